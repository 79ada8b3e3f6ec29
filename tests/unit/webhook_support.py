"""Builders for webhook unit tests: AdmissionReview bodies and requests."""

from __future__ import annotations

import json
from typing import Any

from webhook.review import AdmissionRequest


def review(
    obj: dict[str, Any] | None,
    *,
    operation: str = "CREATE",
    group: str = "",
    version: str = "v1",
    kind: str = "Pod",
    namespace: str = "ns",
    name: str = "",
    old: dict[str, Any] | None = None,
    uid: str = "uid-1",
) -> dict[str, Any]:
    """An AdmissionReview v1 request document, as the API server sends it."""
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": kind.lower() + "s"},
            "operation": operation,
            "namespace": namespace,
            "name": name,
            "object": obj,
            "oldObject": old,
            "userInfo": {"username": "tester"},
        },
    }


def body(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc).encode()


def request(
    obj: dict[str, Any] | None,
    *,
    operation: str = "CREATE",
    old: dict[str, Any] | None = None,
    name: str = "",
) -> AdmissionRequest:
    """An AdmissionRequest for a Volcano object, group/version/kind taken from ``obj``."""
    doc = obj if obj is not None else old
    assert doc is not None
    group, _, version = doc["apiVersion"].partition("/")
    meta = doc.get("metadata") or {}
    return AdmissionRequest(
        uid="uid-1",
        group=group,
        version=version,
        kind=doc["kind"],
        operation=operation,
        namespace=meta.get("namespace", ""),
        name=name or meta.get("name", ""),
        object=obj,
        old_object=old,
    )
