"""The GPU side of one pod against candidate rows, shared by the GPU plugins.

Computed once per pod cycle and kept in ``ctx.scratch`` so filter, score and
the bind step's GPU choice read the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pyextender.api.gpu import MILLI, GpuDemand, gpu_demand
from pyextender.api.resources import CPU
from pyextender.framework.interfaces import IntArray, PodContext
from pyextender.kernels.gpu_share import FgdInput

I64 = npt.NDArray[np.int64]

_DEMAND_KEY = "gpu.demand"


def demand_of(ctx: PodContext) -> GpuDemand:
    """The pod's GPU demand, parsed once per cycle."""
    cached = ctx.scratch.get(_DEMAND_KEY)
    if isinstance(cached, GpuDemand):
        return cached
    demand = gpu_demand(ctx.pod)
    ctx.scratch[_DEMAND_KEY] = demand
    return demand


def milli_per_row(ctx: PodContext, rows: IntArray, demand: GpuDemand) -> I64:
    """milli-GPU the pod needs on each GPU it uses, per row (memory shares vary by node)."""
    if demand.milli > 0 or demand.memory_mib <= 0:
        return np.full(rows.shape[0], demand.milli, dtype=np.int64)
    mem = ctx.state.gpu.memory_mib[rows].astype(np.int64)
    safe = np.maximum(mem, 1)
    need = -(-demand.memory_mib * MILLI // safe)
    result: I64 = np.where(mem > 0, need, MILLI + 1)
    return result


_POPCOUNT16 = np.array([bin(i).count("1") for i in range(1 << 16)], dtype=np.int64)
"""Set bits of every 16-bit mask (MAX_GPUS = 16): one lookup per node."""


def free_whole(ctx: PodContext, rows: IntArray) -> I64:
    """Wholly free GPUs per row, from the free-GPU bitmask the GPU state keeps."""
    result: I64 = _POPCOUNT16[ctx.state.gpu.free_mask[rows] & 0xFFFF]
    return result


def fgd_input(ctx: PodContext, rows: IntArray) -> FgdInput:
    """Kernel input for the rows: free CPU (milli-cores) and the GPU arrays."""
    state = ctx.state
    gpu = state.gpu
    free_cpu: I64 = np.take(state.free_by_col[state.column[CPU]], rows)
    return FgdInput(
        free_cpu=free_cpu,
        free_milli=gpu.free_milli[rows],
        count=np.where(gpu.usable[rows], gpu.count[rows], 0).astype(np.int32),
        model=gpu.model[rows],
    )


def pod_cpu(ctx: PodContext) -> int:
    return int(ctx.request[ctx.state.column[CPU]])


@dataclass(frozen=True, slots=True)
class Reasons:
    """Reason table builder for FilterResult (index 0 is success)."""

    table: list[str]

    def add(self, text: str) -> int:
        self.table.append(text)
        return len(self.table) - 1
