"""The bind barrier: a gang binds as a unit, only live waiters count, and the
timeout path releases assumptions (pyextender_gang_barrier_timeouts_total)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from pyextender.api.names import GROUP_NAME_ANNOTATION
from pyextender.api.objects import PodInfo
from pyextender.cache.cluster import ClusterCache
from pyextender.server import barrier as barrier_mod
from pyextender.server.barrier import GangBarrier, Outcome
from pyextender.server.grpc_permit import quorum


def _pod_doc(name: str, group: str = "g", deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "t",
        "uid": f"uid-{name}",
        "annotations": {GROUP_NAME_ANNOTATION: group},
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "metadata": meta,
        "spec": {"schedulerName": "volcano", "containers": [{"name": "c"}]},
        "status": {"phase": "Pending"},
    }


def _cache(members: int, min_member: int) -> ClusterCache:
    cache = ClusterCache()
    cache.replace_nodes([])
    cache.replace_pods([_pod_doc(f"p{i}") for i in range(members)])
    cache.replace_groups(
        [
            {
                "metadata": {"name": "g", "namespace": "t", "uid": "uid-g"},
                "spec": {"minMember": min_member},
                "status": {"phase": "Inqueue"},
            }
        ]
    )
    return cache


class Binds:
    """Scripted bind results per pod; records every attempt and every settle."""

    def __init__(self) -> None:
        self.attempts: list[str] = []
        self.fail_first: dict[str, int] = {}
        self.settled: dict[str, Outcome] = {}

    def bind(self, pod: PodInfo) -> Any:
        async def write() -> Outcome:
            self.attempts.append(pod.name)
            left = self.fail_first.get(pod.name, 0)
            if left:
                self.fail_first[pod.name] = left - 1
                return ("error", "500 Internal Server Error")
            return ("bound", "")

        return write

    def settle(self, pod: PodInfo) -> Any:
        def done(out: Outcome) -> None:
            assert pod.name not in self.settled, f"{pod.name} settled twice"
            self.settled[pod.name] = out

        return done


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(barrier_mod, "RETRY_PAUSE_S", 0.001)


def _pods(cache: ClusterCache) -> list[PodInfo]:
    return sorted(cache.pods_by_uid.values(), key=lambda p: p.name)


def test_gang_binds_together_and_a_failed_member_is_retried_at_once() -> None:
    async def main() -> tuple[list[Outcome], Binds]:
        cache = _cache(3, 3)
        b = GangBarrier(cache, timeout=5)
        binds = Binds()
        binds.fail_first["p1"] = 2  # fails twice, then binds
        waits = [b.wait(p, binds.bind(p), binds.settle(p)) for p in _pods(cache)]
        return list(await asyncio.gather(*waits)), binds

    outs, binds = asyncio.run(main())
    assert outs == [("bound", "")] * 3
    assert sorted(binds.attempts) == ["p0", "p1", "p1", "p1", "p2"]
    assert set(binds.settled) == {"p0", "p1", "p2"}


def test_no_bind_before_the_quorum_and_timeout_settles_each_member() -> None:
    async def main() -> tuple[list[Outcome], Binds]:
        cache = _cache(3, 3)
        waiting: list[int] = []
        b = GangBarrier(cache, timeout=0.2, on_waiting=waiting.append)
        binds = Binds()
        waits = [b.wait(p, binds.bind(p), binds.settle(p)) for p in _pods(cache)[:2]]
        outs = list(await asyncio.gather(*waits))
        assert b.waiting == {}
        assert max(waiting) == 2 and waiting[-1] == 0, waiting
        return outs, binds

    outs, binds = asyncio.run(main())
    assert binds.attempts == [], "a member bound before the gang was complete"
    assert [o[0] for o in outs] == ["gang_timeout", "gang_timeout"]
    assert "only 2/3 members reached bind" in outs[0][1]
    assert [o[0] for o in binds.settled.values()] == ["gang_timeout", "gang_timeout"]


def test_a_deleted_waiter_no_longer_counts() -> None:
    async def main() -> tuple[list[Outcome], Binds]:
        cache = _cache(3, 3)
        cache.pod_gone.append(lambda uid: None)
        b = GangBarrier(cache, timeout=0.3)
        cache.pod_gone.append(b.forget)
        binds = Binds()
        pods = _pods(cache)
        first = asyncio.ensure_future(b.wait(pods[0], binds.bind(pods[0]), binds.settle(pods[0])))
        await asyncio.sleep(0.01)
        cache.pod_event("DELETED", _pod_doc("p0"))  # p0 is gone while it waits
        rest = [b.wait(p, binds.bind(p), binds.settle(p)) for p in pods[1:]]
        outs = [await first, *await asyncio.gather(*rest)]
        return outs, binds

    outs, binds = asyncio.run(main())
    assert binds.attempts == [], "the gang was released short with a deleted member"
    assert outs[0][0] == "error" and "deleted" in outs[0][1]
    assert [o[0] for o in outs[1:]] == ["gang_timeout", "gang_timeout"]


def test_a_waiter_whose_caller_left_is_dropped_from_the_quorum() -> None:
    async def main() -> tuple[Binds, dict[str, Any]]:
        cache = _cache(3, 3)
        b = GangBarrier(cache, timeout=0.3)
        binds = Binds()
        pods = _pods(cache)
        gone = asyncio.ensure_future(b.wait(pods[0], binds.bind(pods[0]), binds.settle(pods[0])))
        await asyncio.sleep(0.01)
        gone.cancel()  # kube-scheduler's request ended
        await asyncio.gather(gone, return_exceptions=True)
        outs = await asyncio.gather(*(b.wait(p, binds.bind(p), binds.settle(p)) for p in pods[1:]))
        return binds, {"outs": outs}

    binds, res = asyncio.run(main())
    assert binds.attempts == []
    assert binds.settled["p0"][0] == "abandoned"
    assert [o[0] for o in res["outs"]] == ["gang_timeout", "gang_timeout"]


def test_after_the_release_a_leaving_caller_does_not_stop_its_bind() -> None:
    async def main() -> Binds:
        cache = _cache(2, 2)
        b = GangBarrier(cache, timeout=5)
        binds = Binds()
        slow = asyncio.Event()
        pods = _pods(cache)

        def slow_bind(p: PodInfo) -> Any:
            async def write() -> Outcome:
                await slow.wait()
                binds.attempts.append(p.name)
                return ("bound", "")

            return write

        w0 = asyncio.ensure_future(b.wait(pods[0], slow_bind(pods[0]), binds.settle(pods[0])))
        await asyncio.sleep(0.01)
        w1 = asyncio.ensure_future(b.wait(pods[1], slow_bind(pods[1]), binds.settle(pods[1])))
        await asyncio.sleep(0.01)  # released: both binds are under way
        w0.cancel()
        slow.set()
        await asyncio.gather(w0, w1, return_exceptions=True)
        await asyncio.sleep(0.01)
        return binds

    binds = asyncio.run(main())
    assert sorted(binds.attempts) == ["p0", "p1"]
    assert binds.settled == {"p0": ("bound", ""), "p1": ("bound", "")}


def test_a_member_of_an_unknown_podgroup_is_never_bound() -> None:
    """Its PodGroup is gone (a restarting job dropped it) or not seen yet: binding it
    alone could run part of a gang; the bind fails and nothing stays assumed."""

    async def main() -> tuple[Outcome, Binds]:
        cache = _cache(2, 2)
        cache.group_event("DELETED", {"metadata": {"name": "g", "namespace": "t"}})
        b = GangBarrier(cache, timeout=5)
        binds = Binds()
        pod = _pods(cache)[0]
        return await b.wait(pod, binds.bind(pod), binds.settle(pod)), binds

    out, binds = asyncio.run(main())
    assert out == ("no_podgroup", "PodGroup t/g does not exist (yet): its pods wait for it")
    assert binds.attempts == [] and binds.settled == {"p0": out}


def test_the_bind_and_filter_verbs_refuse_a_member_of_an_unknown_podgroup() -> None:
    from tests.unit.test_extender_app import Client

    c = Client()
    c.cache.replace_pods([_pod_doc("a", group="gone")])
    c.ext.barrier = GangBarrier(c.cache, timeout=5)
    code, body = c.call(
        "/bind",
        b'{"PodName": "a", "PodNamespace": "t", "PodUID": "uid-a", "Node": "n8"}',
    )
    assert code == 200 and body["Error"].startswith("PodGroup t/gone does not exist")
    assert c.binder.bound == {}
    assert "uid-a" not in c.cache.state.pods, "the refused bind still holds the node"
    reg = c.ext.metrics.registry
    assert reg.get_sample_value("pyextender_binds_total", {"result": "no_podgroup"}) == 1.0
    args = {"Pod": _pod_doc("a", group="gone"), "NodeNames": ["n8"]}
    code, body = c.call("/filter", json.dumps(args).encode())
    assert code == 200 and body["Error"].startswith("PodGroup t/gone does not exist")


def test_timeouts_are_counted_by_the_bind_verb() -> None:
    from tests.unit.test_extender_app import Client

    c = Client()
    c.cache.replace_pods([_pod_doc("a"), _pod_doc("b")])
    c.cache.replace_groups(
        [{"metadata": {"name": "g", "namespace": "t", "uid": "u"}, "spec": {"minMember": 2}}]
    )
    c.ext.barrier = GangBarrier(c.cache, timeout=0.1)
    code, body = c.call(
        "/bind",
        b'{"PodName": "a", "PodNamespace": "t", "PodUID": "uid-a", "Node": "n8"}',
    )
    assert code == 200 and "only 1/2 members reached bind" in body["Error"]
    reg = c.ext.metrics.registry
    assert reg.get_sample_value("pyextender_gang_barrier_timeouts_total") == 1.0
    assert reg.get_sample_value("pyextender_binds_total", {"result": "gang_timeout"}) == 1.0
    assert c.binder.bound == {}
    assert "uid-a" not in c.cache.state.pods, "the timed-out bind still holds the node"


def test_members_that_succeeded_count_toward_the_gang() -> None:
    """Two of a three-member gang (minMember 2) ran and Succeeded; the third, placed
    only once they freed room, binds at once instead of waiting for two new members
    (seen in the demo: the sweep Job's last trial waited forever)."""

    async def main() -> tuple[Outcome, Binds]:
        cache = _cache(3, 2)
        for name in ("p0", "p1"):
            doc = _pod_doc(name)
            doc["spec"]["nodeName"] = "n0"
            doc["status"]["phase"] = "Succeeded"
            cache.pod_event("MODIFIED", doc)
        assert cache.succeeded_members("t/g") == 2
        assert [p.name for p in cache.member_pods("t/g")] == ["p2"]
        b = GangBarrier(cache, timeout=0.5)
        binds = Binds()
        (late,) = cache.member_pods("t/g")
        return await b.wait(late, binds.bind(late), binds.settle(late)), binds

    out, binds = asyncio.run(main())
    assert out == ("bound", "")
    assert binds.attempts == ["p2"]


def test_succeeded_members_are_forgotten_when_deleted_and_rebuilt_on_relist() -> None:
    cache = _cache(2, 2)
    doc = _pod_doc("p0")
    doc["status"]["phase"] = "Succeeded"
    cache.pod_event("MODIFIED", doc)
    assert cache.succeeded_members("t/g") == 1
    cache.pod_event("DELETED", doc)
    assert cache.succeeded_members("t/g") == 0
    failed = _pod_doc("p1")
    failed["status"]["phase"] = "Failed"
    cache.replace_pods([doc, failed])
    assert cache.succeeded_members("t/g") == 1  # Failed does not count
    cache.replace_pods([failed])
    assert cache.succeeded_members("t/g") == 0


def test_framework_permit_quorum_counts_succeeded_members() -> None:
    cache = _cache(3, 2)
    doc = _pod_doc("p0")
    doc["spec"]["nodeName"] = "n0"
    doc["status"]["phase"] = "Succeeded"
    cache.pod_event("MODIFIED", doc)
    p2 = next(p for p in cache.member_pods("t/g") if p.name == "p2")
    q = quorum(cache, p2, waiting=[])
    assert (q.ready, q.min_member) == (2, 2), q
