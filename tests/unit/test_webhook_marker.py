"""Existing-scheduler mode: adopted gang pods keep the cluster's scheduler and get the
pyextender.io/batch marker (requests = limits = 1), so only they reach our extender."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from pyextender.api.names import BATCH_RESOURCE, GANG_GATE, GROUP_NAME_ANNOTATION
from pyextender.api.resources import is_tracked
from webhook.mutate_pod import Adoption, plan_pod, pod_patch

EXISTING = Adoption("existing", "default-scheduler")


def apply(doc: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902 "add" (all the webhook emits), enough for these tests."""
    out = copy.deepcopy(doc)
    for op in ops:
        assert op["op"] == "add"
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        target: Any = out
        for p in parts[:-1]:
            target = target[int(p)] if isinstance(target, list) else target[p]
        last = parts[-1]
        if isinstance(target, list):
            target.append(op["value"]) if last == "-" else target.insert(int(last), op["value"])
        else:
            target[last] = op["value"]
    return out


def pod(scheduler: str | None = None, resources: dict[str, Any] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": "busybox"}
    if resources is not None:
        container["resources"] = resources
    spec: dict[str, Any] = {"containers": [container, {"name": "side", "image": "x"}]}
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    return {"metadata": {"annotations": {GROUP_NAME_ANNOTATION: "pg"}}, "spec": spec}


@pytest.mark.parametrize(
    ("resources", "scheduler"),
    [
        (None, None),
        ({}, "default-scheduler"),
        ({"requests": {"cpu": "1"}}, "default-scheduler"),
        ({"requests": {"cpu": "1"}, "limits": {"memory": "1Gi"}}, "volcano"),
    ],
)
def test_marker_added_once_and_scheduler_kept(
    resources: dict[str, Any] | None, scheduler: str | None
) -> None:
    before = pod(scheduler, resources)
    plan = plan_pod(before, "CREATE", EXISTING)
    after = apply(before, pod_patch(before, plan, EXISTING))
    res = after["spec"]["containers"][0]["resources"]
    assert res["requests"][BATCH_RESOURCE] == res["limits"][BATCH_RESOURCE] == "1"
    assert "resources" not in after["spec"]["containers"][1]
    assert after["spec"].get("schedulerName", "default-scheduler") == "default-scheduler"
    assert after["spec"]["schedulingGates"] == [{"name": GANG_GATE}]
    for key, value in (resources or {}).get("requests", {}).items():
        assert res["requests"][key] == value  # nothing else changed
    again = plan_pod(after, "CREATE", EXISTING)  # reinvocation: nothing more to do
    assert not again.changes, again


def test_other_schedulers_are_left_alone() -> None:
    assert not plan_pod(pod("example-scheduler"), "CREATE", EXISTING).changes


def test_scheduler_mode_adds_no_marker() -> None:
    plan = plan_pod(pod(), "CREATE", Adoption())
    assert plan.changes == ("scheduler_name", "scheduling_gate")


def test_sidecar_does_not_count_the_marker_as_a_node_resource() -> None:
    assert not is_tracked(BATCH_RESOURCE)


def test_a_bare_pod_naming_volcano_is_adopted_and_one_of_the_default_scheduler_is_not() -> None:
    """Existing mode has no profile named volcano: a bare pod naming it would wait
    forever. It is adopted as a gang member is (the cluster's scheduler, the marker, the
    gate); a bare pod of the cluster's own scheduler is the cluster's and passes."""
    before = pod("volcano")
    del before["metadata"]["annotations"]
    plan = plan_pod(before, "CREATE", EXISTING, fresh_name=lambda: "podgroup-fresh")
    assert plan.changes == ("scheduler_name", "scheduling_gate", "batch_marker", "group_name")
    after = apply(before, pod_patch(before, plan, EXISTING))
    assert after["spec"]["schedulerName"] == "default-scheduler"
    assert after["spec"]["schedulingGates"] == [{"name": GANG_GATE}]
    assert after["metadata"]["annotations"] == {
        "pyextender.io/gated-by-webhook": "true",
        "scheduling.k8s.io/group-name": "podgroup-fresh",
        "pyextender.io/own-podgroup": "true",
    }
    assert after["spec"]["containers"][0]["resources"]["requests"] == {BATCH_RESOURCE: "1"}
    assert not plan_pod(after, "CREATE", EXISTING).changes  # reinvocation: nothing more
    for scheduler in (None, "default-scheduler", "example-scheduler"):
        bare = pod(scheduler)
        del bare["metadata"]["annotations"]
        assert not plan_pod(bare, "CREATE", EXISTING).changes
