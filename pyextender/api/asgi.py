"""ASGI plumbing shared by our HTTP servers (sidecar extender, webhook).

A raw ASGI app keeps the hot path free of framework layers; these helpers
are the parts every such app needs: reading a body under a size limit,
writing a response, and the /healthz, /readyz and /metrics probes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
Ready = Callable[[], tuple[bool, str]]

PROBES = ("/healthz", "/readyz", "/metrics")


class HttpError(Exception):
    """An HTTP error status with a message naming the problem and a metric reason."""

    def __init__(self, status: int, message: str, reason: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


async def read_body(scope: Scope, receive: Receive, limit: int, what: str = "") -> bytes:
    """The request body; 413 as soon as it (or its declared length) passes ``limit`` bytes."""
    prefix = f"{what}: " if what else ""
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                declared = int(value)
            except ValueError:
                raise HttpError(400, f"{prefix}bad Content-Length", "bad_length") from None
            if declared > limit:
                raise HttpError(
                    413, f"{prefix}body of {declared} bytes exceeds {limit} bytes", "too_large"
                )
    parts: list[bytes] = []
    size = 0
    while True:
        msg = await receive()
        if msg.get("type") == "http.disconnect":
            raise HttpError(400, f"{prefix}client disconnected", "disconnected")
        chunk = msg.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise HttpError(413, f"{prefix}body exceeds {limit} bytes", "too_large")
        parts.append(chunk)
        if not msg.get("more_body", False):
            return b"".join(parts)


async def respond(
    send: Send, status: int, body: bytes, content_type: bytes = b"application/json"
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def probe(
    path: str,
    method: str,
    send: Send,
    ready: Ready,
    registry: CollectorRegistry,
    health: Ready | None = None,
) -> None:
    """/healthz (alive: 500 with the reason once ``health`` says a background loop
    died), /readyz (200 or 503 with the reason), /metrics (Prometheus)."""
    if method not in ("GET", "HEAD"):
        raise HttpError(405, f"{path}: method {method} not allowed, use GET", "method")
    if path == "/healthz":
        ok, why = health() if health is not None else (True, "ok")
        await respond(send, 200 if ok else 500, why.encode(), b"text/plain")
    elif path == "/readyz":
        ok, why = ready()
        await respond(send, 200 if ok else 503, why.encode(), b"text/plain")
    else:
        await respond(send, 200, generate_latest(registry), CONTENT_TYPE_LATEST.encode())


async def lifespan(receive: Receive, send: Send) -> None:
    """Answer uvicorn's startup/shutdown messages (nothing to set up or tear down)."""
    while True:
        msg = await receive()
        if msg["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif msg["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
