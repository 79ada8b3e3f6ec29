"""Supernode packing kernel: kernel == references; plans respect capacity and hard limits."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pyextender.kernels.supernode import (
    GangShape,
    plan_supernodes,
    plan_supernodes_numpy,
    plan_supernodes_python,
)


@st.composite
def cases(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int, GangShape]:
    n = draw(st.integers(1, 48))
    s = draw(st.integers(1, 8))
    d = draw(st.integers(1, 3))
    sn = np.asarray(draw(st.lists(st.integers(0, s - 1), min_size=n, max_size=n)), np.int32)
    # a supernode sits inside one domain (or none), as HyperNode tiers nest
    sn_dom = draw(st.lists(st.integers(-1, d - 1), min_size=s, max_size=s))
    dom = np.asarray([sn_dom[x] for x in sn.tolist()], np.int32)
    slots = np.asarray(draw(st.lists(st.integers(0, 4), min_size=n, max_size=n)), np.int64)
    unit = draw(st.integers(1, 8))
    gang = GangShape(draw(st.integers(1, 40)), unit, draw(st.integers(1, unit)))
    return sn, slots, dom, s, d, gang


@settings(max_examples=100, deadline=None)
@given(cases())
def test_kernel_matches_references(
    case: tuple[np.ndarray, np.ndarray, np.ndarray, int, int, GangShape],
) -> None:
    fast = plan_supernodes(*case)
    for ref in (plan_supernodes_python(*case), plan_supernodes_numpy(*case)):
        assert np.array_equal(fast.assign, ref.assign)
        assert (fast.feasible, fast.domain, fast.broken) == (ref.feasible, ref.domain, ref.broken)


@settings(max_examples=100, deadline=None)
@given(cases())
def test_plan_invariants(
    case: tuple[np.ndarray, np.ndarray, np.ndarray, int, int, GangShape],
) -> None:
    sn, slots, dom, s, _d, gang = case
    plan = plan_supernodes(*case)
    if not plan.feasible:
        assert plan.assign.sum() == 0
        return
    assert plan.assign.sum() == gang.pods
    inside = dom == plan.domain
    cap = np.bincount(sn[inside], weights=slots[inside], minlength=s)
    assert (plan.assign <= cap).all()  # never more pods than room
    used = np.flatnonzero(plan.assign)
    outside = set(sn[~inside].tolist()) - set(sn[inside].tolist())
    assert not set(used.tolist()) & outside  # never across the tier boundary
    if plan.broken == 0:
        # no unit was split: every supernode holds whole units (the last may be short)
        short = gang.pods % gang.unit
        partial = [a % gang.unit for a in plan.assign[used].tolist() if a % gang.unit]
        assert partial in ([], [short])


def test_units_stay_whole_and_best_fit() -> None:
    # supernodes of 4, 8 and 8 pods; a gang of 8 pods in units of 4
    sn = np.asarray([0, 1, 2], np.int32)
    slots = np.asarray([4, 8, 8], np.int64)
    dom = np.zeros(3, np.int32)
    plan = plan_supernodes(sn, slots, dom, 3, 1, GangShape(8, 4, 4))
    assert plan.feasible and plan.broken == 0
    assert plan.assign.tolist() == [4, 4, 0]  # the small one first, one big one broken into


def test_atomic_group_that_fits_nowhere_is_infeasible() -> None:
    sn = np.asarray([0, 1], np.int32)
    plan = plan_supernodes(
        sn, np.asarray([3, 3], np.int64), np.zeros(2, np.int32), 2, 1, GangShape(4, 4, 4)
    )
    assert not plan.feasible
    ok = plan_supernodes(
        sn, np.asarray([3, 3], np.int64), np.zeros(2, np.int32), 2, 1, GangShape(4, 4, 2)
    )
    assert ok.feasible and ok.broken == 1 and ok.assign.tolist() == [2, 2]
