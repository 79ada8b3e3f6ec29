"""The webhook's ASGI app in-process: AdmissionReview in and out, bad input, metrics."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest

from pyextender.api.names import GANG_GATE, GROUP_NAME_ANNOTATION
from tests.unit.webhook_support import body, review
from webhook.app import WebhookApp
from webhook.metrics import Metrics
from webhook.queues import MemoryQueues


def call(
    app: WebhookApp,
    path: str,
    payload: bytes = b"",
    method: str = "POST",
    chunks: int = 1,
    headers: list[tuple[bytes, bytes]] | None = None,
) -> tuple[int, bytes]:
    """One HTTP request through the ASGI app; the body is sent in ``chunks`` pieces."""
    size = max(1, -(-len(payload) // chunks))
    pieces = [payload[i : i + size] for i in range(0, len(payload), size)] or [b""]
    messages = [
        {"type": "http.request", "body": p, "more_body": i < len(pieces) - 1}
        for i, p in enumerate(pieces)
    ]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(msg: dict[str, Any]) -> None:
        sent.append(msg)

    scope = {"type": "http", "path": path, "method": method, "headers": headers or []}
    asyncio.run(app(scope, receive, send))
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


@pytest.fixture
def app() -> WebhookApp:
    return WebhookApp(MemoryQueues(), lambda: (True, "ok"), Metrics(), max_body_bytes=64 * 1024)


def gang_pod(scheduler: str = "default-scheduler") -> dict[str, Any]:
    return {
        "metadata": {
            "name": "w-0",
            "namespace": "ns",
            "annotations": {GROUP_NAME_ANNOTATION: "pg"},
        },
        "spec": {"schedulerName": scheduler, "containers": [{"name": "c", "image": "busybox"}]},
    }


def response(raw: bytes) -> dict[str, Any]:
    doc = json.loads(raw)
    assert doc["apiVersion"] == "admission.k8s.io/v1" and doc["kind"] == "AdmissionReview"
    out: dict[str, Any] = doc["response"]
    return out


def metric(app: WebhookApp, name: str, labels: dict[str, str]) -> float:
    value = app.metrics.registry.get_sample_value(name, labels)
    return value or 0.0


def test_mutate_returns_json_patch(app: WebhookApp) -> None:
    status, raw = call(app, "/mutate/pods", body(review(gang_pod(), uid="abc")))
    assert status == 200
    resp = response(raw)
    assert resp["uid"] == "abc" and resp["allowed"] is True
    assert resp["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(resp["patch"]))
    assert patch == [
        {"op": "add", "path": "/spec/schedulerName", "value": "volcano"},
        {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": GANG_GATE}]},
        {
            "op": "add",
            "path": "/metadata/annotations/pyextender.io~1gated-by-webhook",
            "value": "true",
        },
    ]
    labels = {"kind": "Pod", "operation": "CREATE", "result": "patched"}
    assert metric(app, "pyextender_webhook_admissions_total", labels) == 1
    assert (
        metric(
            app,
            "pyextender_webhook_admission_duration_seconds_count",
            {"kind": "Pod", "operation": "CREATE"},
        )
        == 1
    )


def test_shadow_never_patches_but_counts(app: WebhookApp) -> None:
    status, raw = call(app, "/mutate/pods-shadow", body(review(gang_pod())))
    resp = response(raw)
    assert status == 200 and resp["allowed"] is True
    assert "patch" not in resp and "patchType" not in resp
    for change in ("scheduler_name", "scheduling_gate"):
        assert metric(app, "pyextender_webhook_shadow_changes_total", {"change": change}) == 1


def test_non_gang_pod_untouched(app: WebhookApp) -> None:
    pod = gang_pod()
    pod["metadata"]["annotations"] = {}
    resp = response(call(app, "/mutate/pods", body(review(pod)))[1])
    assert resp["allowed"] is True and "patch" not in resp


def test_pod_path_ignores_other_kinds(app: WebhookApp) -> None:
    doc = review({"metadata": {"name": "x"}}, group="apps", kind="Deployment")
    resp = response(call(app, "/mutate/pods", body(doc))[1])
    assert resp["allowed"] is True and "patch" not in resp


def test_validate_denial_is_an_admission_review(app: WebhookApp) -> None:
    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "q"},
        "spec": {"weight": 0},
    }
    doc = review(queue, group="scheduling.volcano.sh", version="v1beta1", kind="Queue")
    status, raw = call(app, "/validate", body(doc))
    resp = response(raw)
    assert status == 200 and resp["allowed"] is False
    assert resp["status"]["code"] == 422 and resp["status"]["reason"] == "Invalid"
    assert "spec.weight" in resp["status"]["message"]


def test_warnings_are_passed_on(app: WebhookApp) -> None:
    pg = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "ns"},
        "spec": {"minMember": 1, "minTaskMember": {"a": 2}},
    }
    doc = review(pg, group="scheduling.volcano.sh", version="v1beta1", kind="PodGroup")
    resp = response(call(app, "/validate", body(doc))[1])
    assert resp["allowed"] is True and "adds up to 2" in resp["warnings"][0]


def review_with(**changes: Any) -> bytes:
    doc = review(gang_pod())
    for key, value in changes.items():
        if key.startswith("request_"):
            doc["request"][key.removeprefix("request_")] = value
        else:
            doc[key] = value
    return body(doc)


BAD: list[tuple[str, bytes, int, str]] = [
    ("empty", b"", 400, "empty request body"),
    ("malformed", b'{"apiVersion": ', 400, "malformed JSON"),
    ("not json at all", b"\x00\xff\xfe garbage", 400, "malformed JSON"),
    ("a list", b"[1, 2]", 400, "must be a JSON object"),
    ("deep nesting", b"[" * 30_000 + b"]" * 30_000, 400, "malformed JSON"),
    ("v1beta1 review", review_with(apiVersion="admission.k8s.io/v1beta1"), 400, "apiVersion"),
    ("wrong kind", review_with(kind="Pod"), 400, "kind must be"),
    ("no request", review_with(request=None), 400, "request: required"),
    ("no uid", review_with(request_uid=None), 400, "request.uid"),
    ("uid not a string", review_with(request_uid=5), 400, "request.uid: must be a string"),
    ("bad operation", review_with(request_operation="PATCH"), 400, "request.operation"),
    ("object not a map", review_with(request_object=[1]), 400, "request.object"),
    ("kind not a map", review_with(request_kind="Pod"), 400, "request.kind"),
]


@pytest.mark.parametrize(
    ("payload", "status", "message"), [b[1:] for b in BAD], ids=[b[0] for b in BAD]
)
def test_bad_bodies_get_400_and_the_app_keeps_serving(
    app: WebhookApp, payload: bytes, status: int, message: str
) -> None:
    got, raw = call(app, "/mutate/pods", payload)
    assert got == status
    assert message in json.loads(raw)["error"]
    assert call(app, "/mutate/pods", body(review(gang_pod())))[0] == 200


def test_body_limit(app: WebhookApp) -> None:
    huge = b"x" * (app.max_body_bytes + 1)
    status, raw = call(app, "/validate", huge, chunks=8)
    assert status == 413 and "exceeds" in json.loads(raw)["error"]
    declared = [(b"content-length", str(10**9).encode())]
    status, raw = call(app, "/validate", b"{}", headers=declared)
    assert status == 413 and "1000000000 bytes" in json.loads(raw)["error"]
    assert metric(app, "pyextender_webhook_bad_requests_total", {"reason": "too_large"}) == 2


def test_chunked_body_is_joined(app: WebhookApp) -> None:
    status, raw = call(app, "/mutate/pods", body(review(gang_pod())), chunks=7)
    assert status == 200 and response(raw)["allowed"] is True


def test_routes_and_methods(app: WebhookApp) -> None:
    assert call(app, "/nope")[0] == 404
    assert call(app, "/validate", method="GET")[0] == 405
    assert call(app, "/metrics", method="POST")[0] == 405
    assert call(app, "/healthz", method="GET") == (200, b"ok")
    assert call(app, "/readyz", method="GET") == (200, b"ok")
    status, raw = call(app, "/metrics", method="GET")
    assert status == 200 and b"pyextender_webhook_admissions_total" in raw


def test_not_ready() -> None:
    app = WebhookApp(MemoryQueues(), lambda: (False, "waiting for the API server"))
    assert call(app, "/readyz", method="GET") == (503, b"waiting for the API server")


def test_internal_error_becomes_a_denial(app: WebhookApp, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: Any) -> Any:
        raise RuntimeError("bug")

    monkeypatch.setattr("webhook.app.plan_pod", boom)
    resp = response(call(app, "/mutate/pods", body(review(gang_pod())))[1])
    assert resp["allowed"] is False and resp["status"]["code"] == 500
    assert "internal error: bug" in resp["status"]["message"]


def test_metric_labels_from_requests_are_bounded(app: WebhookApp) -> None:
    for i in range(50):
        doc = review({"metadata": {"name": "x"}}, kind=f"Made-Up-{i}")
        call(app, "/mutate/pods", body(doc))
    assert (
        metric(
            app,
            "pyextender_webhook_admissions_total",
            {"kind": "other", "operation": "CREATE", "result": "skipped"},
        )
        == 50.0
    )
    kinds = {
        s.labels.get("kind")
        for m in app.metrics.registry.collect()
        for s in m.samples
        if "kind" in s.labels
    }
    assert kinds <= {"other", "Pod"}, f"request values became label values: {kinds}"
