"""Per-row answers kept between calls, for plugins whose answer on a row is the row's own.

A filter or score plugin opts in with ``filter_key(ctx)`` / ``score_key(ctx)``: a
hashable key such that, for every pod with that key, its verdict (score) on a row
depends on the key and on that row's state alone, whose changes
``ClusterState.changed_rows`` lists (the node, the pods counted on it, their GPUs,
its supernodes). The key is None for a pod whose answer depends on more (then the
plugin runs as before).

The first call with a key computes every live row; later calls recompute only the
rows listed as changed since, then gather the asked rows' answers. On a live cluster
a few rows change between two pods of one shape (the members of a gang, a Job's
replicas), so 5,000 rows cost the gathers and a plugin call over a handful of rows
instead of the plugin's work over all (bench/verbs.py churn; README, The sidecar).
A row's answer is the plugin's own for that row, so the result is the array a fresh
call makes (tests/unit/test_row_memo.py compares them after random cluster changes).

The memos live on the ClusterState they were computed from, bounded in bytes, most
recently used last; a reading copy (ClusterState.snapshot) starts with none, so the
scheduling cycle's thread and the verbs never write one memo.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from pyextender.cache.state import ClusterState
from pyextender.framework.interfaces import FilterResult, FloatArray, IntArray, PodContext

MIN_ROWS = 128
"""Calls over fewer rows run the plugin: the bind's and Reserve's one-row checks ask
about one row, where a memo's first call computes every live row."""

MEMO_BYTES = 32 << 20
"""Bytes all memos of one state may hold (5 per row and filter key, 8 per row and
score key: 256 keys at 10,000 nodes)."""

MAX_MEMOS = 256
MIN_MEMOS = 8
MAX_REASONS = 4096
"""Distinct reasons one filter memo keeps before it starts over (a plugin with a
reason per amount, e.g. "needs 3.5 GB more", would otherwise grow it without end)."""


class Same:
    """A key part equal only to the very same object (which it holds, so its id is
    not reused while the key lives): for inputs compared by identity, such as the
    class model gpu-share scores with (a new object whenever it is rebuilt)."""

    __slots__ = ("obj",)

    def __init__(self, obj: object) -> None:
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Same) and other.obj is self.obj


class FilterMemo:
    """Verdicts per row: code and reason (into ``reasons``), as of change ``count``."""

    __slots__ = ("_index", "cap", "codes", "count", "plugin", "reason_ids", "reasons")
    ROW_BYTES = 1 + 4

    def __init__(self, plugin: object, cap: int) -> None:
        self.plugin = plugin
        self.cap = cap
        self.count = -1  # the state's change_count the answers are of (-1: none yet)
        self.codes = np.zeros(cap, dtype=np.int8)
        self.reason_ids = np.zeros(cap, dtype=np.int32)
        self.reasons: list[str] = [""]
        self._index: dict[str, int] = {"": 0}

    def store(self, rows: IntArray, result: FilterResult) -> None:
        index = self._index
        if len(index) + len(result.reasons) > MAX_REASONS:
            self.count = -1  # every row again, with a new table, at the next call
            self.reasons = [""]
            self._index = index = {"": 0}
            return
        ids = np.empty(len(result.reasons), dtype=np.int32)
        for i, reason in enumerate(result.reasons):
            at = index.get(reason)
            if at is None:
                at = index[reason] = len(self.reasons)
                self.reasons.append(reason)
            ids[i] = at
        self.codes[rows] = result.codes
        self.reason_ids[rows] = np.take(ids, result.reason_ids)

    def answer(self, rows: IntArray) -> FilterResult:
        # reasons: the memo's own list; Profile.filter copies it before the memo grows
        return FilterResult(np.take(self.codes, rows), np.take(self.reason_ids, rows), self.reasons)


class ScoreMemo:
    """Scores per row, as of change ``count``."""

    __slots__ = ("cap", "count", "plugin", "score")
    ROW_BYTES = 8

    def __init__(self, plugin: object, cap: int) -> None:
        self.plugin = plugin
        self.cap = cap
        self.count = -1
        self.score: FloatArray = np.zeros(cap, dtype=np.float64)

    def store(self, rows: IntArray, score: FloatArray) -> None:
        self.score[rows] = score


def _memo(
    state: ClusterState,
    kind: str,
    plugin: object,
    key: Hashable,
    make: Callable[[object, int], Any],
    row_bytes: int,
) -> Any:
    memos = state.row_memos
    full = (kind, id(plugin), key)
    memo: Any = memos.pop(full, None)  # put back last: the most recently used
    cap = state.live.shape[0]
    if memo is None or memo.plugin is not plugin or memo.cap != cap:
        keep = max(MIN_MEMOS, min(MAX_MEMOS, MEMO_BYTES // (max(cap, 1) * row_bytes)))
        while len(memos) >= keep:
            memos.pop(next(iter(memos)))
        memo = make(plugin, cap)
    memos[full] = memo
    return memo


def _stale(state: ClusterState, count: int) -> IntArray:
    """The rows whose answers a memo as of change ``count`` must compute: every live
    row when it has none (or its changes are no longer listed), else those changed."""
    if count < state.changed_from:
        return state.live_rows()
    changed = state.changed_rows[count - state.changed_from :]
    if not changed:
        return _NO_ROWS
    return np.asarray(sorted(set(changed)), dtype=np.int64)


_NO_ROWS: IntArray = np.empty(0, dtype=np.int64)


def _update(memo: Any, state: ClusterState, compute: Callable[[IntArray], None]) -> None:
    """``compute`` (which stores into ``memo``) over the rows changed since the memo's
    change count, which becomes the state's."""
    count = state.change_count
    if memo.count != count:
        stale = _stale(state, memo.count)
        memo.count = count
        if stale.shape[0]:
            compute(stale)


def memo_filter(plugin: Any, key: Hashable, ctx: PodContext, rows: IntArray) -> FilterResult:
    """``plugin.filter(ctx, rows)``, from the memo brought up to date."""
    state = ctx.state
    memo: FilterMemo = _memo(state, "filter", plugin, key, FilterMemo, FilterMemo.ROW_BYTES)
    _update(memo, state, lambda stale: memo.store(stale, plugin.filter(ctx, stale)))
    if memo.count < 0:  # the reasons outgrew the table: answered afresh, kept next time
        result: FilterResult = plugin.filter(ctx, rows)
        return result
    return memo.answer(rows)


def memo_score(plugin: Any, key: Hashable, ctx: PodContext, rows: IntArray) -> FloatArray:
    """``plugin.score(ctx, rows)``, from the memo brought up to date."""
    state = ctx.state
    memo: ScoreMemo = _memo(state, "score", plugin, key, ScoreMemo, ScoreMemo.ROW_BYTES)
    _update(
        memo, state, lambda stale: memo.store(stale, np.asarray(plugin.score(ctx, stale), float))
    )
    kept: FloatArray = np.take(memo.score, rows)
    return kept
