"""enqueue: admit whole gangs, fairly across queues, when they fit.

A PodGroup moves Pending -> Inqueue (and the gates of the pods it needs to
reach minMember are lifted) only when every plugin allows it (queue
capability, overcommit, gang size) and those pods fit the free capacity left
after every other admitted-but-unbound gang. So kube-scheduler only ever sees
gangs that can be placed whole, and two gangs never hold half of the same
nodes. Queues take turns: after each admission the queue furthest below its
share (per the plugins' queue order) goes next.

allocate (elastic members): members beyond minMember of admitted gangs are
released one at a time, the job first in job order (e.g. smallest dominant
share) first, while they fit and their queue's capability, and every parent
queue's, allow it.
"""

from __future__ import annotations

import functools

import numpy as np
import numpy.typing as npt

from pyextender.actions.backfill import may_backfill
from pyextender.actions.decisions import Decisions
from pyextender.actions.gangs import gang_message, min_request, needed_tasks
from pyextender.api.resources import format_amount
from pyextender.framework.placement import Placement, place
from pyextender.framework.session import IntArray, Job, Session, Task
from pyextender.framework.status import Code

ASSEMBLY_GRACE_S = 5.0
"""Seconds after a PodGroup's creation during which missing pods are expected
(its controller is still creating them) and not reported."""


def admitted(job: Job) -> bool:
    return job.group is None or job.phase not in ("Pending", "")


def _allowed(ssn: Session, job: Job, request: IntArray, backfill: bool) -> npt.NDArray[np.bool_]:
    """Rows the job may use: all but those reserved for another gang (unless backfill fits)."""
    allowed = np.ones(ssn.free.shape[0], dtype=np.bool_)
    for row, r in ssn.state.reservations.by_row.items():
        if r.job != job.key and row < allowed.shape[0]:
            allowed[row] = backfill and may_backfill(job, request, r, ssn.now)
    return allowed


def _fits_in_total(
    ssn: Session, request: IntArray, allowed: npt.NDArray[np.bool_], missing: int
) -> Placement:
    """A PodGroup admitted before its pods exist (gang.podless) has no pods to place:
    like Volcano, its minResources must fit the free capacity in total. The capacity
    is taken off the emptiest nodes, so later gangs of this cycle see it held."""
    free = ssn.free[allowed].sum(axis=0)
    short = [
        f"{name} {format_amount(name, int(need))} > {format_amount(name, int(have))} free"
        for name, need, have in zip(ssn.state.resources, request, free, strict=True)
        if need > have
    ]
    if short:
        return Placement(
            [], max(missing, 1), "minResources exceed the free capacity: " + ", ".join(short)
        )
    left = request.copy()
    for row in np.argsort(-ssn.free.sum(axis=1)):
        if not allowed[row]:
            continue
        take = np.minimum(ssn.free[row], left)
        ssn.free[row] -= take
        left -= take
        if not left.any():
            break
    return Placement(rows=[], unplaced=0, reason="")


def _live_pending(job: Job) -> list[Task]:
    return [t for t in job.pending if not t.pod.deleting]


def account_admitted(ssn: Session, decisions: Decisions) -> None:
    """Hold capacity for admitted gangs' ungated, unbound pods; re-lift gates
    of gangs that are admitted but short of minMember ungated pods."""
    resources = ssn.state.resources
    for job in ssn.ordered_jobs([j for j in ssn.jobs.values() if j.group is not None]):
        if not admitted(job):
            continue
        pending = _live_pending(job)
        open_tasks = [t for t in pending if not t.gated]
        if open_tasks:
            place(ssn.free, [t.request for t in open_tasks], resources, commit=True)
        short = job.min_member - job.bound_count - len(open_tasks)
        if short > 0:
            relift = [t for t in pending if t.gated][:short]
            decisions.lift.extend(relift)
            # These gates are coming off (just lifted, and the watch has not shown it
            # yet; or a lift that failed or was cut short by a crash): the members
            # hold their capacity and their queue's share now, or a second gang could
            # be admitted into the same room, past a queue's capability.
            place(ssn.free, [t.request for t in relift], resources, commit=True)
            ssn.allocate(job, sum((t.request for t in relift), start=np.zeros_like(job.allocated)))


def enqueue(ssn: Session, decisions: Decisions, backfill: bool = True) -> None:
    account_admitted(ssn, decisions)
    resources = ssn.state.resources
    waiting: dict[str, list[Job]] = {}
    pending = [j for j in ssn.jobs.values() if j.group is not None and not admitted(j)]
    for job in ssn.ordered_jobs(pending):
        waiting.setdefault(job.queue, []).append(job)

    def compare(a: str, b: str) -> int:
        if a in ssn.queues and b in ssn.queues:
            return ssn.queue_compare(ssn.queues[a], ssn.queues[b])
        return (a > b) - (a < b)

    by_queue = functools.cmp_to_key(compare)
    while waiting:
        queue = min(waiting, key=by_queue)
        job = waiting[queue].pop(0)
        if not waiting[queue]:
            del waiting[queue]
        tasks = needed_tasks(job)
        request = min_request(ssn, job, tasks)
        status = ssn.enqueueable(job, request)
        missing = max(job.min_member - job.bound_count, 0)
        if status.code == Code.UNRESOLVABLE:  # eviction cannot help: say so, move on
            decisions.unschedulable[job.key] = gang_message(job, missing, status.message())
            if len(job.tasks) < job.min_member and ssn.now - job.created < ASSEMBLY_GRACE_S:
                decisions.assembling.add(job.key)
            continue
        allowed = _allowed(ssn, job, request, backfill)
        requests = [t.request for t in tasks]
        fit = place(ssn.free, requests, resources, allowed, commit=status.ok)
        if not tasks and status.ok and job.bound_count < job.min_member:
            # no pods yet (gang.podless): its minResources must fit in total
            fit = _fits_in_total(ssn, request, allowed, missing)
        if fit.ok and status.ok:
            decisions.admit.append(job)
            decisions.lift.extend(tasks)
            ssn.allocate(job, request)
            continue
        reasons = []
        if not fit.ok:
            reason = fit.reason
            if not allowed.all() and place(ssn.free, requests, resources).ok:
                holders = sorted(
                    {r.job for r in ssn.state.reservations.by_row.values() if r.job != job.key}
                )
                reason = f"free nodes are reserved for waiting gang {', '.join(holders)}"
            reasons.append(reason)
        if not status.ok:  # a queue or cluster limit says no (as well)
            reasons.append(status.message())
        unplaced = fit.unplaced if not fit.ok else missing
        decisions.unschedulable[job.key] = gang_message(job, unplaced, "; ".join(reasons))
        decisions.starving.append(job)


def allocate_elastic(ssn: Session, decisions: Decisions, backfill: bool = True) -> None:
    """Release gated members beyond minMember of admitted gangs, in job order."""
    lifting = {t.pod.uid for t in decisions.lift}
    admitted_now = {j.key for j in decisions.admit}
    extras: dict[str, list[Task]] = {}
    for job in ssn.jobs.values():
        if job.group is None or not (admitted(job) or job.key in admitted_now):
            continue
        gated = [t for t in _live_pending(job) if t.gated and t.pod.uid not in lifting]
        if gated:
            extras[job.key] = sorted(gated, key=lambda t: (t.pod.created, t.pod.name))
    resources = ssn.state.resources
    while extras:
        job = min((ssn.jobs[k] for k in extras), key=functools.cmp_to_key(ssn.job_compare))
        task = extras[job.key].pop(0)
        if not ssn.allocatable(job, task.request):
            del extras[job.key]  # its queue (or a parent's) capability is reached
            continue
        allowed = _allowed(ssn, job, task.request, backfill)
        if place(ssn.free, [task.request], resources, allowed, commit=True).ok:
            decisions.lift.append(task)
            ssn.allocate(job, task.request)
            if not extras[job.key]:
                del extras[job.key]
        else:
            del extras[job.key]  # its next member does not fit either, this cycle
