"""enqueue: move PodGroups Pending -> Inqueue, fairly across queues.

Volcano's semantics (the default): a PodGroup is admitted when its minimum
(``minResources`` less what it already holds; without minResources, its
members' requests, once minMember of them exist or ASSEMBLY_GRACE_S has passed)
fits its queue's allowance (capability, parent
queues, the share other queues' guarantees leave) and the cluster's total times
the overcommit factor, as every plugin's ``job_enqueueable`` says, its pods
not required: an operator's PodGroup without pods, or a user's, is admitted.
Its gates stay on: lifting them is allocate's (pyextender.actions.allocate),
which requires the whole gang to fit the free capacity now. While Inqueue the
gang holds its minimum of its queue (``Job.held``), so queues and the overcommit
limit see it.

``enqueue.requireFit`` (the stricter mode, before Volcano's): a PodGroup is
admitted only when all its minMember pods exist (gang's ``job_valid``), the
limits allow it and those pods fit the free capacity now, counting every other
admitted-but-unbound gang; its gates are lifted at once. Inqueue then always
means "placeable now"; a PodGroup without pods waits (operators: its
minResources must fit the free capacity in total after a grace period).

Queues take turns: after each admission the queue furthest below its share
(per the plugins' queue order) goes next.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

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


def assembling(ssn: Session, job: Job) -> bool:
    """Its pods are still being created (fewer than minMember, created moments ago)."""
    return len(job.tasks) < job.min_member and ssn.now - job.created < ASSEMBLY_GRACE_S


def awaiting_members(ssn: Session, job: Job) -> bool:
    """Not judged yet: a PodGroup without minResources whose pods are still being
    created (its minimum is its members' requests, see ``_admit_on_limits``)."""
    return job.group is not None and not job.group.min_resources and assembling(ssn, job)


def allowed_rows(
    ssn: Session, job: Job, request: IntArray, backfill: bool
) -> npt.NDArray[np.bool_]:
    """Rows the job may use: all but those reserved for another gang (unless backfill fits)."""
    allowed = np.ones(ssn.free.shape[0], dtype=np.bool_)
    for row, r in {**ssn.state.reservations.by_row, **ssn.reserved_now}.items():
        if r.job != job.key and row < allowed.shape[0]:
            allowed[row] = backfill and may_backfill(job, request, r, ssn.now)
    return allowed


def take_in_total(
    ssn: Session, request: IntArray, allowed: npt.NDArray[np.bool_], partial: bool = False
) -> IntArray:
    """Take ``request`` off the free capacity, emptiest nodes first, without placing
    pods (a gang's room held for it this cycle). Returns what could not be taken;
    with ``partial`` False nothing is taken unless all of it can be."""
    free = ssn.free[allowed].sum(axis=0)
    if not partial and (request > free).any():
        short: IntArray = np.maximum(request - free, 0)
        return short
    left = request.copy()
    for row in np.argsort(-ssn.free.sum(axis=1)):
        if not allowed[row]:
            continue
        take = np.minimum(ssn.free[row], left)
        ssn.free[row] -= take
        left -= take
        if not left.any():
            break
    return left


def _fits_in_total(
    ssn: Session, request: IntArray, allowed: npt.NDArray[np.bool_], missing: int
) -> Placement:
    """requireFit, a PodGroup admitted before its pods exist (gang.podless): like
    Volcano, its minResources must fit the free capacity in total; the capacity is
    taken off the emptiest nodes, so later gangs of this cycle see it held."""
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
    take_in_total(ssn, request, allowed)
    return Placement(rows=[], unplaced=0, reason="")


def live_pending(job: Job) -> list[Task]:
    return [t for t in job.pending if not t.pod.deleting]


def account_admitted(ssn: Session, decisions: Decisions, require_fit: bool) -> set[str]:
    """Hold capacity for admitted gangs' ungated, unbound pods; re-lift the gates
    of gangs whose lifting was decided but is unfinished. Returns those gangs' keys.

    With requireFit every admitted gang had its gates lifted; otherwise only a gang
    with a member placed or ungated has (an Inqueue gang with every gate on waits
    for allocate)."""
    resources = ssn.state.resources
    relifted: set[str] = set()
    # Only admitted gangs with a live unbound member have anything to hold or lift:
    # the rest (most jobs of a busy cluster, running) are left out before ordering,
    # which leaves the order of the others as it was.
    waiting = [j for j in ssn.jobs.values() if j.group is not None and admitted(j)]
    waiting = [j for j in waiting if len(j.tasks) > j.bound_count and live_pending(j)]
    for job in ssn.ordered_jobs(waiting):
        pending = live_pending(job)
        open_tasks = [t for t in pending if not t.gated]
        if open_tasks:
            place(ssn.free, [t.request for t in open_tasks], resources, commit=True)
        placed = job.bound_count + job.succeeded
        short = job.min_member - placed - len(open_tasks)
        started = placed + len(open_tasks) > 0
        if short > 0 and (require_fit or started):
            relift = sorted((t for t in pending if t.gated), key=_age)[:short]
            if not relift:
                continue
            relifted.add(job.key)
            decisions.lift.extend(relift)
            # These gates are coming off (a lift that failed or was cut short by a
            # crash, or a member recreated): the members hold their capacity and
            # their queue's share now, or a second gang could be admitted into the
            # same room, past a queue's capability.
            place(ssn.free, [t.request for t in relift], resources, commit=True)
            ssn.release_hold(job)
            ssn.allocate(job, sum((t.request for t in relift), start=np.zeros_like(job.allocated)))
    return relifted


def _age(t: Task) -> tuple[str, str]:
    return (t.pod.created, t.pod.name)


def by_queue_turns(ssn: Session, jobs: list[Job]) -> Iterator[Job]:
    """Jobs queue by queue: each turn the queue first in queue order (shares change
    as jobs are given room) offers its next job in job order."""
    waiting: dict[str, list[Job]] = {}
    for job in ssn.ordered_jobs(jobs):
        waiting.setdefault(job.queue, []).append(job)

    def compare(a: str, b: str) -> int:
        if a in ssn.queues and b in ssn.queues:
            return ssn.queue_compare(ssn.queues[a], ssn.queues[b])
        return (a > b) - (a < b)

    key = functools.cmp_to_key(compare)
    while waiting:
        queue = min(waiting, key=key)
        job = waiting[queue].pop(0)
        if not waiting[queue]:
            del waiting[queue]
        yield job


def enqueue(
    ssn: Session, decisions: Decisions, backfill: bool = True, require_fit: bool = False
) -> set[str]:
    """Admit Pending PodGroups; returns the keys of gangs account_admitted re-lifted."""
    relifted = account_admitted(ssn, decisions, require_fit)
    pending = [j for j in ssn.jobs.values() if j.group is not None and not admitted(j)]
    for job in by_queue_turns(ssn, pending):
        if require_fit:
            _admit_fitting(ssn, decisions, job, backfill)
        else:
            _admit_on_limits(ssn, decisions, job, backfill)
    return relifted


def _admit_on_limits(ssn: Session, decisions: Decisions, job: Job, backfill: bool) -> None:
    """Volcano's enqueue: queue and cluster limits on the job's minimum, no pods needed."""
    if awaiting_members(ssn, job):
        # Without minResources the minimum is its members' requests: admitted while
        # its controller is still creating them, it would be checked against (and
        # hold) only part of it, and be Inqueue in a queue it does not fit. Volcano
        # admits such a group at once; waiting the grace (seconds) makes the result
        # not depend on which cycle saw it first.
        return
    request = min_request(ssn, job, needed_tasks(job))
    status = ssn.enqueueable(job, request)
    if status.ok or (
        backfill and status.code != Code.UNRESOLVABLE and _backfills(ssn, job, request)
    ):
        decisions.admit.append(job)
        ssn.hold(job, request)
        return
    missing = max(job.min_member - job.bound_count, 0)
    decisions.unschedulable[job.key] = gang_message(job, missing, status.message())
    if status.code != Code.UNRESOLVABLE:
        decisions.starving.append(job)  # reclaim may make room in its queue


def _backfills(ssn: Session, job: Job, request: IntArray) -> bool:
    """Would the limits admit the job but for what a gang with reserved nodes holds, and
    does the job end before that gang can start (backfill)? It cannot delay it then."""
    for r in ssn.state.reservations.held.values():
        holder = ssn.jobs.get(r.job)
        if holder is None or not holder.held.any() or not may_backfill(job, request, r, ssn.now):
            continue
        held = holder.held.copy()
        ssn.release_hold(holder)
        try:
            if ssn.enqueueable(job, request).ok:
                return True
        finally:
            ssn.hold(holder, held)
    return False


def _admit_fitting(ssn: Session, decisions: Decisions, job: Job, backfill: bool) -> None:
    """requireFit: admitted only with every member needed and room for them now."""
    resources = ssn.state.resources
    tasks = needed_tasks(job)
    request = min_request(ssn, job, tasks)
    status = ssn.job_valid(job)
    if status.ok:
        status = ssn.enqueueable(job, request)
    missing = max(job.min_member - job.bound_count, 0)
    if status.code == Code.UNRESOLVABLE:  # eviction cannot help: say so, move on
        decisions.unschedulable[job.key] = gang_message(job, missing, status.message())
        if assembling(ssn, job):
            decisions.assembling.add(job.key)
        return
    allowed = allowed_rows(ssn, job, request, backfill)
    requests = [t.request for t in tasks]
    fit = place(ssn.free, requests, resources, allowed, commit=status.ok)
    if not tasks and status.ok and job.bound_count < job.min_member:
        # no pods yet (gang.podless): its minResources must fit in total
        fit = _fits_in_total(ssn, request, allowed, missing)
    if fit.ok and status.ok:
        decisions.admit.append(job)
        decisions.lift.extend(tasks)
        ssn.allocate(job, request)
        return
    reasons = []
    if not fit.ok:
        reasons.append(no_room_reason(ssn, job, fit, requests, allowed))
    if not status.ok:  # a queue or cluster limit says no (as well)
        reasons.append(status.message())
    unplaced = fit.unplaced if not fit.ok else missing
    decisions.unschedulable[job.key] = gang_message(job, unplaced, "; ".join(reasons))
    decisions.starving.append(job)


def no_room_reason(
    ssn: Session,
    job: Job,
    fit: Placement,
    requests: list[IntArray],
    allowed: npt.NDArray[np.bool_],
) -> str:
    """Why the gang's members do not fit: the placement's reason, or the reservation
    that keeps it off nodes where it would fit."""
    if not allowed.all() and place(ssn.free, requests, ssn.state.resources).ok:
        reserved = {**ssn.state.reservations.by_row, **ssn.reserved_now}
        holders = sorted({r.job for r in reserved.values() if r.job != job.key})
        return f"free nodes are reserved for waiting gang {', '.join(holders)}"
    return fit.reason
