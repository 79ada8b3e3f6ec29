"""Per-row answers kept between calls, for plugins whose answer on a row is the row's own.

A filter or score plugin opts in with ``filter_key(ctx)`` / ``score_key(ctx)``: a
hashable key such that, for every pod with that key, its verdict (score) on a row
depends on the key and on that row's state alone: what ``ClusterState.row_version``
versions (the node, the pods counted on it, their GPUs, its supernodes). The key
returns None for a pod whose answer depends on more (then the plugin runs as before).

Then every row's answer is kept with the row's version it was computed at, and a
call computes only the rows whose version moved since: on a live cluster a few rows
change between two pods of one shape (the members of a gang, a Job's replicas), so
5,000 rows cost three gathers and a compare instead of the plugin's work
(bench/verbs.py churn; README, The sidecar). A row's answer is the plugin's own for
that row, so the result is the same array a fresh call makes
(tests/unit/test_row_memo.py compares them after random cluster changes).

The memos live on the ClusterState they were computed from, bounded in bytes, most
recently used last; a reading copy (ClusterState.snapshot) starts with none, so the
scheduling cycle's thread and the verbs never write one memo.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Protocol

import numpy as np

from pyextender.cache.state import ClusterState
from pyextender.framework.interfaces import FilterResult, FloatArray, IntArray, PodContext

MIN_ROWS = 128
"""Calls over fewer rows run the plugin: the bind's and Reserve's one-row checks cost
a few µs of fixed numpy work either way, and a memo is three gathers more."""

MEMO_BYTES = 32 << 20
"""Bytes all memos of one state may hold (~13 per row and filter key, 16 per row and
score key: ~150 keys at 10,000 nodes)."""

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


class _Memo(Protocol):
    plugin: object
    version: IntArray


class FilterMemo:
    """Verdicts per row: code, reason (into ``reasons``) and the row version they are of."""

    __slots__ = ("_index", "codes", "plugin", "reason_ids", "reasons", "version")
    ROW_BYTES = 8 + 1 + 4

    def __init__(self, plugin: object, cap: int) -> None:
        self.plugin = plugin
        self.version: IntArray = np.full(cap, -1, dtype=np.int64)  # row versions are ≥ 0
        self.codes = np.zeros(cap, dtype=np.int8)
        self.reason_ids = np.zeros(cap, dtype=np.int32)
        self.reasons: list[str] = [""]
        self._index: dict[str, int] = {"": 0}

    def store(self, rows: IntArray, result: FilterResult, version: IntArray) -> None:
        index = self._index
        if len(index) + len(result.reasons) > MAX_REASONS:
            self.version[:] = -1  # forget every row (none refers to the old table now)
            self.reasons = [""]
            self._index = index = {"": 0}
        ids = np.empty(len(result.reasons), dtype=np.int32)
        for i, reason in enumerate(result.reasons):
            at = index.get(reason)
            if at is None:
                at = index[reason] = len(self.reasons)
                self.reasons.append(reason)
            ids[i] = at
        self.codes[rows] = result.codes
        self.reason_ids[rows] = np.take(ids, result.reason_ids)
        self.version[rows] = np.take(version, rows)

    def answer(self, rows: IntArray) -> FilterResult:
        # reasons: the memo's own list; Profile.filter copies it before the memo grows
        return FilterResult(np.take(self.codes, rows), np.take(self.reason_ids, rows), self.reasons)


class ScoreMemo:
    """Scores per row and the row version they are of."""

    __slots__ = ("plugin", "score", "version")
    ROW_BYTES = 8 + 8

    def __init__(self, plugin: object, cap: int) -> None:
        self.plugin = plugin
        self.version: IntArray = np.full(cap, -1, dtype=np.int64)
        self.score: FloatArray = np.zeros(cap, dtype=np.float64)

    def store(self, rows: IntArray, score: FloatArray, version: IntArray) -> None:
        self.score[rows] = score
        self.version[rows] = np.take(version, rows)


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
    cap = state.row_version.shape[0]
    if memo is None or memo.plugin is not plugin or memo.version.shape[0] != cap:
        keep = max(MIN_MEMOS, min(MAX_MEMOS, MEMO_BYTES // (max(cap, 1) * row_bytes)))
        while len(memos) >= keep:
            memos.pop(next(iter(memos)))
        memo = make(plugin, cap)
    memos[full] = memo
    return memo


def _stale(memo: _Memo, rows: IntArray, version: IntArray) -> IntArray:
    """Positions in ``rows`` whose answer is missing or older than the row."""
    stale: IntArray = np.flatnonzero(np.take(memo.version, rows) != np.take(version, rows))
    return stale


def memo_filter(plugin: Any, key: Hashable, ctx: PodContext, rows: IntArray) -> FilterResult:
    """``plugin.filter(ctx, rows)``, computed for the stale rows only."""
    state = ctx.state
    memo: FilterMemo = _memo(state, "filter", plugin, key, FilterMemo, FilterMemo.ROW_BYTES)
    version = state.row_version
    stale = _stale(memo, rows, version)
    n = stale.shape[0]
    if n == rows.shape[0]:  # nothing kept (the first pod of this key): the plugin's answer
        result: FilterResult = plugin.filter(ctx, rows)
        memo.store(rows, result, version)
        return result
    if n:
        sub = rows[stale]
        memo.store(sub, plugin.filter(ctx, sub), version)
    return memo.answer(rows)


def memo_score(plugin: Any, key: Hashable, ctx: PodContext, rows: IntArray) -> FloatArray:
    """``plugin.score(ctx, rows)``, computed for the stale rows only."""
    state = ctx.state
    memo: ScoreMemo = _memo(state, "score", plugin, key, ScoreMemo, ScoreMemo.ROW_BYTES)
    version = state.row_version
    stale = _stale(memo, rows, version)
    n = stale.shape[0]
    if n == rows.shape[0]:
        score: FloatArray = np.asarray(plugin.score(ctx, rows), dtype=np.float64)
        memo.store(rows, score, version)
        return score
    if n:
        sub = rows[stale]
        memo.store(sub, np.asarray(plugin.score(ctx, sub), dtype=np.float64), version)
    kept: FloatArray = np.take(memo.score, rows)
    return kept
