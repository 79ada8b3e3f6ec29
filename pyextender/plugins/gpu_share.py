"""gpu-share: GPU fit at device level, and fragmentation-gradient (FGD) scoring.

Filter: a sharing pod needs one usable GPU with free milli ≥ its share; a
whole-GPU pod needs k wholly free GPUs (kube-scheduler's count of
``nvidia.com/gpu`` cannot see GPUs that sharing pods occupy in part).

Score (Weng et al., USENIX ATC'23): Δ = F(before) − F(after) of the node's
fragmentation for the cluster's task classes, for a sharing pod on its best
GPU; score = 100 · sigmoid(Δ / 1000 milli-GPU). ``resolution`` 1 reproduces the
paper's integer scores (which create ties broken at random; this helps).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np

from pyextender.api.gpu import MILLI
from pyextender.api.resources import CPU
from pyextender.api.task_classes import TaskClasses
from pyextender.framework.interfaces import FilterResult, FloatArray, IntArray, PodContext
from pyextender.framework.registry import PluginSpec
from pyextender.framework.row_memo import Same
from pyextender.framework.status import Code
from pyextender.kernels.gpu_share import (
    NO_FIT,
    FgdBase,
    FgdMemo,
    FgdRows,
    fgd_gpu_deltas,
    fgd_rows,
)
from pyextender.plugins import gpu_topology
from pyextender.plugins.gpu_rows import (
    demand_of,
    fgd_input,
    free_whole,
    milli_per_row,
    pod_cpu,
)

_CODE_OF_REASON = np.array(
    [Code.SUCCESS, Code.UNSCHEDULABLE, Code.UNRESOLVABLE, Code.UNRESOLVABLE], dtype=np.int8
)
"""filter's code for each of its reason ids: none, short, never fits, GPUs unusable."""

SCALE_MILLI = 1000.0
"""Δ (milli-GPU) that moves the score from 50 to 73: the sigmoid's temperature (FGD's)."""

DEFAULT_RESOLUTION = 1.0
"""Score step: the FGD paper's integer scores. Gradients within about 40 milli-GPU
of each other tie, and ties are broken at random (kube-scheduler's own rule among
equal top scores). A coarser step replayed better on one workload and worse on
another (openb default +0.1 pp, gpushare40 −0.3 pp): it is not a better policy."""


@dataclass(frozen=True, slots=True)
class Args:
    weight: float = 1.0
    """Weight of the fragmentation score among all score plugins."""
    resolution: float = DEFAULT_RESOLUTION
    """Scores are rounded down to multiples of this (0 = exact). 1 = the FGD paper's
    integer scores: nearly equal gradients tie and the tie-break spreads them."""
    cpu_fed: bool = False
    """Count the GPU milli a node's free CPU cannot feed (⌊cpu / c_m⌋ tasks of class m)
    as fragmented too; off = the paper's measure, where one task's CPU makes every
    fitting GPU usable. Off by default: on the openb workloads it did not beat the
    paper's measure."""


@dataclass(slots=True)
class _Memo:
    """Δ per row for one pod shape (kernel memo), for the class model it was computed with."""

    classes: TaskClasses
    rows: FgdMemo


MEMO_SHAPES = 64
"""Pod shapes whose Δs are kept at most (the least recently used dropped first)."""

MEMO_BYTES = 16 * 2**20
"""What those memos may hold together (FgdMemo.ROW_BYTES, 38 bytes per row and shape;
45 before the milli and GPU columns were narrowed): at 10,000 nodes 64 shapes of 45
bytes were 30 MB, the largest part of the verbs' memory under load (bench/memory.py),
so larger clusters keep fewer shapes (44 at 10,000 nodes, 36 at 45 bytes; all 64 up to
~6,900). The openb default pod list's 44 commonest shapes cover 97.5 % of its pods, its
36 commonest 95.6 %."""

MIN_SHAPES = 8
"""Shapes kept whatever the cluster's size: the pods of a few jobs in turn."""


def memo_shapes(cap: int) -> int:
    """Pod shapes whose Δs are kept for a state of ``cap`` rows."""
    per_shape = max(cap, 1) * FgdMemo.ROW_BYTES
    return max(MIN_SHAPES, min(MEMO_SHAPES, MEMO_BYTES // per_shape))


def gradient(
    ctx: PodContext, rows: IntArray, cpu_fed: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """(Δ in milli-GPU of F per row, NO_FIT rows as -inf; best GPU per row or -1).

    Memoised per pod shape, over a per-row state all shapes share (W before and the
    per-class GPU counts, ``GpuState.fgd_base``): a row is recomputed only when its
    GPUs, its free CPU or the class model changed since, so the pods of a gang (one
    shape) cost one kernel run over the cluster and then only over what moved, and
    the first pod of a new shape computes only its placement on each row, not the
    rows' state again. A class model rebuilt with the same milli values (the learned
    model as its weights move) keeps the rows' GPU state: only W before is computed
    again, and every shape's Δ (bench/gpu_share_calls.py, "model rebuilt").
    """
    demand = demand_of(ctx)
    gpu = ctx.state.gpu
    classes = gpu.classes()
    if classes.size == 0 or rows.shape[0] == 0:
        return np.zeros(rows.shape[0]), np.full(rows.shape[0], -1, dtype=np.int32)
    key = (pod_cpu(ctx), demand.count, demand.milli, demand.memory_mib, cpu_fed)
    cap = gpu.count.shape[0]
    base = gpu.fgd_base.get(cpu_fed)
    if not isinstance(base, FgdBase):
        base = FgdBase.empty(classes, cpu_fed, cap)
        gpu.fgd_base[cpu_fed] = base
    elif base.classes is not classes or base.total.shape[0] != cap:
        base = base.for_classes(classes, cpu_fed, cap)
        gpu.fgd_base[cpu_fed] = base
    memo = gpu.fgd_memo.pop(key, None)  # put back last: the most recently used
    if memo is None or memo.classes is not classes or memo.rows.delta.shape[0] != cap:
        while len(gpu.fgd_memo) >= memo_shapes(cap):
            gpu.fgd_memo.pop(next(iter(gpu.fgd_memo)))
        memo = _Memo(classes, FgdMemo.empty(cap))
    gpu.fgd_memo[key] = memo
    state = ctx.state
    arrays = FgdRows(
        state.alloc, state.used, state.column[CPU], gpu.free_milli, gpu.count, gpu.usable,
        gpu.model, gpu.row_version,
    )  # fmt: skip
    milli = milli_per_row(ctx, rows, demand)
    out = fgd_rows(arrays, rows, classes, pod_cpu(ctx), milli, demand.count, base, memo.rows)
    return out.score, out.gpu


class GpuShare:
    name = "gpu-share"

    def __init__(self, args: Args) -> None:
        self.args = args

    def filter_key(self, ctx: PodContext) -> Hashable:
        """framework.row_memo: a row's verdict is its GPUs (count, free milli, memory,
        usable) against the pod's GPU demand (the resource named in the reasons too)."""
        d = demand_of(ctx)
        return (d.count, d.milli, d.memory_mib, d.resource)

    def score_key(self, ctx: PodContext) -> Hashable:
        """framework.row_memo: a row's score is its Δ (its GPUs and free CPU) for the
        pod's GPU demand and CPU under the class model in use (a new object whenever it
        is rebuilt), and this plugin's own arguments."""
        d = demand_of(ctx)
        model = Same(ctx.state.gpu.classes())
        return (d.count, d.milli, d.memory_mib, pod_cpu(ctx), model)

    def filter(self, ctx: PodContext, rows: IntArray) -> FilterResult:
        demand = demand_of(ctx)
        n = rows.shape[0]
        if demand.none:
            return FilterResult.all_pass(n)
        gpu = ctx.state.gpu
        count = gpu.count[rows]
        usable = gpu.usable[rows]
        if demand.whole:
            reasons = [
                "",
                f"fewer than {demand.count} wholly free GPUs ({demand.resource})",
                f"node has fewer than {demand.count} GPUs ({demand.resource})",
            ]
            short: np.ndarray = free_whole(ctx, rows) < demand.count
            never: np.ndarray = count < demand.count
        else:
            milli = milli_per_row(ctx, rows, demand)
            share = demand.milli or demand.memory_mib
            unit = "milli-GPU" if demand.milli else "MiB GPU memory"
            reasons = [
                "",
                f"no GPU with {share} {unit} free",
                f"no GPU can hold {share} {unit} (none, or GPU memory unknown or too small)",
            ]
            short = np.logical_not((gpu.free_milli[rows] >= milli[:, None]).any(axis=1))
            never = np.logical_or(count == 0, milli > MILLI)
        reasons.append("GPU topology annotation is invalid; GPUs unusable")
        broken = ~usable & (count > 0)
        # the later reason wins; np.putmask over the rows, where boolean-mask
        # assignment of codes and reasons apart cost ~2x at 5,000 rows
        reason_ids = short.astype(np.int32)
        np.putmask(reason_ids, never, 2)
        np.putmask(reason_ids, broken, 3)
        codes = np.take(_CODE_OF_REASON, reason_ids)
        return FilterResult(codes=codes, reason_ids=reason_ids, reasons=reasons)

    def score(self, ctx: PodContext, rows: IntArray) -> FloatArray:
        delta, _ = gradient(ctx, rows, self.args.cpu_fed)
        with np.errstate(over="ignore"):
            score = 100.0 / (1.0 + np.exp(-delta / SCALE_MILLI))
        step = self.args.resolution
        if step > 0:
            score = np.floor(score / step) * step
        result: FloatArray = score
        return result


def choose_gpus(
    ctx: PodContext,
    row: int,
    resolution: float = DEFAULT_RESOLUTION,
    best_fit_ties: bool = True,
    cpu_fed: bool = False,
) -> tuple[int, ...]:
    """GPU indices for the pod on ``row`` (what the bind step writes on the pod).

    Sharing pod: the GPU of the top score at the plugin's ``resolution``; among
    GPUs that tie, the best fit (least free milli, then lowest index), which keeps
    the emptier GPUs whole for larger shares (``best_fit_ties`` False: lowest
    index, as the FGD simulator); resolution 0 = the largest exact Δ. Whole-GPU
    pod: the topology-best set (gpu-topology). No GPUs: ().
    """
    demand = demand_of(ctx)
    if demand.none:
        return ()
    if demand.whole:
        return gpu_topology.choose_gpus(ctx, row)
    rows = np.asarray([row], dtype=np.int64)
    classes = ctx.state.gpu.classes()
    milli = milli_per_row(ctx, rows, demand)
    if classes.size == 0:
        return best_fit_gpu(ctx, row)
    deltas = fgd_gpu_deltas(fgd_input(ctx, rows), classes, pod_cpu(ctx), milli, cpu_fed)[0]
    if int(deltas.max()) == NO_FIT:
        return ()
    if resolution > 0:
        with np.errstate(over="ignore"):
            sig = 100.0 / (1.0 + np.exp(-deltas / classes.weight_sum / SCALE_MILLI))
        score = np.where(deltas == NO_FIT, -1.0, np.floor(sig / resolution) * resolution)
        if best_fit_ties:
            free = ctx.state.gpu.free_milli[row, : score.shape[0]].astype(np.float64)
            top = np.flatnonzero(score == score.max())
            return (int(top[np.argmin(free[top])]),)
        return (int(score.argmax()),)
    return (int(deltas.argmax()),)


def best_fit_gpu(ctx: PodContext, row: int) -> tuple[int, ...]:
    """The fitting GPU with the least free milli (lowest index on ties), or ()."""
    demand = demand_of(ctx)
    rows = np.asarray([row], dtype=np.int64)
    milli = int(milli_per_row(ctx, rows, demand)[0])
    gpu = ctx.state.gpu
    free = gpu.free_milli[row, : gpu.count[row]].astype(np.int64)
    fits = np.flatnonzero(free >= milli)
    if fits.shape[0] == 0 or not gpu.usable[row]:
        return ()
    return (int(fits[np.argmin(free[fits])]),)


SPEC = PluginSpec(
    name="gpu-share",
    args_type=Args,
    factory=GpuShare,
    summary="GPU fit per device; score by fragmentation gradient (FGD) for all GPU pods.",
)
