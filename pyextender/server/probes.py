"""A second listener with only /healthz, /readyz and /metrics.

In the chart the extender verbs listen on the Pod's loopback (only its
kube-scheduler may call them), while kubelet's probes and Prometheus need an
address reachable from outside the Pod: ``--metrics-address``/``--metrics-port``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import uvicorn
from prometheus_client import CollectorRegistry

from pyextender.api.asgi import PROBES, HttpError, Receive, Scope, Send, lifespan, probe, respond


class ProbesApp:
    """ASGI app answering the probe paths and nothing else (404 for the verbs)."""

    def __init__(self, ready: Callable[[], tuple[bool, str]], registry: CollectorRegistry) -> None:
        self.ready = ready
        self.registry = registry

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path: str = scope["path"].rstrip("/")
        try:
            if path not in PROBES:
                raise HttpError(404, f"{scope['path']!r}: only {', '.join(PROBES)} here", "path")
            await probe(path, scope["method"], send, self.ready, self.registry)
        except HttpError as exc:
            await respond(send, exc.status, json.dumps({"Error": str(exc)}).encode())


def start_probes(
    address: str, port: int, ready: Callable[[], tuple[bool, str]], registry: CollectorRegistry
) -> tuple[uvicorn.Server, asyncio.Task[None]]:
    """Serve ProbesApp on address:port in the background; returns the server and its task."""
    config = uvicorn.Config(
        ProbesApp(ready, registry),
        host=address,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        http="httptools",
    )
    server = uvicorn.Server(config)
    # a signal reaches whichever server captured it last; it re-raises the signal to
    # the handler it replaced, and the caller stops this one when the main one stops
    return server, asyncio.create_task(server.serve())
