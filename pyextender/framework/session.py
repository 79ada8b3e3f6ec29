"""A scheduling session: jobs, tasks and queues as numpy vectors, plus the
plugins' session hooks evaluated with Volcano's tier rules.

A session is built from the cache at the start of one cycle of the actions
(enqueue, preempt, reclaim, backfill) and thrown away after it. Resource
vectors use the ClusterState's columns (cpu milli, memory bytes, ...).

Tier rules (as in Volcano): for orderings the first plugin, tier by tier,
with a non-zero answer decides; for admission every plugin must agree; for
victims the first tier in which any plugin votes decides, by intersecting
its plugins' votes. One difference: Volcano moves on to the next tier when
that intersection is empty; we take the empty answer as final (a veto by
conformance must not be overridden by a lower tier).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal, Protocol, cast, runtime_checkable

import numpy as np
import numpy.typing as npt

from pyextender.api.objects import PodInfo
from pyextender.cache.batch import GroupView, QueueView
from pyextender.cache.reservations import Reservation
from pyextender.cache.state import ClusterState
from pyextender.framework.status import SUCCESS, Code, Status

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def timestamp(text: str) -> float:
    """RFC 3339 text -> epoch seconds (0 when empty or malformed)."""
    if not text:
        return 0.0
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


PAUSE_EVERY = 32
"""Pods or jobs between two pause points of a session's build: 0.1-0.3 ms of work.
There the scheduling cycle's thread gives way to the verbs (pyextender.server.courtesy)."""


@dataclass(slots=True)
class Task:
    """One pod of a job."""

    pod: PodInfo
    request: IntArray
    node: int
    """Row of the node holding it (bound or assumed), -1 when unplaced."""

    @property
    def bound(self) -> bool:
        return self.node >= 0

    @property
    def gated(self) -> bool:
        return bool(self.pod.gates)


_IMPLEMENTS: dict[tuple[type, type], bool] = {}
"""(plugin class, hook Protocol) -> whether the class implements it. A Protocol
isinstance check reads every member of the Protocol (~10 µs); sessions are built
afresh each cycle, so per session caching alone still paid it ~100 times a cycle
(7 % of a cycle's CPU with 150 running gangs). Plugins define their hooks on the
class, so the answer is the class's."""


def implements(plugin: object, kind: type) -> bool:
    key = (type(plugin), kind)
    hit = _IMPLEMENTS.get(key)
    if hit is None:
        hit = _IMPLEMENTS[key] = isinstance(plugin, kind)
    return hit


_NOTHING: IntArray = np.zeros(0, dtype=np.int64)
_NOTHING.flags.writeable = False
"""A Job's vectors until the session builder sets them (shared, read-only)."""


@dataclass(slots=True)
class Job:
    """A PodGroup (or a lone pod) and its tasks."""

    key: str
    queue: str
    priority: int
    created: float
    """epoch seconds"""
    min_member: int
    tasks: list[Task]
    group: GroupView | None = None
    allocated: IntArray = field(default_factory=lambda: _NOTHING)
    share: float = 0.0
    """Dominant resource share (set by drf)."""
    running_estimate: float | None = None
    """Expected run time in seconds, when known (backfill)."""
    sla_wait: float | None = None
    """Seconds after which the job gets nodes reserved (sla)."""
    held: IntArray = field(default_factory=lambda: _NOTHING)
    """What an admitted (Inqueue) gang whose gates are still on holds of its queue's
    ``inqueue`` (its minResources, or its needed members' requests): the queue's
    room is promised to it between enqueue and the lifting of its gates."""

    succeeded: int = 0
    """Members that have Succeeded (gone from ``tasks``): they count toward
    minMember, as Volcano's ready count does."""

    _bound_count: int = field(default=-1, init=False, repr=False, compare=False)
    """bound_count once counted (-1: not yet). Orderings ask for it O(jobs log jobs)
    times a cycle; a session never changes a job's tasks once built (the builder
    clears this when it replaces them)."""

    _pending: list[Task] | None = field(default=None, init=False, repr=False, compare=False)
    """pending once listed (None: not yet); asked for per job by several actions and
    plugins a cycle, and cleared with ``_bound_count`` where ``tasks`` is replaced.
    Callers only read it."""

    @property
    def bound_count(self) -> int:
        if self._bound_count < 0:
            self._bound_count = sum(1 for t in self.tasks if t.bound and not t.pod.deleting)
        return self._bound_count

    @property
    def ready(self) -> bool:
        return self.bound_count + self.succeeded >= self.min_member

    @property
    def pending(self) -> list[Task]:
        if self._pending is None:
            self._pending = [t for t in self.tasks if t.node < 0]
        return self._pending

    def tasks_changed(self) -> None:
        """``tasks`` was replaced: what was counted from it is counted again."""
        self._bound_count = -1
        self._pending = None

    @property
    def phase(self) -> str:
        return self.group.phase if self.group is not None else "Inqueue"


@dataclass(slots=True)
class QueueState:
    """A queue with what its jobs hold and ask for, and its deserved share."""

    view: QueueView
    allocated: IntArray
    """Requests of bound tasks."""
    inqueue: IntArray
    """Requests of admitted (Inqueue) but unbound tasks."""
    request: IntArray
    """allocated + every unbound task of its jobs."""
    deserved: FloatArray
    share: float = 0.0
    """max over resources of allocated / deserved (proportion)."""
    held: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """The part of ``inqueue`` that admitted gangs with their gates still on hold
    (the sum of their ``Job.held``): counted at admission, not when allocate asks
    whether a queue may hold more members (Volcano's allocatable looks at what is
    allocated)."""

    @property
    def name(self) -> str:
        return self.view.name


# -- hooks ---------------------------------------------------------------------


@runtime_checkable
class SessionOpener(Protocol):
    name: str

    def open_session(self, ssn: Session) -> None: ...


@runtime_checkable
class JobOrder(Protocol):
    name: str

    def job_order(self, ssn: Session, a: Job, b: Job) -> int:
        """Negative when ``a`` goes first, positive when ``b`` does, 0 for no opinion."""
        ...


@runtime_checkable
class JobOrderKey(Protocol):
    """A JobOrder whose order is a key's: ``job_order(a, b)`` is negative, zero or
    positive exactly as ``job_order_key(a)`` is below, equal to or above
    ``job_order_key(b)``. When every enabled JobOrder has one, jobs sort by the
    keys (one call per job) instead of by pairwise comparisons."""

    name: str

    def job_order_key(self, ssn: Session, job: Job) -> float | tuple[float, float]: ...


@runtime_checkable
class QueueOrder(Protocol):
    name: str

    def queue_order(self, ssn: Session, a: QueueState, b: QueueState) -> int: ...


@runtime_checkable
class JobEnqueueable(Protocol):
    name: str

    def job_enqueueable(self, ssn: Session, job: Job, request: IntArray) -> Status:
        """May the job be admitted now, asking for ``request`` (its min resources)?"""
        ...


@runtime_checkable
class EnqueuePermit(Protocol):
    name: str

    def enqueue_permit(self, ssn: Session, job: Job) -> bool:
        """True: admit the job whatever later tiers' limits say (Volcano's Permit vote
        in JobEnqueueable, e.g. sla past the job's waiting time). A refusal in the
        same tier, or one eviction cannot help (a closed queue), still wins."""
        ...


@runtime_checkable
class JobValid(Protocol):
    name: str

    def job_valid(self, ssn: Session, job: Job) -> Status:
        """May the job's pods be placed now (e.g. minMember of them exist)? Asked before
        its gates are lifted; not asked for admission (Volcano's JobValidFn)."""
        ...


@runtime_checkable
class Allocatable(Protocol):
    name: str

    def allocatable(self, ssn: Session, queue: QueueState, request: IntArray) -> bool:
        """May ``queue`` hold ``request`` more (an elastic member released by allocate)?"""
        ...


@runtime_checkable
class Preemptable(Protocol):
    name: str

    def preemptable(self, ssn: Session, preemptor: Job, victims: list[Task]) -> list[Task]:
        """The subset of ``victims`` this plugin allows to evict for ``preemptor`` (same queue)."""
        ...


@runtime_checkable
class Reclaimable(Protocol):
    name: str

    def reclaimable(self, ssn: Session, reclaimer: Job, victims: list[Task]) -> list[Task]:
        """The subset of ``victims`` (other queues) this plugin allows to evict."""
        ...


@runtime_checkable
class AllocateHandler(Protocol):
    name: str

    def on_allocate(self, ssn: Session, job: Job, request: IntArray) -> None:
        """``request`` was just (virtually) given to ``job``: update shares."""
        ...


@runtime_checkable
class Overused(Protocol):
    name: str

    def overused(self, ssn: Session, queue: QueueState) -> bool: ...


# -- the session -----------------------------------------------------------------


class Session:
    """Jobs, queues and free capacity for one cycle, with the configured plugins."""

    def __init__(
        self,
        state: ClusterState,
        jobs: dict[str, Job],
        queues: dict[str, QueueState],
        tiers: Sequence[Sequence[object]],
        now: float,
        options: dict[str, dict[str, bool]] | None = None,
    ) -> None:
        self.state = state
        self.jobs = jobs
        self.queues = queues
        self.tiers = [list(t) for t in tiers]
        self._hook_cache: dict[tuple[type, str], list[list[object]]] = {}
        self._order_keys: list[JobOrderKey] | Literal[False] | None = None
        """The enabled JobOrder plugins when all have a key, False when one has not
        (None: not looked at yet)."""
        self.now = now
        self.options = options or {}
        """plugin name -> Volcano enable switches (enableJobOrder, ...); absent = on."""
        self._job_of: dict[str, Job] | None = None
        self._task_of: dict[str, Task] | None = None
        rows = state.live_rows()
        sched = rows[state.schedulable[rows]]
        self.rows = sched
        self.total: IntArray = state.alloc[sched].sum(axis=0)
        free = np.zeros_like(state.alloc[: state.size])
        free[sched] = state.alloc[sched] - state.used[sched]
        self.free: IntArray = free
        """Free capacity per row after bound and assumed pods; actions subtract
        what they admit, so later decisions in the cycle see earlier ones."""
        self.reserved_now: dict[int, Reservation] = {}
        """Rows reserved during this cycle (a gang past its sla-waiting-time that did
        not fit): later gangs of the same cycle keep off them, as they keep off the
        reservations of the last cycle (``state.reservations``)."""

    @property
    def job_of(self) -> dict[str, Job]:
        """pod uid -> its job. Made on first use: only victim searches (preempt,
        reclaim, the preempt verb) and a few lifts ask, and at 48,000 pods making it
        for every cycle was a sixth of the session's build."""
        if self._job_of is None:
            self._index()
        assert self._job_of is not None
        return self._job_of

    @property
    def task_of(self) -> dict[str, Task]:
        """pod uid -> its task (made with ``job_of``)."""
        if self._task_of is None:
            self._index()
        assert self._task_of is not None
        return self._task_of

    def _index(self) -> None:
        job_of: dict[str, Job] = {}
        task_of: dict[str, Task] = {}
        for job in self.jobs.values():
            for t in job.tasks:
                job_of[t.pod.uid] = job
                task_of[t.pod.uid] = t
        self._job_of, self._task_of = job_of, task_of

    # -- tier evaluation -----------------------------------------------------------
    def _plugins(self, kind: type, option: str) -> list[list[object]]:
        """Per tier, the plugins that implement ``kind`` and have ``option`` on.

        Cached: a Protocol isinstance check is slow, and orderings ask this
        O(jobs x log jobs) times per cycle."""
        key = (kind, option)
        hit = self._hook_cache.get(key)
        if hit is not None:
            return hit
        out = []
        for tier in self.tiers:
            chosen = [
                p
                for p in tier
                if implements(p, kind)
                and self.options.get(getattr(p, "name", ""), {}).get(option, True)
            ]
            out.append(chosen)
        self._hook_cache[key] = out
        return out

    def open(self) -> None:
        for tier in self._plugins(SessionOpener, "enabled"):
            for p in tier:
                p.open_session(self)  # type: ignore[attr-defined]

    def job_compare(self, a: Job, b: Job) -> int:
        for tier in self._plugins(JobOrder, "enableJobOrder"):
            for p in tier:
                r = p.job_order(self, a, b)  # type: ignore[attr-defined]
                if r:
                    return int(r)
        if a.created != b.created:
            return -1 if a.created < b.created else 1
        return -1 if a.key < b.key else (1 if a.key > b.key else 0)

    def queue_compare(self, a: QueueState, b: QueueState) -> int:
        for tier in self._plugins(QueueOrder, "enableQueueOrder"):
            for p in tier:
                r = p.queue_order(self, a, b)  # type: ignore[attr-defined]
                if r:
                    return int(r)
        return -1 if a.name < b.name else (1 if a.name > b.name else 0)

    def ordered_jobs(self, jobs: Sequence[Job]) -> list[Job]:
        """Jobs in queue order, then job order within the queue (round-robin free)."""

        def by_queue(x: str, y: str) -> int:
            return self.queue_compare(self.queues[x], self.queues[y])

        qorder = sorted(
            {j.queue for j in jobs if j.queue in self.queues}, key=functools.cmp_to_key(by_queue)
        )
        rank = {q: i for i, q in enumerate(qorder)}
        return sorted(jobs, key=lambda j: (rank.get(j.queue, len(rank)), self._job_key(j)))

    def _job_key(self, job: Job) -> object:
        """A sort key with job_compare's order: the plugins' keys, tier by tier, then
        creation time and name; a comparison wrapper when a plugin has no key."""
        if self._order_keys is None:
            chain = [p for tier in self._plugins(JobOrder, "enableJobOrder") for p in tier]
            keyed = [cast(JobOrderKey, p) for p in chain if implements(p, JobOrderKey)]
            self._order_keys = keyed if len(keyed) == len(chain) else False
        if self._order_keys is False:
            return functools.cmp_to_key(self.job_compare)(job)
        return (*(p.job_order_key(self, job) for p in self._order_keys), job.created, job.key)

    def enqueueable(self, job: Job, request: IntArray) -> Status:
        permitted = False
        voters = self._plugins(JobEnqueueable, "enableJobEnqueued")
        permits = self._plugins(EnqueuePermit, "enableJobEnqueued")
        for tier, permitting in zip(voters, permits, strict=True):
            for p in tier:
                st: Status = p.job_enqueueable(self, job, request)  # type: ignore[attr-defined]
                if not st.ok and not (permitted and st.code != Code.UNRESOLVABLE):
                    return st
            if any(p.enqueue_permit(self, job) for p in permitting):  # type: ignore[attr-defined]
                permitted = True
        return SUCCESS

    def job_valid(self, job: Job) -> Status:
        for tier in self._plugins(JobValid, "enabled"):
            for p in tier:
                st: Status = p.job_valid(self, job)  # type: ignore[attr-defined]
                if not st.ok:
                    return st
        return SUCCESS

    def allocatable(self, job: Job, request: IntArray) -> bool:
        """Queue limits for members of an admitted job about to be placed (switched with
        enqueue's). What admitted gangs merely hold (``QueueState.held``) does not count:
        the question is what the queues will have placed."""
        q = self.queues.get(job.queue)
        if q is None:
            return True
        saved = {n: o.inqueue for n, o in self.queues.items()}
        for o in self.queues.values():
            if o.held.shape == o.inqueue.shape:
                o.inqueue = o.inqueue - o.held
        try:
            for tier in self._plugins(Allocatable, "enableJobEnqueued"):
                for p in tier:
                    if not p.allocatable(self, q, request):  # type: ignore[attr-defined]
                        return False
            return True
        finally:
            for n, inqueue in saved.items():
                self.queues[n].inqueue = inqueue

    def victims(self, job: Job, candidates: list[Task], reclaim: bool) -> list[Task]:
        """Candidates the first voting tier allows; none when no plugin votes."""
        kind: type = Reclaimable if reclaim else Preemptable
        option = "enableReclaimable" if reclaim else "enablePreemptable"
        for tier in self._plugins(kind, option):
            if not tier:
                continue
            allowed = {t.pod.uid for t in candidates}
            for p in tier:
                if not allowed:
                    return []  # vetoed already: the rest of the tier cannot add any
                fn = p.reclaimable if reclaim else p.preemptable  # type: ignore[attr-defined]
                allowed &= {t.pod.uid for t in fn(self, job, candidates)}
            return [t for t in candidates if t.pod.uid in allowed]
        return []

    def evicting(self, task: Task) -> None:
        """``task`` was chosen as a victim: for the rest of this cycle it is terminating
        (not a candidate again, its room counted as coming free, its job one pod short).
        The Task and pod are replaced, not changed: both may be shared with the cache
        and with later sessions, and the eviction may yet be refused."""
        gone = Task(pod=replace(task.pod, deleting=True), request=task.request, node=task.node)
        self.task_of[task.pod.uid] = gone
        job = self.job_of.get(task.pod.uid)
        if job is not None:
            job.tasks = [gone if t is task else t for t in job.tasks]
            job.tasks_changed()

    def allocate(self, job: Job, request: IntArray) -> None:
        """Record a decision to place ``request`` for ``job`` (admission or an
        elastic member): the job and its queue hold it for the rest of the cycle."""
        job.allocated = job.allocated + request
        q = self.queues.get(job.queue)
        if q is not None:
            q.inqueue = q.inqueue + request
        for tier in self._plugins(AllocateHandler, "enabled"):
            for p in tier:
                p.on_allocate(self, job, request)  # type: ignore[attr-defined]

    def hold(self, job: Job, request: IntArray) -> None:
        """Admitted, gates still on: the gang holds ``request`` of its queue (Inqueue)."""
        job.held = job.held + request if job.held.shape == request.shape else request.copy()
        q = self.queues.get(job.queue)
        if q is not None:
            q.inqueue = q.inqueue + request
            q.held = q.held + request if q.held.shape == request.shape else request.copy()
        for tier in self._plugins(AllocateHandler, "enabled"):
            for p in tier:
                p.on_allocate(self, job, np.zeros_like(request))  # type: ignore[attr-defined]

    def release_hold(self, job: Job) -> None:
        """The gang's gates are being decided: what it held of its queue is taken back
        (``allocate`` then records what it is really given)."""
        q = self.queues.get(job.queue)
        if q is not None and job.held.shape == q.inqueue.shape:
            q.inqueue = q.inqueue - job.held
            if q.held.shape == job.held.shape:
                q.held = q.held - job.held
        job.held = np.zeros_like(job.held)

    def overused(self, queue: QueueState) -> bool:
        for tier in self._plugins(Overused, "enabledOverused"):
            for p in tier:
                if p.overused(self, queue):  # type: ignore[attr-defined]
                    return True
        return False

    # -- helpers -------------------------------------------------------------
    def describe(self, vec: IntArray) -> str:
        from pyextender.api.resources import format_amount

        names = self.state.resources
        parts = [f"{names[i]} {format_amount(names[i], int(v))}" for i, v in enumerate(vec) if v]
        return ", ".join(parts) or "nothing"


def past_sla(ssn: Session, job: Job) -> bool:
    """Has the job waited longer than its sla-waiting-time (set by the sla plugin)?"""
    return job.sla_wait is not None and ssn.now - job.created >= job.sla_wait


def unschedulable(plugin: str, reason: str, structural: bool = False) -> Status:
    """A refusal. ``structural``: eviction cannot help (missing tasks, closed
    queue); otherwise it is a resource limit that preemption may resolve."""
    return Status(Code.UNRESOLVABLE if structural else Code.UNSCHEDULABLE, (reason,), plugin)
