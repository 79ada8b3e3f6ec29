"""Virtual placement of a gang's tasks on free capacity (best fit, decreasing).

Used by enqueue (does the whole gang fit, counting other admitted gangs?),
preempt/reclaim (would it fit once these victims are gone?) and reservation
(which nodes would it take?). Works on a free-capacity matrix [rows, columns]
that the caller owns; ``commit`` subtracts the placement from it.
"""

from __future__ import annotations

import itertools
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
    placed = [-1] * len(requests)
    reason = ""
    if not requests:
        return Placement(rows=placed, unplaced=0, reason=reason)
    asks = np.stack(requests)
    # scarcest first; a stable sort keeps equal keys in the order given
    order = np.argsort(-(asks / peak).max(axis=1), kind="stable")
    ranked = asks[order]
    # where the request changes along that order: each run of equal requests (a gang's
    # members, mostly) is placed in one go, since one by one each would go where the
    # one before went until that node is full (it stays the tightest fit)
    cuts = np.flatnonzero((ranked[1:] != ranked[:-1]).any(axis=1)) + 1
    tasks = order.tolist()
    bounds = [0, *cuts.tolist(), len(tasks)]
    for start, end in itertools.pairwise(bounds):
        reason = _place_run(
            work, allowed, ranked[start], peak, tasks[start:end], placed, reason, resources
        )
    unplaced = placed.count(-1)
    if commit and unplaced == 0:
        free[...] = work
    return Placement(rows=placed, unplaced=unplaced, reason=reason)


def _place_run(
    work: IntArray,
    allowed: BoolArray,
    req: IntArray,
    peak: IntArray,
    tasks: list[int],
    placed: list[int],
    reason: str,
    resources: Sequence[str],
) -> str:
    """Best-fit for ``tasks``, all asking ``req``: fills ``placed`` and subtracts from
    ``work``; returns ``reason``, or why they do not fit when it was still "".

    The same rows as placing them one by one: a task goes to the fitting row with
    the least slack on the key resource (the first of equals); that row's slack
    then drops further, so the next task goes there too while it still fits."""
    cols = np.flatnonzero(req > 0)
    if cols.shape[0] == 0:
        row = int(np.flatnonzero(allowed)[0])
        for i in tasks:
            placed[i] = row
        return reason
    need = req[cols]
    key = cols[int(np.argmax(need / peak[cols]))]
    fits = allowed & (work[:, cols] >= need).all(axis=1)
    slack = np.where(fits, work[:, key] - req[key], np.iinfo(np.int64).max)
    at = 0
    while at < len(tasks):
        row = int(np.argmin(slack))
        if not fits[row]:
            return reason or _shortage(work, allowed, req, cols, resources)
        take = min(len(tasks) - at, int((work[row, cols] // need).min()))
        work[row] -= take * req
        for i in tasks[at : at + take]:
            placed[i] = row
        at += take
        # the row is full for this request now (or the run is done): only it changed
        fits[row] = False
        slack[row] = np.iinfo(np.int64).max
    return reason


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
