"""preempt and reclaim under the queue tree: a preemptor may not take its queue's
subtree past a parent's capability, as Volcano's preempt action pipelines a
preemptor only while ssn.Allocatable(queue) holds (pkg/scheduler/actions/preempt/
preempt.go; capacity's allocatable walks the queue's ancestors)."""

from __future__ import annotations

from tests.unit.batch_fixtures import World


def _team(hp_gpus: int) -> World:
    """16 GPUs, half free; team (8 GPUs) > a, b. b runs 4 GPUs; a runs 4 one-GPU pods of
    low priority; a high-priority gang in a asks ``hp_gpus``: only team's capability
    stops it."""
    w = World(nodes=2, gpus=8)
    w.queue("team", capability={"nvidia.com/gpu": "8"})
    w.queue("a", parent="team")
    w.queue("b", parent="team")
    w.gang("bs", 1, gpus=4, queue="b", phase="Running", bound=["n1"])
    w.gang("lo", 4, gpus=1, min_member=1, priority=1, queue="a", phase="Running",
           bound=["n0"] * 4)  # fmt: skip
    w.gang("hp", 1, gpus=hp_gpus, priority=100, queue="a")
    return w


def test_preempt_makes_room_under_the_parents_capability() -> None:
    d = _team(hp_gpus=4).cycle()
    assert sorted(e.task.pod.name for e in d.evictions) == ["lo-0", "lo-1", "lo-2", "lo-3"]
    assert {e.action for e in d.evictions} == {"preempt"}


def test_preempt_evicts_nothing_when_the_parent_would_still_be_exceeded() -> None:
    """6 + b's 4 = 10 > team's 8 even with all of a's pods gone: no pointless eviction."""
    d = _team(hp_gpus=6).cycle()
    assert d.evictions == []
    assert 'parent queue "team" capability exceeded' in d.unschedulable["t/hp"]
