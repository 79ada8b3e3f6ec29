"""Pod mutation: which pods are routed to us and gated, and the exact JSONPatch."""

from __future__ import annotations

from typing import Any

import pytest

from pyextender.api.names import (
    GANG_GATE,
    GROUP_NAME_ANNOTATION,
    OWN_PODGROUP_ANNOTATION,
    own_podgroup_name,
)
from webhook.mutate_pod import Adoption, plan_pod, pod_patch

FRESH = "podgroup-0f5e2f6c-1111-4222-8333-444455556666"
"""The name tests give a bare pod's own PodGroup (the webhook's is a random uuid4)."""


def fresh() -> str:
    return FRESH


SCHED = {"op": "add", "path": "/spec/schedulerName", "value": "volcano"}
GATE_LIST = {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": GANG_GATE}]}
GATE_APPEND = {"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": GANG_GATE}}
GATED_BY = {
    "op": "add",
    "path": "/metadata/annotations/pyextender.io~1gated-by-webhook",
    "value": "true",
}
OWN_GROUP = [
    {"op": "add", "path": "/metadata/annotations/scheduling.k8s.io~1group-name", "value": FRESH},
    {"op": "add", "path": "/metadata/annotations/pyextender.io~1own-podgroup", "value": "true"},
]


def pod(group: str | None = "pg", **spec: Any) -> dict[str, Any]:
    annotations = {GROUP_NAME_ANNOTATION: group} if group is not None else {"other": "x"}
    return {
        "metadata": {"name": "p", "annotations": annotations},
        "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec},
    }


CASES: list[tuple[str, dict[str, Any], str, list[dict[str, Any]], str]] = [
    # (case, pod, operation, expected patch, expected skip reason fragment)
    (
        "defaulted scheduler",
        pod(schedulerName="default-scheduler"),
        "CREATE",
        [SCHED, GATE_LIST],
        "",
    ),
    ("no scheduler at all", pod(), "CREATE", [SCHED, GATE_LIST], ""),
    ("empty scheduler", pod(schedulerName=""), "CREATE", [SCHED, GATE_LIST], ""),
    ("already volcano", pod(schedulerName="volcano"), "CREATE", [GATE_LIST], ""),
    (
        "other gates kept",
        pod(schedulerName="volcano", schedulingGates=[{"name": "example.com/quota"}]),
        "CREATE",
        [GATE_APPEND],
        "",
    ),
    ("null gates", pod(schedulingGates=None), "CREATE", [SCHED, GATE_LIST], ""),
    (
        "already gated and ours",
        pod(schedulerName="volcano", schedulingGates=[{"name": GANG_GATE}]),
        "CREATE",
        [],
        "already",
    ),
    (
        "gated but default scheduler",
        pod(schedulerName="default-scheduler", schedulingGates=[{"name": GANG_GATE}]),
        "CREATE",
        [SCHED],
        "",
    ),
    ("another scheduler", pod(schedulerName="yunikorn"), "CREATE", [], "another scheduler"),
    ("not a gang member", pod(group=None), "CREATE", [], "neither a gang member"),
    ("empty group name", pod(group=""), "CREATE", [], "neither a gang member"),
    (
        "bare pod of the default scheduler",
        pod(group=None, schedulerName="default-scheduler"),
        "CREATE",
        [],
        "neither a gang member",
    ),
    (
        "bare pod naming us",
        pod(group=None, schedulerName="volcano"),
        "CREATE",
        [GATE_LIST, GATED_BY, *OWN_GROUP],
        "",
    ),
    (
        "bare pod naming us, bound",
        pod(group=None, schedulerName="volcano", nodeName="node-1"),
        "CREATE",
        [],
        "already bound",
    ),
    ("already bound", pod(nodeName="node-1"), "CREATE", [], "already bound"),
    ("update", pod(), "UPDATE", [], "only pod creation"),
    (
        "no spec",
        {"metadata": {"annotations": {GROUP_NAME_ANNOTATION: "pg"}}},
        "CREATE",
        [],
        "no spec",
    ),
    (
        "annotations not a map",
        {"metadata": {"annotations": "x"}, "spec": {}},
        "CREATE",
        [],
        "neither a gang member",
    ),
]


@pytest.mark.parametrize(
    ("pod_doc", "operation", "expected", "skipped"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_patch(
    pod_doc: dict[str, Any], operation: str, expected: list[dict[str, Any]], skipped: str
) -> None:
    plan = plan_pod(pod_doc, operation, fresh_name=fresh)
    if any(op in expected for op in (GATE_LIST, GATE_APPEND)) and GATED_BY not in expected:
        expected = [*expected, GATED_BY]  # a gated pod is marked as gated by us
    assert pod_patch(pod_doc, plan) == expected
    assert bool(plan.changes) == bool(expected)
    if skipped:
        assert skipped in plan.skipped
    else:
        assert plan.skipped == ""


def test_plan_names_group_and_changes() -> None:
    plan = plan_pod(pod(group="train-1"), "CREATE")
    assert plan.group == "train-1"
    assert plan.changes == ("scheduler_name", "scheduling_gate")


def test_missing_pod() -> None:
    assert plan_pod(None, "CREATE").skipped


def test_a_bare_pod_without_annotations_gets_the_map() -> None:
    """A bare pod may have no annotations at all: the marks come as the whole map (an
    "add" below a missing member would fail the patch, and the pod's creation)."""
    doc = {"metadata": {"name": "p"}, "spec": {"schedulerName": "volcano", "containers": []}}
    plan = plan_pod(doc, "CREATE", fresh_name=fresh)
    assert plan.group == FRESH and plan.changes == ("scheduling_gate", "group_name")
    assert pod_patch(doc, plan) == [
        GATE_LIST,
        {
            "op": "add",
            "path": "/metadata/annotations",
            "value": {
                "pyextender.io/gated-by-webhook": "true",
                GROUP_NAME_ANNOTATION: FRESH,
                OWN_PODGROUP_ANNOTATION: "true",
            },
        },
    ]


def test_a_bare_pod_without_an_owner_is_given_a_fresh_podgroup_of_its_own() -> None:
    """Its uid (Volcano's name for its PodGroup) is not known at admission: it gets
    podgroup-<a fresh uuid>, marked as its own, which the PodGroup controller then
    creates and never writes onto the pod (own_podgroup_name reads it back). Each pod
    gets another name, and a pod that comes back (reinvocation) is left as it is."""
    doc = {"metadata": {"name": "p"}, "spec": {"schedulerName": "volcano", "containers": []}}
    first, second = plan_pod(doc, "CREATE"), plan_pod(doc, "CREATE")
    assert first.own_group and first.name_group.startswith("podgroup-")
    assert len(first.name_group) == len("podgroup-") + 36  # a uuid, as Volcano's names
    assert first.name_group != second.name_group
    gate, annotations = pod_patch(doc, first)
    assert gate == GATE_LIST and annotations["path"] == "/metadata/annotations"
    after = {
        "metadata": {"name": "p", "annotations": annotations["value"]},
        "spec": {**doc["spec"], "schedulingGates": gate["value"]},
    }
    assert own_podgroup_name({**after["metadata"], "uid": "the-pods-uid"}) == first.name_group
    again = plan_pod(after, "CREATE")
    assert not again.changes and "already" in again.skipped


def test_the_own_mark_alone_names_no_podgroup() -> None:
    """The mark without a group-name annotation (a user's, say) is no name: such a pod
    is bare, and gets a fresh name like any other."""
    doc = {
        "metadata": {"name": "p", "annotations": {OWN_PODGROUP_ANNOTATION: "true"}},
        "spec": {"schedulerName": "volcano", "containers": []},
    }
    assert own_podgroup_name({**doc["metadata"], "uid": "u1"}) == "podgroup-u1"
    assert plan_pod(doc, "CREATE", fresh_name=fresh).name_group == FRESH


BARRIER_MARKS = {"pyextender.io/gang-barrier": "true", "pyextender.io/gated-by-webhook": "true"}


def _whole_map(values: dict[str, str]) -> list[dict[str, Any]]:
    """The patch of a pod that had no annotations: the whole map in one operation."""
    return [{"op": "add", "path": "/metadata/annotations", "value": values}]


def test_a_bare_pod_is_held_at_the_barrier_with_the_framework_shim() -> None:
    doc = {"metadata": {"name": "p"}, "spec": {"schedulerName": "volcano", "containers": []}}
    adoption = Adoption(barrier=True)
    plan = plan_pod(doc, "CREATE", adoption, fresh_name=fresh)
    assert plan.changes == ("gang_barrier", "group_name")
    own = {GROUP_NAME_ANNOTATION: FRESH, OWN_PODGROUP_ANNOTATION: "true"}
    assert pod_patch(doc, plan, adoption) == _whole_map({**BARRIER_MARKS, **own})


def _owned(refs: list[dict[str, Any]], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "web-abc12", "ownerReferences": refs}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"metadata": meta, "spec": {"schedulerName": "volcano", "containers": []}}


RS = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs-1"}


def test_an_owned_pod_is_given_its_owners_podgroup_at_creation() -> None:
    """A ReplicaSet's pod names podgroup-<the ReplicaSet's uid>, the PodGroup the
    controller makes for the owner's pods, in the same patch as its gate: the controller
    then writes nothing to it."""
    doc = _owned([{**RS, "controller": True}], {"app": "web"})
    plan = plan_pod(doc, "CREATE")
    assert plan.group == "podgroup-rs-1" and plan.name_group == "podgroup-rs-1"
    assert plan.changes == ("scheduling_gate", "group_name")
    assert pod_patch(doc, plan) == [
        GATE_LIST,
        GATED_BY,
        {
            "op": "add",
            "path": "/metadata/annotations/scheduling.k8s.io~1group-name",
            "value": "podgroup-rs-1",
        },
    ]


def test_an_owned_pod_without_annotations_gets_them_in_one_map() -> None:
    adoption = Adoption(barrier=True)
    doc = _owned([{**RS, "controller": True}])
    plan = plan_pod(doc, "CREATE", adoption)
    assert pod_patch(doc, plan, adoption) == _whole_map(
        {**BARRIER_MARKS, GROUP_NAME_ANNOTATION: "podgroup-rs-1"}
    )


def test_an_owned_pod_already_gated_is_still_named() -> None:
    doc = _owned([{**RS, "controller": True}], {})
    doc["spec"]["schedulingGates"] = [{"name": GANG_GATE}]
    plan = plan_pod(doc, "CREATE")
    assert plan.changes == ("group_name",)
    assert pod_patch(doc, plan) == [
        {
            "op": "add",
            "path": "/metadata/annotations/scheduling.k8s.io~1group-name",
            "value": "podgroup-rs-1",
        }
    ]


@pytest.mark.parametrize(
    "doc",
    [
        _owned([{**RS, "controller": False}]),  # an owner, but not the controller
        _owned([]),
        {  # a uid in the request: the API server gives the pod another
            "metadata": {"name": "p", "uid": "sent-by-client"},
            "spec": {"schedulerName": "volcano", "containers": []},
        },
    ],
    ids=["non-controller owner", "no owner", "uid in the request"],
)
def test_a_pod_without_a_controller_owner_gets_a_fresh_name(doc: dict[str, Any]) -> None:
    """Volcano names its PodGroup for the pod's own uid, unknown at admission (a uid sent
    in the request is not the one the API server gives the pod): a fresh one instead."""
    plan = plan_pod(doc, "CREATE", fresh_name=fresh)
    assert plan.name_group == FRESH and plan.own_group and "group_name" in plan.changes
    assert "sent-by-client" not in str(pod_patch(doc, plan))


def test_a_pod_naming_its_podgroup_is_not_named() -> None:
    doc = _owned([{**RS, "controller": True}], {GROUP_NAME_ANNOTATION: "train"})
    plan = plan_pod(doc, "CREATE", fresh_name=fresh)
    assert plan.group == "train" and plan.name_group == "" and not plan.own_group
    assert "group_name" not in plan.changes
    assert GROUP_NAME_ANNOTATION.replace("/", "~1") not in str(pod_patch(doc, plan))
