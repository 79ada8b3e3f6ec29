"""The sidecar process: informers -> cache -> extender verbs over HTTP."""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import socket
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import uvicorn
from kubernetes import client

from pyextender.api.asgi_server import Server
from pyextender.api.client import api_client, body_of
from pyextender.api.informer import Informer
from pyextender.api.leader import KubeLeases, LeaderElector, LeaseConfig
from pyextender.api.raw_requests import RawApi
from pyextender.api.resources import gpu_resources
from pyextender.api.supervise import Supervisor
from pyextender.cache.cluster import ClusterCache
from pyextender.cache.state import ClusterState
from pyextender.framework.action_args import ACTION_ARGS
from pyextender.framework.config import ConfigError, ConfigWatcher, SchedulerConfig
from pyextender.framework.runtime import build_profile
from pyextender.plugins.defaults import load, plugins_of
from pyextender.plugins.registry import REGISTRY
from pyextender.server.actuator import Actuator
from pyextender.server.barrier import DEFAULT_TIMEOUT_S, GangBarrier
from pyextender.server.binder import ApiBinder
from pyextender.server.config_events import post_config_event
from pyextender.server.courtesy import Courtesy
from pyextender.server.grpc_annotate import PodAnnotator
from pyextender.server.grpc_permit import DEFAULT_MAX_WAIT_S
from pyextender.server.grpc_server import GrpcOptions, GrpcServer
from pyextender.server.grpc_service import SchedulerService
from pyextender.server.http import ExtenderApp, ExtenderTLS
from pyextender.server.metrics import Metrics
from pyextender.server.probes import start_probes
from pyextender.server.scheduler_loop import SchedulerLoop
from pyextender.server.threads import API_THREADS
from pyextender.server.verbs import Extender
from pyextender.server.warmup import warm_up

log = logging.getLogger(__name__)

PODGROUPS = ("scheduling.volcano.sh", "v1beta1", "podgroups")
QUEUES = ("scheduling.volcano.sh", "v1beta1", "queues")
HYPERNODES = ("topology.volcano.sh", "v1alpha1", "hypernodes")


@dataclass(frozen=True, slots=True)
class ServeOptions:
    kubeconfig: str | None
    """Path of a kubeconfig; None for in-cluster / $KUBECONFIG / ~/.kube/config."""
    address: str
    """Listen address of the extender HTTP server."""
    port: int
    """Listen port of the extender HTTP server."""
    scheduler_name: str
    """schedulerName of the pods we schedule."""
    config_path: str | None
    """Scheduler config file (reloaded on change); None for the built-in default."""
    max_body_bytes: int
    """Largest accepted request body, bytes."""
    leader_elect: bool = True
    """Run the actions only while holding the Lease (verbs are always served)."""
    lease_namespace: str = "kube-system"
    lease_name: str = "pyextender-scheduler"
    lease_duration_s: float = 15.0
    renew_deadline_s: float = 10.0
    retry_period_s: float = 2.0
    metrics_address: str = "127.0.0.1"
    """Listen address of the probes-only server (/healthz /readyz /metrics)."""
    metrics_port: int = 0
    """Its port; 0: no second server (the probes are on the extender port anyway)."""
    gang_timeout: float = DEFAULT_TIMEOUT_S
    """Seconds a gang member's bind waits for the rest of its gang (framework mode:
    the stall window, a gang waiting in Permit is rejected once no new member has
    arrived for this long)."""
    gang_max_wait: float = DEFAULT_MAX_WAIT_S
    """Framework mode: cap on a gang's whole wait in Permit, seconds."""
    filter_picks_node: bool = True
    """Extender filter answers only the node our score plugins rank first."""
    grpc: GrpcOptions = field(default_factory=GrpcOptions)
    tls: ExtenderTLS = field(default_factory=lambda: ExtenderTLS())
    """Optional HTTPS (and client certificates) on the extender port."""
    """The gRPC front end for the framework shim; off unless a socket or address is set."""


GC_THRESHOLDS = (50_000, 20, 20)
"""gen0/gen1/gen2 thresholds. One filter over 5,000 nodes allocates ~10,000
short-lived objects; at the default gen0 threshold (700) that is a dozen
collections per request, each adding tail latency."""


def tune_gc() -> None:
    """Fewer, cheaper collections for a latency-bound server."""
    gc.set_threshold(*GC_THRESHOLDS)


SWITCH_INTERVAL_S = 0.0001
"""How long a thread may hold the GIL while another waits for it (Python's default is
5 ms). The scheduling cycle runs on its own thread; at the default, a filter call
arriving during the cycle's Python work waited up to 5 ms per GIL hand-over, which
alone exceeds the verbs' 2 ms p99 budget (bench/verbs.py churn scenario). The cycle
gives way to a verb in flight (courtesy.py), but only once the verb has the GIL: this
is what the verb waits for it first. 0.5 ms gave churn p99s of 2.2-2.6 / 1.8-2.2 ms
(filter / prioritize) at 5,000 nodes, 0.1 ms 1.8-2.2 / 1.6-2.1 ms, interleaved runs."""


def tune_switch_interval() -> None:
    """Hand the GIL over within SWITCH_INTERVAL_S, so the verbs wait little for the cycle."""
    sys.setswitchinterval(SWITCH_INTERVAL_S)


def freeze_heap() -> None:
    """Move everything alive now (the synced cache) out of the collector's scans."""
    gc.collect()
    gc.freeze()


async def _freeze_after_sync(cache: ClusterCache) -> None:
    while not cache.synced:
        await asyncio.sleep(0.1)
    freeze_heap()
    log.info(
        "cache synced: %d nodes, %d pods; heap frozen",
        len(cache.state.index),
        len(cache.state.pods),
    )


def _log_failure(what: str) -> Callable[[asyncio.Future[Any]], None]:
    """A done-callback that logs the exception of a fire-and-forget API call."""

    def done(fut: asyncio.Future[Any]) -> None:
        if not fut.cancelled() and fut.exception() is not None:
            log.warning("%s: %s", what, fut.exception())

    return done


def _node_event(core: client.CoreV1Api, node: str, message: str) -> None:
    """A Warning event on a Node (events of cluster-scoped objects live in "default")."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = {
        "metadata": {"generateName": f"{node}.", "namespace": "default"},
        "involvedObject": {"kind": "Node", "name": node, "apiVersion": "v1"},
        "type": "Warning",
        "reason": "InvalidGPUTopology",
        "message": message[:1024],
        "source": {"component": "pyextender"},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    body_of(core.create_namespaced_event("default", body, _preload_content=False))


def read_cache_gauges(cache: ClusterCache, metrics: Metrics) -> None:
    """The cache gauges read the cache when /metrics is scraped, not from a sample taken
    up to a second earlier: a sample showed 0 nodes for up to a second after /readyz
    turned 200 (the first sample predates the sync), and a scrape is rarer and cheaper
    than a sample a second. Scrapes run on the event loop that changes the cache, so
    each reading is of one consistent state."""
    metrics.cache_nodes.set_function(lambda: len(cache.state.index))
    metrics.cache_pods.set_function(lambda: len(cache.state.pods))
    metrics.cache_pending_pods.set_function(lambda: len(cache.pending))
    metrics.task_classes.labels("seen").set_function(lambda: len(cache.state.gpu.learned.counts))
    metrics.task_classes.labels("kept").set_function(lambda: cache.state.gpu.classes_kept())
    for resource in gpu_resources():
        for which, state in enumerate(("allocatable", "allocated")):
            metrics.cache_gpus.labels(resource, state).set_function(
                functools.partial(_gpu_total, cache, resource, which)
            )


def _gpu_total(cache: ClusterCache, resource: str, which: int) -> float:
    """GPUs of ``resource`` on live nodes: allocatable (``which`` 0) or allocated (1)."""
    return gpu_totals(cache.state).get(resource, (0, 0))[which]


async def _housekeeping(cache: ClusterCache, core: client.CoreV1Api) -> None:
    """Once a second: HyperNode tiers (when changed), node problems as events."""
    reported: set[tuple[str, str]] = set()
    loop = asyncio.get_running_loop()
    while True:
        cache.refresh_topology()
        current = {(n, w) for n, ws in cache.node_problems.items() for w in ws}
        # forget what is fixed (bounded memory; a problem that comes back is news)
        reported &= current
        for problem in sorted(current - reported):
            try:
                await loop.run_in_executor(API_THREADS, _node_event, core, *problem)
                reported.add(problem)
            except Exception as exc:
                log.warning("event for node %s: %s", problem[0], exc)
        await asyncio.sleep(1.0)


def gpu_totals(state: ClusterState) -> dict[str, tuple[int, int]]:
    """Per configured GPU resource: (allocatable, allocated) GPUs over live nodes."""
    live = state.live[: state.size]
    out: dict[str, tuple[int, int]] = {}
    for resource in gpu_resources():
        col = state.column.get(resource)
        if col is None:
            out[resource] = (0, 0)
            continue
        alloc = int(state.alloc[: state.size, col][live].sum())
        used = int(state.used[: state.size, col][live].sum())
        out[resource] = (alloc, used)
    return out


async def serve(opts: ServeOptions) -> int:
    loop = asyncio.get_running_loop()
    api = api_client(opts.kubeconfig)
    core = client.CoreV1Api(api)
    cache = ClusterCache(opts.scheduler_name)
    metrics = Metrics()
    current = [load(opts.config_path)]

    def report(config: SchedulerConfig) -> None:
        """Log, count and post as an event what a loaded config maps or ignores (Volcano
        names we do not run)."""
        for warning in config.warnings:
            log.warning("scheduler config: %s", warning.message)
        metrics.count_ignored((w.kind, w.name) for w in config.ignored)
        if config.ignored:
            posted = loop.run_in_executor(
                API_THREADS, post_config_event, core, opts.lease_namespace, opts.lease_name, config
            )
            posted.add_done_callback(_log_failure("config event"))

    report(current[0])
    profile = build_profile(plugins_of(current[0]), metrics.observe_plugin)
    custom = client.CustomObjectsApi(api)
    cache.synced_groups = cache.synced_queues = False
    informers = [
        Informer("nodes", core.list_node, loop, cache.replace_nodes, cache.node_event),
        Informer(
            "pods",
            core.list_pod_for_all_namespaces,
            loop,
            cache.replace_pods,
            cache.pod_event,
            convert=cache.pods_of_page,
        ),
        Informer(
            "podgroups",
            functools.partial(custom.list_cluster_custom_object, *PODGROUPS),
            loop,
            cache.replace_groups,
            cache.group_event,
        ),
        Informer(
            "queues",
            functools.partial(custom.list_cluster_custom_object, *QUEUES),
            loop,
            cache.replace_queues,
            cache.queue_event,
        ),
        Informer(
            "hypernodes",
            functools.partial(custom.list_cluster_custom_object, *HYPERNODES),
            loop,
            cache.replace_hypernodes,
            cache.hypernode_event,
        ),
    ]
    for inf in informers:
        inf.start()
    identity = f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}"
    elector = LeaderElector(
        KubeLeases(api),
        LeaseConfig(
            opts.lease_namespace,
            opts.lease_name,
            identity,
            opts.lease_duration_s,
            opts.renew_deadline_s,
            opts.retry_period_s,
        ),
        on_change=lambda leading: metrics.leader.set(1 if leading else 0),
    )

    def fence() -> Callable[[], bool]:
        """At the start of a cycle: a check that its leadership term still holds."""
        return functools.partial(elector.valid, elector.epoch)

    courtesy = Courtesy()  # the cycle's thread gives way to filter and prioritize
    raw = RawApi(api.configuration)  # one libcurl handle per API thread, for every write
    loop_ = SchedulerLoop(
        cache,
        lambda: current[0],
        Actuator(api, metrics, cache=cache, raw=raw),
        metrics,
        fence if opts.leader_elect else None,
        courtesy,
    )
    supervisor = Supervisor(lambda name: metrics.background_failures.labels(name).inc())
    barrier = GangBarrier(
        cache,
        opts.gang_timeout,
        on_gang_failure=lambda gang, failed: metrics.gang_bind_failures.inc(failed),
        on_waiting=metrics.barrier_waiting.set,
    )
    cache.pod_gone.append(barrier.forget)  # a deleted member never counts toward a gang
    extender = Extender(
        cache,
        profile,
        ApiBinder(api, raw),
        metrics,
        barrier,
        loop_.session_async,
        courtesy,
        pick_node=opts.filter_picks_node,
    )
    # The actions run only while this replica holds the Lease; verbs always.
    if not opts.leader_elect:
        metrics.leader.set(1)
    actions = elector.run(loop_.run) if opts.leader_elect else loop_.run()
    tasks = [supervisor.spawn("actions", actions)]
    watcher_task: asyncio.Task[None] | None = None
    if opts.config_path is not None:

        def apply(config: SchedulerConfig) -> None:
            current[0] = config
            report(config)
            extender.profile = build_profile(plugins_of(config), metrics.observe_plugin)
            log.info("scheduler config reloaded: plugins %s", ", ".join(config.plugin_names))

        def reject(exc: ConfigError) -> None:
            metrics.config_errors.inc()
            log.error("scheduler config change rejected, keeping the last good one: %s", exc)

        watcher = ConfigWatcher(
            opts.config_path, REGISTRY, on_change=apply, on_error=reject, action_args=ACTION_ARGS
        )
        watcher_task = supervisor.spawn("config-watcher", watcher.run())

    def ready() -> tuple[bool, str]:
        if not kernels.done():
            return False, "compiling the numba kernels"
        if kernels.exception() is not None:
            return False, f"numba kernel warm-up failed: {kernels.exception()}"
        if cache.synced:
            stale = [why for why in (inf.stale() for inf in informers) if why]
            if stale:
                return False, "; ".join(stale)
            return True, "ok"
        return False, (
            f"waiting for the first cache sync (nodes: {cache.synced_nodes}, "
            f"pods: {cache.synced_pods}, podgroups: {cache.synced_groups}, "
            f"queues: {cache.synced_queues}; are the Volcano CRDs installed?)"
        )

    app = ExtenderApp(extender, ready, opts.max_body_bytes, supervisor.health)
    read_cache_gauges(cache, metrics)
    gauges = supervisor.spawn("housekeeping", _housekeeping(cache, core))
    kernels: asyncio.Task[float] = asyncio.create_task(asyncio.to_thread(warm_up, profile))
    tune_gc()
    tune_switch_interval()
    freezer = asyncio.create_task(_freeze_after_sync(cache))
    grpc_server: GrpcServer | None = None
    if opts.grpc.enabled:
        # the same Extender: one cache, profile and decision log for both front ends
        service = SchedulerService(
            extender, opts.gang_timeout, PodAnnotator(api), opts.gang_max_wait
        )
        grpc_server = GrpcServer(service, opts.grpc, ready)
        await grpc_server.start()
    config = uvicorn.Config(
        app,
        host=opts.address,
        port=opts.port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        http="httptools",
        timeout_keep_alive=60,
        # a bind held at the gang barrier waits up to --gang-timeout: on shutdown it is
        # cut after this (kube-scheduler retries the pod) rather than outliving the
        # termination grace period
        timeout_graceful_shutdown=5,
        **opts.tls.uvicorn_args(),
    )
    server = Server(config)
    log.info(
        "serving extender on %s://%s:%d for schedulerName %s%s",
        "https" if opts.tls.enabled else "http",
        opts.address,
        opts.port,
        opts.scheduler_name,
        " (client certificates required)" if opts.tls.client_ca else "",
    )
    probes = None
    if opts.metrics_port:
        probes = start_probes(
            opts.metrics_address,
            opts.metrics_port,
            ready,
            metrics.registry,
            health=supervisor.health,
            debug=app,
        )
        log.info("probes and metrics on http://%s:%d", opts.metrics_address, opts.metrics_port)
    try:
        await server.serve()
    finally:
        if probes is not None:
            probes[0].should_exit = True
            await asyncio.gather(probes[1], return_exceptions=True)
        if grpc_server is not None:
            await grpc_server.stop()
        gauges.cancel()
        freezer.cancel()
        for t in tasks:
            t.cancel()  # the elector releases the Lease as it stops
        await asyncio.gather(*tasks, return_exceptions=True)
        if watcher_task is not None:
            watcher_task.cancel()
        for inf in informers:
            inf.stop.set()
    return 0
