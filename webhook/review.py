"""AdmissionReview v1 framing: decode a request, encode a response.

Only ``admission.k8s.io/v1`` is spoken (the webhook configurations ask for
``admissionReviewVersions: [v1]``). A body that is not a v1 AdmissionReview
with a request is a ``ReviewError`` (HTTP 400); everything after that is
answered as an AdmissionReview, so the API server always gets a verdict it
can show to the user.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"

OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")


class ReviewError(ValueError):
    """A body that is not a usable AdmissionReview request; ``reason`` labels the metric."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class AdmissionRequest:
    """The parts of ``AdmissionReview.request`` the webhook uses."""

    uid: str
    group: str
    version: str
    kind: str
    operation: str
    namespace: str = ""
    name: str = ""
    sub_resource: str = ""
    object: dict[str, Any] | None = None
    old_object: dict[str, Any] | None = None
    dry_run: bool = False
    user: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def label(self) -> str:
        """``kind namespace/name`` for logs."""
        obj = self.object or self.old_object or {}
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        name = self.name or (meta or {}).get("name") or (meta or {}).get("generateName") or "?"
        where = f"{self.namespace}/{name}" if self.namespace else str(name)
        return f"{self.kind} {where}"


@dataclass(slots=True)
class Verdict:
    """What the webhook decided; encoded as ``AdmissionReview.response``."""

    allowed: bool
    message: str = ""
    code: int = 0
    """HTTP status the API server returns to the client when denied (0: the server's default)."""
    reason: str = ""
    """Machine-readable reason (metav1.StatusReason), e.g. "Invalid"."""
    patch: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def allow(warnings: list[str] | None = None) -> Verdict:
    return Verdict(allowed=True, warnings=list(warnings or []))


def deny(message: str, code: int = 422, reason: str = "Invalid") -> Verdict:
    """Refuse the request. 422/Invalid is what the API server itself answers for bad fields."""
    return Verdict(allowed=False, message=message, code=code, reason=reason)


def _str(data: Mapping[str, Any], key: str, where: str, required: bool = False) -> str:
    value = data.get(key)
    if value is None:
        if required:
            raise ReviewError(f"{where}.{key}: required field is missing", "missing_field")
        return ""
    if not isinstance(value, str):
        raise ReviewError(f"{where}.{key}: must be a string", "invalid_type")
    return value


def _obj(data: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ReviewError(f"request.{key}: must be an object or null", "invalid_type")
    return value


def parse_review(body: bytes) -> AdmissionRequest:
    """Decode an AdmissionReview v1 request body. Raises ReviewError naming the problem."""
    if not body:
        raise ReviewError("empty request body: expected an AdmissionReview", "empty_body")
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:  # RecursionError: absurdly nested JSON
        raise ReviewError(f"malformed JSON: {exc}", "malformed_json") from None
    if not isinstance(data, dict):
        raise ReviewError("body must be a JSON object (an AdmissionReview)", "invalid_type")
    api_version, kind = data.get("apiVersion"), data.get("kind")
    if kind != KIND:
        raise ReviewError(f"kind must be {KIND!r}, got {kind!r}", "wrong_kind")
    if api_version != API_VERSION:
        raise ReviewError(
            f"apiVersion must be {API_VERSION!r}, got {api_version!r} "
            "(configure admissionReviewVersions: [v1])",
            "wrong_api_version",
        )
    req = data.get("request")
    if not isinstance(req, dict):
        raise ReviewError("request: required object is missing", "missing_field")
    gvk = req.get("kind")
    if not isinstance(gvk, dict):
        raise ReviewError("request.kind: required object is missing", "missing_field")
    operation = _str(req, "operation", "request", required=True)
    if operation not in OPERATIONS:
        raise ReviewError(
            f"request.operation: must be one of {', '.join(OPERATIONS)}, got {operation!r}",
            "invalid_value",
        )
    user_info = req.get("userInfo")
    user = user_info.get("username", "") if isinstance(user_info, dict) else ""
    return AdmissionRequest(
        uid=_str(req, "uid", "request", required=True),
        group=_str(gvk, "group", "request.kind"),
        version=_str(gvk, "version", "request.kind", required=True),
        kind=_str(gvk, "kind", "request.kind", required=True),
        operation=operation,
        namespace=_str(req, "namespace", "request"),
        name=_str(req, "name", "request"),
        sub_resource=_str(req, "subResource", "request"),
        object=_obj(req, "object"),
        old_object=_obj(req, "oldObject"),
        dry_run=req.get("dryRun") is True,
        user=user if isinstance(user, str) else "",
    )


def encode_response(uid: str, verdict: Verdict) -> bytes:
    """The AdmissionReview v1 response body for ``verdict``."""
    response: dict[str, Any] = {"uid": uid, "allowed": verdict.allowed}
    if not verdict.allowed:
        status: dict[str, Any] = {"status": "Failure", "message": verdict.message}
        if verdict.code:
            status["code"] = verdict.code
        if verdict.reason:
            status["reason"] = verdict.reason
        response["status"] = status
    if verdict.allowed and verdict.patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(verdict.patch).encode()).decode()
    if verdict.warnings:
        # the API server may truncate warnings over 256 characters; cut them ourselves, visibly
        response["warnings"] = [w if len(w) <= 256 else w[:253] + "..." for w in verdict.warnings]
    return json.dumps({"apiVersion": API_VERSION, "kind": KIND, "response": response}).encode()
