"""HTTP framing of the webhook: a small ASGI app (run by uvicorn over TLS).

Routes: POST /mutate/pods, /mutate/pods-shadow, /mutate/volcano (defaults of
new Jobs and Queues), /validate (AdmissionReview v1); GET /healthz, /readyz, /metrics.

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
from collections.abc import Callable

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
from webhook.configuration import MUTATE_PODS, MUTATE_PODS_SHADOW, MUTATE_VOLCANO, VALIDATE
from webhook.metrics import Metrics
from webhook.mutate_pod import Adoption, plan_pod, pod_patch
from webhook.mutate_volcano import MUTATED_KINDS
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

DEFAULT_MAX_BODY_BYTES = 8 * 2**20
"""Largest body accepted (bytes): an AdmissionReview holds object and oldObject, each up to
etcd's 1.5 MiB request limit, plus JSON overhead."""

_ROUTES = (MUTATE_PODS, MUTATE_PODS_SHADOW, MUTATE_VOLCANO, VALIDATE)


class WebhookApp:
    """The ASGI callable."""

    def __init__(
        self,
        queues: QueueSource,
        ready: Callable[[], tuple[bool, str]],
        metrics: Metrics | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        adoption: Adoption | None = None,
    ) -> None:
        self.adoption = adoption or Adoption()
        self.queues = queues
        self.ready = ready
        self.metrics = metrics or Metrics()
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path: str = scope["path"].rstrip("/") or "/"
        method: str = scope["method"]
        try:
            if path in PROBES:
                await probe(path, method, send, self.ready, self.metrics.registry)
                return
            if path not in _ROUTES:
                raise HttpError(
                    404, f"unknown path {scope['path']!r}; use one of {', '.join(_ROUTES)}", "path"
                )
            if method != "POST":
                raise HttpError(405, f"{path}: method {method} not allowed, use POST", "method")
            body = await read_body(scope, receive, self.max_body_bytes)
            try:
                req = parse_review(body)
            except ReviewError as exc:
                raise HttpError(400, f"{path}: {exc}", exc.reason) from None
        except HttpError as exc:
            log.warning("refused %s %s: %s", method, scope["path"], exc)
            self.metrics.bad_requests.labels(exc.reason).inc()
            await respond(send, exc.status, json.dumps({"error": str(exc)}).encode())
            return
        await respond(send, 200, await self._admit(path, req))

    async def _admit(self, path: str, req: AdmissionRequest) -> bytes:
        start = time.perf_counter()
        try:
            if path == VALIDATE:
                # may read queues from the API server: keep the event loop free
                verdict = await asyncio.to_thread(validate, req, self.queues)
                result = "allowed" if verdict.allowed else "denied"
            elif path == MUTATE_VOLCANO:
                verdict, result = _default(req)
            else:
                verdict, result = self._mutate(req, shadow=path == MUTATE_PODS_SHADOW)
        except Exception as exc:
            log.exception("%s %s %s failed", path, req.operation, req.label)
            verdict, result = deny(f"webhook internal error: {exc}", 500, "InternalError"), "error"
        if not verdict.allowed:
            log.info("denied %s %s: %s", req.operation, req.label, verdict.message)
        kind, op = _label(req.kind, KINDS), _label(req.operation, OPERATIONS)
        self.metrics.admissions.labels(kind, op, result).inc()
        self.metrics.seconds.labels(kind, op).observe(time.perf_counter() - start)
        return encode_response(req.uid, verdict)

    def _mutate(self, req: AdmissionRequest, shadow: bool) -> tuple[Verdict, str]:
        if req.group or req.kind != "Pod":
            log.warning("pod webhook got %s %s; allowed unchanged", req.api_version, req.kind)
            return allow(), "skipped"
        plan = plan_pod(req.object, req.operation, self.adoption)
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
        return Verdict(allowed=True, patch=pod_patch(req.object, plan, self.adoption)), "patched"


def _default(req: AdmissionRequest) -> tuple[Verdict, str]:
    """Volcano's defaults for a new Job or Queue; anything else passes unchanged."""
    fill = MUTATED_KINDS.get((req.group, req.kind))
    if fill is None or req.operation != "CREATE" or req.object is None:
        log.warning(
            "defaults webhook got %s %s %s; allowed unchanged",
            req.operation,
            req.api_version,
            req.kind,
        )
        return allow(), "skipped"
    patch = fill(req.object)
    if not patch:
        return allow(), "skipped"
    log.info("%s: defaulted %s", req.label, ", ".join(p["path"] for p in patch))
    return Verdict(allowed=True, patch=patch), "patched"


KINDS = frozenset(
    {"Pod", "Job", "CronJob", "PodGroup", "Queue", "HyperNode", "Command", "Namespace"}
)
"""Kinds the webhook is configured for; anything else in a request is labelled "other"."""
OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})


def _label(value: str, known: frozenset[str]) -> str:
    """A metric label from a request field: only known values, so a client cannot
    create unbounded series by sending made-up kinds or operations."""
    return value if value in known else "other"
