"""preempt and reclaim: free room for starving gangs by evicting other pods.

preempt looks inside the starving job's own queue (lower priority, per the
plugins' votes); reclaim looks at other queues, for a job whose queue is
under its deserved share, taking only from reclaimable queues above theirs.
Those two queue rules are enforced here, whatever the plugin tiers say, so a
non-reclaimable queue is never reclaimed from.

Victims come in units: a gang may lose single pods only while it keeps
minMember running; beyond that the rest of it goes as one unit, so no gang is
ever left running below minMember. Units are tried cheapest first (lowest
priority, then youngest) until the starving gang fits; if it never fits,
nothing is evicted. Pods already being deleted count as free room first, so
a cycle does not evict again while earlier victims are still terminating.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from pyextender.actions.decisions import Decisions, Eviction
from pyextender.actions.gangs import min_request, needed_tasks
from pyextender.framework.placement import place
from pyextender.framework.session import IntArray, Job, Session, Task, timestamp


def _units(ssn: Session, tasks: list[Task], gang: bool) -> list[list[Task]]:
    by_job: dict[str, list[Task]] = {}
    for t in tasks:
        owner = ssn.job_of.get(t.pod.uid)
        by_job.setdefault(owner.key if owner else t.pod.uid, []).append(t)
    units: list[list[Task]] = []
    for key, victims in by_job.items():
        job = ssn.jobs.get(key)
        victims.sort(key=lambda t: t.pod.created, reverse=True)  # youngest first
        if not gang or job is None or job.min_member <= 1:
            units.extend([t] for t in victims)
            continue
        spare = max(job.bound_count - job.min_member, 0)
        units.extend([t] for t in victims[:spare])
        rest = victims[spare:]
        if rest and len(rest) == len([t for t in job.tasks if t.bound]) - spare:
            units.append(rest)  # the remainder only as a whole job
    units.sort(key=lambda u: (min(t.pod.priority for t in u), -max(_created(t) for t in u)))
    return units


def _created(t: Task) -> float:
    return timestamp(t.pod.created)


class Victims:
    """The bound pods of a session, scanned once per action instead of once per
    starving gang (a full cluster with many gangs waiting asked for every running
    pod per waiting gang, each cycle): those still running, by queue, and those
    terminating (before this cycle, or chosen in it)."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.running: dict[str, list[Task]] = {}
        self.terminating: list[Task] = []
        for j in ssn.jobs.values():
            for t in j.tasks:
                if not t.bound:
                    continue
                if t.pod.deleting:
                    self.terminating.append(t)
                else:
                    self.running.setdefault(j.queue, []).append(t)
        self.chosen: set[str] = set()
        """uids chosen as victims in this action."""

    def live(self, queue: str) -> list[Task]:
        """Running pods of ``queue`` not chosen as victims yet."""
        tasks = self.running.get(queue, [])
        if not self.chosen:
            return tasks
        return [t for t in tasks if t.pod.uid not in self.chosen]

    def evict(self, t: Task) -> None:
        self.chosen.add(t.pod.uid)
        self.ssn.evicting(t)
        self.terminating.append(self.ssn.task_of[t.pod.uid])


def _evict_for(
    ssn: Session,
    job: Job,
    candidates: list[Task],
    reclaim: bool,
    decisions: Decisions,
    victims: Victims,
) -> bool:
    tasks = needed_tasks(job)
    if not tasks:
        return False
    requests = [t.request for t in tasks]
    request = min_request(ssn, job, tasks)
    resources = ssn.state.resources
    room = ssn.free.copy()
    freed = list(victims.terminating)
    for t in freed:
        room[t.node] += t.request
    if _fits(ssn, job, request, room, requests, freed):
        return False  # enough is already terminating; wait for it
    allowed = ssn.victims(job, candidates, reclaim)
    gang = any(getattr(p, "name", "") == "gang" for tier in ssn.tiers for p in tier)
    chosen: list[Task] = []
    for unit in _units(ssn, allowed, gang):
        for t in unit:
            room[t.node] += t.request
        chosen.extend(unit)
        if _fits(ssn, job, request, room, requests, freed + chosen):
            place(room, requests, resources, commit=True)
            action = "reclaim" if reclaim else "preempt"
            why = f"{action}ed for {job.key} (priority {job.priority}, queue {job.queue})"
            for t in chosen:
                decisions.evictions.append(Eviction(t, action, job.key, why))
                victims.evict(t)  # not a candidate again this cycle
                owner = ssn.job_of.get(t.pod.uid)
                if owner is not None and owner.queue in ssn.queues:
                    ssn.queues[owner.queue].allocated -= t.request
            ssn.free[...] = room
            return True
    return False


def _fits(
    ssn: Session,
    job: Job,
    request: IntArray,
    room: IntArray,
    requests: list[IntArray],
    gone: list[Task],
) -> bool:
    """Would the job fit the nodes, and pass the queue/cluster limits, without ``gone``?"""
    if not place(room, requests, ssn.state.resources).ok:
        return False
    saved = {n: q.allocated.copy() for n, q in ssn.queues.items()}
    try:
        for t in gone:
            owner = ssn.job_of.get(t.pod.uid)
            if owner is not None and owner.queue in ssn.queues:
                ssn.queues[owner.queue].allocated -= t.request
        if job.group is None or job.phase in ("Pending", ""):
            return ssn.enqueueable(job, request).ok
        # admitted: its queue already holds its minimum (Job.held); what is asked now
        # is allocate's question, may its queue hold these members
        return ssn.allocatable(job, request)
    finally:
        for n, alloc in saved.items():
            ssn.queues[n].allocated = alloc


def preempt(ssn: Session, decisions: Decisions) -> None:
    if not decisions.starving:
        return
    victims = Victims(ssn)
    job_of = ssn.job_of
    for job in decisions.starving:
        candidates = [t for t in victims.live(job.queue) if job_of[t.pod.uid] is not job]
        _evict_for(ssn, job, candidates, reclaim=False, decisions=decisions, victims=victims)


def reclaim(ssn: Session, decisions: Decisions) -> None:
    if not decisions.starving:
        return
    victims = Victims(ssn)
    for job in decisions.starving:
        if any(e.for_job == job.key for e in decisions.evictions):
            continue
        queue = ssn.queues.get(job.queue)
        if queue is None or ssn.overused(queue):
            continue
        wanted = min_request(ssn, job, needed_tasks(job)) > 0
        candidates = _over_share(ssn, job.queue, wanted, victims)
        _evict_for(ssn, job, candidates, reclaim=True, decisions=decisions, victims=victims)


def _over_share(
    ssn: Session, exclude: str, wanted: npt.NDArray[np.bool_], victims: Victims
) -> list[Task]:
    """Bound tasks of other, reclaimable queues, taken (youngest first) only
    while their queue is above its deserved share on a resource the reclaimer
    wants (Volcano's proportion rule, checked before each eviction)."""
    out: list[Task] = []
    by_queue: dict[str, list[Task]] = {}
    for queue in victims.running:
        q = ssn.queues.get(queue)
        if queue == exclude or q is None or not q.view.reclaimable:
            continue
        tasks = victims.live(queue)
        if tasks:
            by_queue[q.name] = tasks
    for name, tasks in by_queue.items():
        q = ssn.queues[name]
        left = q.allocated.copy()
        for t in sorted(tasks, key=lambda t: timestamp(t.pod.created), reverse=True):
            if not (left[wanted] > q.deserved[wanted] + 1e-9).any():
                break
            left = left - t.request
            out.append(t)
    return out


def proposal_allowed(ssn: Session, job: Job, victims: list[Task]) -> bool:
    """May kube-scheduler's own preemption evict exactly ``victims`` for ``job``?

    The same rules as our actions: same-queue victims need the preempt votes,
    other-queue victims the reclaim votes and reclaim's queue rules, and no
    gang may be left running below minMember unless it goes whole.
    """
    same = [t for t in victims if (o := ssn.job_of.get(t.pod.uid)) and o.queue == job.queue]
    other = [t for t in victims if t not in same]
    if same and len(ssn.victims(job, same, reclaim=False)) != len(same):
        return False
    if other:
        wanted = min_request(ssn, job, needed_tasks(job) or job.tasks) > 0
        open_to_reclaim = {t.pod.uid for t in _over_share(ssn, job.queue, wanted, Victims(ssn))}
        if any(t.pod.uid not in open_to_reclaim for t in other):
            return False
        if len(ssn.victims(job, other, reclaim=True)) != len(other):
            return False
    taken: dict[str, int] = {}
    for t in victims:
        owner = ssn.job_of.get(t.pod.uid)
        if owner is not None:
            taken[owner.key] = taken.get(owner.key, 0) + 1
    for key, n in taken.items():
        owner = ssn.jobs[key]
        running = owner.bound_count
        if 0 < running - n < owner.min_member:
            return False
    return True
