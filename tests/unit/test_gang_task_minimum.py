"""The gang plugin's per-task minimum (PodGroup minTaskMember), as Volcano's
CheckTaskValid: enforced only when minMember is at least the sum of the tasks' minimums."""

from __future__ import annotations

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


def admitted(w: World) -> list[str]:
    return sorted(j.key for j in w.cycle(actions=("enqueue",)).admit)


def test_min_member_below_the_task_minimums_admits_on_min_member() -> None:
    w = World()
    job_group(w, 1, {"master": 1, "worker": 2})
    assert admitted(w) == ["t/j"]


def test_min_member_covering_every_task_waits_for_each_tasks_pods() -> None:
    w = World()
    job_group(w, 3, {"master": 1, "worker": 2})
    d = w.cycle(actions=("enqueue",))
    assert [j.key for j in d.admit] == []
    assert "1/3 tasks exist" in d.unschedulable["t/j"]
