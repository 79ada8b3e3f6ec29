"""The PodGroup controller and a pod whose PodGroup the webhook named at creation.

An owned pod comes from our webhook already naming ``podgroup-<owner uid>``
(webhook/mutate_pod.py), a pod without an owner a fresh ``podgroup-<uuid>`` marked
as its own: the controller creates that PodGroup and writes nothing to the pod. A
pod that names no PodGroup is annotated by the controller, as before.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from controllers.podgroup import BARE_POD, PodGroupController
from controllers.runtime import Context
from pyextender.api.names import (
    GATED_BY_WEBHOOK_ANNOTATION,
    GROUP_NAME_ANNOTATION,
    OWN_PODGROUP_ANNOTATION,
)

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
    ctx.recorder.event = lambda obj, reason, message, warning=False: kube.calls.append(  # type: ignore[method-assign]
        ("event " + reason, str(obj["metadata"]["name"]))
    )
    ctl = PodGroupController(ctx)
    ctx.replicasets.remember(_replicaset(replicas))
    for pod in pods:
        ctx.pods.remember(pod)
        await ctl.reconcile(BARE_POD + f"ns/{pod['metadata']['name']}")
    return kube, ctx


def test_pods_named_at_creation_get_their_podgroup_and_no_write() -> None:
    group = f"podgroup-{RS_UID}"
    kube, ctx = asyncio.run(_run([_pod("web-a", group), _pod("web-b", group)]))
    assert kube.calls == [("create podgroups", group), ("event PodGroupCreated", "web-a")]
    assert ctx.podgroups.get(f"ns/{group}") is not None


def test_pods_that_name_none_are_annotated_as_before() -> None:
    kube, _ = asyncio.run(_run([_pod("web-a", None), _pod("web-b", None)]))
    group = f"podgroup-{RS_UID}"
    assert kube.calls == [
        ("create podgroups", group),
        ("event PodGroupCreated", "web-a"),
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


def _standalone(name: str, annotations: dict[str, str]) -> dict[str, Any]:
    pod = _pod(name, None)
    del pod["metadata"]["ownerReferences"]
    pod["metadata"]["annotations"].update(annotations)
    return pod


FRESH = "podgroup-5d1f0e4a-8b7c-4d2e-9f10-a1b2c3d4e5f6"


def test_a_standalone_pod_named_by_the_webhook_gets_that_podgroup_and_no_write() -> None:
    """The webhook gave it a fresh name marked as its own: the PodGroup of that name is
    created, owned by the pod, and nothing else is written (no annotation patch, and no
    PodGroupCreated event: the pod said which PodGroup it has from its creation)."""
    pod = _standalone("solo", {GROUP_NAME_ANNOTATION: FRESH, OWN_PODGROUP_ANNOTATION: "true"})
    kube, ctx = asyncio.run(_run([pod]))
    assert kube.calls == [("create podgroups", FRESH)]
    pg = ctx.podgroups.get(f"ns/{FRESH}")
    assert pg is not None and pg["spec"]["minMember"] == 1
    (owner,) = pg["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Pod", "solo", "pod-solo")


def test_a_standalone_pod_the_webhook_did_not_name_is_annotated_with_its_uid() -> None:
    """Created before its namespace was adopted, say: Volcano's name, written onto it."""
    kube, _ = asyncio.run(_run([_standalone("solo", {})]))
    assert kube.calls == [
        ("create podgroups", "podgroup-pod-solo"),
        ("event PodGroupCreated", "solo"),
        ("patch pod", "solo"),
    ]


def test_a_name_without_the_own_mark_is_a_gang_the_controller_leaves_alone() -> None:
    """A pod naming a PodGroup that looks like ours but is not marked as its own waits
    for whoever makes that PodGroup (an operator, say)."""
    kube, _ = asyncio.run(_run([_standalone("solo", {GROUP_NAME_ANNOTATION: FRESH})]))
    assert kube.calls == []


class RefusingKube(FakeKube):
    """The API server refuses the PodGroup, as our webhook does for a missing queue."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__()
        self.status, self.reason = status, reason

    def create(self, kind: Any, ns: str, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("create " + kind.plural, body["metadata"]["name"]))
        raise ApiException(status=self.status, reason=self.reason)


DENIED = (
    'admission webhook "volcano-crds.pyextender.io" denied the request: '
    'spec.queue: queue "nope" does not exist'
)


@pytest.mark.parametrize(
    ("status", "warned"),
    [(400, True), (403, True), (422, True), (429, False), (500, False), (404, False)],
)
def test_a_refused_podgroup_is_told_on_the_pod_and_retried(status: int, warned: bool) -> None:
    """A pod whose PodGroup the API server refuses stays held: it gets a Warning with
    the refusal (a transient error, none), and the error goes up for the worker's
    retry; nothing is written to the pod."""
    pod = _standalone("solo", {GROUP_NAME_ANNOTATION: FRESH, OWN_PODGROUP_ANNOTATION: "true"})
    kube = RefusingKube(status, DENIED)
    ctx = Context.empty(kube, "test", "volcano")  # type: ignore[arg-type]
    told: list[tuple[str, str, bool]] = []
    ctx.recorder.event = lambda obj, reason, message, warning=False: told.append(  # type: ignore[method-assign]
        (reason, message, warning)
    )
    ctl = PodGroupController(ctx)
    ctx.pods.remember(pod)
    with pytest.raises(ApiException):
        asyncio.run(ctl.reconcile(BARE_POD + "ns/solo"))
    assert kube.calls == [("create podgroups", FRESH)]
    if not warned:
        assert told == []
        return
    ((reason, message, warning),) = told
    assert (reason, warning) == ("FailedCreatePodGroup", True)
    assert (
        f"PodGroup {FRESH} (HTTP {status})" in message and 'queue "nope" does not exist' in message
    )
