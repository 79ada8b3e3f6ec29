"""The PodGroup controller and a pod whose PodGroup the webhook named at creation.

An owned pod comes from our webhook already naming ``podgroup-<owner uid>``
(webhook/mutate_pod.py): the controller creates that PodGroup and writes nothing to
the pod. A pod that names no PodGroup is annotated by the controller, as before.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controllers.podgroup import BARE_POD, PodGroupController
from controllers.runtime import Context
from pyextender.api.names import GATED_BY_WEBHOOK_ANNOTATION, GROUP_NAME_ANNOTATION

RS_UID = "rs-uid-1"


class FakeKube:
    """The writes the PodGroup controller makes, recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.version = 10

    def _stamp(self, body: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        meta = {**body["metadata"], "uid": f"uid-{body['metadata']['name']}"}
        return {**body, "metadata": {**meta, "resourceVersion": str(self.version)}}

    def create(self, kind: Any, ns: str, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("create " + kind.plural, body["metadata"]["name"]))
        return self._stamp({**body, "metadata": {**body["metadata"], "namespace": ns}})

    def patch_pod(self, ns: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("patch pod", name))
        self.version += 1
        return {"metadata": {"name": name, "namespace": ns, "resourceVersion": str(self.version)}}

    def create_event(self, ns: str, body: dict[str, Any]) -> None:
        pass

    def patch_event(self, ns: str, name: str, patch: dict[str, Any]) -> None:
        pass


def _replicaset(replicas: int) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "namespace": "ns", "uid": RS_UID, "resourceVersion": "1"},
        "spec": {"replicas": replicas},
    }


def _pod(name: str, group: str | None) -> dict[str, Any]:
    annotations = {GATED_BY_WEBHOOK_ANNOTATION: "true"}
    if group is not None:
        annotations[GROUP_NAME_ANNOTATION] = group
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": RS_UID}
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"pod-{name}",
            "resourceVersion": "5",
            "annotations": annotations,
            "ownerReferences": [{**owner, "controller": True}],
        },
        "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "x"}]},
        "status": {"phase": "Pending"},
    }


async def _run(pods: list[dict[str, Any]], replicas: int = 2) -> tuple[FakeKube, Context]:
    kube = FakeKube()
    ctx = Context.empty(kube, "test", "volcano")  # type: ignore[arg-type]
    ctl = PodGroupController(ctx)
    ctx.replicasets.remember(_replicaset(replicas))
    for pod in pods:
        ctx.pods.remember(pod)
        await ctl.reconcile(BARE_POD + f"ns/{pod['metadata']['name']}")
    return kube, ctx


def test_pods_named_at_creation_get_their_podgroup_and_no_write() -> None:
    group = f"podgroup-{RS_UID}"
    kube, ctx = asyncio.run(_run([_pod("web-a", group), _pod("web-b", group)]))
    assert kube.calls == [("create podgroups", group)]
    assert ctx.podgroups.get(f"ns/{group}") is not None


def test_pods_that_name_none_are_annotated_as_before() -> None:
    kube, _ = asyncio.run(_run([_pod("web-a", None), _pod("web-b", None)]))
    group = f"podgroup-{RS_UID}"
    assert kube.calls == [
        ("create podgroups", group),
        ("patch pod", "web-a"),
        ("patch pod", "web-b"),
    ]


def test_a_pod_naming_another_podgroup_is_left_to_it() -> None:
    """A gang member (or any pod naming a PodGroup that is not the one we would give
    it) waits for that PodGroup: the controller creates none for it."""
    kube, _ = asyncio.run(_run([_pod("web-a", "train")]))
    assert kube.calls == []


@pytest.mark.parametrize("group", [f"podgroup-{RS_UID}", None], ids=["named", "unnamed"])
def test_no_podgroup_for_the_pods_of_an_owner_scaled_to_zero(group: str | None) -> None:
    """Its PodGroup was deleted at zero replicas (_reconcile_owner); a pod event of
    one of its leaving pods must not make it again."""
    kube, _ = asyncio.run(_run([_pod("web-a", group)], replicas=0))
    assert kube.calls == []
