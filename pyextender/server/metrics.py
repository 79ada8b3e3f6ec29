"""Prometheus metrics of the sidecar, recorded in one place.

Names start with ``pyextender_`` and carry their unit.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

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
        self.plugin_seconds = Histogram(
            "pyextender_plugin_duration_seconds",
            "Time spent in one plugin call, by plugin and extension point.",
            ["plugin", "point"],
            buckets=_BUCKETS,
            registry=r,
        )
        self.binds = Counter(
            "pyextender_binds_total",
            "Bind outcomes: bound, already_bound, conflict, no_fit, error.",
            ["result"],
            registry=r,
        )
        self.config_errors = Counter(
            "pyextender_config_reload_errors_total",
            "Scheduler config edits rejected (the last good config stays).",
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

    def observe_plugin(self, plugin: str, point: str, seconds: float) -> None:
        self.plugin_seconds.labels(plugin, point).observe(seconds)
