"""Virtual placement (pyextender.framework.placement): runs of equal requests are
placed in one go, and that must give the rows, reasons and free capacity that
placing the tasks one by one gives (bench/placement_reference.py, the code before)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.placement_reference import one_by_one
from pyextender.framework.placement import place

RESOURCES = ("cpu", "memory", "nvidia.com/gpu")


SHAPES = [
    np.array([1000, 4096, 1], dtype=np.int64),
    np.array([4000, 16384, 2], dtype=np.int64),
    np.array([500, 1024, 0], dtype=np.int64),
    np.array([8000, 65536, 8], dtype=np.int64),
    np.array([0, 0, 0], dtype=np.int64),
]


@settings(max_examples=300, deadline=None)
@given(
    nodes=st.lists(
        st.tuples(st.integers(0, 64_000), st.integers(0, 512 * 1024), st.integers(0, 8)),
        min_size=1,
        max_size=12,
    ),
    picks=st.lists(st.tuples(st.integers(0, len(SHAPES) - 1), st.integers(1, 12)), max_size=6),
    mask=st.lists(st.booleans(), min_size=12, max_size=12),
    shared=st.booleans(),
)
def test_runs_of_equal_requests_go_where_one_by_one_placement_puts_them(
    nodes: list[tuple[int, int, int]],
    picks: list[tuple[int, int]],
    mask: list[bool],
    shared: bool,
) -> None:
    free = np.array(nodes, dtype=np.int64).reshape(len(nodes), 3)
    # a gang's members share one vector object (shared) or carry equal copies
    requests = [
        SHAPES[s] if shared else SHAPES[s].copy() for s, count in picks for _ in range(count)
    ]
    allowed = np.array(mask[: len(nodes)], dtype=np.bool_)
    for allow in (None, allowed):
        mine, theirs = free.copy(), free.copy()
        got = place(mine, requests, RESOURCES, allow, commit=True)
        want = one_by_one(theirs, requests, RESOURCES, allow, commit=True)
        assert got == want
        assert (mine == theirs).all()


def test_a_gang_fills_the_tightest_node_before_the_next() -> None:
    free = np.array([[64, 64, 8], [64, 64, 3], [64, 64, 5]], dtype=np.int64)
    gang = [np.array([1, 1, 1], dtype=np.int64)] * 7
    fit = place(free, gang, RESOURCES, commit=True)
    # the 3-GPU node is the tightest: it takes 3, then the 5-GPU node takes 4
    assert fit.rows == [1, 1, 1, 2, 2, 2, 2]
    assert free[:, 2].tolist() == [8, 0, 1]


def test_members_that_do_not_fit_are_counted_and_named() -> None:
    free = np.array([[64, 64, 2], [64, 64, 1]], dtype=np.int64)
    gang = [np.array([1, 1, 1], dtype=np.int64)] * 5
    fit = place(free, gang, RESOURCES, commit=True)
    assert fit.rows == [1, 0, 0, -1, -1]  # the tightest (1 GPU free) first
    assert fit.unplaced == 2
    assert "Insufficient nvidia.com/gpu" in fit.reason
    assert free[:, 2].tolist() == [2, 1]  # not committed: the gang does not fit whole
