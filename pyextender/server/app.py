"""The sidecar process: informers -> cache -> extender verbs over HTTP."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import uvicorn
from kubernetes import client

from pyextender.api.client import api_client
from pyextender.cache.cluster import ClusterCache
from pyextender.cache.informer import Informer
from pyextender.framework.registry import PluginSpec
from pyextender.server.binder import ApiBinder
from pyextender.server.http import ExtenderApp
from pyextender.server.metrics import Metrics
from pyextender.server.profile import build_profile
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
    plugins: Sequence[tuple[PluginSpec, Any]]
    """Plugins (spec, validated args) in tier order."""
    max_body_bytes: int
    """Largest accepted request body, bytes."""


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
    profile = build_profile(opts.plugins, metrics.observe_plugin)
    informers = [
        Informer("nodes", core.list_node, loop, cache.replace_nodes, cache.node_event),
        Informer(
            "pods", core.list_pod_for_all_namespaces, loop, cache.replace_pods, cache.pod_event
        ),
    ]
    for inf in informers:
        inf.start()
    extender = Extender(cache, profile, ApiBinder(api), metrics)

    def ready() -> tuple[bool, str]:
        if cache.synced:
            return True, "ok"
        return False, (
            f"waiting for the first cache sync (nodes synced: {cache.synced_nodes}, "
            f"pods synced: {cache.synced_pods})"
        )

    app = ExtenderApp(extender, ready, opts.max_body_bytes)
    gauges = asyncio.create_task(_refresh_gauges(cache, metrics))
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
        for inf in informers:
            inf.stop.set()
    return 0
