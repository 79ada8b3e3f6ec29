"""The API calls the controllers make, as plain JSON dicts in and out.

Every call is blocking (the official client is synchronous); controllers run
them with ``asyncio.to_thread``. Responses are decoded with msgspec rather than
the client's model classes: we keep raw dicts everywhere and decode the Volcano
kinds with ``pyextender.api.volcano`` models where we need typed fields.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pyextender.api.client import body_of
from pyextender.api.raw_requests import MERGE_PATCH, RawApi, object_path
from pyextender.api.status_route import StatusRoute

_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode


@dataclass(frozen=True, slots=True)
class CustomKind:
    """A custom resource addressed through CustomObjectsApi."""

    group: str
    version: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


JOBS = CustomKind("batch.volcano.sh", "v1alpha1", "jobs", namespaced=True)
CRONJOBS = CustomKind("batch.volcano.sh", "v1alpha1", "cronjobs", namespaced=True)
PODGROUPS = CustomKind("scheduling.volcano.sh", "v1beta1", "podgroups", namespaced=True)
QUEUES = CustomKind("scheduling.volcano.sh", "v1beta1", "queues", namespaced=False)
COMMANDS = CustomKind("bus.volcano.sh", "v1alpha1", "commands", namespaced=True)


def _path(kind: CustomKind, namespace: str, name: str = "") -> str:
    """The REST path of ``kind`` (in ``namespace`` when namespaced), or of one object."""
    ns = namespace if kind.namespaced else ""
    return object_path(kind.group, kind.version, kind.plural, ns, name)


def not_found(exc: BaseException) -> bool:
    return isinstance(exc, ApiException) and exc.status == 404


def _json(resp: Any) -> dict[str, Any]:
    return _obj(body_of(resp))


def _obj(data: bytes) -> dict[str, Any]:
    if not data:
        return {}
    out = _decode(data)
    return out if isinstance(out, dict) else {}


class Kube:
    """Blocking wrappers over the API calls we need.

    Writes (creates, patches, deletes of pods, events and our kinds) go through
    libcurl (``pyextender.api.raw_requests``): a Volcano Job's pods are created one
    write each, and that path costs a third of the generated client's CPU per
    request. Reads and watches stay on the generated client.
    """

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.coordination = client.CoordinationV1Api(api)
        self.networking = client.NetworkingV1Api(api)
        self.apps = client.AppsV1Api(api)
        self.scheduling = client.SchedulingV1Api(api)
        self.status_route = StatusRoute(api)
        self.raw = RawApi(api.configuration)

    # -- list functions for informers (all namespaces) ----------------------
    def list_fn(self, kind: CustomKind) -> Callable[..., Any]:
        def list_all(**kwargs: Any) -> Any:
            return self.custom.list_cluster_custom_object(
                kind.group, kind.version, kind.plural, **kwargs
            )

        return list_all

    # -- custom objects -------------------------------------------------------
    def create(self, kind: CustomKind, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        return _obj(self.raw.post(_path(kind, namespace), body))

    def patch(
        self,
        kind: CustomKind,
        namespace: str,
        name: str,
        patch: dict[str, Any],
        status: bool = False,
    ) -> dict[str, Any]:
        """JSON merge patch of the object, or of its status: through the status
        subresource, or the object itself when the installed CRD has none (Volcano's
        PodGroup CRD; ``pyextender.api.status_route``)."""
        if status:
            ns = namespace if kind.namespaced else ""
            return _obj(
                self.status_route.patch_status(
                    self.raw, kind.group, kind.version, kind.plural, ns, name, patch
                )
            )
        return _obj(self.raw.patch(_path(kind, namespace, name), patch, MERGE_PATCH))

    def delete(self, kind: CustomKind, namespace: str, name: str) -> bool:
        """Delete (background propagation); raises ApiException 404 when already gone."""
        body = {"propagationPolicy": "Background"}
        self.raw.request("DELETE", _path(kind, namespace, name), _encode(body))
        return True

    # -- core -----------------------------------------------------------------
    def create_pod(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        return _obj(self.raw.post(f"/api/v1/namespaces/{namespace}/pods", body))

    def delete_pod(self, namespace: str, name: str, uid: str) -> dict[str, Any]:
        """Delete the pod with this uid. Volcano Job pods have fixed names, so a pod
        recreated under the same name must never be deleted in its predecessor's
        place: the uid precondition makes the API server answer 409 instead, which
        raises as a 404 here (the pod we meant is gone)."""
        body = _encode({"preconditions": {"uid": uid}}) if uid else None
        try:
            data = self.raw.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", body)
        except ApiException as exc:
            if exc.status == 409 and uid:
                gone = f"pod {namespace}/{name} with uid {uid} is gone"
                raise ApiException(status=404, reason=gone) from exc
            raise
        return _obj(data)

    def patch_pod(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        return _obj(self.raw.patch(path, patch, MERGE_PATCH))

    def create_core(self, kind: str, namespace: str, body: dict[str, Any]) -> bool:
        """Create a Service, ConfigMap, Secret or NetworkPolicy; False (and nothing
        changed) when one of that name exists."""
        fn = {
            "Service": self.core.create_namespaced_service,
            "ConfigMap": self.core.create_namespaced_config_map,
            "Secret": self.core.create_namespaced_secret,
            "NetworkPolicy": self.networking.create_namespaced_network_policy,
        }[kind]
        try:
            body_of(fn(namespace, body, _preload_content=False))
        except ApiException as exc:
            if exc.status != 409:
                raise
            return False
        return True

    def patch_configmap(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        """JSON merge patch of a ConfigMap; raises ApiException 404 when there is none."""
        body_of(
            self.core.patch_namespaced_config_map(
                name, namespace, patch, _content_type=MERGE_PATCH, _preload_content=False
            )
        )

    def create_event(self, namespace: str, body: dict[str, Any]) -> None:
        self.raw.post(f"/api/v1/namespaces/{namespace}/events", body)

    def patch_event(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        self.raw.patch(f"/api/v1/namespaces/{namespace}/events/{name}", patch, MERGE_PATCH)

    # -- leases ---------------------------------------------------------------
    def read_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            resp = self.coordination.read_namespaced_lease(name, namespace, _preload_content=False)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return _json(resp)

    def create_lease(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        resp = self.coordination.create_namespaced_lease(namespace, body, _preload_content=False)
        return _json(resp)

    def replace_lease(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """Optimistic update: body carries metadata.resourceVersion; 409 if someone else won."""
        resp = self.coordination.replace_namespaced_lease(
            name, namespace, body, _preload_content=False
        )
        return _json(resp)
