"""Topology-loss kernel: kernel == references; chosen sets are free, minimal in domains."""

from __future__ import annotations

from itertools import combinations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pyextender.kernels.topology_loss import (
    MEMO_BANKS,
    Layouts,
    TopologyKernel,
    topology_numpy,
    topology_numpy_dedup,
)

STRIDE = 16
LAYOUTS = [
    [0, 0, 0, 0, 1, 1, 1, 1],  # two NVLink islands of 4
    [0] * 8,  # one NVSwitch
    [0, 0, 1, 1, 2, 2, 3, 3],  # pairs
    [0, 1, 0, 1],
    [0, 0],
    [0],
]


SHARED = TopologyKernel()
"""One kernel across examples: its memo persists between calls with the same request."""


def _layouts() -> Layouts:
    count = np.asarray([len(d) for d in LAYOUTS], dtype=np.int32)
    dom = np.zeros((len(LAYOUTS), STRIDE), dtype=np.int32)
    for i, d in enumerate(LAYOUTS):
        dom[i, : len(d)] = d
    return Layouts(count, dom)


@st.composite
def cases(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, int, np.ndarray, np.ndarray]:
    n = draw(st.integers(1, 40))
    layout = np.asarray(
        draw(st.lists(st.integers(0, len(LAYOUTS) - 1), min_size=n, max_size=n)), np.int32
    )
    masks = [draw(st.integers(0, (1 << len(LAYOUTS[lid])) - 1)) for lid in layout.tolist()]
    sizes = sorted(draw(st.sets(st.sampled_from([1, 2, 3, 4, 8]), min_size=1, max_size=4)))
    weights = draw(st.lists(st.integers(1, 100), min_size=len(sizes), max_size=len(sizes)))
    k = draw(st.integers(1, 8))
    return (np.asarray(masks, np.int64), layout, k, np.asarray(sizes, np.int64),
            np.asarray(weights, np.int64))  # fmt: skip


@settings(max_examples=100, deadline=None)
@given(cases(), st.sampled_from([(1.0, 1.0), (0.5, 2.0), (3.0, 0.0)]))
def test_kernel_matches_references(
    case: tuple[np.ndarray, np.ndarray, int, np.ndarray, np.ndarray], w: tuple[float, float]
) -> None:
    masks, layout, k, sizes, weights = case
    layouts = _layouts()
    kern = TopologyKernel()
    fast = SHARED.run(masks, layout, layouts, k, sizes, weights, *w)
    for ref in (kern.run(masks, layout, layouts, k, sizes, weights, *w),
                kern.run_python(masks, layout, layouts, k, sizes, weights, *w),
                topology_numpy(masks, layout, layouts, k, sizes, weights, *w),
                topology_numpy_dedup(masks, layout, layouts, k, sizes, weights, *w)):  # fmt: skip
        assert np.array_equal(fast.mask, ref.mask)
        assert np.array_equal(fast.domains, ref.domains)
        assert np.array_equal(fast.loss, ref.loss)
        assert np.array_equal(fast.score, ref.score)
    # the verbs' call: the same domains and scores, the same memo bank
    fit = SHARED.run(masks, layout, layouts, k, sizes, weights, *w, full=False)
    cold = TopologyKernel().run(masks, layout, layouts, k, sizes, weights, *w, full=False)
    for f in (fit, cold):
        assert np.array_equal(f.domains, fast.domains)
        assert np.array_equal(f.score, fast.score)


def _domains_crossed(bits: int, domains: list[int]) -> int:
    return len({domains[j] for j in range(len(domains)) if (bits >> j) & 1})


@settings(max_examples=100, deadline=None)
@given(cases())
def test_choice_is_free_exact_and_crosses_fewest_domains(
    case: tuple[np.ndarray, np.ndarray, int, np.ndarray, np.ndarray],
) -> None:
    masks, layout, k, sizes, weights = case
    res = TopologyKernel().run(masks, layout, _layouts(), k, sizes, weights)
    for i in range(masks.shape[0]):
        mask, chosen, doms = int(masks[i]), int(res.mask[i]), LAYOUTS[int(layout[i])]
        free = [j for j in range(len(doms)) if (mask >> j) & 1]
        if len(free) < k:
            assert chosen == 0 and res.domains[i] == 0 and res.score[i] == -np.inf
            continue
        assert chosen & ~mask == 0  # never a GPU that is not free
        assert bin(chosen).count("1") == k  # exactly k, never more
        fewest = min(
            _domains_crossed(sum(1 << j for j in combo), doms) for combo in combinations(free, k)
        )
        assert res.domains[i] == fewest == _domains_crossed(chosen, doms)


def test_prefers_the_node_that_fills_a_hole() -> None:
    # node 0: 4 free GPUs in one island; node 1: all 8 free. A 4-GPU pod should
    # go to node 0: using node 1 breaks a free 8-GPU node.
    masks = np.asarray([0b1111_0000, 0b1111_1111], np.int64)
    layout = np.zeros(2, np.int32)
    res = TopologyKernel().run(
        masks, layout, _layouts(), 4, np.asarray([4, 8], np.int64), np.asarray([1, 1], np.int64)
    )
    assert res.mask.tolist() == [0b1111_0000, 0b0000_1111]
    assert res.domains.tolist() == [1, 1]
    assert res.score[0] > res.score[1]


def test_sixteen_gpu_layouts_and_reused_buffers_match_the_reference() -> None:
    """Masks up to 16 bits (the popcount has no per-bit loop) and memo buffers kept across
    ``forget()`` and bank eviction (their stale entries must never be read back)."""
    count = np.asarray([8, 16], dtype=np.int32)  # the 16-GPU block after the other's
    dom = np.zeros((2, STRIDE), dtype=np.int32)
    dom[0, :8] = [0, 0, 1, 1, 1, 1, 2, 2]
    dom[1] = [0] * 4 + [1] * 4 + [2] * 6 + [3] * 2
    layouts = Layouts(count, dom)
    rng = np.random.default_rng(5)
    layout = rng.integers(0, 2, 400).astype(np.int32)
    masks = rng.integers(0, 1 << 16, 400).astype(np.int64)  # bits past 8 GPUs: ignored
    sizes, weights = np.asarray([1, 2, 3, 6], np.int64), np.asarray([5, 4, 3, 2], np.int64)
    kern = TopologyKernel()
    for round_ in range(3):
        for k in range(1, 17):
            fast = kern.run(masks, layout, layouts, k, sizes, weights)
            ref = topology_numpy(masks, layout, layouts, k, sizes, weights)
            assert np.array_equal(fast.mask, ref.mask), (round_, k)
            assert np.array_equal(fast.domains, ref.domains)
            assert np.array_equal(fast.loss, ref.loss)
            assert np.array_equal(fast.score, ref.score)
            if round_ == 0 and k in (3, 16):
                # the interpreted loops over a 16-GPU layout: its memo block is past
                # SCAN_BLOCK, so its pairs are listed by the pass over the nodes
                slow = TopologyKernel().run_python(masks, layout, layouts, k, sizes, weights)
                assert np.array_equal(slow.mask, ref.mask)
                assert np.array_equal(slow.score, ref.score)
            fit = TopologyKernel().run(masks, layout, layouts, k, sizes, weights, full=False)
            assert np.array_equal(fit.domains, ref.domains)
            assert np.array_equal(fit.score, ref.score)
            masks, layout = masks[::-1].copy(), layout[::-1].copy()  # in other order
        kern.forget()


def test_spare_buffers_of_other_layouts_are_skipped_and_bounded() -> None:
    """Memos of a changed layout set (another size) are never reused for the new one, and
    spares stay bounded: those of the latest layout set only, at most MEMO_BANKS."""
    kern = TopologyKernel()
    sizes, weights = np.asarray([1, 2], np.int64), np.asarray([1, 1], np.int64)
    masks = np.asarray([0b1111, 0b0011], np.int64)
    layout = np.zeros(2, np.int32)
    for width in (4, 3, 2, 4, 3, 2):
        count = np.asarray([width], np.int32)
        dom = np.zeros((1, STRIDE), np.int32)
        layouts = Layouts(count, dom)
        for k in range(1, 12):  # more requests than banks: evictions feed the spares
            fast = kern.run(masks, layout, layouts, k, sizes, weights)
            ref = topology_numpy(masks, layout, layouts, k, sizes, weights)
            assert np.array_equal(fast.score, ref.score)
            assert np.array_equal(fast.mask, ref.mask)
        kern.forget()
        # only the latest layout set's buffers are kept, at most MEMO_BANKS, all of its size
        assert list(kern._spare) == [count.tobytes()]
        kept = kern._spare[count.tobytes()]
        assert 0 < len(kept) <= MEMO_BANKS
        assert all(m[0].shape[0] == layouts.memo_size for m in kept)


def test_counts_memo_across_layout_sets_and_interleaved_requests() -> None:
    """The counts memo is shared by every bank and keyed by free GPUs per domain: entries
    of one request or one layout set must never answer for another. Two layout sets with
    the same GPU counts (so pair memos are reused as spares) but other domains alternate,
    and requests interleave, each against a fresh reference."""
    dom_a = np.zeros((2, STRIDE), dtype=np.int32)
    dom_a[0, :8] = [0, 0, 0, 0, 1, 1, 1, 1]
    dom_a[1, :8] = [0, 0, 1, 1, 2, 2, 3, 3]
    dom_b = np.zeros((2, STRIDE), dtype=np.int32)
    dom_b[0, :8] = [0, 0, 1, 1, 1, 1, 1, 1]  # islands of 2 and 6
    dom_b[1, :8] = [0] * 8
    count = np.asarray([8, 8], dtype=np.int32)
    rng = np.random.default_rng(11)
    layout = rng.integers(0, 2, 300).astype(np.int32)
    masks = rng.integers(0, 256, 300).astype(np.int64)
    requests = [
        (2, np.asarray([1, 2, 4], np.int64), np.asarray([3, 2, 1], np.int64)),
        (3, np.asarray([1, 2, 4], np.int64), np.asarray([3, 2, 1], np.int64)),
        (2, np.asarray([1, 8], np.int64), np.asarray([1, 1], np.int64)),
    ]
    kern = TopologyKernel()
    for round_ in range(4):
        # a new Layouts object each round, equal to an earlier one every other round
        layouts = Layouts(count, (dom_a if round_ % 2 == 0 else dom_b).copy())
        for k, sizes, weights in requests * 2:
            for full in (True, False):
                got = kern.run(masks, layout, layouts, k, sizes, weights, full=full)
                ref = topology_numpy(masks, layout, layouts, k, sizes, weights)
                assert np.array_equal(got.domains, ref.domains), (round_, k)
                assert np.array_equal(got.score, ref.score), (round_, k)
                if full:
                    assert np.array_equal(got.mask, ref.mask), (round_, k)
                    assert np.array_equal(got.loss, ref.loss), (round_, k)
            masks = np.where(rng.random(300) < 0.1, rng.integers(0, 256, 300), masks)


def test_popcount_in_a_kernel_equals_the_interpreters() -> None:
    """The kernels' popcount (LLVM ctpop inside numba, bin() in the interpreter)."""
    from numba import njit

    from pyextender.kernels.jit import popcount

    @njit
    def counts(xs: np.ndarray, out: np.ndarray) -> None:
        for i in range(xs.shape[0]):
            out[i] = popcount(xs[i])

    xs = np.asarray([0, 1, 0xFFFF, 0b1010_0110, 1 << 40, (1 << 62) - 1], dtype=np.int64)
    out = np.zeros(xs.shape[0], dtype=np.int64)
    counts(xs, out)
    assert out.tolist() == [popcount(int(x)) for x in xs.tolist()] == [0, 1, 16, 4, 1, 62]
