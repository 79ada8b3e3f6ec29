"""Framework mode's PreBind write: the placement chosen at Reserve, onto the pod.

The GPU indices normally ride on the Binding: the bind verb's in extender mode,
the shim's Bind in framework mode (Reserve's reply names them). Only when
another bind plugin bound one of our pods (a profile with DefaultBinder first at
bind) does the shim ask PreBind, and the sidecar patches the pod. The patch
carries the pod's UID as a precondition: a pod re-created under the same name
is never annotated.
"""

from __future__ import annotations

from typing import Any, Protocol

from kubernetes import client

from pyextender.api.client import body_of


class Annotator(Protocol):
    def __call__(self, namespace: str, name: str, uid: str, annotations: dict[str, str]) -> None:
        """Set ``annotations`` on the pod (blocking; run in a thread); raise on failure."""
        ...


class PodAnnotator:
    """A merge patch of metadata.annotations, with metadata.uid as the precondition."""

    def __init__(self, api: client.ApiClient) -> None:
        self.core = client.CoreV1Api(api)

    def __call__(self, namespace: str, name: str, uid: str, annotations: dict[str, str]) -> None:
        body = {"metadata": {"uid": uid, "annotations": annotations}}
        patch: Any = self.core.patch_namespaced_pod
        body_of(patch(name, namespace, body, _preload_content=False))
