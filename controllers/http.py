"""``/healthz``, ``/readyz`` and ``/metrics`` on a small asyncio HTTP/1.1 server.

The controllers answer no other HTTP, so a few lines of asyncio replace a web
framework. Any other path is 404; any method but GET/HEAD is 405.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = logging.getLogger(__name__)

Probe = Callable[[], tuple[bool, str]]
MAX_REQUEST_BYTES = 8192


class HealthServer:
    def __init__(self, registry: CollectorRegistry, ready: Probe, refresh: Callable[[], None]):
        self.registry = registry
        self.ready = ready
        self.refresh = refresh
        """Called before each scrape to update gauges."""
        self.server: asyncio.Server | None = None

    def respond(self, method: str, path: str) -> tuple[int, str, bytes]:
        """(status, content type, body) for one request."""
        path = path.split("?", 1)[0]
        if method not in ("GET", "HEAD"):
            return 405, "text/plain", b"method not allowed\n"
        if path == "/healthz":
            return 200, "text/plain", b"ok\n"
        if path == "/readyz":
            ok, why = self.ready()
            return (200 if ok else 503), "text/plain", (why + "\n").encode()
        if path == "/metrics":
            self.refresh()
            return 200, CONTENT_TYPE_LATEST, generate_latest(self.registry)
        return 404, "text/plain", b"not found\n"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=10)
            if len(head) > MAX_REQUEST_BYTES:
                raise ValueError("request head too large")
            parts = head.split(b"\r\n", 1)[0].decode("latin-1").split()
            method, path = (parts[0], parts[1]) if len(parts) >= 2 else ("", "")
            code, ctype, body = self.respond(method, path)
            reason = {200: "OK", 404: "Not Found", 405: "Method Not Allowed"}.get(
                code, "Service Unavailable"
            )
            writer.write(
                f"HTTP/1.1 {code} {reason}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            )
            if method != "HEAD":
                writer.write(body)
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ValueError):
            pass
        except ConnectionError:
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def start(self, host: str, port: int) -> None:
        self.server = await asyncio.start_server(self._handle, host, port)
        log.info("health and metrics on http://%s:%d", host, port)

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
