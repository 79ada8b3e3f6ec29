"""Tasks kept between sessions (TaskMemo): a pod whose PodInfo object and node did
not change gets its Task back; anything else is built afresh, and a session built
with the memo equals one built without it."""

from __future__ import annotations

import numpy as np
import pytest

from pyextender.api.names import GANG_GATE
from pyextender.framework.session import Session
from pyextender.framework.snapshot import TaskMemo, build_session
from tests.unit.batch_fixtures import World

NOW = 1767225600.0 + 3600


def _build(w: World, memo: TaskMemo | None, **kw: set[str]) -> Session:
    return build_session(w.cache, [], NOW, None, None, kw.get("evicting"), kw.get("lifting"), memo)


def _tasks(ssn: Session) -> dict[str, object]:
    return {t.pod.uid: t for j in ssn.jobs.values() for t in j.tasks}


def _summary(ssn: Session) -> dict[str, tuple[object, ...]]:
    return {
        k: (
            sorted((t.pod.uid, t.node, t.gated, t.pod.deleting, tuple(t.request)) for t in j.tasks),
            tuple(j.allocated),
            j.priority,
            j.min_member,
            j.phase,
        )
        for k, j in ssn.jobs.items()
    }


def test_an_unchanged_pod_keeps_its_task_and_a_changed_one_gets_a_new_one() -> None:
    w = World(nodes=2, gpus=8)
    w.gang("a", 2, gpus=2, phase="Running", bound=["n0", "n1"])
    w.gang("b", 2, gpus=1)
    memo = TaskMemo()
    first = _tasks(_build(w, memo))
    w.pod("b-1", gpus=1, group="b", node="n1")  # bound now: a new PodInfo, a node
    second = _tasks(_build(w, memo))
    assert second["uid-t-a-0"] is first["uid-t-a-0"]
    assert second["uid-t-b-0"] is first["uid-t-b-0"]
    assert second["uid-t-b-1"] is not first["uid-t-b-1"]
    assert second["uid-t-b-1"].node == w.cache.state.index["n1"]  # type: ignore[attr-defined]
    # a kept request cannot be changed in place (it is in the next session too)
    with pytest.raises(ValueError, match="read-only"):
        second["uid-t-a-0"].request += 1  # type: ignore[attr-defined]


def test_the_memo_never_hides_our_own_writes_or_a_deleted_podgroup() -> None:
    w = World(nodes=2, gpus=8)
    w.gang("g", 2, gpus=1)
    memo = TaskMemo()
    _build(w, memo)
    # a gate we lifted and a pod we evicted, not shown by the watch yet
    ssn = _build(w, memo, lifting={"uid-t-g-0"}, evicting={"uid-t-g-1"})
    tasks = _tasks(ssn)
    assert GANG_GATE not in tasks["uid-t-g-0"].pod.gates  # type: ignore[attr-defined]
    assert tasks["uid-t-g-1"].pod.deleting  # type: ignore[attr-defined]
    # the next build without them sees the pods as the watch has them
    tasks = _tasks(_build(w, memo))
    assert GANG_GATE in tasks["uid-t-g-0"].pod.gates  # type: ignore[attr-defined]
    assert not tasks["uid-t-g-1"].pod.deleting  # type: ignore[attr-defined]
    # a pod of another scheduler counts only while its PodGroup exists
    w.pod("other", gpus=1, group="g")
    other = w.cache.pods_by_uid["uid-t-other"]
    w.cache.pods_by_uid["uid-t-other"] = type(other)(
        **{f: getattr(other, f) for f in other.__slots__} | {"scheduler_name": "default"}
    )
    assert "uid-t-other" in _tasks(_build(w, memo))
    w.cache.group_event("DELETED", {"metadata": {"name": "g", "namespace": "t", "uid": "pg-g"}})
    assert "uid-t-other" not in _tasks(_build(w, memo))


def test_sessions_with_and_without_the_memo_are_the_same() -> None:
    rng = np.random.default_rng(3)
    w = World(nodes=4, gpus=8)
    memo = TaskMemo()
    for step in range(30):
        kind = int(rng.integers(0, 3))
        if kind == 0:
            w.gang(f"j{step}", int(rng.integers(1, 4)), gpus=int(rng.integers(1, 3)))
        elif kind == 1 and w.cache.pods_by_uid:
            uid = sorted(w.cache.pods_by_uid)[int(rng.integers(0, len(w.cache.pods_by_uid)))]
            pod = w.cache.pods_by_uid[uid]
            node = None if pod.node_name else f"n{int(rng.integers(0, 4))}"
            w.pod(pod.name, gpus=1, group=pod.group_name, node=node)
        elif w.cache.pods_by_uid:
            uid = sorted(w.cache.pods_by_uid)[0]
            pod = w.cache.pods_by_uid[uid]
            w.cache.pod_event(
                "DELETED", {"metadata": {"name": pod.name, "namespace": "t", "uid": uid}}
            )
        lifting = {u for u in list(w.cache.pods_by_uid)[:2]} if step % 5 == 0 else set()
        with_memo = _build(w, memo, lifting=lifting)
        without = _build(w, None, lifting=lifting)
        assert _summary(with_memo) == _summary(without), f"step {step}"


def test_a_jobs_allocation_sums_its_bound_members_alike_or_not() -> None:
    """Members with the same requests share one vector (allocated is that vector times
    the count); members that differ are summed; a lone bound member lends its own."""
    w = World(nodes=3, gpus=8)
    w.gang("alike", 3, gpus=2, phase="Running", bound=["n0", "n1", "n2"])
    w.gang("mixed", 2, gpus=1, phase="Running", bound=["n0", "n1"])
    w.pod("mixed-2", gpus=3, group="mixed", node="n2")
    w.gang("one", 2, gpus=4, phase="Running", bound=["n2"])
    memo = TaskMemo()
    for _ in range(2):  # fresh Tasks, then kept ones
        ssn = _build(w, memo)
        gpu = ssn.state.column["nvidia.com/gpu"]
        for key, want in (("t/alike", 6), ("t/mixed", 5), ("t/one", 4)):
            job = ssn.jobs[key]
            total = sum(t.request for t in job.tasks if t.bound)
            assert job.allocated[gpu] == want
            assert (job.allocated == total).all()
        alike = ssn.jobs["t/alike"]
        assert alike.allocated is not alike.tasks[0].request
        alike.allocated += 0  # its own array, not a shared request
