"""The policies the simulator can replay, by name.

Every policy filters with the production filters (predicates, gpu-share,
gpu-topology) and differs only in its score plugins and GPU chooser.
``pyextender`` is the sidecar's shipped configuration (pyextender.plugins.
defaults), with the bind step's GPU choice.
"""

from __future__ import annotations

import numpy as np

from pyextender.framework.interfaces import FilterPlugin, PodContext, ScorePlugin
from pyextender.framework.runtime import Profile, build_profile
from pyextender.plugins import binpack, gpu_share, gpu_topology, predicates
from pyextender.plugins.defaults import load, plugins_of
from pyextender.plugins.gpu_rows import demand_of, milli_per_row
from pyextender.simulate.baselines import BestFit, DotProd, GpuPacking, RandomScore
from pyextender.simulate.replay import Chooser, Policy


def production_filters() -> list[FilterPlugin]:
    return [
        predicates.Predicates(predicates.Args()),
        gpu_share.GpuShare(gpu_share.Args()),
        gpu_topology.GpuTopology(gpu_topology.Args()),
    ]


def lowest_free(ctx: PodContext, row: int) -> tuple[int, ...]:
    """The paper's default: lowest-indexed wholly free GPUs; best-fit GPU for shares."""
    demand = demand_of(ctx)
    if demand.none:
        return ()
    if not demand.whole:
        return gpu_share.best_fit_gpu(ctx, row)
    gpu = ctx.state.gpu
    free = np.flatnonzero(gpu.free_milli[row, : gpu.count[row]] >= 1000)
    return tuple(int(g) for g in free[: demand.count])


def _random_gpu(seed: int) -> Chooser:
    rng = np.random.default_rng(seed + 7)

    def choose(ctx: PodContext, row: int) -> tuple[int, ...]:
        demand = demand_of(ctx)
        if demand.none or demand.whole:
            return lowest_free(ctx, row)
        rows = np.asarray([row], dtype=np.int64)
        milli = int(milli_per_row(ctx, rows, demand)[0])
        gpu = ctx.state.gpu
        fits = np.flatnonzero(gpu.free_milli[row, : gpu.count[row]] >= milli)
        return (int(fits[rng.integers(fits.shape[0])]),) if fits.shape[0] else ()

    return choose


def _profile(*scorers: tuple[ScorePlugin, float]) -> Profile:
    return Profile(filters=production_filters(), scorers=scorers)


def _pyextender(seed: int) -> tuple[Profile, Chooser]:
    """Exactly what the sidecar ships: the default tiers' filters and scorers,
    and the bind step's GPU choice."""
    return build_profile(plugins_of(load(None))), gpu_share.choose_gpus


def _fgd(seed: int) -> tuple[Profile, Chooser]:
    share = gpu_share.GpuShare(gpu_share.Args(resolution=1.0))

    def choose(ctx: PodContext, row: int) -> tuple[int, ...]:
        return gpu_share.choose_gpus(ctx, row, resolution=1.0, best_fit_ties=False)

    return _profile((share, 1.0)), choose


def _simple(plugin: ScorePlugin) -> tuple[Profile, Chooser]:
    return _profile((plugin, 1.0)), lowest_free


POLICIES: dict[str, Policy] = {
    p.name: p
    for p in (
        Policy(
            "pyextender",
            _pyextender,
            "the sidecar's shipped config, classes learned online from placed pods",
            learns_classes=True,
            # as the sidecar: GpuState learns each pod as it binds. Learning from every
            # arrival instead (placed or not) gave the same allocation on all six openb
            # workloads: paired over 40 seeds, -0.015..+0.016 pp, each within its 95 %
            # interval (±0.03); the refused large pods are too few to move the model.
            learns_at="bind",
            spares_idle_nodes=True,
        ),
        Policy(
            "pyextender-known",
            _pyextender,
            # a diagnostic, not a deployment: it separates what the online model costs
            # from what the scoring itself does (the report pairs it with FGD: over 40
            # seeds, alloc@100, +0.04..+0.08 pp on four openb workloads, -0.01 on
            # multigpu30, gpuspec20 -0.05 at 100 % / +0.07 at 130 %; without the order
            # of equals, spares_idle_nodes, -0.02..+0.01 on all six)
            "the sidecar's scoring, told the protocol's classes of the whole trace as FGD is",
            spares_idle_nodes=True,
        ),
        Policy("fgd", _fgd, "the paper's FGD: integer scores, GPU by top score"),
        Policy(
            "fgd-online",
            _fgd,
            # FGD as it could run in a cluster: the protocol's classes are the pod list
            # being replayed, so `fgd` knows the exact mix of the pods still to come,
            # which no scheduler does; this one learns them as the sidecar does
            "the paper's FGD with the sidecar's online class model, not the whole trace's",
            learns_classes=True,
            learns_at="bind",
        ),
        Policy(
            "random",
            lambda seed: (_profile((RandomScore(seed), 1.0)), _random_gpu(seed)),
            "a uniform feasible node and a uniform fitting GPU",
        ),
        Policy("dotprod", lambda seed: _simple(DotProd()), "dot product of free and request"),
        Policy("gpu-packing", lambda seed: _simple(GpuPacking()), "shared GPUs, then used nodes"),
        Policy("best-fit", lambda seed: _simple(BestFit()), "least CPU and GPU left over"),
        Policy(
            "volcano-binpack",
            lambda seed: _simple(binpack.Binpack(binpack.Args())),
            "Volcano's binpack formula (cpu, memory, nvidia.com/gpu weights 1)",
        ),
    )
}
