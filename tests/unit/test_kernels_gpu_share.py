"""FGD fragmentation kernel: the worked example, and kernel == references on random clusters."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pyextender.api.task_classes import TaskClass, TaskClasses, select_classes
from pyextender.kernels.gpu_share import (
    NO_FIT,
    FgdInput,
    FgdResult,
    fgd_gpu_deltas,
    fgd_scores,
    fgd_scores_numpy,
    fgd_scores_numpy_dedup,
    fgd_scores_python,
)

G = 8


def _node(free: list[int], cpu: int = 10**6, model: int = 0) -> FgdInput:
    row = np.zeros((1, G), dtype=np.int32)
    row[0, : len(free)] = free
    return FgdInput(
        free_cpu=np.asarray([cpu], dtype=np.int64),
        free_milli=row,
        count=np.asarray([len(free)], dtype=np.int32),
        model=np.asarray([model], dtype=np.int32),
    )


# REPLAY.md §4: A = 1×500 (p .5), B = 1×1000 (p .3), C = CPU-only (p .2)
EXAMPLE = TaskClasses.build(
    {TaskClass(0, 500, 1): 5, TaskClass(0, 1000, 1): 3, TaskClass(0, 0, 0): 2}
)


def test_worked_example() -> None:
    node = _node([1000, 300])
    res = fgd_scores(node, EXAMPLE, 0, np.asarray([200]), 1)
    assert res.before[0] / EXAMPLE.weight_sum == 500.0
    assert res.gpu[0] == 1  # FGD picks GPU1
    assert res.delta[0] / EXAMPLE.weight_sum == 200.0
    per_gpu = fgd_gpu_deltas(node, EXAMPLE, 0, np.asarray([200]))[0] / EXAMPLE.weight_sum
    assert per_gpu[0] == -200.0 and per_gpu[1] == 200.0
    scores = np.floor(100.0 / (1.0 + np.exp(-per_gpu[:2] / 1000.0)))
    assert scores.tolist() == [45.0, 54.0]


def test_whole_gpu_pod_needs_whole_gpus() -> None:
    node = _node([1000, 300])
    assert fgd_scores(node, EXAMPLE, 0, np.asarray([1000]), 2).delta[0] == NO_FIT
    assert fgd_scores(node, EXAMPLE, 0, np.asarray([1000]), 1).delta[0] != NO_FIT


@st.composite
def clusters(draw: st.DrawFn) -> tuple[FgdInput, TaskClasses, int, np.ndarray, int]:
    n = draw(st.integers(1, 12))
    count = np.asarray(draw(st.lists(st.sampled_from([0, 1, 2, 4, 8]), min_size=n, max_size=n)))
    free = np.zeros((n, G), dtype=np.int32)
    for i in range(n):
        for j in range(int(count[i])):
            free[i, j] = draw(st.sampled_from([0, 100, 250, 500, 700, 1000]))
    cpu = np.asarray(draw(st.lists(st.integers(0, 64_000), min_size=n, max_size=n)))
    model = np.asarray(draw(st.lists(st.integers(-1, 2), min_size=n, max_size=n)), np.int32)
    m = draw(st.integers(1, 6))
    counts = {}
    for _ in range(m):
        num = draw(st.sampled_from([0, 1, 1, 2, 4]))
        milli = 0 if num == 0 else draw(st.sampled_from([100, 300, 500, 1000]))
        if num > 1:
            milli = 1000
        mask = draw(st.sampled_from([0, 0, 1, 2, 6]))
        counts[TaskClass(draw(st.integers(0, 32_000)), milli, num, mask)] = draw(st.integers(1, 50))
    classes = TaskClasses.build(counts)
    req_num = draw(st.sampled_from([0, 1, 1, 2, 4]))
    req_milli = 0 if req_num == 0 else draw(st.sampled_from([50, 200, 500, 1000]))
    if req_num > 1:
        req_milli = 1000
    milli_rows = np.full(n, req_milli, dtype=np.int64)
    nodes = FgdInput(cpu.astype(np.int64), free, count.astype(np.int32), model)
    return nodes, classes, draw(st.integers(0, 16_000)), milli_rows, req_num


def _agree(fast: FgdResult, *refs: FgdResult) -> None:
    for ref in refs:
        assert np.array_equal(fast.before, ref.before)
        assert np.array_equal(fast.delta, ref.delta)
        assert np.array_equal(fast.gpu, ref.gpu)


@settings(max_examples=120, deadline=None)
@given(clusters(), st.booleans())
def test_kernel_matches_references(
    case: tuple[FgdInput, TaskClasses, int, np.ndarray, int], fed: bool
) -> None:
    nodes, classes, cpu, milli, num = case
    fast = fgd_scores(nodes, classes, cpu, milli, num, fed)
    _agree(fast, fgd_scores_numpy(nodes, classes, cpu, milli, num, fed),
           fgd_scores_python(nodes, classes, cpu, milli, num, fed))  # fmt: skip
    if num == 1 and (milli < 1000).all():
        per_gpu = fgd_gpu_deltas(nodes, classes, cpu, milli, fed)
        assert np.array_equal(per_gpu.max(axis=1), fast.delta)


@settings(max_examples=60, deadline=None)
@given(clusters(), st.booleans(), st.randoms(use_true_random=False))
def test_kernel_matches_references_on_repeated_rows(
    case: tuple[FgdInput, TaskClasses, int, np.ndarray, int], fed: bool, rnd: random.Random
) -> None:
    """Each drawn node 8 times, shuffled, the pod's milli one of two per row: the
    kernel computes one row of each state and pod milli and copies it to the others;
    the numpy reference with and without its own deduplication must agree with it."""
    nodes, classes, cpu, milli, num = case
    n = nodes.count.shape[0]
    order = np.asarray(rnd.sample(range(8 * n), 8 * n)) % n
    tiled = FgdInput(
        nodes.free_cpu[order], nodes.free_milli[order], nodes.count[order], nodes.model[order]
    )
    other = np.where(milli[order] > 100, milli[order] // 2, milli[order])
    milli2 = np.where(np.asarray([rnd.random() < 0.5 for _ in order]), milli[order], other)
    fast = fgd_scores(tiled, classes, cpu, milli2, num, fed)
    _agree(fast, fgd_scores_numpy(tiled, classes, cpu, milli2, num, fed),
           fgd_scores_numpy_dedup(tiled, classes, cpu, milli2, num, fed))  # fmt: skip


def test_cpu_fed_counts_gpus_the_free_cpu_cannot_serve() -> None:
    # one class: 1 GPU × 1000 milli with 8 cores. 4 free GPUs, 16 free cores: the
    # paper's measure sees no fragmentation; two tasks fit, so 2000 milli are starved.
    one = TaskClasses.build({TaskClass(8000, 1000, 1): 1})
    node = _node([1000, 1000, 1000, 1000], cpu=16_000)
    assert fgd_scores(node, one, 0, np.asarray([0]), 0).before[0] == 0
    assert fgd_scores(node, one, 0, np.asarray([0]), 0, cpu_fed=True).before[0] == 2000
    # a CPU-only pod of 8 cores starves one more GPU: Δ = −1000
    cpu_pod = fgd_scores(node, one, 8000, np.asarray([0]), 0, cpu_fed=True)
    assert cpu_pod.delta[0] == -1000
    assert fgd_scores(node, one, 8000, np.asarray([0]), 0).delta[0] == 0


@settings(max_examples=60, deadline=None)
@given(clusters())
def test_choice_fits_and_frag_is_bounded(
    case: tuple[FgdInput, TaskClasses, int, np.ndarray, int],
) -> None:
    nodes, classes, cpu, milli, num = case
    res = fgd_scores(nodes, classes, cpu, milli, num)
    real = np.arange(G) < nodes.count[:, None]
    idle = np.where(real, nodes.free_milli, 0).sum(axis=1)
    # fragmentation never exceeds the idle GPU milli
    assert (res.before <= idle * classes.weight_sum).all()
    assert (res.before >= 0).all()
    for i in range(nodes.count.shape[0]):
        g = int(res.gpu[i])
        if g >= 0:  # a sharing pod's GPU exists and has room
            assert g < nodes.count[i] and nodes.free_milli[i, g] >= milli[i]
        if num >= 1 and milli[i] == 1000:
            whole = int((nodes.free_milli[i, : nodes.count[i]] >= 1000).sum())
            assert (res.delta[i] == NO_FIT) == (whole < num)


@settings(max_examples=80, deadline=None)
@given(clusters(), st.booleans())
def test_cpu_only_classes_as_one_measure_the_same(
    case: tuple[FgdInput, TaskClasses, int, np.ndarray, int], fed: bool
) -> None:
    """select_classes folds the CPU-only classes into one (CPU_ONLY): a task without
    GPUs fits no GPU whatever its CPU, so W and every Δ stay exactly the same."""
    nodes, classes, cpu, milli, num = case
    counts = {
        TaskClass(c, m, k, mask): w
        for c, m, k, mask, w in zip(
            classes.cpu.tolist(), classes.milli.tolist(), classes.num.tolist(),
            classes.model_mask.tolist(), classes.weight.tolist(), strict=True,
        )
    }  # fmt: skip
    folded = select_classes(counts, coverage=1.0)
    assert int((folded.num == 0).sum()) == min(1, int((classes.num == 0).sum()))
    assert folded.weight_sum == classes.weight_sum
    one = fgd_scores(nodes, folded, cpu, milli, num, fed)
    many = fgd_scores(nodes, classes, cpu, milli, num, fed)
    assert np.array_equal(one.before, many.before)
    assert np.array_equal(one.delta, many.delta)
    assert np.array_equal(one.gpu, many.gpu)
