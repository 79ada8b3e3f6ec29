"""Virtual placement one task at a time: the baseline of bench/cycle_cost.py and the
oracle of tests/unit/test_placement.py.

This is how pyextender.framework.placement.place worked before it placed a run of
equal requests in one step per node: best fit, biggest first, each task on its own.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pyextender.framework.placement import BoolArray, IntArray, Placement, _shortage


def one_by_one(
    free: IntArray,
    requests: Sequence[IntArray],
    resources: Sequence[str],
    allowed: BoolArray | None = None,
    commit: bool = False,
) -> Placement:
    """``place`` with the same arguments and result, one task per step."""
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
