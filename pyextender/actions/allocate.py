"""allocate: lift gang gates, every gang's minimum before anyone's extras.

Our equivalent of Volcano's allocate (kube-scheduler then places what is
ungated). In one cycle:

1. **Minimums.** Every admitted gang short of minMember members placed or
   ungated, queue by queue (the queue furthest below its share first), in job
   order: the gates of the members it needs come off only when the gang is valid
   (its minMember pods exist: gang's ``job_valid``), its queue and parent queues
   allow them (``allocatable``) and all of them fit the free capacity now,
   counting what was lifted before. So no partial gang ever holds capacity at the
   bind barrier. A gang that does not fit says why (PodGroup condition) and is a
   preempt/reclaim/reservation target; one past its sla-waiting-time gets its
   nodes reserved at once (Volcano's sla JobPipelined), so later gangs of the same
   cycle cannot take them (backfill aside).
2. **Holds.** A gang whose pods are still being created (fewer than minMember,
   created less than ``ASSEMBLY_GRACE_S`` ago) keeps room for its minimum this
   cycle: the extras of a gang created a moment earlier must not take it. Within
   ``NEWCOMER_GRACE_S`` of the newest PodGroup's creation extras are released, in
   job order, only until the first one younger than that: a sibling job's PodGroup
   may not even exist yet, and the jobs after it in the order must not go first.
   Extras that have waited that long go in turn, so PodGroups that keep arriving
   (a bare pod's each) cannot hold them back for ever.
3. **Extras.** Members beyond minMember are released one at a time, the job first
   in job order (e.g. smallest dominant share) first, only for gangs whose minimum
   is placed or lifted, while they fit and their queue's capability, and every
   parent queue's, allow it. Volcano gives every job its minAvailable before any job
   gets more (gang's job order puts jobs not yet ready first); three elastic jobs
   created together all start.

Without the enqueue action, allocate first admits every Pending PodGroup
(Volcano's allocate moves them to Inqueue itself when enqueue is not
configured).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from pyextender.actions.decisions import Decisions
from pyextender.actions.enqueue import (
    admitted,
    allowed_rows,
    assembling,
    by_queue_turns,
    live_pending,
    no_room_reason,
    take_in_total,
)
from pyextender.actions.gangs import gang_message, min_request, needed_tasks
from pyextender.actions.reservation import reserve
from pyextender.framework.placement import place
from pyextender.framework.session import IntArray, Job, Session, Task, past_sla, timestamp
from pyextender.framework.status import Code


def _age(t: Task) -> tuple[str, str]:
    return (t.pod.created, t.pod.name)


def admit_all_pending(ssn: Session, decisions: Decisions) -> None:
    """No enqueue action: every Pending PodGroup is Inqueue for allocate."""
    for job in ssn.ordered_jobs(list(ssn.jobs.values())):
        if job.group is not None and not admitted(job):
            decisions.admit.append(job)
            ssn.hold(job, min_request(ssn, job, needed_tasks(job)))


def allocate(
    ssn: Session,
    decisions: Decisions,
    backfill: bool = True,
    relifted: frozenset[str] | set[str] = frozenset(),
) -> None:
    """Minimums, holds, extras (see the module docstring)."""
    lifted = _lift_minimums(ssn, decisions, backfill, relifted)
    _hold_assembling(ssn, decisions, backfill, lifted)
    newest = _newest_group(ssn)
    grace = NEWCOMER_GRACE_S if 0 <= ssn.now - newest < NEWCOMER_GRACE_S else 0.0
    allocate_elastic(ssn, decisions, backfill, grace)
    if decisions.held_until < math.inf:
        # the hold also ends when the newest PodGroup is grace-old, whichever is first
        decisions.held_until = min(decisions.held_until, newest + NEWCOMER_GRACE_S)


NEWCOMER_GRACE_S = 3.0
"""Seconds after the newest PodGroup's creation during which elastic members younger
than this wait, and every member after them in job order: jobs created together
reach the scheduler one after another (their controller creates each job's PodGroup
and pods in turn), and every one of them gets its minimum before anyone's extras
fill the room, which then go in job order. Members that have waited this long go in
turn whatever arrives: on a cluster where new PodGroups keep coming less than this
apart, extras would otherwise wait for ever."""


def _newest_group(ssn: Session) -> float:
    """Creation time (epoch seconds) of the newest PodGroup not from the future (a
    clock skewed ahead must not hold extras back); -inf when there is none. Created
    less than NEWCOMER_GRACE_S ago, its minimum, or a sibling's, comes first."""
    return max(
        (j.created for j in ssn.jobs.values() if j.group is not None and j.created <= ssn.now),
        default=-math.inf,
    )


def _lift_minimums(
    ssn: Session, decisions: Decisions, backfill: bool, relifted: frozenset[str] | set[str]
) -> set[str]:
    """Gates of whole gangs that fit now; returns the keys of the gangs lifted."""
    now_admitted = {j.key for j in decisions.admit}
    deciding = {k for t in decisions.lift if (k := _key(ssn, t)) is not None}
    waiting = [
        j
        for j in ssn.jobs.values()
        if j.group is not None
        and (admitted(j) or j.key in now_admitted)
        and j.key not in relifted
        and j.key not in deciding
        and j.min_member > 0
        and j.bound_count + j.succeeded < j.min_member  # placed already: no live_pending walk
        and j.bound_count + j.succeeded + sum(1 for t in live_pending(j) if not t.gated)
        < j.min_member
    ]
    lifted: set[str] = set()
    for job in by_queue_turns(ssn, waiting):
        if _lift_gang(ssn, decisions, job, backfill):
            lifted.add(job.key)
    return lifted | deciding | set(relifted)


def _key(ssn: Session, t: Task) -> str | None:
    job = ssn.job_of.get(t.pod.uid)
    return job.key if job is not None else None


def _lift_gang(ssn: Session, decisions: Decisions, job: Job, backfill: bool) -> bool:
    missing = job.min_member - job.bound_count - job.succeeded
    status = ssn.job_valid(job)
    if not status.ok:
        decisions.unschedulable[job.key] = gang_message(job, missing, status.message())
        if assembling(ssn, job):
            decisions.assembling.add(job.key)
        if status.code != Code.UNRESOLVABLE:
            decisions.starving.append(job)
        return False
    tasks = sorted((t for t in live_pending(job) if t.gated), key=_age)[:missing]
    if len(tasks) < missing:  # an operator's PodGroup, admitted before its pods exist
        return False
    request = sum((t.request for t in tasks), start=np.zeros_like(ssn.total))
    held = job.held.copy()
    ssn.release_hold(job)
    allowed = allowed_rows(ssn, job, request, backfill)
    requests = [t.request for t in tasks]
    if not ssn.allocatable(job, request):
        why = ssn.enqueueable(job, request)
        reason = why.message() if not why.ok else f'queue "{job.queue}" capability reached'
        _waits(ssn, decisions, job, held, gang_message(job, missing, reason))
        return False
    fit = place(ssn.free, requests, ssn.state.resources, allowed, commit=True)
    if fit.ok:
        decisions.lift.extend(tasks)
        ssn.allocate(job, request)
        return True
    reason = no_room_reason(ssn, job, fit, requests, allowed)
    _waits(ssn, decisions, job, held, gang_message(job, fit.unplaced, reason))
    return False


def _waits(ssn: Session, decisions: Decisions, job: Job, held: IntArray, message: str) -> None:
    """The gang keeps its gates: it holds its queue's room again, says why, and is a
    target for preempt, reclaim and reservation."""
    ssn.hold(job, held)
    decisions.unschedulable[job.key] = message
    decisions.starving.append(job)
    if past_sla(ssn, job) and _sla_on(ssn) and not _reserved_for_other(ssn, job):
        # pipelined (Volcano's sla): the nodes it will need wait for it from now on,
        # in this cycle already; only backfill (a job that ends in time) may use them
        for r in reserve(ssn, [job]):
            ssn.reserved_now.update(dict.fromkeys(r.rows, r))


def _sla_on(ssn: Session) -> bool:
    return any(getattr(p, "name", "") == "sla" for tier in ssn.tiers for p in tier)


def _reserved_for_other(ssn: Session, job: Job) -> bool:
    """One gang holds nodes at a time (pyextender.actions.reservation)."""
    holders = {r.job for r in ssn.reserved_now.values()} | set(ssn.state.reservations.held)
    return bool(holders - {job.key})


def _hold_assembling(ssn: Session, decisions: Decisions, backfill: bool, lifted: set[str]) -> None:
    now_admitted = {j.key for j in decisions.admit}
    assembling_now = [
        j
        for j in ssn.jobs.values()
        if j.group is not None and j.key not in lifted and not j.ready and assembling(ssn, j)
    ]  # filtered before ordering: the order of these is the same
    for job in ssn.ordered_jobs(assembling_now):
        refused = job.key in decisions.unschedulable and job.key not in decisions.assembling
        if refused and not (admitted(job) or job.key in now_admitted):
            continue  # a limit keeps it Pending: it will not start soon
        request = min_request(ssn, job, needed_tasks(job))
        if request.any():
            take_in_total(ssn, request, allowed_rows(ssn, job, request, backfill))


def allocate_elastic(
    ssn: Session, decisions: Decisions, backfill: bool = True, min_age_s: float = 0.0
) -> None:
    """Release gated members beyond minMember of running gangs, in job order. With
    ``min_age_s``, the walk stops at the first member (in that order) created less than
    ``min_age_s`` seconds ago: its job is still arriving, and no job after it in the
    order may go first."""
    lifting = {t.pod.uid for t in decisions.lift}
    born_by = ssn.now - min_age_s
    admitting = {j.key for j in decisions.admit}
    extras: dict[str, list[Task]] = {}
    for job in ssn.jobs.values():
        if job.group is None or not (admitted(job) or job.key in admitting):
            continue
        pending = live_pending(job)
        opened = sum(1 for t in pending if not t.gated or t.pod.uid in lifting)
        if job.bound_count + job.succeeded + opened < job.min_member:
            continue  # its minimum is not placed yet: no extras before it
        gated = [t for t in pending if t.gated and t.pod.uid not in lifting]
        if gated:
            extras[job.key] = sorted(gated, key=_age)
    resources = ssn.state.resources
    while extras:
        job = min((ssn.jobs[k] for k in extras), key=functools.cmp_to_key(ssn.job_compare))
        if min_age_s > 0 and (born := timestamp(extras[job.key][0].pod.created)) > born_by:
            decisions.held_until = born + min_age_s
            break
        task = extras[job.key].pop(0)
        if not ssn.allocatable(job, task.request):
            del extras[job.key]  # its queue (or a parent's) capability is reached
            continue
        allowed = allowed_rows(ssn, job, task.request, backfill)
        if place(ssn.free, [task.request], resources, allowed, commit=True).ok:
            decisions.lift.append(task)
            ssn.allocate(job, task.request)
            if not extras[job.key]:
                del extras[job.key]
        else:
            del extras[job.key]  # its next member does not fit either, this cycle
