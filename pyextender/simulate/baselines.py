"""Baseline score plugins of the FGD paper's simulator (REPLAY.md §6).

They are research baselines, not production plugins, so they live with the
simulator. Each is an ordinary ScorePlugin run by the same Profile as the
production plugins. Units: CPU milli-cores, GPU milli-GPU; 128000 and 8000
are the largest node's CPU and GPU (the paper's normalisers).
"""

from __future__ import annotations

import numpy as np

from pyextender.api.gpu import MILLI
from pyextender.framework.interfaces import FloatArray, IntArray, PodContext
from pyextender.plugins.gpu_rows import demand_of, milli_per_row, pod_cpu

MAX_CPU = 128_000.0  # milli-cores
MAX_GPU = 8_000.0  # milli-GPU


def _free_cpu(ctx: PodContext, rows: IntArray) -> FloatArray:
    free = ctx.state.free_by_col[ctx.state.column["cpu"]]
    result: FloatArray = np.take(free, rows).astype(np.float64)
    return result


def _demand_milli(ctx: PodContext, rows: IntArray) -> FloatArray:
    demand = demand_of(ctx)
    if demand.none:
        return np.zeros(rows.shape[0])
    result: FloatArray = demand.count * milli_per_row(ctx, rows, demand).astype(np.float64)
    return result


def min_max(scores: FloatArray) -> FloatArray:
    """kube-scheduler style integer min-max normalisation to 0..100 (creates ties)."""
    if scores.shape[0] == 0:
        return scores
    lo, hi = float(scores.min()), float(scores.max())
    if hi == lo:
        return np.zeros_like(scores)
    result: FloatArray = np.floor((scores - lo) * 100.0 / (hi - lo))
    return result


class RandomScore:
    """A uniformly random feasible node."""

    name = "random"

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def score(self, ctx: PodContext, rows: IntArray) -> FloatArray:
        result: FloatArray = np.multiply(self.rng.random(rows.shape[0]), 100.0)
        return result


class DotProd:
    """⌊100·(1 − ½(cpu_free·cpu_req/128000² + gpu_free·gpu_req/8000²))⌋."""

    name = "dotprod"

    def score(self, ctx: PodContext, rows: IntArray) -> FloatArray:
        gpu_free = ctx.state.gpu.free_milli[rows].sum(axis=1).astype(np.float64)
        dot = (
            _free_cpu(ctx, rows) * pod_cpu(ctx) / MAX_CPU**2
            + gpu_free * _demand_milli(ctx, rows) / MAX_GPU**2
        )
        result: FloatArray = np.floor(100.0 * (1.0 - 0.5 * dot))
        return result


class BestFit:
    """⌊100·(1 − ½·cpu_left/128000 − ½·gpu_left/8000)⌋ after placement, min-max normalised."""

    name = "best-fit"

    def score(self, ctx: PodContext, rows: IntArray) -> FloatArray:
        gpu_free = ctx.state.gpu.free_milli[rows].sum(axis=1).astype(np.float64)
        cpu_left = _free_cpu(ctx, rows) - pod_cpu(ctx)
        gpu_left = gpu_free - _demand_milli(ctx, rows)
        left = cpu_left / MAX_CPU * 0.5 + gpu_left / MAX_GPU * 0.5
        return min_max(np.floor((1.0 - left) * 100.0))


class GpuPacking:
    """Shared GPUs first, then free GPUs of used nodes, then idle nodes (REPLAY.md §6)."""

    name = "gpu-packing"

    def score(self, ctx: PodContext, rows: IntArray) -> FloatArray:
        demand = demand_of(ctx)
        n = rows.shape[0]
        if demand.none:
            return np.zeros(n)
        gpu = ctx.state.gpu
        free = gpu.free_milli[rows].astype(np.int64)
        count = gpu.count[rows].astype(np.int64)
        real = np.arange(free.shape[1]) < count[:, None]
        whole_free = ((free >= MILLI) & real).sum(axis=1)
        milli = milli_per_row(ctx, rows, demand)
        # GPUs the pod would use: fitting GPUs, least free first, `count` of them
        fits = (free >= milli[:, None]) & real
        key = np.where(fits, free, 10 * MILLI)
        order = np.argsort(key, axis=1, kind="stable")[:, : demand.count]
        used = np.take_along_axis(free, order, axis=1)
        fully = (used >= MILLI).sum(axis=1)
        free_pct = (used * 100 // MILLI).sum(axis=1)
        idle = np.maximum(33 - whole_free, whole_free)
        fresh = np.maximum(50 - fully, 33)
        shared = np.maximum(100 - free_pct // 10, 50)
        result: FloatArray = np.where(
            whole_free == count, idle, np.where(fully > 0, fresh, shared)
        ).astype(np.float64)
        return result
