"""The controllers process: informers, leader election, and the Job, CronJob, PodGroup,
Queue and Command controllers.

Every replica lists and watches all the time (a standby has warm caches and
takes over within one lease duration). Only the leader runs workers; it first
waits for every cache to be synced, creates the default queues, queues every
object once, and re-queues everything every ``resync_s`` to catch up with
anything a watch may have missed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from controllers import pods as P
from controllers.command import CommandController
from controllers.cronjob import CronJobController, fast_clock, real_clock
from controllers.http import HealthServer
from controllers.job import JobController
from controllers.kube import COMMANDS, CRONJOBS, JOBS, PODGROUPS, QUEUES, Kube
from controllers.podgroup import PodGroupController
from controllers.queue import QueueController
from controllers.release import AdoptionWatch, release_pods
from controllers.runtime import Context, Controller
from controllers.store import Obj, meta
from pyextender.api.client import api_client, body_of
from pyextender.api.leader import LeaderElector, LeaseConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Options:
    kubeconfig: str | None
    """kubeconfig path; None for in-cluster / $KUBECONFIG / ~/.kube/config."""
    workers: int = 2
    """Concurrent reconciles per controller."""
    leader_elect: bool = False
    """Act only while holding the Lease (run more than one replica safely)."""
    lease: LeaseConfig = field(default_factory=LeaseConfig)
    metrics_address: str = "127.0.0.1"
    metrics_port: int = 8899
    scheduler_name: str = "volcano"
    """schedulerName of the pods that get a PodGroup of their own when they name none."""
    resync_s: float = 60.0
    """Seconds between full re-queues of every object."""
    default_queue_weight: int = 1
    default_queue_reclaimable: bool = True
    """spec of the ``default`` queue when the controllers create it."""
    webhook_configuration: str = ""
    """MutatingWebhookConfiguration whose pod webhooks say which namespaces are adopted;
    a namespace leaving them has its gated pods released. "" turns that off."""
    gang_barrier: bool = False
    """Job pods wait at the framework shim's barrier (annotation), not behind a gate."""
    cronjob_clock_speed: float = 1.0
    """How fast the CronJob controller's clock runs (tests only; 1 is real time)."""


def _group_index(pod: Obj) -> list[str]:
    group = P.group_name(pod)
    return [f"{meta(pod).get('namespace')}/{group}"] if group else []


def build(kube: Kube, opts: Options, identity: str) -> tuple[Context, list[Controller]]:
    ctx = Context.empty(kube, identity, opts.scheduler_name)
    ctx.gang_barrier = opts.gang_barrier
    ctx.pods.add_index("group", _group_index)
    queues = QueueController(ctx)
    jobs = JobController(ctx)
    controllers: list[Controller] = [
        PodGroupController(ctx),
        queues,
        jobs,
        CronJobController(
            ctx,
            real_clock if opts.cronjob_clock_speed == 1.0 else fast_clock(opts.cronjob_clock_speed),
        ),
        CommandController(ctx, jobs, queues),
    ]
    return ctx, controllers


def start_informers(ctx: Context, kube: Kube, loop: asyncio.AbstractEventLoop) -> None:
    ctx.namespaces.start(kube.core.list_namespace, loop)
    ctx.pods.start(kube.core.list_pod_for_all_namespaces, loop)
    ctx.queues.start(kube.list_fn(QUEUES), loop)
    ctx.podgroups.start(kube.list_fn(PODGROUPS), loop)
    ctx.jobs.start(kube.list_fn(JOBS), loop)
    ctx.cronjobs.start(kube.list_fn(CRONJOBS), loop)
    ctx.commands.start(kube.list_fn(COMMANDS), loop)
    ctx.replicasets.start(kube.apps.list_replica_set_for_all_namespaces, loop)
    ctx.statefulsets.start(kube.apps.list_stateful_set_for_all_namespaces, loop)
    ctx.priorityclasses.start(kube.scheduling.list_priority_class, loop)


def adoption_watch(ctx: Context, opts: Options) -> AdoptionWatch:
    reg = client.AdmissionregistrationV1Api(ctx.kube.api)

    def read() -> dict[str, Any] | None:
        try:
            resp = reg.read_mutating_webhook_configuration(
                opts.webhook_configuration, _preload_content=False
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        doc: dict[str, Any] = json.loads(body_of(resp))
        return doc

    return AdoptionWatch(
        read,
        ctx.namespaces.values,
        ctx.pods.values,
        lambda pods: release_pods(ctx.kube.core, pods),
    )


async def _ensure_default_queues(queues: QueueController, opts: Options) -> None:
    """Retry until it works: at install time the API server may refuse Queue writes
    for a while (our validating webhook is not serving yet)."""
    delay = 0.5
    while True:
        try:
            await queues.ensure_default_queues(
                opts.default_queue_weight, opts.default_queue_reclaimable
            )
            return
        except ApiException as exc:
            log.warning("creating the default queues: %s %s; retrying", exc.status, exc.reason)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10.0)


async def lead(ctx: Context, controllers: list[Controller], opts: Options) -> None:
    """Act: run until cancelled (leadership lost or shutdown)."""
    while not ctx.synced:
        await asyncio.sleep(0.1)
    ctx.metrics.leader.set(1)
    tasks: list[asyncio.Task[None]] = []
    try:
        for c in controllers:
            if isinstance(c, QueueController):
                await _ensure_default_queues(c, opts)
        if opts.webhook_configuration:
            tasks.append(asyncio.create_task(adoption_watch(ctx, opts).run()))
        for c in controllers:
            c.resync()
            tasks.extend(asyncio.create_task(c.worker()) for _ in range(opts.workers))
        log.info("acting: %d controllers x %d workers", len(controllers), opts.workers)
        while True:
            await asyncio.sleep(opts.resync_s)
            for c in controllers:
                c.resync()
    finally:
        ctx.metrics.leader.set(0)
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t


async def run(opts: Options) -> int:
    loop = asyncio.get_running_loop()
    api: client.ApiClient = api_client(opts.kubeconfig, qps_pool=max(8, 4 * opts.workers))
    kube = Kube(api)
    ctx, controllers = build(kube, opts, opts.lease.identity)
    elector = LeaderElector(kube, opts.lease) if opts.leader_elect else None

    def ready() -> tuple[bool, str]:
        waiting = [s.kind for s in ctx.stores if not s.synced]
        if waiting:
            return False, f"waiting for the first list of: {', '.join(waiting)}"
        role = "leader" if elector is None or elector.is_leader else "standby"
        return True, f"ok ({role}, identity {opts.lease.identity})"

    def refresh() -> None:
        for c in controllers:
            ctx.metrics.depth.labels(c.name).set(len(c.queue))

    health = HealthServer(ctx.metrics.registry, ready, refresh)
    await health.start(opts.metrics_address, opts.metrics_port)
    start_informers(ctx, kube, loop)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    async def act() -> None:
        await lead(ctx, controllers, opts)

    main = asyncio.create_task(elector.run(act) if elector is not None else act())
    await asyncio.wait([main, asyncio.create_task(stop.wait())], return_when="FIRST_COMPLETED")
    log.info("shutting down")
    main.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await main
    for s in ctx.stores:
        s.stop()
    await health.close()
    return 0
