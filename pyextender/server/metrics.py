"""Prometheus metrics of the sidecar, recorded in one place.

Names start with ``pyextender_`` and carry their unit.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from pyextender.api.task_classes import MAX_CLASSES

# seconds; extender verbs are expected well under 2 ms, binds take longer
_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5)


class Metrics:
    """All collectors, on their own registry (tests can create several)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.verb_seconds = Histogram(
            "pyextender_verb_duration_seconds",
            "Time to answer one extender verb, by verb.",
            ["verb"],
            buckets=_BUCKETS,
            registry=r,
        )
        self.requests = Counter(
            "pyextender_verb_requests_total",
            "Extender requests by verb and HTTP status code.",
            ["verb", "code"],
            registry=r,
        )
        self.errors = Counter(
            "pyextender_verb_errors_total",
            "Extender requests answered with an error, by verb and reason.",
            ["verb", "reason"],
            registry=r,
        )
        self.cycle_streams = Counter(
            "pyextender_grpc_cycle_streams_total",
            "Cycle streams opened by the shim, by transport: grpc (the Cycle method) or "
            "socket (a connection to the cycle socket). It keeps one open: more mean "
            "reconnects.",
            ["transport"],
            registry=r,
        )
        self.cycle_messages = Counter(
            "pyextender_grpc_cycle_messages_total",
            "Requests that came as Cycle stream messages, by call (filter, reserve); they "
            "are also counted under their verb (grpc_filter, grpc_reserve).",
            ["call"],
            registry=r,
        )
        self.plugin_seconds = Histogram(
            "pyextender_plugin_duration_seconds",
            "Time spent in one plugin call, by plugin and extension point.",
            ["plugin", "point"],
            buckets=_BUCKETS,
            registry=r,
        )
        self._plugin_children: dict[tuple[str, str], Any] = {}
        self.binds = Counter(
            "pyextender_binds_total",
            "Bind outcomes: bound, already_bound, conflict, no_fit, error.",
            ["result"],
            registry=r,
        )
        self.picks = Counter(
            "pyextender_picks_total",
            "Filter's pick of a node (--filter-picks-node): picked; or none, because of "
            "soft_preferences or prefer_no_schedule taints (kube-scheduler scores then), or "
            "not_reserved (framework mode: kube-scheduler turned the pod's last pick down).",
            ["result"],
            registry=r,
        )
        self.reserve_checks = Counter(
            "pyextender_reserve_checks_total",
            "Framework Reserve of a node Filter did not just pass at the same cache state: "
            "filtered (the node checked again, counting every other reservation), or "
            "unchanged (Filter's verdict stands: nothing it read has changed since).",
            ["check"],
            registry=r,
        )
        self.admissions = Counter(
            "pyextender_gang_admissions_total",
            "PodGroups admitted (Pending -> Inqueue), by queue.",
            ["queue"],
            registry=r,
        )
        self.evictions = Counter(
            "pyextender_evictions_total",
            "Evictions by action (preempt, reclaim) and result (evicted, blocked_by_pdb, error).",
            ["action", "result"],
            registry=r,
        )
        self.action_seconds = Histogram(
            "pyextender_action_duration_seconds",
            "Time to decide one action over the whole session, by action.",
            ["action"],
            buckets=_BUCKETS,
            registry=r,
        )
        self.queue_allocated = Gauge(
            "pyextender_queue_allocated",
            "Resources held by bound pods of the queue (cpu in milli-cores, memory in bytes).",
            ["queue", "resource"],
            registry=r,
        )
        self.queue_deserved = Gauge(
            "pyextender_queue_deserved",
            "Deserved share of the queue (same units as allocated).",
            ["queue", "resource"],
            registry=r,
        )
        self.queue_share = Gauge(
            "pyextender_queue_share_ratio",
            "max over resources of allocated / deserved.",
            ["queue"],
            registry=r,
        )
        self.queue_overused = Gauge(
            "pyextender_queue_overused",
            "1 when the queue holds at least its deserved share.",
            ["queue"],
            registry=r,
        )
        self.job_wait_seconds = Histogram(
            "pyextender_job_wait_seconds",
            "From PodGroup creation to admission (enqueue), per queue.",
            ["queue"],
            buckets=(0.1, 0.5, 1, 2, 5, 10, 30, 60, 300, 1800, 3600),
            registry=r,
        )
        self.job_scheduling_seconds = Histogram(
            "pyextender_job_scheduling_seconds",
            "From PodGroup creation to minMember members bound, per queue.",
            ["queue"],
            buckets=(0.1, 0.5, 1, 2, 5, 10, 30, 60, 300, 1800, 3600),
            registry=r,
        )
        self.barrier_timeouts = Counter(
            "pyextender_gang_barrier_timeouts_total",
            "Binds released because the gang did not reach minMember in time.",
            registry=r,
        )
        self.config_errors = Counter(
            "pyextender_config_reload_errors_total",
            "Scheduler config edits rejected (the last good config stays).",
            registry=r,
        )
        self.config_ignored = Counter(
            "pyextender_config_ignored_total",
            "Names of a loaded scheduler config that do nothing here (Volcano's plugins, "
            "arguments, switches and actions we do not run), by kind and name; counted "
            "at every (re)load.",
            ["kind", "name"],
            registry=r,
        )
        self.cache_nodes = Gauge(
            "pyextender_cache_nodes", "Nodes in the sidecar cache.", registry=r
        )
        self.cache_pods = Gauge(
            "pyextender_cache_pods",
            "Pods holding resources in the cache (bound or assumed).",
            registry=r,
        )
        self.cache_pending_pods = Gauge(
            "pyextender_cache_pending_pods",
            "Pending pods of our scheduler known to the cache.",
            registry=r,
        )
        self.cache_gpus = Gauge(
            "pyextender_cache_gpus",
            "GPUs of live nodes per configured GPU resource (--gpu-resource): "
            "state allocatable or allocated (held by bound and assumed pods).",
            ["resource", "state"],
            registry=r,
        )

        self.task_classes = Gauge(
            "pyextender_task_classes",
            "Task classes of the workload model gpu-share scores fragmentation with: "
            "distinct classes seen in the pods counted (state seen) and classes in the "
            f"model in use (state kept: 95 % of pods, CPU-only as one, at most {MAX_CLASSES}).",
            ["state"],
            registry=r,
        )

        self.leader = Gauge(
            "pyextender_leader",
            "1 while this replica holds the scheduler Lease and runs the actions.",
            registry=r,
        )
        self.writes = Counter(
            "pyextender_api_writes_total",
            "API writes of the actions (admit, lift, release, condition, evict) by result: "
            "ok, retried (a transient error, tried again), failed (gave up; the next cycle "
            "decides again), fenced (dropped: the leadership term it was decided in ended), "
            "with_admission (a release that rode on its gang's admission write: no request "
            "of its own).",
            ["op", "result"],
            registry=r,
        )
        self.barrier_waiting = Gauge(
            "pyextender_gang_barrier_waiting",
            "Gang members held in the bind verb until their gang reaches minMember.",
            registry=r,
        )
        self.gang_bind_failures = Counter(
            "pyextender_gang_bind_failures_total",
            "Members of released gangs whose Binding still failed after retries.",
            registry=r,
        )
        self.background_failures = Counter(
            "pyextender_background_task_failures_total",
            "Background loops that died (housekeeping, actions, config watcher ...); "
            "/healthz fails after the first.",
            ["task"],
            registry=r,
        )

    def count_ignored(self, ignored: Iterable[tuple[str, str]]) -> None:
        """Count the (kind, name) entries a freshly loaded config ignores."""
        for kind, name in ignored:
            self.config_ignored.labels(kind, name).inc()

    def observe_plugin(self, plugin: str, point: str, seconds: float) -> None:
        # every filter/prioritize call observes each plugin: the labelled child is
        # kept, as labels() costs a lock and a tuple lookup per call (~3 µs each)
        child = self._plugin_children.get((plugin, point))
        if child is None:
            child = self._plugin_children[plugin, point] = self.plugin_seconds.labels(plugin, point)
        child.observe(seconds)
