"""What every controller shares: the stores, the API, events, metrics, and the worker loop."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from controllers.events import Recorder
from controllers.kube import Kube, not_found
from controllers.store import Store
from controllers.workqueue import WorkQueue
from pyextender.api.client import conflict

log = logging.getLogger(__name__)

T = TypeVar("T")


class Metrics:
    """Prometheus metrics of the controllers process (its own registry)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.reconciles = Counter(
            "pyextender_controllers_reconcile_total",
            "Reconciles by controller and result (ok, retry).",
            ["controller", "result"],
            registry=r,
        )
        self.duration = Histogram(
            "pyextender_controllers_reconcile_duration_seconds",
            "Time to reconcile one object.",
            ["controller"],
            registry=r,
            buckets=(0.001, 0.005, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
        )
        self.writes = Counter(
            "pyextender_controllers_writes_total",
            "Objects written to the API server, by controller and what was done.",
            ["controller", "what"],
            registry=r,
        )
        self.leader = Gauge(
            "pyextender_controllers_is_leader",
            "1 while this replica holds the leader Lease and acts.",
            registry=r,
        )
        self.depth = Gauge(
            "pyextender_controllers_queue_depth",
            "Keys waiting to be reconciled, by controller.",
            ["controller"],
            registry=r,
        )


@dataclass(slots=True)
class Context:
    kube: Kube
    recorder: Recorder
    metrics: Metrics
    pods: Store
    namespaces: Store
    jobs: Store
    podgroups: Store
    queues: Store
    commands: Store
    scheduler_name: str
    cronjobs: Store = field(default_factory=lambda: Store("cronjobs"))
    replicasets: Store = field(default_factory=lambda: Store("replicasets"))
    statefulsets: Store = field(default_factory=lambda: Store("statefulsets"))
    """Owners whose scale-to-zero removes the PodGroup podgroup.py gave their pods."""
    priorityclasses: Store = field(default_factory=lambda: Store("priorityclasses"))
    """Their values order a Job's tasks for its PodGroup's minResources."""
    gang_barrier: bool = False
    """Hold a Job's gang pods with the pyextender.io/gang-barrier annotation (the
    framework shim's PreEnqueue) instead of the scheduling gate."""

    @classmethod
    def empty(cls, kube: Kube, identity: str, scheduler_name: str) -> Context:
        """A context whose stores are all empty (the informers fill them), whose
        events are recorded as ``identity``."""
        return cls(
            kube=kube,
            recorder=Recorder(kube, identity),
            metrics=Metrics(),
            pods=Store("pods"),
            namespaces=Store("namespaces"),
            jobs=Store("jobs"),
            podgroups=Store("podgroups"),
            queues=Store("queues"),
            commands=Store("commands"),
            scheduler_name=scheduler_name,
        )

    @property
    def stores(self) -> list[Store]:
        return [
            self.namespaces,
            self.pods,
            self.queues,
            self.podgroups,
            self.jobs,
            self.cronjobs,
            self.commands,
            self.replicasets,
            self.statefulsets,
            self.priorityclasses,
        ]

    @property
    def synced(self) -> bool:
        return all(s.synced for s in self.stores)


async def call(fn: Callable[..., T], *args: Any) -> T:
    """Run a blocking API call off the event loop."""
    return await asyncio.to_thread(fn, *args)


async def ignore_missing(aw: Awaitable[T]) -> T | None:
    """Await an API call; a 404 (already gone) is not an error."""
    try:
        return await aw
    except Exception as exc:
        if not_found(exc):
            return None
        raise


async def ignore_exists(aw: Awaitable[T]) -> T | None:
    """Await a create; a 409 (already exists, our cache was behind) is not an error."""
    try:
        return await aw
    except Exception as exc:
        if conflict(exc):
            return None
        raise


class Controller:
    """A work queue of keys and N workers calling ``reconcile`` on them."""

    name = "controller"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.queue = WorkQueue(self.name)

    async def reconcile(self, key: str) -> None:
        raise NotImplementedError

    def resync(self) -> None:
        """Queue every object this controller owns (at leadership start and periodically)."""

    def wrote(self, what: str) -> None:
        self.ctx.metrics.writes.labels(self.name, what).inc()

    async def worker(self) -> None:
        m = self.ctx.metrics
        while True:
            key = await self.queue.get()
            start = time.perf_counter()
            try:
                await self.reconcile(key)
            except asyncio.CancelledError:
                self.queue.done(key)
                raise
            except Exception as exc:
                delay = self.queue.retry(key)
                m.reconciles.labels(self.name, "retry").inc()
                if conflict(exc):
                    log.info("%s %s: conflict, retrying in %.2fs", self.name, key, delay)
                else:
                    log.warning(
                        "%s %s failed (retry in %.2fs): %s",
                        self.name,
                        key,
                        delay,
                        exc,
                        exc_info=not hasattr(exc, "status"),
                    )
            else:
                self.queue.forget(key)
                m.reconciles.labels(self.name, "ok").inc()
            finally:
                m.duration.labels(self.name).observe(time.perf_counter() - start)
            self.queue.done(key)
