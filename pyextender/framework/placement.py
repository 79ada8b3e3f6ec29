"""Virtual placement of a gang's tasks on free capacity (best fit, decreasing).

Used by enqueue (does the whole gang fit, counting other admitted gangs?),
preempt/reclaim (would it fit once these victims are gone?) and reservation
(which nodes would it take?). Works on a free-capacity matrix [rows, columns]
that the caller owns; ``commit`` subtracts the placement from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pyextender.api.resources import format_amount

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(slots=True)
class Placement:
    """Where each task would go, or why the first one that cannot fit does not."""

    rows: list[int]
    """Row per task, in the order of the requests given; -1 for a task that did not fit."""
    unplaced: int
    """How many tasks did not fit."""
    reason: str
    """Why the first task that did not fit does not ("" when all fit)."""

    @property
    def ok(self) -> bool:
        return self.unplaced == 0


def place(
    free: IntArray,
    requests: Sequence[IntArray],
    resources: Sequence[str],
    allowed: BoolArray | None = None,
    commit: bool = False,
) -> Placement:
    """Best-fit decreasing: biggest tasks first, each on the node it leaves tightest.

    ``free`` is [rows, columns]; ``allowed`` masks rows that may be used.
    Tightness is measured on the task's scarcest requested resource (the one
    with the largest request relative to the cluster's largest free amount).
    Without ``commit`` ``free`` is left as it was; with it, only a complete
    placement is subtracted.
    """
    work = free.copy()
    if allowed is None:
        allowed = np.ones(work.shape[0], dtype=np.bool_)
    if work.shape[0] == 0 or not allowed.any():
        return Placement([-1] * len(requests), len(requests), "no schedulable node")
    peak = np.maximum(work.max(axis=0), 1)
    order = sorted(range(len(requests)), key=lambda i: -float((requests[i] / peak).max()))
    placed = [-1] * len(requests)
    reason = ""
    for i in order:
        req = requests[i]
        cols = np.flatnonzero(req > 0)
        if cols.shape[0] == 0:
            placed[i] = int(np.flatnonzero(allowed)[0])
            continue
        fits = allowed & (work[:, cols] >= req[cols]).all(axis=1)
        if not fits.any():
            reason = reason or _shortage(work, allowed, req, cols, resources)
            continue
        key = cols[int(np.argmax(req[cols] / peak[cols]))]
        slack = np.where(fits, work[:, key] - req[key], np.iinfo(np.int64).max)
        row = int(np.argmin(slack))
        work[row] -= req
        placed[i] = row
    unplaced = placed.count(-1)
    if commit and unplaced == 0:
        free[...] = work
    return Placement(rows=placed, unplaced=unplaced, reason=reason)


def _shortage(
    work: IntArray, allowed: BoolArray, req: IntArray, cols: IntArray, resources: Sequence[str]
) -> str:
    """Names the resource that no allowed node has enough of, with the best offer."""
    if not allowed.any():
        return "no schedulable node"
    sub = work[allowed]
    for c in cols.tolist():
        best = int(sub[:, c].max())
        if best < req[c]:
            name = resources[c]
            return (
                f"Insufficient {name} (a task needs {format_amount(name, int(req[c]))}, "
                f"the most free on one node is {format_amount(name, best)})"
            )
    return "no single node has all requested resources free at once"
