"""The sidecar process: informers -> cache -> extender verbs over HTTP."""

from __future__ import annotations

import asyncio
import gc
import logging
from dataclasses import dataclass

import uvicorn
from kubernetes import client

from pyextender.api.client import api_client
from pyextender.cache.cluster import ClusterCache
from pyextender.cache.informer import Informer
from pyextender.framework.config import ConfigError, ConfigWatcher, SchedulerConfig
from pyextender.plugins.registry import REGISTRY
from pyextender.server.binder import ApiBinder
from pyextender.server.http import ExtenderApp
from pyextender.server.metrics import Metrics
from pyextender.server.profile import build_profile
from pyextender.server.sched_config import load, plugins_of
from pyextender.server.verbs import Extender

log = logging.getLogger(__name__)


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


GC_THRESHOLDS = (50_000, 20, 20)
"""gen0/gen1/gen2 thresholds. One filter over 5,000 nodes allocates ~10,000
short-lived objects; at the default gen0 threshold (700) that is a dozen
collections per request, each adding tail latency."""


def tune_gc() -> None:
    """Fewer, cheaper collections for a latency-bound server."""
    gc.set_threshold(*GC_THRESHOLDS)


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


async def _refresh_gauges(cache: ClusterCache, metrics: Metrics) -> None:
    while True:
        metrics.cache_nodes.set(len(cache.state.index))
        metrics.cache_pods.set(len(cache.state.pods))
        metrics.cache_pending_pods.set(len(cache.pending))
        await asyncio.sleep(1.0)


async def serve(opts: ServeOptions) -> int:
    loop = asyncio.get_running_loop()
    api = api_client(opts.kubeconfig)
    core = client.CoreV1Api(api)
    cache = ClusterCache(opts.scheduler_name)
    metrics = Metrics()
    profile = build_profile(plugins_of(load(opts.config_path)), metrics.observe_plugin)
    informers = [
        Informer("nodes", core.list_node, loop, cache.replace_nodes, cache.node_event),
        Informer(
            "pods", core.list_pod_for_all_namespaces, loop, cache.replace_pods, cache.pod_event
        ),
    ]
    for inf in informers:
        inf.start()
    extender = Extender(cache, profile, ApiBinder(api), metrics)
    watcher_task: asyncio.Task[None] | None = None
    if opts.config_path is not None:

        def apply(config: SchedulerConfig) -> None:
            extender.profile = build_profile(plugins_of(config), metrics.observe_plugin)
            log.info("scheduler config reloaded: plugins %s", ", ".join(config.plugin_names))

        def reject(exc: ConfigError) -> None:
            metrics.config_errors.inc()
            log.error("scheduler config change rejected, keeping the last good one: %s", exc)

        watcher = ConfigWatcher(opts.config_path, REGISTRY, on_change=apply, on_error=reject)
        watcher_task = asyncio.create_task(watcher.run())

    def ready() -> tuple[bool, str]:
        if cache.synced:
            return True, "ok"
        return False, (
            f"waiting for the first cache sync (nodes synced: {cache.synced_nodes}, "
            f"pods synced: {cache.synced_pods})"
        )

    app = ExtenderApp(extender, ready, opts.max_body_bytes)
    gauges = asyncio.create_task(_refresh_gauges(cache, metrics))
    tune_gc()
    freezer = asyncio.create_task(_freeze_after_sync(cache))
    config = uvicorn.Config(
        app,
        host=opts.address,
        port=opts.port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        http="httptools",
        timeout_keep_alive=60,
    )
    server = uvicorn.Server(config)
    log.info(
        "serving extender on http://%s:%d for schedulerName %s",
        opts.address,
        opts.port,
        opts.scheduler_name,
    )
    try:
        await server.serve()
    finally:
        gauges.cancel()
        freezer.cancel()
        if watcher_task is not None:
            watcher_task.cancel()
        for inf in informers:
            inf.stop.set()
    return 0
