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


def test_a_bare_pod_is_held_at_the_barrier_with_the_framework_shim() -> None:
    doc = {"metadata": {"name": "p"}, "spec": {"schedulerName": "volcano", "containers": []}}
    adoption = Adoption(barrier=True)
    plan = plan_pod(doc, "CREATE", adoption)
    assert plan.changes == ("gang_barrier",)
    assert pod_patch(doc, plan, adoption) == [
        {
            "op": "add",
            "path": "/metadata/annotations",
            "value": {
                "pyextender.io/gang-barrier": "true",
                "pyextender.io/gated-by-webhook": "true",
            },
        }
    ]
