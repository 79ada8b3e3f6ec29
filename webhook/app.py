"""HTTP framing of the webhook: a small ASGI app (run by uvicorn over TLS).

Routes: POST /mutate/pods, /mutate/pods-shadow, /validate (AdmissionReview
v1); GET /healthz, /readyz, /metrics.

Bad input never takes the process down. A body that is not a v1
AdmissionReview gets HTTP 400 (malformed JSON, wrong apiVersion/kind,
missing request fields), an unknown path 404, a wrong method 405, a body
over the limit 413, each with ``{"error": "..."}`` naming the problem.
Once a request is understood, every answer is an AdmissionReview (HTTP 200),
including denials and internal errors, so the API server shows the user why.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from webhook.configuration import MUTATE_PODS, MUTATE_PODS_SHADOW, VALIDATE
from webhook.metrics import Metrics
from webhook.mutate_pod import plan_pod, pod_patch
from webhook.queues import QueueSource
from webhook.review import (
    AdmissionRequest,
    ReviewError,
    Verdict,
    allow,
    deny,
    encode_response,
    parse_review,
)
from webhook.validate import validate

log = logging.getLogger(__name__)

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

DEFAULT_MAX_BODY_BYTES = 8 * 2**20
"""Largest body accepted (bytes): an AdmissionReview holds object and oldObject, each up to
etcd's 1.5 MiB request limit, plus JSON overhead."""

_ROUTES = (MUTATE_PODS, MUTATE_PODS_SHADOW, VALIDATE)
_PROBES = ("/healthz", "/readyz", "/metrics")


class HttpError(Exception):
    def __init__(self, status: int, message: str, reason: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


class WebhookApp:
    """The ASGI callable."""

    def __init__(
        self,
        queues: QueueSource,
        ready: Callable[[], tuple[bool, str]],
        metrics: Metrics | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        self.queues = queues
        self.ready = ready
        self.metrics = metrics or Metrics()
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif msg["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        path: str = scope["path"].rstrip("/") or "/"
        method: str = scope["method"]
        try:
            if path in _PROBES:
                await self._probe(path, method, send)
                return
            if path not in _ROUTES:
                raise HttpError(
                    404, f"unknown path {scope['path']!r}; use one of {', '.join(_ROUTES)}", "path"
                )
            if method != "POST":
                raise HttpError(405, f"{path}: method {method} not allowed, use POST", "method")
            body = await self._body(scope, receive)
            try:
                req = parse_review(body)
            except ReviewError as exc:
                raise HttpError(400, f"{path}: {exc}", exc.reason) from None
        except HttpError as exc:
            log.warning("refused %s %s: %s", method, scope["path"], exc)
            self.metrics.bad_requests.labels(exc.reason).inc()
            await _respond(send, exc.status, json.dumps({"error": str(exc)}).encode())
            return
        await _respond(send, 200, await self._admit(path, req))

    async def _admit(self, path: str, req: AdmissionRequest) -> bytes:
        start = time.perf_counter()
        try:
            if path == VALIDATE:
                # may read queues from the API server: keep the event loop free
                verdict = await asyncio.to_thread(validate, req, self.queues)
                result = "allowed" if verdict.allowed else "denied"
            else:
                verdict, result = self._mutate(req, shadow=path == MUTATE_PODS_SHADOW)
        except Exception as exc:
            log.exception("%s %s %s failed", path, req.operation, req.label)
            verdict, result = deny(f"webhook internal error: {exc}", 500, "InternalError"), "error"
        if not verdict.allowed:
            log.info("denied %s %s: %s", req.operation, req.label, verdict.message)
        self.metrics.admissions.labels(req.kind, req.operation, result).inc()
        self.metrics.seconds.labels(req.kind, req.operation).observe(time.perf_counter() - start)
        return encode_response(req.uid, verdict)

    def _mutate(self, req: AdmissionRequest, shadow: bool) -> tuple[Verdict, str]:
        if req.group or req.kind != "Pod":
            log.warning("pod webhook got %s %s; allowed unchanged", req.api_version, req.kind)
            return allow(), "skipped"
        plan = plan_pod(req.object, req.operation)
        if not plan.changes or req.object is None:
            log.debug("pod %s unchanged: %s", req.label, plan.skipped)
            return allow(), "skipped"
        if shadow:
            for change in plan.changes:
                self.metrics.shadow.labels(change).inc()
            log.info(
                "shadow: would set %s on %s (PodGroup %s)",
                " and ".join(plan.changes),
                req.label,
                plan.group,
            )
            return allow(), "shadow"
        log.info("pod %s (PodGroup %s): %s", req.label, plan.group, ", ".join(plan.changes))
        return Verdict(allowed=True, patch=pod_patch(req.object, plan)), "patched"

    async def _body(self, scope: Scope, receive: Receive) -> bytes:
        limit = self.max_body_bytes
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    raise HttpError(400, "bad Content-Length", "bad_length") from None
                if declared > limit:
                    raise HttpError(
                        413, f"body of {declared} bytes exceeds {limit} bytes", "too_large"
                    )
        parts: list[bytes] = []
        size = 0
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                raise HttpError(400, "client disconnected", "disconnected")
            chunk = msg.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise HttpError(413, f"body exceeds {limit} bytes", "too_large")
            parts.append(chunk)
            if not msg.get("more_body", False):
                return b"".join(parts)

    async def _probe(self, path: str, method: str, send: Send) -> None:
        if method not in ("GET", "HEAD"):
            raise HttpError(405, f"{path}: method {method} not allowed, use GET", "method")
        if path == "/healthz":
            await _respond(send, 200, b"ok", b"text/plain")
        elif path == "/readyz":
            ok, why = self.ready()
            await _respond(send, 200 if ok else 503, why.encode(), b"text/plain")
        else:
            data = generate_latest(self.metrics.registry)
            await _respond(send, 200, data, CONTENT_TYPE_LATEST.encode())


async def _respond(
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
