"""Pod mutation: which pods are routed to us and gated, and the exact JSONPatch."""

from __future__ import annotations

from typing import Any

import pytest

from pyextender.api.names import GANG_GATE, GROUP_NAME_ANNOTATION
from webhook.mutate_pod import Adoption, plan_pod, pod_patch

SCHED = {"op": "add", "path": "/spec/schedulerName", "value": "volcano"}
GATE_LIST = {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": GANG_GATE}]}
GATE_APPEND = {"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": GANG_GATE}}
GATED_BY = {
    "op": "add",
    "path": "/metadata/annotations/pyextender.io~1gated-by-webhook",
    "value": "true",
}


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
    ("bare pod naming us", pod(group=None, schedulerName="volcano"), "CREATE", [GATE_LIST], ""),
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
    plan = plan_pod(pod_doc, operation)
    if any(op in expected for op in (GATE_LIST, GATE_APPEND)):
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
    """A bare pod may have no annotations at all: the mark comes as the whole map (an
    "add" below a missing member would fail the patch, and the pod's creation)."""
    doc = {"metadata": {"name": "p"}, "spec": {"schedulerName": "volcano", "containers": []}}
    plan = plan_pod(doc, "CREATE")
    assert plan.group == "" and plan.changes == ("scheduling_gate",)
    assert pod_patch(doc, plan) == [
        GATE_LIST,
        {
            "op": "add",
            "path": "/metadata/annotations",
            "value": {"pyextender.io/gated-by-webhook": "true"},
        },
    ]


BARRIER_MARKS = {"pyextender.io/gang-barrier": "true", "pyextender.io/gated-by-webhook": "true"}


def _whole_map(values: dict[str, str]) -> list[dict[str, Any]]:
    """The patch of a pod that had no annotations: the whole map in one operation."""
    return [{"op": "add", "path": "/metadata/annotations", "value": values}]


def test_a_bare_pod_is_held_at_the_barrier_with_the_framework_shim() -> None:
    doc = {"metadata": {"name": "p"}, "spec": {"schedulerName": "volcano", "containers": []}}
    adoption = Adoption(barrier=True)
    plan = plan_pod(doc, "CREATE", adoption)
    assert plan.changes == ("gang_barrier",)
    assert pod_patch(doc, plan, adoption) == _whole_map(BARRIER_MARKS)


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
        _owned([{**RS, "controller": True}], {GROUP_NAME_ANNOTATION: "train"}),  # a member
    ],
    ids=["non-controller owner", "no owner", "uid in the request", "names its PodGroup"],
)
def test_a_pod_whose_podgroup_name_is_not_known_at_creation_is_not_named(
    doc: dict[str, Any],
) -> None:
    plan = plan_pod(doc, "CREATE")
    assert plan.name_group == "" and "group_name" not in plan.changes
    assert GROUP_NAME_ANNOTATION.replace("/", "~1") not in str(pod_patch(doc, plan))
