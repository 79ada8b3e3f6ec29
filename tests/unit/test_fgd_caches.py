"""FGD caches: the per-row state all pod shapes share and the per-shape Δ memo.

The kernel through the caches must equal a full scan after any sequence of pod
shapes and cache deltas, and a new shape must not recompute the shared state
of rows that did not change.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pyextender.api import names
from pyextender.api.objects import NodeInfo, PodInfo
from pyextender.api.resources import CPU, GPU, PYEXTENDER_GPU_MILLI
from pyextender.api.task_classes import TaskClass, TaskClasses
from pyextender.cache.state import ClusterState
from pyextender.framework.interfaces import PodContext
from pyextender.kernels.gpu_share import (
    KEY_HEAD,
    NO_FIT,
    FgdBase,
    FgdInput,
    FgdMemo,
    FgdResult,
    FgdRows,
    fgd_rows,
    fgd_scores,
    fgd_scores_numpy,
    row_hash,
    row_key,
    same_key,
)
from pyextender.plugins import gpu_share

G = 8
CLASSES = TaskClasses.build(
    {
        TaskClass(4000, 500, 1): 5,
        TaskClass(8000, 1000, 1): 3,
        TaskClass(2000, 250, 1): 2,
        TaskClass(16000, 1000, 2): 1,
        TaskClass(1000, 0, 0): 2,
    }
)
# the same milli values, other weights and a class more (a learned model rebuilt)
REWEIGHED = TaskClasses.build(
    {
        TaskClass(4000, 500, 1): 2,
        TaskClass(8000, 1000, 1): 9,
        TaskClass(2000, 250, 1): 4,
        TaskClass(6000, 250, 1): 3,
        TaskClass(16000, 1000, 2): 1,
        TaskClass(1000, 0, 0): 6,
    }
)
OTHER_MILLI = TaskClasses.build({TaskClass(4000, 300, 1): 5, TaskClass(8000, 1000, 1): 3})
MODELS = (CLASSES, REWEIGHED, OTHER_MILLI)
SHAPES = ((4000, 1, 500), (8000, 1, 1000), (2000, 1, 300), (16000, 2, 1000), (1000, 0, 0))


def _rows(rng: np.random.Generator, n: int) -> FgdRows:
    count = rng.choice([0, 2, 4, 8], n).astype(np.int32)
    free = np.zeros((n, G), dtype=np.int32)
    for i in range(n):
        free[i, : count[i]] = rng.choice([0, 100, 250, 500, 700, 1000], int(count[i]))
    alloc = np.zeros((n, 3), dtype=np.int64)
    # every row its own free CPU: no two rows are alike (the counts below are per row)
    alloc[:, 1] = rng.permutation(max(n, 64))[:n] * 1000
    return FgdRows(
        alloc=alloc,
        used=np.zeros((n, 3), dtype=np.int64),
        cpu_col=1,
        free_milli=free,
        count=count,
        usable=rng.random(n) < 0.9,
        model=rng.integers(-1, 3, n).astype(np.int32),
        row_version=np.zeros(n, dtype=np.int64),
    )


def _full_scan(
    state: FgdRows,
    rows: np.ndarray,
    shape: tuple[int, int, int],
    fed: bool,
    classes: TaskClasses = CLASSES,
    milli: np.ndarray | None = None,
    scan: Callable[..., FgdResult] = fgd_scores,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``scan`` (fresh caches) over ``rows``, the pod's milli ``milli`` per row (else
    the shape's on every row)."""
    if milli is None:
        milli = np.full(rows.shape[0], shape[2], dtype=np.int64)
    res = scan(_nodes(state, rows), classes, shape[0], milli, shape[1], fed)
    return res.before, res.delta, res.gpu


def _nodes(state: FgdRows, rows: np.ndarray) -> FgdInput:
    """Rows ``rows`` of the cache's arrays as the full scans' input."""
    cpu = state.alloc[rows, state.cpu_col] - state.used[rows, state.cpu_col]
    return FgdInput(
        cpu, state.free_milli[rows], np.where(state.usable, state.count, 0)[rows].astype(np.int32),
        state.model[rows],
    )  # fmt: skip


def test_a_new_shape_reuses_the_rows_state_and_a_delta_recomputes_one_row() -> None:
    rng = np.random.default_rng(4)
    n = 50
    state = _rows(rng, n)
    rows = np.arange(n, dtype=np.int64)
    base = FgdBase.empty(CLASSES, False, n)
    memos = {shape: FgdMemo.empty(n) for shape in SHAPES}

    def call(shape: tuple[int, int, int]) -> tuple[int, int]:
        milli = np.full(n, shape[2], dtype=np.int64)
        out = fgd_rows(state, rows, CLASSES, shape[0], milli, shape[1], base, memos[shape])
        want = _full_scan(state, rows, shape, False)
        assert np.array_equal(out.before, want[0])
        assert np.array_equal(out.delta, want[1])
        assert np.array_equal(out.gpu, want[2])
        return out.computed, out.computed_base

    assert call(SHAPES[0]) == (n, n)  # nothing cached yet
    assert call(SHAPES[0]) == (0, 0)
    assert call(SHAPES[1]) == (n, 0)  # a new shape: its Δ on every row, the state reused
    state.free_milli[7, 0] = 100  # a bind on row 7
    state.row_version[7] += 1
    assert call(SHAPES[2]) == (n, 1)
    assert call(SHAPES[0]) == (1, 0)  # row 7's state is fresh from the call before
    state.used[9, 1] += 1000  # a CPU-only pod on row 9: other free CPU
    assert call(SHAPES[1]) == (2, 1)  # rows 7 and 9


def _copies(state: FgdRows, pick: np.ndarray) -> FgdRows:
    """Rows ``pick`` of ``state``, each its own row (fresh versions)."""
    return FgdRows(
        alloc=state.alloc[pick].copy(), used=state.used[pick].copy(), cpu_col=state.cpu_col,
        free_milli=state.free_milli[pick].copy(), count=state.count[pick].copy(),
        usable=state.usable[pick].copy(), model=state.model[pick].copy(),
        row_version=np.zeros(pick.shape[0], dtype=np.int64),
    )  # fmt: skip


def test_identical_rows_are_computed_once_and_copied() -> None:
    """Rows of one state id (free CPU, model, free milli per GPU) asked with the same
    pod milli take the state and Δ of the first such row the call computed. 400 rows
    made of 12 distinct ones, the pod's milli one of two by model (memory shares
    differ per GPU type), both measures: every answer as the numpy reference's, in the kernel and
    in the interpreted loops, through a fresh base, binds that make 60 rows like
    others, CPU-only pods on 40 rows (their ids must follow their free CPU), and a
    rebuilt class model."""
    rng = np.random.default_rng(11)
    n = 400
    for interpreted in (False, True):
        for fed in (False, True):
            state = _copies(_rows(rng, 12), rng.integers(0, 12, n))
            rows = np.arange(n, dtype=np.int64)
            base = FgdBase.empty(CLASSES, fed, n)
            for step in ("fresh", "binds", "cpu", "rebuilt"):
                classes = REWEIGHED if step == "rebuilt" else CLASSES
                memos = {shape: FgdMemo.empty(n) for shape in SHAPES}
                asked = n
                if step == "binds":  # each changed row now as another row is
                    changed = rng.choice(n, 60, replace=False)
                    like = rng.integers(0, n, changed.shape[0])
                    for a in (state.alloc, state.used, state.free_milli, state.count):
                        a[changed] = a[like]
                    state.usable[changed] = state.usable[like]
                    state.model[changed] = state.model[like]
                    state.row_version[changed] += 1
                if step == "cpu":  # CPU-only pods on 40 rows: their GPUs unchanged
                    state.used[rng.choice(n, 40, replace=False), 1] += 1000
                if step == "rebuilt":
                    base = base.for_classes(classes, fed, n)
                # a share's milli per node follows its GPUs' memory: here, its model
                halves = {s: np.where(state.model % 2 == 0, s[2], s[2] // 2) for s in SHAPES}
                # every shape, then the first again: every row's Δ from its memo
                for again, shape in enumerate([*SHAPES, SHAPES[0]]):
                    milli = halves[shape].astype(np.int64)
                    out = fgd_rows(
                        state, rows, classes, shape[0], milli, shape[1], base, memos[shape],
                        interpreted,
                    )  # fmt: skip
                    want = _full_scan(state, rows, shape, fed, classes, milli, fgd_scores_numpy)
                    where = (shape, fed, interpreted, step)
                    if again == len(SHAPES):  # copies' memos too
                        assert (out.computed, out.copied) == (0, 0)
                        assert np.array_equal(out.delta, want[1])
                        assert np.array_equal(out.gpu, want[2])
                        continue
                    assert np.array_equal(out.before, want[0]), where
                    assert np.array_equal(out.delta, want[1]), where
                    assert np.array_equal(out.gpu, want[2]), where
                    assert out.computed + out.copied == asked, where
                    # 12 rows × 2 milli values are all there is to compute: the rest
                    # take the results of a row of their state id
                    assert out.computed <= 24, where
                    assert out.copied >= asked - 24, where


def test_row_keys_tell_every_input_apart() -> None:
    """A row's key is its free CPU, model, usable GPU count, pod milli and each usable
    GPU's free milli (the milli past its GPUs is never read): equal rows hash alike
    and match; any one of them different, they do not."""
    free = np.asarray([1000, 500, 0, 250, 0, 0, 0, 0, 1000, 500, 0, 250, 900, 0, 0, 0])
    entry = np.zeros(KEY_HEAD + G, dtype=np.int64)
    entry[0], entry[1] = 8000, row_key(1, 4, 500)
    entry[KEY_HEAD : KEY_HEAD + 4] = free[:4]

    def same(
        c: int = 8000, mid: int = 1, ng: int = 4, u: int = 500, milli: np.ndarray = free
    ) -> bool:
        return bool(same_key(entry, 0, c, row_key(mid, ng, u), milli, G, ng))

    assert same()
    assert row_hash(8000, row_key(1, 4, 500), free, 0, 4) == row_hash(
        8000, row_key(1, 4, 500), free, G, 4
    )
    assert not same(c=7000)
    assert not same(mid=2) and not same(mid=-1)
    assert not same(ng=5)
    assert not same(u=501)
    for j in range(4):
        other = free.copy()
        other[G + j] += 10
        assert not same(milli=other), j
    keys = {row_key(m, k, u) for m in (-1, 0, 5) for k in (0, 8, 16) for u in (0, 1000, 1001)}
    assert len(keys) == 27


def test_shares_past_one_gpu_fit_nowhere_and_share_one_memo_entry() -> None:
    """A memory share larger than a node's GPU memory needs more than MILLI on one GPU:
    NO_FIT whatever the amount, so the memo keeps one key for all of them (it stores
    the milli in 32 bits: 2**40 must not wrap onto a share that fits)."""
    rng = np.random.default_rng(6)
    n = 20
    state = _rows(rng, n)
    rows = np.arange(n, dtype=np.int64)
    base = FgdBase.empty(CLASSES, False, n)
    memo = FgdMemo.empty(n)
    for milli, computed in ((1001, n), (2**40 + 500, 0), (5000, 0)):
        req = np.full(n, milli, dtype=np.int64)
        out = fgd_rows(state, rows, CLASSES, 4000, req, 1, base, memo)
        assert (out.delta == NO_FIT).all() and (out.gpu == -1).all()
        assert out.computed == computed
    # 500 is 2**40 + 500 in 32 bits: computed, not taken from the NO_FIT entries
    out = fgd_rows(state, rows, CLASSES, 4000, np.full(n, 500, np.int64), 1, base, memo)
    assert out.computed == n
    assert np.array_equal(out.delta, _full_scan(state, rows, (4000, 1, 500), False)[1])


def test_a_model_rebuilt_with_the_same_milli_values_keeps_the_rows_gpu_state() -> None:
    """The learned model is rebuilt as its weights move (1 % growth of the pods seen, or
    10 s): W before depends on the weights, the GPU state of a row does not."""
    rng = np.random.default_rng(5)
    n = 40
    state = _rows(rng, n)
    rows = np.arange(n, dtype=np.int64)
    shape = SHAPES[0]
    milli = np.full(n, shape[2], dtype=np.int64)

    def call(base: FgdBase, classes: TaskClasses) -> tuple[int, int, int]:
        out = fgd_rows(state, rows, classes, shape[0], milli, shape[1], base, FgdMemo.empty(n))
        want = _full_scan(state, rows, shape, False, classes)
        assert np.array_equal(out.before, want[0])
        assert np.array_equal(out.delta, want[1])
        assert np.array_equal(out.gpu, want[2])
        return out.computed, out.computed_base, out.computed_gpus

    base = FgdBase.empty(CLASSES, False, n)
    assert call(base, CLASSES) == (n, n, n)
    rebuilt = base.for_classes(REWEIGHED, False, n)
    assert rebuilt.gpu is base.gpu
    assert call(rebuilt, REWEIGHED) == (n, n, 0)  # every W before, no GPU scan
    state.used[3, 1] += 1000  # a CPU-only pod on row 3: its W before only
    assert call(rebuilt, REWEIGHED) == (n, 1, 0)
    other = rebuilt.for_classes(OTHER_MILLI, False, n)  # other milli values: start over
    assert other.gpu is not rebuilt.gpu
    assert call(other, OTHER_MILLI) == (n, n, n)
    # another measure or another size starts over too
    assert rebuilt.for_classes(REWEIGHED, True, n).gpu is not rebuilt.gpu
    assert rebuilt.for_classes(REWEIGHED, False, n + 1).valid.shape[0] == n + 1


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 2**31),
    st.lists(st.tuples(st.integers(0, len(SHAPES) - 1), st.integers(0, 5)), max_size=12),
    st.booleans(),
)
def test_cached_calls_equal_a_full_scan_after_any_deltas(
    seed: int, steps: list[tuple[int, int]], fed: bool
) -> None:
    rng = np.random.default_rng(seed)
    n = 30
    state = _rows(rng, n)
    model = 0
    classes = MODELS[model]
    base = FgdBase.empty(classes, fed, n)
    memos = {shape: FgdMemo.empty(n) for shape in SHAPES}
    for shape_i, change in steps:
        if change >= 4:  # the class model is rebuilt: the same milli values or others
            model = (model + change - 3) % len(MODELS)
            classes = MODELS[model]
            base = base.for_classes(classes, fed, n)
            memos = {shape: FgdMemo.empty(n) for shape in SHAPES}
        row = int(rng.integers(n))
        if change == 1:  # GPUs of one row change
            state.free_milli[row, 0] = int(rng.choice([0, 300, 1000]))
            state.row_version[row] += 1
        elif change == 2:  # its free CPU changes
            state.used[row, 1] = int(rng.integers(0, 8)) * 1000
        shape = SHAPES[shape_i]
        rows = rng.permutation(n)[: int(rng.integers(1, n + 1))].astype(np.int64)
        milli = np.full(rows.shape[0], shape[2], dtype=np.int64)
        interpreted = change == 3
        out = fgd_rows(
            state, rows, classes, shape[0], milli, shape[1], base, memos[shape], interpreted
        )
        want = _full_scan(state, rows, shape, fed, classes)
        assert np.array_equal(out.before, want[0])
        assert np.array_equal(out.delta, want[1])
        assert np.array_equal(out.gpu, want[2])
        scores = np.where(want[1] == NO_FIT, -np.inf, want[1] / classes.weight_sum)
        assert np.array_equal(out.score, scores)


def _pod(uid: str, requests: dict[str, int], ann: dict[str, str]) -> PodInfo:
    return PodInfo("ns", f"p-{uid}", uid, "volcano", "", "Pending", requests, annotations=ann)


def test_gradient_shares_the_rows_state_across_pod_shapes() -> None:
    state = ClusterState()
    for name in ("a", "b", "c"):
        state.set_node(NodeInfo(name, {CPU: 64_000, GPU: 8, "pods": 110}))
    share = {PYEXTENDER_GPU_MILLI: "500", names.GPU_INDEX_ANNOTATION: "0"}
    state.add_pod(_pod("seed", {GPU: 1, CPU: 4000}, share), "a")
    state.gpu.fixed_classes = CLASSES
    rows = state.live_rows()

    def ctx(pod: PodInfo) -> PodContext:
        return PodContext(pod=pod, state=state, request=state.vector(pod.requests))

    small = ctx(_pod("x", {GPU: 1, CPU: 2000}, {PYEXTENDER_GPU_MILLI: "300"}))
    whole = ctx(_pod("y", {GPU: 2, CPU: 16000}, {}))
    gpu_share.gradient(small, rows)
    base = state.gpu.fgd_base[False]
    assert base.valid[rows].all()
    kept = base.before.copy()
    delta, gpus = gpu_share.gradient(whole, rows)
    assert state.gpu.fgd_base[False] is base  # one state for both shapes
    assert np.array_equal(base.before, kept)
    state.gpu.fgd_memo.clear()
    state.gpu.fgd_base.clear()
    fresh, fresh_gpus = gpu_share.gradient(whole, rows)
    assert np.array_equal(delta, fresh)
    assert np.array_equal(gpus, fresh_gpus)


def test_a_snapshot_scores_with_caches_of_its_own() -> None:
    """The cycle scores a snapshot on its own thread while the verbs score the live
    state: shared caches would let the snapshot's older rows overwrite the live ones'
    cached Δ (the kernel writes them in place, without the GIL)."""
    state = ClusterState()
    for name in ("a", "b"):
        state.set_node(NodeInfo(name, {CPU: 64_000, GPU: 8, "pods": 110}))
    state.gpu.fixed_classes = CLASSES
    rows = state.live_rows()
    pod = _pod("x", {GPU: 1, CPU: 2000}, {PYEXTENDER_GPU_MILLI: "500"})

    def ctx(s: ClusterState) -> PodContext:
        return PodContext(pod=pod, state=s, request=s.vector(pod.requests))

    gpu_share.gradient(ctx(state), rows)
    snap = state.snapshot()
    assert snap.gpu.fgd_base == {} and snap.gpu.fgd_memo == {}
    # the live state moves on; the snapshot scores its older rows afterwards
    state.add_pod(_pod("seed", {GPU: 7, CPU: 4000}, {}), "a")  # one GPU of a left
    live, _ = gpu_share.gradient(ctx(state), rows)
    base = state.gpu.fgd_base[False]
    kept = base.before.copy()
    old, _ = gpu_share.gradient(ctx(snap), rows)
    assert state.gpu.fgd_base[False] is base and np.array_equal(base.before, kept)
    again, _ = gpu_share.gradient(ctx(state), rows)
    assert np.array_equal(again, live) and not np.array_equal(old, live)
