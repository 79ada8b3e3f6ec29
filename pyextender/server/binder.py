"""Creates Binding objects through the API server (blocking; run in a thread)."""

from __future__ import annotations

from typing import Any, Protocol

import msgspec
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pyextender.api.client import body_of
from pyextender.api.raw_requests import RawApi


class BindConflict(Exception):
    """The API server refused the binding: the pod is bound already, or its UID changed."""


class Binder(Protocol):
    def bind(
        self, namespace: str, name: str, uid: str, node: str, annotations: dict[str, str]
    ) -> None: ...

    def read_pod(self, namespace: str, name: str) -> dict[str, Any] | None: ...


class ApiBinder:
    """POST pods/binding, as kube-scheduler's DefaultBinder does."""

    def __init__(self, api: client.ApiClient, raw: RawApi | None = None) -> None:
        self.core = client.CoreV1Api(api)
        self.raw = raw or RawApi(api.configuration)
        """One Binding per pod: through libcurl, a third of the generated client's CPU."""

    def bind(
        self, namespace: str, name: str, uid: str, node: str, annotations: dict[str, str]
    ) -> None:
        """``annotations`` ride on the Binding: the API server copies them onto the
        pod in the same write (no second request per pod)."""
        meta: dict[str, Any] = {"name": name, "namespace": namespace}
        if uid:
            meta["uid"] = uid
        if annotations:
            meta["annotations"] = annotations
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        try:
            self.raw.post(f"/api/v1/namespaces/{namespace}/pods/{name}/binding", body)
        except ApiException as exc:
            if exc.status == 409:
                raise BindConflict(str(exc.reason)) from exc
            raise

    def read_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The pod as JSON, or None when it does not exist."""
        try:
            read: Any = self.core.read_namespaced_pod
            resp = read(name, namespace, _preload_content=False)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        doc: dict[str, Any] = msgspec.json.decode(body_of(resp))
        return doc
