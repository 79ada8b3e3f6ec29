"""enqueue: admit whole gangs, in queue and job order, when they fit.

A PodGroup moves Pending -> Inqueue (and its pods' scheduling gate is lifted)
only when every plugin allows it (queue capability, overcommit, gang size)
and its minMember tasks fit the free capacity left after every other
admitted-but-unbound gang. So kube-scheduler only ever sees gangs that can
be placed whole, and two gangs never hold half of the same nodes.
"""

from __future__ import annotations

import numpy as np

from pyextender.actions.backfill import may_backfill
from pyextender.actions.decisions import Decisions
from pyextender.actions.gangs import gang_message, min_request, needed_tasks
from pyextender.framework.placement import place
from pyextender.framework.session import Job, Session
from pyextender.framework.status import Code


def _admitted(job: Job) -> bool:
    return job.group is None or job.phase not in ("Pending", "")


def account_admitted(ssn: Session, decisions: Decisions) -> None:
    """Hold capacity for admitted gangs whose pods are not bound yet."""
    resources = ssn.state.resources
    for job in ssn.ordered_jobs([j for j in ssn.jobs.values() if j.group is not None]):
        if not _admitted(job):
            continue
        open_tasks = [t for t in job.pending if not t.gated and not t.pod.deleting]
        if open_tasks:
            place(ssn.free, [t.request for t in open_tasks], resources, commit=True)
        if any(t.gated for t in job.pending):
            decisions.relift.append(job)


def enqueue(ssn: Session, decisions: Decisions, backfill: bool = True) -> None:
    account_admitted(ssn, decisions)
    resources = ssn.state.resources
    reservations = ssn.state.reservations
    pending = [j for j in ssn.jobs.values() if j.group is not None and not _admitted(j)]
    for job in ssn.ordered_jobs(pending):
        tasks = needed_tasks(job)
        request = min_request(ssn, job, tasks)
        status = ssn.enqueueable(job, request)
        missing = max(job.min_member - job.bound_count, 0)
        if status.code == Code.UNRESOLVABLE:  # eviction cannot help: say so, move on
            decisions.unschedulable[job.key] = gang_message(job, missing, status.message())
            continue
        allowed = np.ones(ssn.free.shape[0], dtype=np.bool_)
        for row, r in reservations.by_row.items():
            if r.job != job.key and row < allowed.shape[0]:
                allowed[row] = backfill and may_backfill(job, request, r, ssn.now)
        requests = [t.request for t in tasks]
        fit = place(ssn.free, requests, resources, allowed, commit=status.ok)
        if fit.ok and status.ok:
            decisions.admit.append(job)
            continue
        if not fit.ok:
            reason = fit.reason
            if not allowed.all() and place(ssn.free, requests, resources).ok:
                holders = sorted({r.job for r in reservations.by_row.values() if r.job != job.key})
                reason = f"free nodes are reserved for waiting gang {', '.join(holders)}"
            message = gang_message(job, fit.unplaced, reason)
        else:  # fits the nodes, but a queue or cluster limit says no
            message = gang_message(job, missing, status.message())
        decisions.unschedulable[job.key] = message
        decisions.starving.append(job)
