"""predicates: resource fit that counts what kube-scheduler cannot see.

kube-scheduler's own NodeResourcesFit already ran before us, but it does not
know the pods our bind is holding (the gang barrier) or pods bound by another
scheduler instance a moment ago. This filter checks every requested column,
extended resources such as nvidia.com/gpu included, against allocatable minus
everything bound or assumed on the node.
"""

from __future__ import annotations

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

    def filter(self, ctx: PodContext, rows: IntArray) -> FilterResult:
        state = ctx.state
        need = ctx.request
        cols = np.flatnonzero(need > 0)
        n = rows.shape[0]
        names = [state.resources[c] for c in cols.tolist()]
        k = len(names)
        # reason table: [ok, Insufficient r..., too small r..., not schedulable]
        reasons = [""]
        reasons += [f"Insufficient {r}" for r in names]
        reasons += [f"node allocatable {r} is less than the pod requests" for r in names]
        reasons.append("node is cordoned or not Ready")
        codes = np.zeros(n, dtype=np.int8)
        reason_ids = np.zeros(n, dtype=np.int32)
        if k:
            # np.take on rows, then columns: the cheapest gather numpy offers here
            alloc = np.take(state.alloc, rows, axis=0)[:, cols]
            short = alloc - np.take(state.used, rows, axis=0)[:, cols] < need[cols]
            fail = np.flatnonzero(short.any(axis=1))
            if fail.shape[0]:  # reasons only for the rows that fail
                codes[fail] = Code.UNSCHEDULABLE
                reason_ids[fail] = 1 + short[fail].argmax(axis=1)
                never = alloc[fail] < need[cols]  # too small even when empty
                hopeless = never.any(axis=1)
                codes[fail[hopeless]] = Code.UNRESOLVABLE
                reason_ids[fail[hopeless]] = 1 + k + never[hopeless].argmax(axis=1)
        down = ~state.schedulable[rows]
        codes[down] = Code.UNRESOLVABLE
        reason_ids[down] = 1 + 2 * k
        return FilterResult(codes=codes, reason_ids=reason_ids, reasons=reasons)


SPEC = PluginSpec(
    name="predicates",
    args_type=Args,
    factory=Predicates,
    summary="Resource fit (all resources incl. extended) counting bound and assumed pods.",
)
