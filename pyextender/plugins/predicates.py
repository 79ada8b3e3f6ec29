"""predicates: resource fit that counts what kube-scheduler cannot see.

kube-scheduler's own NodeResourcesFit already ran before us, but it does not
know the pods our bind is holding (the gang barrier) or pods bound by another
scheduler instance a moment ago. This filter checks every requested column,
extended resources such as nvidia.com/gpu included, against allocatable minus
everything bound or assumed on the node.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np

from pyextender.framework.interfaces import FilterResult, IntArray, PodContext
from pyextender.framework.registry import PluginSpec
from pyextender.framework.status import Code


@dataclass(frozen=True, slots=True)
class Args:
    """predicates takes no arguments of its own yet."""


class Predicates:
    name = "predicates"

    def __init__(self, args: Args) -> None:
        self.args = args
        self._tables: dict[tuple[str, ...], list[str]] = {}
        """asked resources -> reason table (read-only once made; a few per cluster)"""

    def _reasons(self, names: tuple[str, ...]) -> list[str]:
        """[ok, Insufficient r..., too small r..., not schedulable] for the asked
        resources: made once per set of them, not per call (9 strings for a GPU pod)."""
        table = self._tables.get(names)
        if table is None:
            table = [""]
            table += [f"Insufficient {r}" for r in names]
            table += [f"node allocatable {r} is less than the pod requests" for r in names]
            table.append("node is cordoned or not Ready")
            if len(self._tables) >= 256:
                self._tables.clear()
            self._tables[names] = table
        return table

    def filter_key(self, ctx: PodContext) -> Hashable:
        """framework.row_memo: a row's verdict is its free and allocatable amounts and
        whether it is schedulable, against the pod's request vector."""
        return ctx.request.tobytes()

    def filter(self, ctx: PodContext, rows: IntArray) -> FilterResult:
        state = ctx.state
        need = ctx.request
        cols: list[int] = np.flatnonzero(need > 0).tolist()
        n = rows.shape[0]
        resources = state.resources
        reasons = self._reasons(tuple([resources[c] for c in cols]))
        k = len(cols)
        if n <= FEW_ROWS:
            return self._filter_few(ctx, rows, cols, reasons)
        # One contiguous 1-D gather per asked column from the column-major mirror of
        # alloc - used: k is a handful (cpu, memory, pods, the pod's extended
        # resources), and a 2-D (rows, k) gather of alloc and used with per-row
        # reductions over the short axis cost twice as much (README, The sidecar).
        # At a few rows the fixed cost per numpy call is what counts (the bind's and
        # Reserve's one-row check): the rare paths are skipped with np.count_nonzero.
        shorts = np.empty((k, n), dtype=np.bool_)
        free = state.free_by_col
        for j, c in enumerate(cols):
            np.less(np.take(free[c], rows), need[c], out=shorts[j])
        failing = np.logical_or.reduce(shorts, axis=0)
        codes = failing.view(np.int8) * np.int8(Code.UNSCHEDULABLE)
        reason_ids = np.zeros(n, dtype=np.int32)
        if np.count_nonzero(failing):  # reasons only for the rows that fail
            fail = np.flatnonzero(failing)
            # a row's reason is its first short column, or its first column too small
            # even on the empty node: columns are visited last to first so the first
            # one's id is written last
            first = np.zeros(fail.shape[0], dtype=np.int32)
            never = np.zeros(fail.shape[0], dtype=np.int32)
            at = rows[fail]
            for j in range(k - 1, -1, -1):
                c = cols[j]
                np.putmask(first, shorts[j][fail], 1 + j)
                np.putmask(never, np.take(state.alloc_by_col[c], at) < need[c], 1 + k + j)
            hopeless = never > 0
            codes[fail[hopeless]] = Code.UNRESOLVABLE
            reason_ids[fail] = np.where(hopeless, never, first)
        up = np.take(state.schedulable, rows)
        if np.count_nonzero(up) < n:
            down = ~up
            codes[down] = Code.UNRESOLVABLE
            reason_ids[down] = 1 + 2 * k
        return FilterResult(codes=codes, reason_ids=reason_ids, reasons=reasons)

    def _filter_few(
        self, ctx: PodContext, rows: IntArray, cols: list[int], reasons: list[str]
    ) -> FilterResult:
        """filter's verdicts, row by row in Python: for a few rows (the ones that
        changed since a memo was made, framework.row_memo; the bind's one-row check)
        the array path's ~40 numpy calls cost ~50 µs, this ~10. The same rules in the
        same order (tests/unit/test_predicates.py compares the two)."""
        state = ctx.state
        need = ctx.request
        free = state.free_by_col
        alloc = state.alloc_by_col
        schedulable = state.schedulable
        k = len(cols)
        asked = [(j, c, int(need[c])) for j, c in enumerate(cols)]
        n = rows.shape[0]
        codes = np.zeros(n, dtype=np.int8)
        reason_ids = np.zeros(n, dtype=np.int32)
        for i, r in enumerate(rows.tolist()):
            if not schedulable[r]:
                codes[i] = Code.UNRESOLVABLE
                reason_ids[i] = 1 + 2 * k
                continue
            first = 0
            for j, c, amount in asked:
                if free[c, r] < amount:
                    first = 1 + j
                    break
            if not first:
                continue
            never = 0
            for j, c, amount in asked:
                if alloc[c, r] < amount:
                    never = 1 + k + j
                    break
            codes[i] = Code.UNRESOLVABLE if never else Code.UNSCHEDULABLE
            reason_ids[i] = never or first
        return FilterResult(codes=codes, reason_ids=reason_ids, reasons=reasons)


FEW_ROWS = 8
"""Calls over this many rows or fewer take the row-by-row path (_filter_few)."""


SPEC = PluginSpec(
    name="predicates",
    args_type=Args,
    factory=Predicates,
    summary="Resource fit (all resources incl. extended) counting bound and assumed pods.",
)
