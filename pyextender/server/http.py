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

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

import msgspec

from pyextender.api.asgi import (
    PROBES,
    HttpError,
    Receive,
    Scope,
    Send,
    lifespan,
    probe,
    read_body,
    respond,
)
from pyextender.api.extender import (
    ExtenderArgs,
    ExtenderBindingArgs,
    ExtenderPreemptionArgs,
)
from pyextender.server.extender_wire import ExtenderArgsWire
from pyextender.server.limits import DEFAULT_MAX_BODY_BYTES
from pyextender.server.verbs import BadRequest, Extender

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ExtenderTLS:
    """HTTPS on the extender port, optionally with client certificates.

    Off by default: the chart binds the extender to the Pod's loopback, where only
    its own kube-scheduler reaches it. Turn it on when the extender must listen
    on a reachable address; with ``client_ca`` only a caller holding a certificate
    from that CA (kube-scheduler's extender ``tlsConfig``) can call bind.
    """

    cert: str | None = None
    key: str | None = None
    client_ca: str | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.cert)

    def uvicorn_args(self) -> dict[str, Any]:
        if not self.cert:
            return {}
        args: dict[str, Any] = {"ssl_certfile": self.cert, "ssl_keyfile": self.key}
        if self.client_ca:
            args["ssl_ca_certs"] = self.client_ca
            args["ssl_cert_reqs"] = ssl.CERT_REQUIRED
        return args


_VERBS = ("filter", "prioritize", "preempt", "bind")


_args_decoder = msgspec.json.Decoder(ExtenderArgs)
_wire_decoder = msgspec.json.Decoder(ExtenderArgsWire)
_bind_decoder = msgspec.json.Decoder(ExtenderBindingArgs)
_preempt_decoder = msgspec.json.Decoder(ExtenderPreemptionArgs)
_encoder = msgspec.json.Encoder()


def _decode(decoder: msgspec.json.Decoder[Any], body: bytes, verb: str) -> Any:
    if not body:
        raise HttpError(400, f"{verb}: empty request body", "empty_body")
    try:
        return decoder.decode(body)
    except msgspec.ValidationError as exc:
        raise HttpError(400, f"{verb}: invalid request: {exc}", "invalid_type") from exc
    except msgspec.DecodeError as exc:
        raise HttpError(400, f"{verb}: malformed JSON: {exc}", "malformed_json") from exc
    except RecursionError as exc:  # absurdly nested JSON, even under keys we skip
        raise HttpError(400, f"{verb}: malformed JSON: {exc}", "malformed_json") from None


class ExtenderApp:
    """The ASGI callable."""

    def __init__(
        self,
        extender: Extender,
        ready: Callable[[], tuple[bool, str]],
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        health: Callable[[], tuple[bool, str]] | None = None,
    ) -> None:
        self.extender = extender
        self.ready = ready
        self.health = health
        """/healthz: false once a background loop has died (None: always healthy)."""
        self.max_body_bytes = max_body_bytes
        self.metrics = extender.metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path: str = scope["path"].rstrip("/")
        if path.startswith("/scheduler/"):
            path = path[len("/scheduler") :]
        method: str = scope["method"]
        if path in PROBES or path == "/debug/decisions":
            await self._probe(path, method, send, scope.get("query_string", b""))
            return
        verb = path.lstrip("/")
        start = time.perf_counter()
        status = 200
        # filter and prioritize are in flight from their first byte read to their reply
        # sent: the scheduling cycle's thread gives way to them meanwhile (courtesy)
        quick = verb in ("filter", "prioritize")
        if quick:
            self.extender.courtesy.enter()
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
            body = await read_body(scope, receive, self.max_body_bytes, verb)
            if verb == "bind":
                # a bind may wait for its gang: stop waiting if the caller goes away,
                # so a kube-scheduler that gave up does not count toward the quorum
                payload = await _unless_disconnected(self._dispatch(verb, body), receive)
                if payload is None:
                    status = 499
                    self.metrics.errors.labels(verb, "client_gone").inc()
                    return
            else:
                payload = await self._dispatch(verb, body)
            await respond(send, 200, payload)
        except HttpError as exc:
            status = exc.status
            self.metrics.errors.labels(verb if verb in _VERBS else "unknown", exc.reason).inc()
            await respond(send, exc.status, _encoder.encode({"Error": str(exc)}))
        except BadRequest as exc:
            status = 400
            self.metrics.errors.labels(verb, "bad_request").inc()
            await respond(send, 400, _encoder.encode({"Error": f"{verb}: {exc}"}))
        except Exception as exc:
            status = 500
            log.exception("%s failed", verb)
            self.metrics.errors.labels(verb, "internal").inc()
            await respond(send, 500, _encoder.encode({"Error": f"{verb}: internal error: {exc}"}))
        finally:
            if quick:
                self.extender.courtesy.leave()
            label = verb if verb in _VERBS else "unknown"
            self.metrics.requests.labels(label, str(status)).inc()
            if status == 200:
                self.metrics.verb_seconds.labels(label).observe(time.perf_counter() - start)

    async def _dispatch(self, verb: str, body: bytes) -> bytes:
        ext = self.extender
        if verb in ("filter", "prioritize"):
            wire = _decode(_wire_decoder, body, verb)
            try:
                return ext.filter_json(wire) if verb == "filter" else ext.prioritize_json(wire)
            except msgspec.ValidationError:
                # Pod or NodeNames has a wrong type: the full decoder names the path
                _decode(_args_decoder, body, verb)
                raise
        if verb == "preempt":
            return _encoder.encode(await ext.preempt(_decode(_preempt_decoder, body, verb)))
        return _encoder.encode(await ext.bind(_decode(_bind_decoder, body, verb)))

    async def _probe(self, path: str, method: str, send: Send, query: bytes) -> None:
        try:
            if path != "/debug/decisions":
                await probe(path, method, send, self.ready, self.metrics.registry, self.health)
                return
            if method not in ("GET", "HEAD"):
                raise HttpError(405, f"{path}: method {method} not allowed, use GET", "method")
        except HttpError as exc:
            await respond(send, exc.status, _encoder.encode({"Error": str(exc)}))
            return
        # ?pod=<namespace>/<name> narrows to one pod
        wanted = parse_qs(query.decode()).get("pod", [""])[0]
        rows = [d for d in self.extender.decisions if not wanted or d["pod"] == wanted]
        await respond(send, 200, _encoder.encode(rows))


async def _unless_disconnected(work: Awaitable[bytes], receive: Receive) -> bytes | None:
    """``work``'s result, or None (``work`` cancelled) when the client disconnects first."""
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_disconnect(receive))
    try:
        await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if task.done():
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return None


async def _disconnect(receive: Receive) -> None:
    """Returns when the server reports that the client closed the connection."""
    while True:
        msg = await receive()
        if msg.get("type") == "http.disconnect":
            return
        # after the body a server only reports the disconnect; anything else
        # (a test harness, an unusual server) must not turn this into a busy loop
        await asyncio.sleep(0.05)
