"""StatusRoute against a real API server whose CRD gains, then loses, a status subresource.

A process that writes status (the sidecar's actuator, the controllers) remembers for a
minute whether a CRD has ``/status``. While the subresource exists the object's own
endpoint silently drops ``status``; while it does not, ``/status`` answers 404. Both
changes must be followed at the next write, with no write lost. A CRD of a test group
stands in for PodGroup (whose CRD differs between Volcano's release and ours), so the
session's other tests keep theirs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pyextender.api.raw_requests import RawApi
from pyextender.api.status_route import StatusRoute
from tests.e2e.kube import wait_for

pytestmark = pytest.mark.e2e

GROUP, VERSION, PLURAL = "routes.tests.pyextender.io", "v1", "routetests"
CRD = f"{PLURAL}.{GROUP}"


def _crd(with_status: bool) -> dict[str, Any]:
    free = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    version: dict[str, Any] = {
        "name": VERSION,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": {"type": "object", "properties": {"status": free}}},
    }
    if with_status:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": PLURAL, "singular": "routetest", "kind": "RouteTest"},
            "versions": [version],
        },
    }


@pytest.fixture
def crd(api: client.ApiClient) -> Iterator[client.ApiextensionsV1Api]:
    ext = client.ApiextensionsV1Api(api)
    ext.create_custom_resource_definition(_crd(with_status=False))
    try:
        yield ext
    finally:
        try:
            ext.delete_custom_resource_definition(CRD)
        except ApiException as exc:
            if exc.status != 404:
                raise


def _served_status(custom: client.CustomObjectsApi) -> bool | None:
    """Discovery's answer now: True/False, None while the group is not served yet."""
    try:
        doc = custom.get_api_resources(GROUP, VERSION)
    except ApiException:
        return None
    return any(r.name == f"{PLURAL}/status" for r in doc.resources)


def _switch(ext: client.ApiextensionsV1Api, custom: client.CustomObjectsApi, on: bool) -> None:
    """Give the CRD a status subresource (or take it away); wait until it is served so."""
    current = ext.read_custom_resource_definition(CRD)
    body = _crd(with_status=on)
    body["metadata"]["resourceVersion"] = current.metadata.resource_version
    ext.replace_custom_resource_definition(CRD, body)
    wait_for(f"/status {'served' if on else 'gone'}", lambda: _served_status(custom) is on)


def test_status_writes_follow_a_crd_that_gains_and_loses_status(
    api: client.ApiClient, crd: client.ApiextensionsV1Api, namespace: str
) -> None:
    custom = client.CustomObjectsApi(api)
    wait_for("the test CRD served", lambda: _served_status(custom) is False)
    custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL,
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "RouteTest", "metadata": {"name": "r"}},
    )  # fmt: skip
    raw = RawApi(api.configuration)
    # recheck_s 0: the test does not wait out the production minimum between rechecks
    route = StatusRoute(api, recheck_s=0.0)

    def write(phase: str, **meta: Any) -> dict[str, Any]:
        body: dict[str, Any] = {"status": {"phase": phase}}
        if meta:
            body["metadata"] = meta
        out: dict[str, Any] = json.loads(
            route.patch_status(raw, GROUP, VERSION, PLURAL, namespace, "r", body)
        )
        return out

    def stored() -> dict[str, Any]:
        obj = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "r")
        return obj  # type: ignore[no-any-return]

    write("one")
    assert stored()["status"] == {"phase": "one"}
    assert not route.has_status(GROUP, VERSION, PLURAL)  # remembered for a minute

    # the subresource comes: the object's endpoint now drops status; the route sees it
    # in the reply and sends the write to /status, annotations and precondition kept
    _switch(crd, custom, on=True)
    version = stored()["metadata"]["resourceVersion"]
    reply = write("two", resourceVersion=version, annotations={"a": "b"})
    now = stored()
    assert now["status"] == {"phase": "two"} == reply["status"]
    assert now["metadata"]["annotations"] == {"a": "b"}
    assert route.has_status(GROUP, VERSION, PLURAL)

    # and goes: /status answers 404, the route asks again, the write goes to the object
    _switch(crd, custom, on=False)
    write("three")
    assert stored()["status"] == {"phase": "three"}
    assert not route.has_status(GROUP, VERSION, PLURAL)
