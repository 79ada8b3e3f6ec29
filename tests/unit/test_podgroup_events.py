"""The PodGroup controller's phase events: a gang's, and none for a group of one pod.

A PodGroup of one pod (minMember at most 1, one member: a standalone pod's, or a
single-pod job's) moving to Running or Completed has no news beyond its pod's own
events, so the controller writes its phase and posts nothing; a gang, or a group of
one that breaks, still gets its event.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controllers.app import _group_index
from controllers.podgroup import PodGroupController
from controllers.runtime import Context
from pyextender.api.names import GROUP_NAME_ANNOTATION


class FakeKube:
    """Answers the PodGroup status patch with the patched object."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}

    def patch(self, kind: Any, ns: str, name: str, body: dict[str, Any], merge: bool) -> Any:
        pg = self.objects[f"{ns}/{name}"]
        written = {
            **pg["metadata"],
            "resourceVersion": str(int(pg["metadata"]["resourceVersion"]) + 1),
        }
        return {**pg, "metadata": written, "status": {**pg["status"], **body["status"]}}


def _pg(min_member: int, phase: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "ns", "uid": "uid-g", "resourceVersion": "3"},
        "spec": {"minMember": min_member},
        "status": {"phase": phase},
    }


def _member(name: str, phase: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "annotations": {GROUP_NAME_ANNOTATION: "g"},
        },
        "spec": {"schedulerName": "volcano", "nodeName": "n1"},
        "status": {"phase": phase},
    }


def _reasons(pg: dict[str, Any], members: list[dict[str, Any]]) -> tuple[str, list[str]]:
    """(the phase written, the event reasons posted) when ``pg`` is reconciled."""
    kube = FakeKube()
    kube.objects["ns/g"] = pg
    ctx = Context.empty(kube, "test", "volcano")  # type: ignore[arg-type]
    ctx.pods.add_index("group", _group_index)
    posted: list[str] = []
    ctx.recorder.event = lambda obj, reason, message, warning=False: posted.append(reason)  # type: ignore[method-assign]
    ctl = PodGroupController(ctx)
    ctx.podgroups.remember(pg)
    for pod in members:
        ctx.pods.remember(pod)
    asyncio.run(ctl.reconcile("ns/g"))
    written = ctx.podgroups.get("ns/g")
    assert written is not None
    return str((written.get("status") or {}).get("phase")), posted


@pytest.mark.parametrize(
    ("min_member", "pods", "phase", "expected"),
    [
        (1, ["Running"], "Running", []),
        (1, ["Succeeded"], "Completed", []),
        (0, ["Running"], "Running", []),
        (2, ["Running", "Running"], "Running", ["GangRunning"]),
        (2, ["Succeeded", "Succeeded"], "Completed", ["GangCompleted"]),
        # minMember 1 with two members bound: a group, not one pod
        (1, ["Running", "Running"], "Running", ["GangRunning"]),
    ],
)
def test_phase_events_are_for_gangs_not_for_a_group_of_one_pod(
    min_member: int, pods: list[str], phase: str, expected: list[str]
) -> None:
    members = [_member(f"p{i}", p) for i, p in enumerate(pods)]
    assert _reasons(_pg(min_member, "Inqueue"), members) == (phase, expected)


def test_a_group_of_one_pod_that_breaks_still_says_so() -> None:
    """Running, then its pod is gone from the node: phase Unknown and a warning."""
    assert _reasons(_pg(1, "Running"), []) == ("Unknown", ["GangBroken"])
