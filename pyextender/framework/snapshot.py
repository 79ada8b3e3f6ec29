"""Builds a Session from the sidecar's cache (or the simulator's state)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import numpy as np

from pyextender.api.names import (
    BARRIER_GATE,
    GANG_GATE,
    QUEUE_NAME_ANNOTATION,
    RUNNING_ESTIMATE_ANNOTATION,
    SLA_WAITING_TIME_ANNOTATION,
)
from pyextender.api.objects import PodInfo
from pyextender.api.volcano.codec import duration_seconds
from pyextender.cache.batch import DEFAULT_QUEUE, ROOT_QUEUE, QueueView
from pyextender.cache.cluster import ClusterCache
from pyextender.framework.session import (
    PAUSE_EVERY,
    IntArray,
    Job,
    QueueState,
    Session,
    Task,
    timestamp,
)

LONE_PREFIX = "pod:"
"""Job key prefix of a pod without a PodGroup (a job of one)."""

LIFTED = (GANG_GATE, BARRIER_GATE)
"""The gates our actions take off (a scheduling gate, or the barrier's)."""

UNKNOWN_GROUP_MIN = 1 << 30
"""min_member of a job whose PodGroup does not exist yet: never admissible."""


def _duration(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return duration_seconds(text)
    except ValueError:
        return None


def _held(job: Job, opened: IntArray, width: int, column: Mapping[str, int]) -> IntArray:
    """What an admitted gang still short of minMember placed or ungated members holds
    of its queue beyond its ungated pods: its minResources less what it has. Volcano's
    proportion and overcommit count an Inqueue job's minResources the same way, and
    nothing for a job without minResources (so a gang that never fits cannot hold its
    queue shut)."""
    group = job.group
    assert group is not None
    pending = [t for t in job.pending if not t.pod.deleting]
    opened_count = sum(1 for t in pending if not t.gated)
    placed = job.bound_count + job.succeeded
    want = np.zeros(width, dtype=np.int64)
    if placed + opened_count >= job.min_member or not group.min_resources:
        return want
    for name, value in group.min_resources.items():
        col = column.get(name)
        if col is not None:
            want[col] = value
    held: IntArray = np.maximum(want - job.allocated - opened, 0)
    return held


class TaskMemo:
    """Tasks kept from one session to the next by whoever builds sessions over and
    over (the actions loop): a pod whose PodInfo object, node and resource columns
    are unchanged gets its Task back instead of a new one and a new request vector.
    Most pods do not change between two cycles; at 4,590 pods this is most of a
    session's build (bench/cycle_cost.py). A kept Task's request is the state's
    shared read-only vector for those requests, so a session that tried to change it
    in place would fail, not leak into the next one or into other Tasks."""

    def __init__(self) -> None:
        self.width = -1
        self.tasks: dict[str, tuple[PodInfo, int, Task, str, str]] = {}
        """uid -> (the PodInfo seen, its node row, its Task, its PodGroup key, its job key)"""


def _no_pause() -> None:
    return None


def build_session(
    cache: ClusterCache,
    tiers: Sequence[Sequence[object]],
    now: float,
    options: dict[str, dict[str, bool]] | None = None,
    phases: dict[str, str] | None = None,
    evicting: set[str] | None = None,
    lifting: set[str] | None = None,
    memo: TaskMemo | None = None,
    pause: Callable[[], None] | None = None,
) -> Session:
    """``phases`` overrides PodGroup phases the scheduler wrote but the watch has
    not shown yet; ``evicting`` lists pod uids evicted but not yet seen deleting;
    ``lifting`` pod uids whose gang gate we removed but the watch still shows;
    ``memo`` keeps unchanged pods' Tasks between calls (one thread at a time);
    ``pause`` is called between small units of work: there the cycle's thread gives
    way to the verbs (pyextender.server.courtesy)."""
    state = cache.state
    phases = phases or {}
    evicting = evicting or set()
    lifting = lifting or set()
    start_width = len(state.resources)
    jobs: dict[str, Job] = {}
    kept: dict[str, tuple[PodInfo, int, Task, str, str]] = {}
    seen = memo.tasks if memo is not None and memo.width == start_width else {}
    pause = pause or _no_pause
    # the loop below runs once per pod of the cluster every cycle: names it reads for
    # each pod are bound locally (a cycle at 48,000 pods is mostly this loop)
    records = state.pods.get
    earlier = seen.get
    job_by_key = jobs.get
    groups = cache.groups
    scheduler = cache.scheduler_name
    overridden = bool(evicting or lifting)
    for i, (uid, pod) in enumerate(cache.pods_by_uid.items()):
        if not i % PAUSE_EVERY:
            pause()
        rec = records(uid)
        node = rec.node if rec else -1
        # our own writes the watch has not shown
        ours = overridden and (uid in evicting or uid in lifting)
        old = None if ours else earlier(uid)
        if old is not None and old[0] is pod and old[1] == node:
            task, group_key, key = old[2], old[3], old[4]
            if pod.scheduler_name != scheduler and group_key not in groups:
                continue
            kept[uid] = old
        else:
            group_key = cache.group_of(pod)
            if pod.scheduler_name != scheduler and group_key not in groups:
                continue
            key = group_key or f"{LONE_PREFIX}{pod.key}"
            if ours:
                if uid in evicting and not pod.deleting:
                    pod = replace(pod, deleting=True)
                if uid in lifting and (GANG_GATE in pod.gates or BARRIER_GATE in pod.gates):
                    # a lift (or release) in flight: off for this cycle
                    pod = replace(pod, gates=tuple(g for g in pod.gates if g not in LIFTED))
                task = Task(pod=pod, request=state.vector(pod.requests), node=node)
            else:
                task = Task(pod=pod, request=state.shared_vector(pod.requests), node=node)
                kept[uid] = (pod, node, task, group_key, key)
        job = job_by_key(key)
        if job is None:
            group = groups.get(group_key) if group_key else None
            if group is not None and group_key in phases and group.phase in ("Pending", ""):
                group = replace(group, phase=phases[group_key])
            if group is not None:
                job = Job(
                    key=key,
                    queue=group.queue,
                    priority=pod.priority,
                    created=timestamp(group.created),
                    min_member=group.min_member,
                    tasks=[],
                    group=group,
                )
            else:
                job = Job(
                    key=key,
                    queue=pod.annotations.get(QUEUE_NAME_ANNOTATION) or DEFAULT_QUEUE,
                    priority=pod.priority,
                    created=timestamp(pod.created),
                    min_member=UNKNOWN_GROUP_MIN if group_key else 1,
                    tasks=[],
                )
            jobs[key] = job
        job.tasks.append(task)
        if pod.priority > job.priority:
            job.priority = pod.priority
        if job.running_estimate is None and RUNNING_ESTIMATE_ANNOTATION in pod.annotations:
            job.running_estimate = _duration(pod.annotations[RUNNING_ESTIMATE_ANNOTATION])
    # a request naming a resource no node has adds a column while building
    width = len(state.resources)
    for key, group in cache.groups.items():
        if key in phases and group.phase in ("Pending", ""):
            group = replace(group, phase=phases[key])
        if key not in jobs:
            jobs[key] = Job(
                key=key,
                queue=group.queue,
                priority=0,
                created=timestamp(group.created),
                min_member=group.min_member,
                tasks=[],
                group=group,
            )
    # One read-only zero vector for every job that holds nothing (most jobs, pending or
    # lone pods): at 100,000 jobs a vector each was ~50 MB per session.
    zero = np.zeros(width, dtype=np.int64)
    zero.flags.writeable = False
    for i, job in enumerate(jobs.values()):
        if not i % PAUSE_EVERY:
            pause()
        if width != start_width and any(t.request.shape[0] < width for t in job.tasks):
            # a column was added: new Tasks (a kept one may be in another session's use)
            job.tasks = [
                Task(t.pod, np.pad(t.request, (0, width - t.request.shape[0])), t.node)
                if t.request.shape[0] < width
                else t
                for t in job.tasks
            ]
            job.tasks_changed()
        # the bound requests and bound_count in one pass over the tasks
        bound: list[IntArray] = []
        live = 0
        for t in job.tasks:
            if t.node >= 0:
                bound.append(t.request)
                live += not t.pod.deleting
        job._bound_count = live
        if not bound:
            job.allocated = zero
        elif len(bound) == 1 and not bound[0].flags.writeable:
            job.allocated = bound[0]  # a kept Task's read-only request
        elif all(r is bound[0] for r in bound):
            job.allocated = bound[0] * len(bound)  # members alike (one shared vector)
        else:
            job.allocated = np.add.reduce(bound)
        if job.group is not None:
            job.succeeded = cache.succeeded_members(job.key)
            est = _duration(job.group.annotations.get(RUNNING_ESTIMATE_ANNOTATION))
            job.running_estimate = est if est is not None else job.running_estimate
            job.sla_wait = _duration(job.group.annotations.get(SLA_WAITING_TIME_ANNOTATION))

    views = dict(cache.queues)
    for name in (ROOT_QUEUE, DEFAULT_QUEUE):
        views.setdefault(
            name, QueueView(name=name, parent="" if name == ROOT_QUEUE else ROOT_QUEUE)
        )
    queues: dict[str, QueueState] = {}
    for name, view in views.items():
        zero = np.zeros(width, dtype=np.int64)
        queues[name] = QueueState(
            view=view,
            allocated=zero.copy(),
            inqueue=zero.copy(),
            request=zero.copy(),
            deserved=np.zeros(width, dtype=np.float64),
            held=zero.copy(),
        )
    for i, job in enumerate(jobs.values()):
        if not i % PAUSE_EVERY:
            pause()
        job.held = zero
        q = queues.get(job.queue)
        if q is None:
            continue
        q.allocated += job.allocated
        q.request += job.allocated
        opened = zero
        opened_count = 0
        for t in job.pending:
            q.request += t.request
            if job.phase == "Inqueue" and not t.gated and not t.pod.deleting:
                opened = opened + t.request
                opened_count += 1
        # Ungated members count as the queue's only when the gang as a whole is through
        # its gates (allocate lifts minMember at once): fewer than that were released by
        # someone else (a namespace no longer adopted) and wait at the bind barrier
        # for members that never come, so they must not hold the queue shut.
        if job.bound_count + job.succeeded + opened_count >= job.min_member:
            q.inqueue += opened
        else:
            opened = zero
        if job.phase == "Inqueue" and job.group is not None:
            job.held = _held(job, opened, width, state.column)
            q.inqueue += job.held
            q.held += job.held
    if memo is not None:
        memo.width, memo.tasks = (width, kept) if width == start_width else (-1, {})
    ssn = Session(state, jobs, queues, tiers, now, options)
    pause()  # the plugins' session opening (drf, proportion) comes next
    ssn.open()
    return ssn
