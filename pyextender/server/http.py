"""HTTP framing of the extender: a small ASGI app (run by uvicorn).

Routes: POST /filter, /prioritize, /preempt, /bind (also under a /scheduler
prefix, kube-scheduler's urlPrefix convention); GET /healthz, /readyz, /metrics,
and /debug/decisions (the most recent filter/prioritize/bind outcomes, JSON;
``?pod=ns/name`` for one pod).
Bad input never reaches the cache: malformed JSON or wrong types -> 400,
unknown path -> 404, wrong method -> 405, body over the limit -> 413, each
with a JSON body ``{"Error": "..."}`` naming the problem.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

import msgspec
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from pyextender.api.extender import (
    ExtenderArgs,
    ExtenderBindingArgs,
    ExtenderPreemptionArgs,
    HostPriority,
)
from pyextender.server.verbs import BadRequest, Extender

log = logging.getLogger(__name__)

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

DEFAULT_MAX_BODY_BYTES = 16 * 2**20
"""Largest request body accepted (bytes); a preempt call with full victim pods is the biggest."""

_VERBS = ("filter", "prioritize", "preempt", "bind")


class HttpError(Exception):
    def __init__(self, status: int, message: str, reason: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


_args_decoder = msgspec.json.Decoder(ExtenderArgs)
_bind_decoder = msgspec.json.Decoder(ExtenderBindingArgs)
_preempt_decoder = msgspec.json.Decoder(ExtenderPreemptionArgs)
_encoder = msgspec.json.Encoder()
_priorities = msgspec.json.Encoder()


def _decode(decoder: msgspec.json.Decoder[Any], body: bytes, verb: str) -> Any:
    if not body:
        raise HttpError(400, f"{verb}: empty request body", "empty_body")
    try:
        return decoder.decode(body)
    except msgspec.ValidationError as exc:
        raise HttpError(400, f"{verb}: invalid request: {exc}", "invalid_type") from exc
    except msgspec.DecodeError as exc:
        raise HttpError(400, f"{verb}: malformed JSON: {exc}", "malformed_json") from exc


class ExtenderApp:
    """The ASGI callable."""

    def __init__(
        self,
        extender: Extender,
        ready: Callable[[], tuple[bool, str]],
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        self.extender = extender
        self.ready = ready
        self.max_body_bytes = max_body_bytes
        self.metrics = extender.metrics

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
        path: str = scope["path"].rstrip("/")
        if path.startswith("/scheduler/"):
            path = path[len("/scheduler") :]
        method: str = scope["method"]
        if path in ("/healthz", "/readyz", "/metrics", "/debug/decisions"):
            await self._probe(path, method, send, scope.get("query_string", b""))
            return
        verb = path.lstrip("/")
        start = time.perf_counter()
        status = 200
        try:
            if verb not in _VERBS:
                raise HttpError(
                    404,
                    f"unknown path {scope['path']!r}: verbs are "
                    + ", ".join("/" + v for v in _VERBS),
                    "unknown_verb",
                )
            if method != "POST":
                raise HttpError(405, f"{verb}: method {method} not allowed, use POST", "method")
            body = await self._body(scope, receive, verb)
            payload = await self._dispatch(verb, body)
            await _respond(send, 200, payload)
        except HttpError as exc:
            status = exc.status
            self.metrics.errors.labels(verb if verb in _VERBS else "unknown", exc.reason).inc()
            await _respond(send, exc.status, _encoder.encode({"Error": str(exc)}))
        except BadRequest as exc:
            status = 400
            self.metrics.errors.labels(verb, "bad_request").inc()
            await _respond(send, 400, _encoder.encode({"Error": f"{verb}: {exc}"}))
        except Exception as exc:
            status = 500
            log.exception("%s failed", verb)
            self.metrics.errors.labels(verb, "internal").inc()
            await _respond(send, 500, _encoder.encode({"Error": f"{verb}: internal error: {exc}"}))
        finally:
            label = verb if verb in _VERBS else "unknown"
            self.metrics.requests.labels(label, str(status)).inc()
            if status == 200:
                self.metrics.verb_seconds.labels(label).observe(time.perf_counter() - start)

    async def _body(self, scope: Scope, receive: Receive, verb: str) -> bytes:
        limit = self.max_body_bytes
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    raise HttpError(400, f"{verb}: bad Content-Length", "bad_length") from None
                if declared > limit:
                    raise HttpError(
                        413, f"{verb}: body of {declared} bytes exceeds {limit} bytes", "too_large"
                    )
        parts: list[bytes] = []
        size = 0
        while True:
            msg = await receive()
            chunk = msg.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise HttpError(413, f"{verb}: body exceeds {limit} bytes", "too_large")
            parts.append(chunk)
            if not msg.get("more_body", False):
                return b"".join(parts)

    async def _dispatch(self, verb: str, body: bytes) -> bytes:
        ext = self.extender
        if verb == "filter":
            return _encoder.encode(ext.filter(_decode(_args_decoder, body, verb)))
        if verb == "prioritize":
            result: list[HostPriority] = ext.prioritize(_decode(_args_decoder, body, verb))
            return _priorities.encode(result)
        if verb == "preempt":
            return _encoder.encode(ext.preempt(_decode(_preempt_decoder, body, verb)))
        return _encoder.encode(await ext.bind(_decode(_bind_decoder, body, verb)))

    async def _probe(self, path: str, method: str, send: Send, query: bytes) -> None:
        if method not in ("GET", "HEAD"):
            await _respond(send, 405, b'{"Error":"use GET"}')
            return
        if path == "/healthz":
            await _respond(send, 200, b"ok", b"text/plain")
        elif path == "/readyz":
            ok, why = self.ready()
            await _respond(send, 200 if ok else 503, why.encode(), b"text/plain")
        elif path == "/debug/decisions":
            # ?pod=<namespace>/<name> narrows to one pod
            wanted = parse_qs(query.decode()).get("pod", [""])[0]
            rows = [d for d in self.extender.decisions if not wanted or d["pod"] == wanted]
            await _respond(send, 200, _encoder.encode(rows))
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
