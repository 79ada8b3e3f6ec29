"""reservation: hold nodes for the gang that has waited past its sla-waiting-time.

The first starving job in order (the current holder keeps priority while it
still waits, and its nodes from its admission until its members are bound, so
reservations do not hop around) gets the nodes that are
expected to be free soonest: each node's release time is the latest expected
end (start + running estimate) of the pods on it, unknown when a pod has no
estimate. The gang is placed on those nodes as if they were empty; the rows
it would take are reserved, and its expected start is their latest release.
"""

from __future__ import annotations

import math

import numpy as np

from pyextender.actions.gangs import needed_tasks
from pyextender.cache.reservations import Reservation
from pyextender.framework.placement import place
from pyextender.framework.session import FloatArray, Job, Session, past_sla, timestamp


def release_times(ssn: Session) -> FloatArray:
    """Per row: epoch seconds by which all its pods are expected to end (inf: unknown)."""
    out = np.full(ssn.state.size, ssn.now, dtype=np.float64)
    for job in ssn.jobs.values():
        for t in job.tasks:
            if not t.bound:
                continue
            est = job.running_estimate
            start = timestamp(t.pod.started) or ssn.now
            end = math.inf if est is None else start + est
            out[t.node] = max(out[t.node], end)
    # pods we know nothing about (other schedulers) also hold nodes
    known = {t.pod.uid for j in ssn.jobs.values() for t in j.tasks}
    for uid, rec in ssn.state.pods.items():
        if uid not in known:
            out[rec.node] = math.inf
    return out


def reserve(ssn: Session, starving: list[Job]) -> list[Reservation]:
    previous = ssn.state.reservations.held
    candidates = [j for j in starving if past_sla(ssn, j)]
    # The holder keeps its nodes after it is admitted, until its members are bound:
    # pods admitted in the same cycle are placed by kube-scheduler meanwhile and must
    # not land on them (seen in e2e: a small job took the held node, the gang never ran).
    keys = {j.key for j in candidates}
    for key in previous:
        job = ssn.jobs.get(key)
        if job is not None and key not in keys and needed_tasks(job):
            candidates.insert(0, job)
    if not candidates:
        return []
    holder = next((j for j in candidates if j.key in previous), candidates[0])
    tasks = needed_tasks(holder)
    if not tasks:
        return []
    release = release_times(ssn)
    rows = ssn.rows
    order = rows[np.argsort(release[rows], kind="stable")]
    capacity = np.zeros_like(ssn.free)
    capacity[rows] = ssn.state.alloc[rows]
    allowed = np.zeros(capacity.shape[0], dtype=np.bool_)
    for row in order.tolist():  # grow the set, soonest-free first, until the gang fits
        allowed[row] = True
        fit = place(capacity, [t.request for t in tasks], ssn.state.resources, allowed)
        if fit.ok:
            taken = frozenset(r for r in fit.rows if r >= 0)
            ready = float(max(release[list(taken)])) if taken else ssn.now
            since = previous[holder.key].since if holder.key in previous else ssn.now
            return [Reservation(job=holder.key, rows=taken, since=since, ready_at=ready)]
    return []
