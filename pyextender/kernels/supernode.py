"""Supernode packing: where a gang's model-parallel units go, as a plan per supernode.

A gang of P pods (each the same shape) is cut into units of U pods (G GPUs
per unit / GPUs per pod) and every unit into atomic sub-units of A pods.
Supernodes offer capacity in pods (Σ over member nodes of the pods of this
shape each node can host). Units are placed in order, each into the
supernode with the least capacity that still holds it (best fit, lowest id on
ties), so whole free supernodes stay whole. A unit that fits no supernode is
split ("broken") into its atomic sub-units, placed best fit one by one; an
atomic sub-unit that fits nowhere makes the plan infeasible (hard rule).

With a tier limit every candidate domain at that tier (e.g. a HyperNode of
tier ``highestTierAllowed``) is planned alone; the plan with the fewest
broken units wins, then the domain with the least capacity (tight fit), then
the lowest domain id. Nodes outside every domain have domain id −1 and are
never used under a limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from pyextender.kernels.jit import LoopKernel, compile_kernel

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]


def supernode_loops(
    n: int,
    node_sn: I32,  # [n] supernode id 0..S-1 (unlabelled nodes get their own id)
    node_slots: I64,  # [n] pods of this shape the node can host
    node_dom: I32,  # [n] limit-tier domain 0..D-1, -1 = outside every domain
    s_count: int,
    d_count: int,
    pods: int,
    unit: int,  # pods per unit
    atomic: int,  # pods per atomic sub-unit
    buf: I64,  # [3*S + 3]: see below
) -> None:
    # buf: remaining capacity [0, S), the plan of the domain being tried [S, 2S), the
    # chosen plan (pods per supernode) [2S, 3S), then feasible (0/1), chosen domain and
    # broken units. One buffer: a call allocates once (each array ~0.25 µs more)
    plan = s_count
    out = 2 * s_count
    status = 3 * s_count
    best_dom = -1
    best_broken = 0
    best_total = 0
    # one pass over the nodes per domain; the best plan so far is copied out (S entries)
    # rather than replayed (another pass over the nodes: ~4 µs at 10k nodes)
    for dom in range(d_count):
        for s in range(2 * s_count):
            buf[s] = 0
        total = 0
        for i in range(n):
            if node_slots[i] > 0 and node_dom[i] == dom:
                buf[node_sn[i]] += node_slots[i]
                total += node_slots[i]
        if total < pods:
            continue
        remaining = pods
        broken = 0
        ok = True
        while remaining > 0 and ok:
            size = unit if remaining > unit else remaining
            fit = -1
            for s in range(s_count):
                if buf[s] >= size and (fit < 0 or buf[s] < buf[fit]):
                    fit = s
            if fit >= 0:
                buf[fit] -= size
                buf[plan + fit] += size
                remaining -= size
                continue
            broken += 1
            left = size
            while left > 0:
                part = atomic if left > atomic else left
                fit = -1
                for s in range(s_count):
                    if buf[s] >= part and (fit < 0 or buf[s] < buf[fit]):
                        fit = s
                if fit < 0:
                    ok = False
                    break
                buf[fit] -= part
                buf[plan + fit] += part
                left -= part
            remaining -= size
        if ok and (
            best_dom < 0 or broken < best_broken or (broken == best_broken and total < best_total)
        ):
            best_dom = dom
            best_broken = broken
            best_total = total
            for s in range(s_count):
                buf[out + s] = buf[plan + s]
    if best_dom < 0:
        for s in range(s_count):
            buf[out + s] = 0
        buf[status] = 0
        buf[status + 1] = -1
        buf[status + 2] = 0
    else:
        buf[status] = 1
        buf[status + 1] = best_dom
        buf[status + 2] = best_broken


_supernode_jit = compile_kernel(supernode_loops)
_supernode_loops_python: LoopKernel = supernode_loops
"""The same loops, interpreted: the pure-Python reference (called with lists)."""


@dataclass(frozen=True, slots=True)
class GangShape:
    """A gang to plan, in pods: total, per unit (G GPUs) and per atomic sub-unit (A GPUs)."""

    pods: int
    unit: int
    atomic: int

    @staticmethod
    def from_gpus(pods: int, gpus_per_pod: int, group_gpus: int, atomic_gpus: int) -> GangShape:
        """Units in pods from GPU sizes; missing sizes (0) mean one unit / no atomic rule."""
        per = max(gpus_per_pod, 1)
        unit = max(group_gpus // per, 1) if group_gpus > 0 else max(pods, 1)
        atomic = max(atomic_gpus // per, 1) if atomic_gpus > 0 else 1
        return GangShape(pods=pods, unit=unit, atomic=min(atomic, unit))


class SupernodePlan(NamedTuple):
    """Pods planned per supernode; ``feasible`` False when a hard rule cannot be met.
    (A named tuple: built in ~0.2 µs, a frozen dataclass in ~0.6 µs of a ~6 µs call.)"""

    assign: I64
    feasible: bool
    domain: int
    broken: int


def _args(
    node_sn: I32, node_slots: I64, node_dom: I32, s_count: int, d_count: int, gang: GangShape
) -> tuple[object, ...]:
    return (
        int(node_sn.shape[0]),
        np.ascontiguousarray(node_sn, dtype=np.int32),
        np.ascontiguousarray(node_slots, dtype=np.int64),
        np.ascontiguousarray(node_dom, dtype=np.int32),
        int(s_count), int(d_count), int(gang.pods), int(gang.unit), int(gang.atomic),
    )  # fmt: skip


def plan_supernodes(
    node_sn: I32, node_slots: I64, node_dom: I32, s_count: int, d_count: int, gang: GangShape
) -> SupernodePlan:
    """numba kernel: the gang's plan (see module doc)."""
    # the kernel writes every entry before reading any (np.zeros: ~0.3 µs more)
    buf = np.empty(3 * s_count + 3, dtype=np.int64)
    _supernode_jit(*_args(node_sn, node_slots, node_dom, s_count, d_count, gang), buf)
    feasible, domain, broken = buf[3 * s_count :].tolist()
    return SupernodePlan(buf[2 * s_count : 3 * s_count], bool(feasible), domain, broken)


def plan_supernodes_python(
    node_sn: I32, node_slots: I64, node_dom: I32, s_count: int, d_count: int, gang: GangShape
) -> SupernodePlan:
    """Pure-Python reference: the same loops run by the interpreter over lists."""
    args = [
        a.tolist() if isinstance(a, np.ndarray) else a
        for a in _args(node_sn, node_slots, node_dom, s_count, d_count, gang)
    ]
    buf = [0] * (3 * s_count + 3)
    _supernode_loops_python(*args, buf)
    feasible, domain, broken = buf[3 * s_count :]
    return SupernodePlan(
        np.asarray(buf[2 * s_count : 3 * s_count], dtype=np.int64), bool(feasible), domain, broken
    )


def _plan_numpy(cap: I64, gang: GangShape) -> tuple[bool, int, I64]:
    cap = cap.copy()
    assign = np.zeros_like(cap)
    big = np.iinfo(np.int64).max
    remaining, broken = gang.pods, 0
    while remaining > 0:
        size = min(gang.unit, remaining)
        key = np.where(cap >= size, cap, big)
        fit = int(key.argmin())
        if key[fit] != big:
            cap[fit] -= size
            assign[fit] += size
            remaining -= size
            continue
        broken += 1
        left = size
        while left > 0:
            part = min(gang.atomic, left)
            key = np.where(cap >= part, cap, big)
            fit = int(key.argmin())
            if key[fit] == big:
                return False, broken, assign
            cap[fit] -= part
            assign[fit] += part
            left -= part
        remaining -= size
    return True, broken, assign


def plan_supernodes_numpy(
    node_sn: I32, node_slots: I64, node_dom: I32, s_count: int, d_count: int, gang: GangShape
) -> SupernodePlan:
    """numpy reference: capacities by bincount, best fit by argmin over supernodes."""
    best: tuple[int, int, int] | None = None  # (broken, total, domain)
    slots = np.maximum(node_slots, 0)
    for dom in range(d_count):
        inside = node_dom == dom
        cap = np.bincount(node_sn[inside], weights=slots[inside], minlength=s_count)
        cap = cap.astype(np.int64)
        total = int(cap.sum())
        if total < gang.pods:
            continue
        ok, broken, _ = _plan_numpy(cap, gang)
        if ok and (best is None or (broken, total) < best[:2]):
            best = (broken, total, dom)
    if best is None:
        return SupernodePlan(np.zeros(s_count, dtype=np.int64), False, -1, 0)
    dom = best[2]
    inside = node_dom == dom
    cap = np.bincount(node_sn[inside], weights=slots[inside], minlength=s_count).astype(np.int64)
    _, broken, assign = _plan_numpy(cap, gang)
    return SupernodePlan(assign, True, dom, broken)
