"""A second listener with only /healthz, /readyz and /metrics.

In the chart the extender verbs listen on the Pod's loopback (only its
kube-scheduler may call them), while kubelet's probes and Prometheus need an
address reachable from outside the Pod: ``--metrics-address``/``--metrics-port``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import uvicorn
from prometheus_client import CollectorRegistry

from pyextender.api.asgi import PROBES, HttpError, Receive, Scope, Send, lifespan, probe, respond
from pyextender.api.asgi_server import Server

ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


Probe = Callable[[], tuple[bool, str]]
DEBUG_PATHS = ("/debug/decisions",)
"""Served here too (by the extender app), so looking at decisions needs no access
to the port that can bind pods."""


class ProbesApp:
    """ASGI app answering the probe and debug paths and nothing else (404 for the verbs)."""

    def __init__(
        self,
        ready: Probe,
        registry: CollectorRegistry,
        health: Probe | None = None,
        debug: ASGIApp | None = None,
    ) -> None:
        self.ready = ready
        self.registry = registry
        self.health = health
        self.debug = debug

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path: str = scope["path"].rstrip("/")
        if path in DEBUG_PATHS and self.debug is not None:
            await self.debug(scope, receive, send)
            return
        try:
            if path not in PROBES:
                raise HttpError(404, f"{scope['path']!r}: only {', '.join(PROBES)} here", "path")
            await probe(path, scope["method"], send, self.ready, self.registry, self.health)
        except HttpError as exc:
            await respond(send, exc.status, json.dumps({"Error": str(exc)}).encode())


def start_probes(
    address: str,
    port: int,
    ready: Probe,
    registry: CollectorRegistry,
    health: Probe | None = None,
    debug: ASGIApp | None = None,
) -> tuple[uvicorn.Server, asyncio.Task[None]]:
    """Serve ProbesApp on address:port in the background; returns the server and its task."""
    config = uvicorn.Config(
        ProbesApp(ready, registry, health, debug),
        host=address,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        http="httptools",
    )
    server = Server(config)  # stopped by the process's signal handler, or by the caller
    return server, asyncio.create_task(server.serve())
