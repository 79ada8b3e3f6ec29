"""supernode: keep a gang's model-parallel units inside supernodes.

A pod takes part when it asks for whole GPUs and carries a GPU group size G
(``pyextender.io/gpu-group-size`` or ``metax-tech.com/gpu-group-size``) or a
tier limit. The gang's plan (pyextender.kernels.supernode: units best-fit,
atomic sub-units of A GPUs never split, fewest units broken) is computed once
per gang and kept; filter then admits only nodes of supernodes whose planned
share is not yet filled, and score prefers them. A plan that cannot be met
(hard tier limit, or an atomic sub-unit that fits no supernode) fails every
node with the reason, so the gang stays pending and says why.

Gang size is the PodGroup's minMember (else ``pyextender.io/gang-size``);
the tier limit is the PodGroup's Volcano ``networkTopology`` (mode hard|soft,
highestTierAllowed), else ``pyextender.io/highest-tier-allowed`` with
``pyextender.io/network-topology-mode``, else the plugin args.

The plan is made before the gang's gates are lifted (the actions ask
``job_valid``; a hard limit that cannot be met keeps the gates on, with the reason)
and kept in the cluster state, where the filter of every replica finds it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from pyextender.api import names
from pyextender.api.objects import PodInfo
from pyextender.framework.interfaces import FilterResult, FloatArray, IntArray, PodContext
from pyextender.framework.registry import PluginAlias, PluginSpec
from pyextender.framework.session import Job, Session, unschedulable
from pyextender.framework.status import SUCCESS, Code, Status
from pyextender.kernels.supernode import GangShape, SupernodePlan, plan_supernodes
from pyextender.plugins.gpu_rows import demand_of

TIER_ANNOTATION = "pyextender.io/highest-tier-allowed"
MODE_ANNOTATION = "pyextender.io/network-topology-mode"


@dataclass(frozen=True, slots=True)
class Args:
    weight: float = 1.0
    """Weight of the supernode score among all score plugins."""
    highest_tier_allowed: int = 0
    """Default tier limit for gangs that set none; 0 = no limit."""
    hard: bool = True
    """Default mode: a limit that cannot be met keeps the gang pending (else soft)."""


def _first_int(pod: PodInfo, keys: tuple[str, ...]) -> int:
    for key in keys:
        raw = pod.annotations.get(key, "")
        if raw.isdigit():
            return int(raw)
    return 0


@dataclass(frozen=True, slots=True)
class _Plan:
    plan: SupernodePlan
    shape: GangShape
    reason: str


class Supernode:
    name = "supernode"

    def __init__(self, args: Args) -> None:
        self.args = args

    def _tier_limit(self, ctx: PodContext) -> tuple[int, bool]:
        group, pod = ctx.group, ctx.pod
        if group is not None and group.topology_highest_tier > 0:
            return group.topology_highest_tier, group.topology_mode != "soft"
        tier = _first_int(pod, (TIER_ANNOTATION,)) or self.args.highest_tier_allowed
        mode = pod.annotations.get(MODE_ANNOTATION, "")
        hard = mode == "hard" if mode in ("hard", "soft") else self.args.hard
        return tier, hard

    def _active(self, ctx: PodContext) -> bool:
        pod = ctx.pod
        return demand_of(ctx).whole and bool(
            _first_int(pod, names.GPU_GROUP_SIZE_ANNOTATIONS) or self._tier_limit(ctx)[0]
        )

    def _gang_size(self, ctx: PodContext) -> int:
        if ctx.group is not None:
            return max(ctx.group.min_member, 1)
        return max(_first_int(ctx.pod, (names.GANG_SIZE_ANNOTATION,)), 1)

    def job_valid(self, ssn: Session, job: Job) -> Status:
        """Plan the gang's supernodes before its gates come off; refuse when it cannot be met."""
        if job.group is None or not job.tasks:
            return SUCCESS
        task = job.tasks[0]
        ctx = PodContext(pod=task.pod, state=ssn.state, request=task.request, group=job.group)
        if not self._active(ctx):
            return SUCCESS
        ssn.state.gang_plans.pop(job.key, None)  # replan with the capacity of now
        made = self._plan(ctx)
        if made.plan.feasible:
            return SUCCESS
        return unschedulable(self.name, made.reason)

    def _plan(self, ctx: PodContext) -> _Plan:
        pod = ctx.pod
        key = f"{pod.namespace}/{pod.group_name or pod.name}"
        cached = ctx.state.gang_plans.get(key)
        if isinstance(cached, _Plan):
            return cached
        gpu = ctx.state.gpu
        k = demand_of(ctx).count
        shape = GangShape.from_gpus(
            pods=self._gang_size(ctx),
            gpus_per_pod=k,
            group_gpus=_first_int(pod, names.GPU_GROUP_SIZE_ANNOTATIONS),
            atomic_gpus=_first_int(pod, names.ATOMIC_GPU_GROUP_SIZE_ANNOTATIONS),
        )
        rows = ctx.state.live_rows()
        sn, s_count = effective_supernodes(ctx, rows)
        slots = (gpu.free_milli[rows] >= 1000).sum(axis=1) // max(k, 1)
        slots = np.where(ctx.state.schedulable[rows] & gpu.usable[rows], slots, 0)
        tier, hard = self._tier_limit(ctx)
        everywhere = np.zeros(rows.shape[0], dtype=np.int32)
        plan = plan_supernodes(sn, slots, everywhere, s_count, 1, shape)
        reason = ""
        if tier > 0:
            dom, d_count = tier_domains(ctx, rows, tier, sn)
            limited = plan_supernodes(sn, slots, dom, s_count, d_count, shape)
            if limited.feasible or hard:
                plan = limited
            if not limited.feasible and hard:
                reason = (
                    f"gang {key}: {shape.pods} pods cannot be placed within one tier-{tier} "
                    "domain (hard network topology)"
                )
        if not plan.feasible and not reason:
            reason = (
                f"gang {key}: an atomic group of {shape.atomic} pods fits no supernode "
                f"({shape.pods} pods, {shape.unit} per unit)"
            )
        made = _Plan(plan, shape, reason)
        ctx.state.gang_plans[key] = made
        return made

    def _open_rows(self, ctx: PodContext, rows: IntArray, made: _Plan) -> np.ndarray:
        """Rows whose supernode still has planned room for this gang."""
        all_rows = ctx.state.live_rows()
        sn_all, _ = effective_supernodes(ctx, all_rows)
        sn_of = np.full(ctx.state.size, -1, dtype=np.int64)
        sn_of[all_rows] = sn_all
        placed: Counter[int] = Counter()
        group = ctx.pod.group_name
        for rec in ctx.state.pods.values():
            if group and rec.pod.group_name == group and rec.pod.namespace == ctx.pod.namespace:
                placed[int(sn_of[rec.node])] += 1
        left = made.plan.assign.copy()
        for s, c in placed.items():
            if 0 <= s < left.shape[0]:
                left[s] -= c
        sn_rows = sn_of[rows]
        ok: np.ndarray = (sn_rows >= 0) & (left[np.maximum(sn_rows, 0)] > 0)
        return ok

    def filter(self, ctx: PodContext, rows: IntArray) -> FilterResult:
        n = rows.shape[0]
        if not self._active(ctx):
            return FilterResult.all_pass(n)
        made = self._plan(ctx)
        codes = np.zeros(n, dtype=np.int8)
        reason_ids = np.zeros(n, dtype=np.int32)
        if not made.plan.feasible:
            codes[:] = Code.UNSCHEDULABLE
            reason_ids[:] = 1
            return FilterResult(codes, reason_ids, ["", made.reason])
        ok = self._open_rows(ctx, rows, made)
        codes[~ok] = Code.UNSCHEDULABLE
        reason_ids[~ok] = 1
        return FilterResult(codes, reason_ids, ["", "outside the supernodes planned for its gang"])

    def score(self, ctx: PodContext, rows: IntArray) -> FloatArray:
        if not self._active(ctx):
            return np.zeros(rows.shape[0])
        made = self._plan(ctx)
        if not made.plan.feasible:
            return np.zeros(rows.shape[0])
        result: FloatArray = np.where(self._open_rows(ctx, rows, made), 100.0, 0.0)
        return result


def effective_supernodes(ctx: PodContext, rows: IntArray) -> tuple[np.ndarray, int]:
    """Dense supernode ids 0..S-1 for the rows; a node in none is its own supernode."""
    tier1 = ctx.state.gpu.supernode[rows].astype(np.int64)
    own = np.where(tier1 >= 0, tier1, -1 - rows)  # unique negative key per lone node
    uniq, dense = np.unique(own, return_inverse=True)
    return dense.astype(np.int32), int(uniq.shape[0])


def tier_domains(
    ctx: PodContext, rows: IntArray, tier: int, sn: np.ndarray
) -> tuple[np.ndarray, int]:
    """Dense domain ids at ``tier`` (1 = the supernode itself); -1 outside every domain."""
    if tier <= 1:
        return sn.astype(np.int32), int(sn.max()) + 1 if sn.shape[0] else 0
    col = ctx.state.gpu.tiers[rows, min(tier, ctx.state.gpu.tiers.shape[1]) - 1].astype(np.int64)
    uniq, dense = np.unique(np.where(col >= 0, col, -1), return_inverse=True)
    dom = dense.astype(np.int32)
    if uniq.shape[0] and uniq[0] == -1:
        dom = dom - 1  # the -1 group becomes -1, the rest 0..
        return dom, int(uniq.shape[0]) - 1
    return dom, int(uniq.shape[0])


SPEC = PluginSpec(
    name="supernode",
    args_type=Args,
    factory=Supernode,
    summary="Gang units inside supernodes (best fit, atomic groups hard, tier limits).",
    aliases=(
        PluginAlias(
            "gpu-podaffinity",
            {"weight": "weight"},
            "a GPU vendor's Volcano plugin that keeps a gang's GPU pods together in a "
            "supernode: weight is the score weight; the group size comes from the pods' "
            "metax-tech.com/gpu-group-size annotation, as with that plugin",
        ),
    ),
)
