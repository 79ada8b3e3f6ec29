"""The gang plugin's per-task minimum (PodGroup minTaskMember), as Volcano's
CheckTaskValid: enforced only when minMember is at least the sum of the tasks' minimums."""

from __future__ import annotations

import pytest

from pyextender.api import names
from tests.unit.batch_fixtures import World


def job_group(w: World, min_member: int, min_task_member: dict[str, int]) -> None:
    w.cache.group_event(
        "ADDED",
        {
            "metadata": {"name": "j", "namespace": "t", "uid": "pg-j",
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"minMember": min_member, "queue": "default", "minTaskMember": min_task_member},
            "status": {"phase": "Pending"},
        },
    )  # fmt: skip
    # only the master exists: the workers are created once it runs (dependsOn)
    w.pod("j-master-0", gpus=1, group="j", gated=True,
          annotations={names.VOLCANO_TASK_SPEC: "master"})  # fmt: skip


def lifted(w: World, require_fit: bool) -> list[str]:
    d = w.cycle(actions=("enqueue", "allocate"), require_fit=require_fit)
    return sorted(t.pod.name for t in d.lift)


@pytest.mark.parametrize("require_fit", [False, True])
def test_min_member_below_the_task_minimums_admits_on_min_member(require_fit: bool) -> None:
    w = World()
    job_group(w, 1, {"master": 1, "worker": 2})
    assert lifted(w, require_fit) == ["j-master-0"]


@pytest.mark.parametrize("require_fit", [False, True])
def test_min_member_covering_every_task_waits_for_each_tasks_pods(require_fit: bool) -> None:
    """The check is Volcano's JobValid: asked before the gates are lifted (with
    requireFit, at admission too)."""
    w = World()
    job_group(w, 3, {"master": 1, "worker": 2})
    d = w.cycle(actions=("enqueue", "allocate"), require_fit=require_fit)
    assert d.lift == []
    assert [j.key for j in d.admit] == ([] if require_fit else ["t/j"])
    assert "1/3 tasks exist" in d.unschedulable["t/j"]
