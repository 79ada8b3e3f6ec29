"""Prometheus metrics of the webhook, recorded in one place (the HTTP app).

Names start with ``pyextender_webhook_`` and carry their unit.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

# seconds; pod mutation is sub-millisecond, validation may read queues from the API server
_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)


class Metrics:
    """All collectors, on their own registry (tests can create several)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.admissions = Counter(
            "pyextender_webhook_admissions_total",
            "AdmissionReviews answered, by kind, operation and result "
            "(allowed, patched, denied, skipped).",
            ["kind", "operation", "result"],
            registry=r,
        )
        self.seconds = Histogram(
            "pyextender_webhook_admission_duration_seconds",
            "Time to answer one AdmissionReview, by kind and operation.",
            ["kind", "operation"],
            buckets=_BUCKETS,
            registry=r,
        )
        self.shadow = Counter(
            "pyextender_webhook_shadow_changes_total",
            "Pod changes shadow mode would have made (scheduler_name, scheduling_gate).",
            ["change"],
            registry=r,
        )
        self.bad_requests = Counter(
            "pyextender_webhook_bad_requests_total",
            "Requests refused before admission (not an AdmissionReview), by reason.",
            ["reason"],
            registry=r,
        )
