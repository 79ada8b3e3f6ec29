"""``vcctl explain job|queue``: a queue's share and who waits in it; why a job waits.

Pure functions over one snapshot of the cluster's objects as the API returns them
(JSON dicts), so they are tested without a cluster and vcctl only lists objects.

A queue's numbers are the proportion plugin's: ``allocated`` is what bound pods of
its PodGroups request; ``deserved`` is its spec.deserved (capped by capability)
when set, else the cluster's schedulable allocatable split by weight among the
queues that ask for it, down the queue tree (``tree_fill``: a parent's share is
split among its children; never above a queue's demand or capability, never below
its guarantee); ``share`` is the largest allocated / deserved. Waiting
PodGroups (Pending or Inqueue) are ordered as the scheduler takes them within a
queue: higher priority first, then older first.

The start estimate uses only what pods declare: a running pod with
``pyextender.io/running-estimate`` ends at its start time plus the estimate. The
job can start at the earliest when the free capacity (of the cluster, and under
its queue's capability) plus what those pods release covers what the gang asks.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pyextender.api import names
from pyextender.api.objects import pod_requests
from pyextender.api.resources import (
    CPU,
    EPHEMERAL,
    MEMORY,
    PODS,
    format_amount,
    gpu_resources,
    parse_resource_list,
)
from pyextender.api.volcano.codec import duration_seconds
from pyextender.cache.batch import GroupView, QueueView, group_from_dict, queue_from_dict
from pyextender.cache.cluster import released_uids
from pyextender.plugins.proportion import tree_fill

Obj = Mapping[str, Any]
TERMINATED = ("Succeeded", "Failed")


def _meta(obj: Obj) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _spec(obj: Obj) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _held_count(members: Iterable[Obj], group: GroupView) -> int:
    """Members held until their gang is admitted: behind a scheduling gate, or (unbound)
    at the framework shim's barrier and not yet listed as released on the PodGroup."""
    released = set(released_uids(group))
    held = 0
    for pod in members:
        spec = _spec(pod)
        meta = pod.get("metadata") or {}
        at_barrier = (meta.get("annotations") or {}).get(names.BARRIER_ANNOTATION)
        if spec.get("schedulingGates") or (
            at_barrier and not spec.get("nodeName") and meta.get("uid") not in released
        ):
            held += 1
    return held


def _status(obj: Obj) -> Mapping[str, Any]:
    status = obj.get("status")
    return status if isinstance(status, Mapping) else {}


def _add(into: dict[str, int], amounts: Mapping[str, int]) -> None:
    for k, v in amounts.items():
        into[k] = into.get(k, 0) + v


def _requests(pod: Obj) -> dict[str, int]:
    try:
        return pod_requests(_spec(pod))
    except (ValueError, TypeError, AttributeError):
        return {}


def _parse_time(raw: object) -> dt.datetime | None:
    if not isinstance(raw, str) or not raw:
        return None
    try:
        return dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None


def _duration(raw: str) -> str:
    """Seconds -> "1h2m3s" style text."""
    seconds = max(int(float(raw)), 0)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return "".join(f"{v}{u}" for v, u in ((h, "h"), (m, "m"), (s, "s")) if v) or "0s"


@dataclass
class Snapshot:
    """The objects one explanation reads, listed once."""

    nodes: list[Obj]
    pods: list[Obj]
    podgroups: list[Obj]
    queues: list[Obj]
    priority_classes: dict[str, int] = field(default_factory=dict)
    now: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))

    def __post_init__(self) -> None:
        self.groups: dict[str, GroupView] = {}
        for raw in self.podgroups:
            g = group_from_dict(raw)
            self.groups[g.key] = g
        self.queue_views: dict[str, QueueView] = {}
        for raw in self.queues:
            q = queue_from_dict(raw)
            self.queue_views[q.name] = q
        self.members: dict[str, list[Obj]] = {}
        for pod in self.pods:
            meta = _meta(pod)
            group = (meta.get("annotations") or {}).get(names.GROUP_NAME_ANNOTATION)
            if group:
                key = f"{meta.get('namespace') or 'default'}/{group}"
                self.members.setdefault(key, []).append(pod)

    # -- cluster totals ---------------------------------------------------------
    def schedulable_total(self) -> dict[str, int]:
        """Allocatable of Ready, uncordoned nodes."""
        total: dict[str, int] = {}
        for node in self.nodes:
            conditions = _status(node).get("conditions") or []
            ready = any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in conditions
                if isinstance(c, Mapping)
            )
            if ready and not _spec(node).get("unschedulable"):
                _add(total, parse_resource_list(_status(node).get("allocatable")))
        return total

    def used_total(self) -> dict[str, int]:
        used: dict[str, int] = {}
        for pod in self.pods:
            if _spec(pod).get("nodeName") and _status(pod).get("phase") not in TERMINATED:
                _add(used, _requests(pod))
        return used

    # -- queues -----------------------------------------------------------------
    def queue_of_pod(self, pod: Obj) -> str:
        meta = _meta(pod)
        ann = meta.get("annotations") or {}
        group = ann.get(names.GROUP_NAME_ANNOTATION)
        if group:
            g = self.groups.get(f"{meta.get('namespace') or 'default'}/{group}")
            if g is not None:
                return g.queue
        return str(ann.get(names.POD_QUEUE_ANNOTATION) or "")

    def queue_usage(self) -> dict[str, tuple[dict[str, int], dict[str, int]]]:
        """Per queue: (allocated = bound pods' requests, request = allocated + unbound)."""
        out: dict[str, tuple[dict[str, int], dict[str, int]]] = {
            q: ({}, {}) for q in self.queue_views
        }
        for pod in self.pods:
            if _status(pod).get("phase") in TERMINATED or _meta(pod).get("deletionTimestamp"):
                continue
            queue = self.queue_of_pod(pod)
            if not queue:
                continue
            allocated, request = out.setdefault(queue, ({}, {}))
            req = _requests(pod)
            _add(request, req)
            if _spec(pod).get("nodeName"):
                _add(allocated, req)
        return out

    def deserved(self) -> dict[str, dict[str, float]]:
        """Per queue (root excluded), as the proportion / capacity plugins compute it."""
        usage = self.queue_usage()
        total = self.schedulable_total()
        leaves = {n: q for n, q in self.queue_views.items() if n != "root"}
        names_ = sorted(({*total} | {r for _, req in usage.values() for r in req}) - {PODS})
        if not names_ or not leaves:
            return {n: {} for n in leaves}

        def vec(amounts: Mapping[str, int], missing: float = 0.0) -> np.ndarray:
            return np.asarray([float(amounts.get(r, missing)) for r in names_])

        cap = {n: vec(q.capability, missing=np.inf) for n, q in leaves.items()}
        want = {n: np.minimum(vec(usage.get(n, ({}, {}))[1]), cap[n]) for n in leaves}
        floor = {n: vec(q.guarantee) for n, q in leaves.items()}
        for n, q in leaves.items():
            if q.deserved:
                fixed = np.minimum(vec(q.deserved), cap[n])
                floor[n] = fixed
                want[n] = np.minimum(want[n], fixed)
        weights = {n: float(q.weight) for n, q in leaves.items()}
        parents = {n: q.parent for n, q in leaves.items()}
        split = tree_fill(vec(total), parents, weights, want, floor, cap)
        return {n: dict(zip(names_, split[n].tolist(), strict=True)) for n in leaves}

    def priority(self, g: GroupView) -> int:
        return self.priority_classes.get(g.priority_class, 0)

    def waiting_in(self, queue: str) -> list[GroupView]:
        """Waiting PodGroups of a queue in the order the scheduler takes them: Pending
        ones, and admitted (Inqueue) ones with fewer than minMember pods bound."""
        waiting = [g for g in self.groups.values() if g.queue == queue and self.waiting(g)]
        return sorted(waiting, key=lambda g: (-self.priority(g), g.created, g.key))

    def bound(self, g: GroupView) -> int:
        return sum(1 for p in self.members.get(g.key, []) if _spec(p).get("nodeName"))

    def waiting(self, g: GroupView) -> bool:
        if g.phase == "Pending":
            return True
        return g.phase == "Inqueue" and self.bound(g) < max(g.min_member, 1)

    def gang_need(self, g: GroupView) -> dict[str, int]:
        """What the gang asks to start: minResources, else its unbound members' requests."""
        if g.min_resources:
            return dict(g.min_resources)
        need: dict[str, int] = {}
        for pod in self.members.get(g.key, []):
            if not _spec(pod).get("nodeName") and _status(pod).get("phase") not in TERMINATED:
                _add(need, _requests(pod))
        return need


def _order(resources: Iterable[str]) -> list[str]:
    """cpu, memory, the GPU resources, then the rest by name (pods and disk left out)."""
    have = set(resources)
    first = [CPU, MEMORY, *gpu_resources()]
    rest = sorted(have - set(first) - {PODS, EPHEMERAL})
    return [r for r in first if r in have] + rest


def _fmt(resource: str, value: float | int | None) -> str:
    if value is None or value == np.inf:
        return "-"
    return format_amount(resource, round(float(value)))


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _share(allocated: Mapping[str, int], deserved: Mapping[str, float]) -> float:
    ratios = [allocated.get(r, 0) / d for r, d in deserved.items() if d > 1e-9 and r != PODS]
    return max(ratios, default=0.0)


def _unschedulable(g: GroupView) -> str:
    c = g.condition("Unschedulable")
    if c and c.get("status") == "True":
        return str(c.get("message") or c.get("reason") or "")
    return ""


# ------------------------------------------------------------------------- queue


def explain_queue(snap: Snapshot, name: str) -> str:
    q = snap.queue_views.get(name)
    if q is None:
        return f"queue {name}: not found"
    allocated, request = snap.queue_usage().get(name, ({}, {}))
    deserved = snap.deserved().get(name, {})
    head = f"queue {name}: {q.state or 'Open'}, weight {q.weight}"
    if q.parent:
        head += f", parent {q.parent}"
    head += ", reclaimable" if q.reclaimable else ", not reclaimable"
    out = [head]
    shown = _order(
        r
        for r in {*allocated, *q.capability, *q.guarantee, *request, *q.deserved}
        if allocated.get(r) or q.capability.get(r) or q.guarantee.get(r) or request.get(r)
    )
    rows = [["resource", "allocated", "deserved", "capability", "guarantee", "asked"]]
    for r in shown:
        rows.append([
            r, _fmt(r, allocated.get(r, 0)),
            _fmt(r, deserved.get(r)) if r in deserved else "-",
            _fmt(r, q.capability.get(r)), _fmt(r, q.guarantee.get(r)),
            _fmt(r, request.get(r, 0)),
        ])  # fmt: skip
    if shown:
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        for row in rows:
            out.append("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    else:
        out.append("  nothing allocated or asked for")
    basis = "spec.deserved" if q.deserved else "weight among the queues that ask"
    out.append(f"  share {_share(allocated, deserved):.2f} (largest allocated / deserved; "
               f"deserved from {basis})")  # fmt: skip
    counts: dict[str, int] = {}
    for g in snap.groups.values():
        if g.queue == name:
            counts[g.phase] = counts.get(g.phase, 0) + 1
    if counts:
        out.append(
            "  podgroups: " + ", ".join(f"{v} {k.lower()}" for k, v in sorted(counts.items()))
        )
    waiting = snap.waiting_in(name)
    if not waiting:
        out.append("  nobody waits")
        return "\n".join(out)
    out.append(f"  waiting ({len(waiting)}, in the order the scheduler takes them: "
               "priority, then age):")  # fmt: skip
    for i, g in enumerate(waiting, 1):
        need = snap.gang_need(g)
        asks = ", ".join(f"{r} {_fmt(r, need[r])}" for r in _order(need)) or "nothing"
        line = f"    {i}. {g.key}  {g.phase}  minMember {g.min_member}  asks {asks}"
        why = _unschedulable(g)
        if why:
            line += f"  ({why})"
        out.append(line)
    return "\n".join(out)


# --------------------------------------------------------------------------- job


def job_podgroup(snap: Snapshot, job: Obj) -> GroupView | None:
    """The PodGroup of a Volcano Job: ``<job>-<uid>`` (ours and Volcano's), else ``<job>``."""
    meta = _meta(job)
    ns = str(meta.get("namespace") or "default")
    name = str(meta.get("name") or "")
    return snap.groups.get(f"{ns}/{name}-{meta.get('uid', '')}") or snap.groups.get(f"{ns}/{name}")


def start_estimate(snap: Snapshot, g: GroupView) -> str:
    """When the gang can start at the earliest, from running pods' declared run times."""
    need = {r: v for r, v in snap.gang_need(g).items() if v > 0 and r != PODS}
    if not need:
        return "no estimate: the gang asks for no resources"
    total = snap.schedulable_total()
    used = snap.used_total()
    free = {r: total.get(r, 0) - used.get(r, 0) for r in need}
    q = snap.queue_views.get(g.queue)
    room: dict[str, float] = {}
    if q is not None and q.capability:
        allocated, _ = snap.queue_usage().get(g.queue, ({}, {}))
        room = {r: q.capability[r] - allocated.get(r, 0) for r in need if r in q.capability}
    ends: list[tuple[dt.datetime, dict[str, int], bool]] = []
    for pod in snap.pods:
        if not _spec(pod).get("nodeName") or _status(pod).get("phase") in TERMINATED:
            continue
        raw = (_meta(pod).get("annotations") or {}).get(names.RUNNING_ESTIMATE_ANNOTATION)
        started = _parse_time(_status(pod).get("startTime"))
        if not raw or started is None:
            continue
        try:
            seconds = duration_seconds(str(raw))
        except ValueError:
            continue
        same_queue = snap.queue_of_pod(pod) == g.queue
        ends.append((started + dt.timedelta(seconds=seconds), _requests(pod), same_queue))
    ends.sort(key=lambda e: e[0])

    def fits() -> bool:
        return all(free[r] >= v for r, v in need.items()) and all(room[r] >= need[r] for r in room)

    if fits():
        return "resources are free now; it waits for the scheduler (see above)"
    for when, released, same_queue in ends:
        for r in need:
            free[r] += released.get(r, 0)
            if same_queue and r in room:
                room[r] += released.get(r, 0)
        if fits():
            at = max(when, snap.now)
            wait = (at - snap.now).total_seconds()
            return (
                f"at the earliest in {_duration(str(wait))} ({at.strftime('%Y-%m-%dT%H:%M:%SZ')}), "
                f"when running pods with {names.RUNNING_ESTIMATE_ANNOTATION} have ended"
            )
    if not ends:
        return f"no estimate: no running pod declares {names.RUNNING_ESTIMATE_ANNOTATION}"
    return "no estimate: what the running pods declare ending does not free enough"


def explain_job(snap: Snapshot, job: Obj | None, g: GroupView | None, name: str) -> str:
    out: list[str] = []
    if job is not None:
        meta, spec, status = _meta(job), _spec(job), _status(job)
        replicas = sum(int(t.get("replicas") or 0) for t in spec.get("tasks") or [])
        phase = (status.get("state") or {}).get("phase", "Pending")
        out.append(
            f"job {meta.get('namespace')}/{meta.get('name')}: {phase}, minAvailable "
            f"{spec.get('minAvailable', replicas)} of {replicas} replicas, "
            f"queue {spec.get('queue') or 'default'}"
        )
    if g is None:
        out.append(f"  podgroup: none found for {name} (the controllers make it; is the job new?)")
        return "\n".join(out)
    members = snap.members.get(g.key, [])
    bound = sum(1 for p in members if _spec(p).get("nodeName"))
    gated = _held_count(members, g)
    out.append(
        f"  podgroup {g.key}: {g.phase}, minMember {g.min_member}, "
        f"{_count(len(members), 'pod')} ({bound} bound, {gated} gated)"
    )
    q = snap.queue_views.get(g.queue)
    if q is None:
        out.append(f"  queue {g.queue}: not found (the gang cannot be admitted)")
    else:
        allocated, _ = snap.queue_usage().get(g.queue, ({}, {}))
        deserved = snap.deserved().get(g.queue, {})
        need = snap.gang_need(g)
        parts = []
        for r in _order({*need, *q.capability}):
            if need.get(r) or q.capability.get(r):
                parts.append(
                    f"{r} {_fmt(r, allocated.get(r, 0))}/"
                    f"{_fmt(r, deserved.get(r)) if r in deserved else '-'}/"
                    f"{_fmt(r, q.capability.get(r))}"
                )
        out.append(
            f"  queue {q.name}: {q.state or 'Open'}, share {_share(allocated, deserved):.2f}; "
            f"allocated/deserved/capability: {', '.join(parts) or '-'}"
        )
    if not snap.waiting(g):
        out.append(f"  not waiting: the PodGroup is {g.phase}, {bound} of {g.min_member} bound")
        return "\n".join(out)
    waiting = snap.waiting_in(g.queue)
    pos = next(i for i, w in enumerate(waiting, 1) if w.key == g.key)
    out.append(
        f"  position: {pos} of {len(waiting)} waiting in queue {g.queue} (priority, then age)"
    )
    out.append("  waits for:")
    for reason in _reasons(snap, g, q):
        out.append(f"    - {reason}")
    out.append(f"  start: {start_estimate(snap, g)}")
    return "\n".join(out)


def _reasons(snap: Snapshot, g: GroupView, q: QueueView | None) -> list[str]:
    reasons: list[str] = []
    members = snap.members.get(g.key, [])
    bound = sum(1 for p in members if _spec(p).get("nodeName"))
    fit = f"gang: {_count(g.min_member, 'pod')} must fit at once (minMember {g.min_member})"
    if g.phase == "Pending":
        reasons.append(
            f"{fit}; {bound} bound; not admitted yet: enqueue (Pending -> Inqueue) waits "
            "until its minResources fit its queue and the cluster"
        )
    else:
        gated = _held_count(members, g)
        reasons.append(
            f"{fit}; admitted (Inqueue), {bound} bound, {gated} gated: the gates lift "
            "together once they all fit, and they bind together"
        )
    if len(members) < g.min_member:
        reasons.append(f"members: only {len(members)} of {g.min_member} pods exist yet")
    if q is not None and q.state not in ("Open", ""):
        reasons.append(f"queue {q.name} is {q.state}: it admits nothing")
    if q is not None and q.capability:
        allocated, _ = snap.queue_usage().get(g.queue, ({}, {}))
        need = snap.gang_need(g)
        over = [
            f"{r} {_fmt(r, allocated.get(r, 0) + need[r])}/{_fmt(r, q.capability[r])}"
            for r in _order(need)
            if r in q.capability and allocated.get(r, 0) + need[r] > q.capability[r]
        ]
        if over:
            reasons.append(f"capability: queue {q.name} would exceed it ({', '.join(over)})")
    sla = g.annotations.get(names.SLA_WAITING_TIME_ANNOTATION)
    if sla:
        created = _parse_time(g.created)
        waited = (snap.now - created).total_seconds() if created else 0.0
        try:
            left = duration_seconds(sla) - waited
        except ValueError:
            left = None
        if left is None:
            when = "not a duration, ignored"
        elif left > 0:
            when = f"nodes are reserved for it in {_duration(str(left))}"
        else:
            when = "past it: nodes are reserved for it until it fits"
        reasons.append(
            f"reservation: sla-waiting-time {sla}, waiting {_duration(str(waited))}; {when}"
        )
    if g.topology_mode:
        tier = g.topology_highest_tier or "any"
        reasons.append(f"topology: {g.topology_mode} network topology, highest tier allowed {tier}")
    why = _unschedulable(g)
    if why:
        reasons.append(f"scheduler: {why}")
    return reasons
