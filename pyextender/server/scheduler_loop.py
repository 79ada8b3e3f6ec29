"""The actions loop: on every cache change (at most every 100 ms) and at least
once a second, build a session, run the configured actions and apply their
decisions. The sidecar runs it only while holding the Lease (see app.py);
other replicas only answer extender verbs.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from prometheus_client import Gauge

from pyextender.actions.cycle import run_cycle
from pyextender.actions.decisions import Decisions
from pyextender.api.process import name_os_thread
from pyextender.cache.cluster import ClusterCache
from pyextender.framework.action_args import require_fit
from pyextender.framework.config import SchedulerConfig
from pyextender.framework.session import Session
from pyextender.framework.snapshot import TaskMemo, build_session
from pyextender.plugins.registry import REGISTRY
from pyextender.server.actuator import Actuator, Allowed, Applied
from pyextender.server.courtesy import Courtesy
from pyextender.server.metrics import Metrics

log = logging.getLogger(__name__)

Overrides = tuple[dict[str, str], set[str], set[str]]
"""Phases we wrote, pods we evicted, gates we lifted: not yet shown by the watch."""

DECIDE_NICE = 19
"""How much nicer than the process the decide thread runs (Linux niceness, capped
at 19). On a shared core the kernel's fair scheduler gives a thread that is runnable
beside a verb slices of milliseconds (a verb leaves the GIL in its nogil kernels and
socket calls, and the cycle thread runs then); niced, the cycle gets the CPU while
the verbs wait on the network, and little while one runs. In a container, niceness
only ranks the sidecar's own threads. bench/verbs.py churn p99 at 5,000 nodes,
filter / prioritize: ~5 ms at niceness 0; 2.5-2.6 / 3.5-4.2 ms at 10; 2.4-2.6 /
2.0-2.2 ms at 19 (same session, two runs each). The idle class (SCHED_IDLE) did
little better (2.3 / 1.8-1.9) but can starve a cycle on a saturated core, and an
unprivileged process cannot leave it again; at 19 a cycle keeps a share of 15/1024
against a busy thread of niceness 0."""


def _lower_priority() -> None:
    """Runs on the decide thread as it starts: Linux nices threads one by one."""
    name_os_thread()
    try:
        tid = threading.get_native_id()
        os.setpriority(
            os.PRIO_PROCESS, tid, min(os.getpriority(os.PRIO_PROCESS, tid) + DECIDE_NICE, 19)
        )
    except (AttributeError, OSError) as exc:  # not Linux, or not permitted: run as is
        log.info("decide thread keeps its priority: %s", exc)


DECIDE_THREAD = ThreadPoolExecutor(1, thread_name_prefix="decide", initializer=_lower_priority)
"""Where cycles and the preempt verb's sessions are built and run, one at a time
(they share the plugin instances)."""

MIN_INTERVAL_S = 0.1
"""Shortest time between two cycles (seconds): events are batched this long."""
DECIDE_SHARE = 0.1
"""Most of one core the decide thread may take while events keep coming: after a
cycle whose session and actions cost C seconds of CPU, the next waits at least
C * (1 - share) / share (capped at HEARTBEAT_S). A cycle costs O(all pods and jobs),
not O(what changed): with hundreds of live jobs a 10 Hz cadence took 20-30 % of a
core on a 2-core machine, CPU the pods being scheduled needed. Small clusters keep
the 0.1 s cadence (their cycles cost ~1 ms)."""
WHOLE_GANG_WAIT_S = 0.01
"""After a PodGroup became whole (ClusterCache.gang_whole), the loop waits this long
(seconds) for others completing at the same moment, instead of the rest of
MIN_INTERVAL_S: admitting a complete gang is what a cycle is for, and the 0.1 s it
waited was most of a lone gang's time to start (bench/e2e.py --pods 8)."""
WAKE_SHARE = 0.02
"""Most of one core that cycles started early for whole gangs may take: the early
cycle also waits C * (1 - share) / share after the last one began (C its CPU), so it
comes early only where cycles are cheap or rare. With gangs streaming in, cycles cost
more and the regular 0.1 s batching is kept: waking for every whole gang there
doubled the decide thread's CPU (bench/e2e.py --shapes single, 0.8 -> 1.7 ms per pod)
and started none of them sooner."""
HEARTBEAT_S = 1.0
"""Longest time between two cycles: time alone changes SLA waits and reservations."""
REMEMBER_S = 30.0
"""How long our own writes override what the watch has not shown yet."""
HOLD_END_SLACK_S = 0.01
"""The cycle after a newcomer hold comes this long (seconds) after the hold ends
(Decisions.held_until), so that the members it held are old enough in that cycle."""


def _release_off_loop(garbage: list[object]) -> None:
    """Drops the last references to a cycle's snapshot and session on the decide
    thread: freeing them (dicts and arrays over every pod and node) held the loop
    ~0.5 ms per cycle at 5,000 nodes, in the verbs' way."""
    try:
        DECIDE_THREAD.submit(garbage.clear)
    except RuntimeError:  # the pool is shut down (interpreter exit)
        garbage.clear()


class SchedulerLoop:
    def __init__(
        self,
        cache: ClusterCache,
        config: Callable[[], SchedulerConfig],
        actuator: Actuator,
        metrics: Metrics,
        fence: Callable[[], Allowed] | None = None,
        courtesy: Courtesy | None = None,
    ) -> None:
        self.cache = cache
        self.courtesy = courtesy or Courtesy()
        """Shared with the verbs: the cycle's session build gives way to them."""
        self.fence = fence
        """Returns, at the start of a cycle, a check that the leadership term the
        cycle is decided in still holds (None: no leader election, always true)."""
        self.config = config
        self.actuator = actuator
        self.metrics = metrics
        self._built_for: SchedulerConfig | None = None
        self._tiers: list[list[object]] = []
        self._options: dict[str, dict[str, bool]] = {}
        self.admitted: dict[str, float] = {}
        """PodGroup uid -> when we moved it to Inqueue (by uid: a PodGroup deleted and
        created again under the same name starts afresh)."""
        self.evicted: dict[str, float] = {}
        """pod uid -> when we evicted it."""
        self.lifted: dict[str, float] = {}
        """pod uid -> when we asked for its gate to come off."""
        self.pended: dict[str, float] = {}
        """PodGroup uid -> when we wrote its first phase, Pending."""
        self._writes: set[asyncio.Future[Applied]] = set()
        self.ready_seen: set[str] = set()
        self._task_memo = TaskMemo()
        """Unchanged pods' Tasks from one session to the next; used on the decide
        thread only (cycles and the preempt verb's sessions, one at a time)."""
        self._gauges: dict[tuple[Gauge, tuple[str, ...]], float] = {}
        """Last value set per labelled queue gauge (_gauge)."""
        self._whole = False
        """Set by wake(): some PodGroup became whole since the loop last looked."""
        self._waiter: asyncio.Future[None] | None = None
        """What _pause waits on while it waits (wake() ends it)."""
        cache.gang_whole.append(self.wake)
        self.held_until = math.inf
        """When the newcomer hold of the last cycle ends (Decisions.held_until): the
        next cycle comes then if no change or heartbeat brings it sooner."""
        self.cycles = 0
        self.decide_cpu_s = 0.0
        """CPU seconds the last cycle's session and actions took (the decide thread's)."""

    def next_gap(self) -> float:
        """Seconds to wait before the next cycle (see DECIDE_SHARE)."""
        return min(HEARTBEAT_S, max(MIN_INTERVAL_S, self._spacing(DECIDE_SHARE)))

    def _spacing(self, share: float) -> float:
        """The least time between cycle starts (seconds) that keeps cycles costing what
        the last one did (decide_cpu_s) within ``share`` of a core."""
        return self.decide_cpu_s * (1.0 - share) / share

    def wake(self) -> None:
        """A PodGroup became whole: cycle soon (ClusterCache.gang_whole; loop thread)."""
        self._whole = True
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def _pause(self, last_run: float) -> None:
        """next_gap(), or less once a PodGroup became whole meanwhile (or during the last
        cycle): then WHOLE_GANG_WAIT_S, and no sooner than WAKE_SHARE allows after the last
        cycle began (``last_run``, time.time()); never longer than next_gap(), nor past
        the end of the last cycle's newcomer hold (but MIN_INTERVAL_S after it began)."""
        gap = self.next_gap()
        start = time.time()
        if self.held_until < math.inf:
            due = max(self.held_until + HOLD_END_SLACK_S, last_run + MIN_INTERVAL_S)
            # a hold over already and not cycled for (the cache was not synced) is
            # retried every MIN_INTERVAL_S, not in a busy loop
            gap = min(gap, due - start if due > start else MIN_INTERVAL_S)
        if not self._whole:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await asyncio.wait_for(self._waiter, gap)
            except TimeoutError:
                return
            finally:
                self._waiter = None
        self._whole = False
        now = time.time()
        rest = max(WHOLE_GANG_WAIT_S, last_run + self._spacing(WAKE_SHARE) - now)
        await asyncio.sleep(max(0.0, min(rest, start + gap - now)))

    def _plugins(self) -> tuple[list[list[object]], dict[str, dict[str, bool]]]:
        cfg = self.config()
        if cfg is not self._built_for:
            self._tiers = [
                [REGISTRY[p.name].factory(p.args) for p in tier.plugins] for tier in cfg.tiers
            ]
            self._options = {p.name: dict(p.options) for tier in cfg.tiers for p in tier.plugins}
            self._built_for = cfg
        return self._tiers, self._options

    def _overrides(self, now: float) -> Overrides:
        """Our own writes the watch may not show yet: PodGroups we admitted (phase),
        pods we evicted and gates we lifted. Read on the event loop, which owns
        these dicts."""
        phases = {
            key: "Inqueue"
            for key, g in self.cache.groups.items()
            if now - self.admitted.get(g.uid, -REMEMBER_S) < REMEMBER_S
        }
        evicting = {u for u, t in self.evicted.items() if now - t < REMEMBER_S}
        lifting = {u for u, t in self.lifted.items() if now - t < REMEMBER_S}
        return phases, evicting, lifting

    def _build(
        self,
        cache: ClusterCache,
        now: float,
        phases: dict[str, str],
        evicting: set[str],
        lifting: set[str] | None = None,
        memo: TaskMemo | None = None,
        pause: Callable[[], None] | None = None,
    ) -> Session:
        tiers, options = self._plugins()
        return build_session(cache, tiers, now, options, phases, evicting, lifting, memo, pause)

    def session(self, now: float | None = None) -> Session:
        """A session over the live cache, built on the calling thread (tests, tools)."""
        now = time.time() if now is None else now
        return self._build(self.cache, now, *self._overrides(now))

    async def session_async(self) -> Session:
        """A session for the preempt verb: a snapshot taken on the loop, the session
        built on the decide thread (after any cycle in progress, whose plugins it shares)."""
        now = time.time()
        snap = self.cache.snapshot()
        overrides = self._overrides(now)
        loop = asyncio.get_running_loop()
        phases, evicting, lifting = overrides
        return await loop.run_in_executor(
            DECIDE_THREAD, self._build, snap, now, phases, evicting, lifting, self._task_memo
        )

    def decide(
        self,
        now: float,
        cache: ClusterCache | None = None,
        overrides: Overrides | None = None,
    ) -> tuple[Session, Decisions]:
        """Build a session and run the actions. Pure over ``cache`` (default: the
        live one), so it may run on the decide thread over a snapshot."""
        cache = self.cache if cache is None else cache
        phases, evicting, lifting = overrides if overrides is not None else self._overrides(now)
        cpu = time.thread_time()
        self.courtesy.start_cycle()
        ssn = self._build(
            cache, now, phases, evicting, lifting, self._task_memo, self.courtesy.pause
        )
        sla = "sla" in self._options
        cfg = self.config()
        start = time.perf_counter()
        decisions = run_cycle(ssn, cfg.actions, sla, require_fit(cfg.configurations))
        self.metrics.action_seconds.labels("cycle").observe(time.perf_counter() - start)
        self.decide_cpu_s = time.thread_time() - cpu
        return ssn, decisions

    def _adopt(self, ssn: Session, decisions: Decisions, snap: ClusterCache) -> None:
        """Back on the loop: what the cycle leaves in the live state for the verbs."""
        estimates = {
            k: j.running_estimate for k, j in ssn.jobs.items() if j.running_estimate is not None
        }
        live = self.cache.state
        live.reservations.replace(decisions.reservations, estimates)
        # gang plans made at admission (supernode), for PodGroups that still exist
        live.gang_plans = {k: v for k, v in snap.state.gang_plans.items() if k in self.cache.groups}
        live.generation += 1  # what the filters read changed: verdicts memoised before are stale

    async def run(self) -> None:
        """Cycles until cancelled (the Lease is lost, or shutdown); then stops the
        writes still in flight, which their fence would drop anyway."""
        try:
            await self._run()
        finally:
            for task in list(self._writes):
                task.cancel()
            self.actuator.cancel_background()
            # a later term starts from what the API server says, not from our memory
            self.admitted.clear()
            self.lifted.clear()
            self.evicted.clear()
            self.pended.clear()

    def something_waits(self) -> bool:
        """Could a cycle decide anything now? Its decisions are all about PodGroups:
        admitting one (phase Pending or none yet), lifting or releasing its members,
        evicting, reserving or reporting for a gang not placed yet. So: a PodGroup
        not admitted, or an unbound pod that belongs to one or is held by a gate.
        Unbound lone pods are kube-scheduler's (with our verbs); bound pods only
        change what the queue gauges show, which the heartbeat keeps current."""
        cache = self.cache
        if any(g.phase in ("", "Pending") for g in cache.groups.values()):
            return True
        return any(p.gates or p.group_name for p in cache.pending.values())

    def should_cycle(self, now: float, version: int, last_run: float, idle: bool) -> bool:
        """On a change (at most every next_gap()), at least every HEARTBEAT_S, and once
        the last cycle's newcomer hold ends (held_until), change or not.
        ``idle``: the last cycle found nothing waiting (something_waits). Then
        changes alone do not start cycles until something waits again: a cluster
        of lone pods binding used to run a whole session every 0.1 s for nothing
        (a fifth of the sidecar's CPU in bench/e2e's plain phase at 1,200 pods). The first cycle
        after the last wait ends still runs, so what became ready is seen at once."""
        if now - last_run >= HEARTBEAT_S or now >= self.held_until:
            return True
        if self.cache.version == version:
            return False
        return not idle or self.something_waits()

    async def _run(self) -> None:
        last_version = -1
        last_run = 0.0
        idle = False
        while True:
            await self._pause(last_run)
            now = time.time()
            if not self.cache.synced:
                continue
            if not self.should_cycle(now, last_version, last_run, idle):
                continue
            last_version, last_run = self.cache.version, now
            idle = not self.something_waits()
            try:
                await self.cycle(now)
            except Exception:
                log.exception("scheduling cycle failed; retrying next cycle")

    async def cycle(self, now: float) -> Decisions:
        allowed = self.fence() if self.fence is not None else None
        t0 = time.perf_counter()
        # The decision runs on its own thread over a snapshot, so filter and
        # prioritize (served on this loop) never wait for a whole cycle.
        snap = self.cache.snapshot()
        overrides = self._overrides(now)
        loop = asyncio.get_running_loop()
        ssn, decisions = await loop.run_in_executor(
            DECIDE_THREAD, self.decide, now, snap, overrides
        )
        self._adopt(ssn, decisions, snap)
        self.held_until = decisions.held_until
        t1 = time.perf_counter()
        self.cycles += 1
        # our own writes in flight: never repeated by the cycles that overlap them
        decisions.lift = [
            t for t in decisions.lift if now - self.lifted.get(t.pod.uid, -REMEMBER_S) >= REMEMBER_S
        ]
        for job in decisions.admit:
            if job.group is not None:
                self.admitted[job.group.uid] = now
            self.metrics.job_wait_seconds.labels(job.queue).observe(max(now - job.created, 0.0))
        for member in decisions.lift:
            self.lifted[member.pod.uid] = now
        for ev in decisions.evictions:
            self.evicted[ev.task.pod.uid] = now
        # a first phase is written once; the watch then shows it
        decisions.pending = [
            j for j in decisions.pending if j.group is not None and j.group.uid not in self.pended
        ]
        for job in decisions.pending:
            if job.group is not None:
                self.pended[job.group.uid] = now
        for memory in (self.admitted, self.lifted, self.evicted, self.pended):
            for key in [k for k, t in memory.items() if now - t >= REMEMBER_S]:
                del memory[key]
        self._observe(ssn, now)
        self.actuator.forget(set(ssn.jobs))
        # Writes go on in the background: the next cycle need not wait for them.
        # What they record above means "in flight or done"; what fails is
        # forgotten when they finish, so the next cycle decides it again at once.
        if allowed is None:
            writes = asyncio.ensure_future(self.actuator.apply(decisions))
        else:
            writes = asyncio.ensure_future(self.actuator.apply(decisions, allowed))
        self._writes.add(writes)
        writes.add_done_callback(self._written)
        t2 = time.perf_counter()
        if decisions.admit or decisions.lift or decisions.evictions:
            log.info(
                "cycle %d: %d jobs, admitted %d, lifted %d gates, evicted %d, %d waiting; "
                "decided in %.0f ms, handed over in %.0f ms",
                self.cycles,
                len(ssn.jobs),
                len(decisions.admit),
                len(decisions.lift),
                len(decisions.evictions),
                len(decisions.unschedulable),
                (t1 - t0) * 1000,
                (t2 - t1) * 1000,
            )
        garbage: list[object] = [ssn, snap]
        del ssn, snap  # the list holds the last references: freed where it is cleared
        _release_off_loop(garbage)
        return decisions

    def _written(self, task: asyncio.Future[Applied]) -> None:
        self._writes.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            log.error("applying a cycle's decisions failed: %s", exc, exc_info=exc)
            return
        applied = task.result()
        for uid in applied.failed_admissions:
            self.admitted.pop(uid, None)
        for uid in applied.failed_lifts:
            self.lifted.pop(uid, None)
        for uid in applied.failed_evictions:
            self.evicted.pop(uid, None)
        for uid in applied.failed_pending:
            self.pended.pop(uid, None)

    def _gauge(self, gauge: Gauge, labels: tuple[str, ...], value: float) -> None:
        """Sets a labelled gauge when its value moved: ``labels()`` costs microseconds
        each, and a cycle's queue gauges (queues x resources) mostly stay put."""
        key = (gauge, labels)
        if self._gauges.get(key) != value:
            gauge.labels(*labels).set(value)
            self._gauges[key] = value

    def _observe(self, ssn: Session, now: float) -> None:
        names = ssn.state.resources
        m = self.metrics
        for q in ssn.queues.values():
            for i, name in enumerate(names):
                self._gauge(m.queue_allocated, (q.name, name), float(q.allocated[i]))
                self._gauge(m.queue_deserved, (q.name, name), float(q.deserved[i]))
            self._gauge(m.queue_share, (q.name,), q.share if q.share != float("inf") else -1.0)
            self._gauge(m.queue_overused, (q.name,), 1.0 if ssn.overused(q) else 0.0)
        for job in ssn.jobs.values():
            if job.group is None or job.key in self.ready_seen or not job.ready:
                continue
            self.ready_seen.add(job.key)
            self.metrics.job_scheduling_seconds.labels(job.queue).observe(
                max(now - job.created, 0.0)
            )
        live = set(ssn.jobs)
        self.ready_seen &= live
