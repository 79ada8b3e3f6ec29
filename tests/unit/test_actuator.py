"""The actuator's writes: fenced, retried when transient, reported when they fail,
with uid and resourceVersion preconditions. A recording stand-in for the client
APIs lets each call fail in a scripted way."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pyextender.actions.decisions import Decisions, Eviction
from pyextender.api.names import GANG_GATE, GROUP_NAME_ANNOTATION
from pyextender.api.objects import PodInfo
from pyextender.api.raw_requests import MERGE_PATCH
from pyextender.api.status_route import StatusRoute
from pyextender.cache.batch import GroupView
from pyextender.framework.session import Job, Task
from pyextender.server import actuator as actuator_mod
from pyextender.server.actuator import Actuator
from pyextender.server.metrics import Metrics
from pyextender.server.scheduler_loop import SchedulerLoop


class Api:
    """Records calls; ``script[op]`` is a list of exceptions (None = succeed) per call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.script: dict[str, list[Exception | None]] = {}
        self.delay: dict[str, float] = {}  # seconds a call of that op takes
        self.served = ["podgroups", "podgroups/status"]  # what discovery lists
        self.replies: dict[str, list[bytes]] = {}  # bodies a successful call returns, in turn

    def _do(self, op: str, *args: Any, **kwargs: Any) -> Any:
        time.sleep(self.delay.get(op, 0.0))
        self.calls.append((op, args, kwargs))
        plan = self.script.get(op) or []
        if plan:
            exc = plan.pop(0)
            if exc is not None:
                raise exc

        resources = [{"name": n} for n in self.served]
        data = json.dumps({"resources": resources}).encode() if op == "get_api_resources" else b"{}"
        if self.replies.get(op):
            data = self.replies[op].pop(0)

        class Resp:
            def release_conn(self) -> None:
                pass

        resp = Resp()
        resp.data = data  # type: ignore[attr-defined]
        return resp

    def __getattr__(self, name: str) -> Callable[..., Any]:
        return lambda *a, **k: self._do(name, *a, **k)

    # RawApi's interface: each request is recorded as the generated client's call
    # for the same path, with the same arguments
    def patch(self, path: str, body: Any, content_type: str = MERGE_PATCH) -> bytes:
        op, args = _route("PATCH", path)
        data: bytes = self._do(op, *args, body, _content_type=content_type).data
        return data

    def post(self, path: str, body: Any) -> bytes:
        op, args = _route("POST", path)
        data: bytes = self._do(op, *args, body).data
        return data

    def ops(self, op: str) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
        return [(a, k) for o, a, k in self.calls if o == op]


def _route(method: str, path: str) -> tuple[str, tuple[str, ...]]:
    """The generated client's method and leading arguments for a raw request."""
    p = path.strip("/").split("/")
    if p[:3] == ["api", "v1", "namespaces"]:
        ns = p[3]
        if method == "POST" and p[4:] == ["events"]:
            return "create_namespaced_event", (ns,)
        if method == "POST" and p[4] == "pods" and p[6:] == ["binding"]:
            return "create_namespaced_binding", (ns,)
        if method == "PATCH" and p[4] == "pods" and len(p) == 6:
            return "patch_namespaced_pod", (p[5], ns)
    if p[0] == "apis" and p[3] == "namespaces" and method == "PATCH":
        op = "patch_namespaced_custom_object" + ("_status" if p[7:] == ["status"] else "")
        return op, (p[1], p[2], p[4], p[5], p[6])
    raise AssertionError(f"unexpected request {method} {path}")


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(actuator_mod, "BACKOFF_S", 0.001)


def _actuator() -> tuple[Actuator, Api, Metrics]:
    metrics = Metrics()
    act = Actuator.__new__(Actuator)
    api = Api()
    act.core = api  # type: ignore[assignment]
    act.raw = api  # type: ignore[assignment]
    act.status = StatusRoute(client.ApiClient())
    act.status.custom = api  # type: ignore[assignment]
    act.metrics = metrics
    act._limit = asyncio.Semaphore(4)
    act._background = set()
    act._events = set()
    act.said = {}
    act.ours = {}
    act._group_locks = {}
    act.cache = None
    act.released = {}
    return act, api, metrics


def _pod(name: str, group: str = "g", gates: tuple[str, ...] = (GANG_GATE,)) -> PodInfo:
    return PodInfo(
        namespace="ns",
        name=name,
        uid=f"uid-{name}",
        scheduler_name="volcano",
        node_name="",
        phase="Pending",
        requests={"cpu": 1000},
        annotations={GROUP_NAME_ANNOTATION: group} if group else {},
        gates=gates,
    )


def _group(rv: str = "41") -> GroupView:
    return GroupView(
        namespace="ns",
        name="g",
        uid="uid-g",
        min_member=2,
        resource_version=rv,
        conditions=[
            {"type": "Unschedulable", "status": "True", "message": "old"},
            {"type": "Scheduled", "status": "True", "reason": "from-the-controllers"},
        ],
    )


def _job(group: GroupView, pods: list[PodInfo]) -> Job:
    tasks = [Task(pod=p, request=np.zeros(5, dtype=np.int64), node=-1) for p in pods]
    return Job(
        key=group.key,
        queue="default",
        priority=0,
        created=0.0,
        min_member=group.min_member,
        tasks=tasks,
        group=group,
    )


def _count(metrics: Metrics, op: str, result: str) -> float:
    v = metrics.registry.get_sample_value(
        "pyextender_api_writes_total", {"op": op, "result": result}
    )
    return v or 0.0


def test_admit_carries_resource_version_and_keeps_other_conditions() -> None:
    act, api, metrics = _actuator()
    group = _group()
    pods = [_pod("a"), _pod("b")]
    job = _job(group, pods)
    d = Decisions(admit=[job], lift=job.tasks)
    out = asyncio.run(act.apply(d))
    assert not out.failed_admissions and not out.failed_lifts
    ((args, _),) = api.ops("patch_namespaced_custom_object_status")
    body = args[-1]
    assert body["metadata"] == {"resourceVersion": "41"}
    assert body["status"]["phase"] == "Inqueue"
    assert [c["type"] for c in body["status"]["conditions"]] == ["Scheduled"]
    lifts = api.ops("patch_namespaced_pod")
    assert len(lifts) == 2
    # the two lifts run concurrently: find each pod's patch by name, not by order
    by_pod = {args[0]: args[2] for args, _ in lifts}
    assert by_pod["a"][0] == {"op": "test", "path": "/metadata/uid", "value": "uid-a"}
    assert by_pod["b"][0] == {"op": "test", "path": "/metadata/uid", "value": "uid-b"}
    assert _count(metrics, "admit", "ok") == 1 and _count(metrics, "lift", "ok") == 2


def test_admit_without_a_status_subresource_patches_the_podgroup() -> None:
    """Volcano's PodGroup CRD has no /status: the phase goes to the object itself,
    with the same resourceVersion precondition."""
    act, api, _ = _actuator()
    api.served = ["podgroups"]
    job = _job(_group(), [_pod("a"), _pod("b")])
    out = asyncio.run(act.apply(Decisions(admit=[job], lift=job.tasks)))
    assert not out.failed_admissions and not out.failed_lifts
    assert not api.ops("patch_namespaced_custom_object_status")
    ((args, kwargs),) = api.ops("patch_namespaced_custom_object")
    assert args[:5] == ("scheduling.volcano.sh", "v1beta1", "ns", "podgroups", "g")
    assert args[5]["metadata"] == {"resourceVersion": "41"}
    assert args[5]["status"]["phase"] == "Inqueue"
    assert kwargs["_content_type"] == "application/merge-patch+json"


def test_status_404_asks_discovery_again() -> None:
    """CRDs swapped under a running sidecar (ours for Volcano's): the /status 404 makes
    it look again, and the write goes to the object."""
    act, api, _ = _actuator()
    act.status.has_status("scheduling.volcano.sh", "v1beta1", "podgroups")  # remembered: /status
    api.served = ["podgroups"]
    api.script["patch_namespaced_custom_object_status"] = [ApiException(status=404)]
    job = _job(_group(), [_pod("a"), _pod("b")])
    out = asyncio.run(act.apply(Decisions(admit=[job], lift=job.tasks)))
    assert not out.failed_admissions
    assert len(api.ops("patch_namespaced_custom_object_status")) == 1
    assert len(api.ops("patch_namespaced_custom_object")) == 1


def _events_after_admitting(job: Job, said: bool = False, term_ends: bool = False) -> list[str]:
    """The event reasons posted when ``job`` is admitted (``said``: it was told it
    waits first; ``term_ends``: leadership ends while its event is still in flight)."""

    async def main() -> Api:
        act, api, _ = _actuator()
        if said:
            act.said[job.key] = ("queue default: capability exceeded", 0.0)
        if term_ends:
            api.delay["create_namespaced_event"] = 0.3  # still in flight when the term ends
        await act.apply(Decisions(admit=[job], lift=job.tasks))
        if term_ends:
            act.cancel_background()  # what the loop does when the term ends
        for _ in range(200):
            if not (act._events or act._background):
                break
            await asyncio.sleep(0.01)
        return api

    api = asyncio.run(main())
    return [args[-1]["reason"] for args, _ in api.ops("create_namespaced_event")]


def test_the_enqueued_event_outlives_the_term() -> None:
    """Leadership ends right after an admission landed: its condition writes stop, but
    the Enqueued event (a report of a write already made) is still sent."""
    job = _job(_group(), [_pod("a"), _pod("b")])
    assert _events_after_admitting(job, term_ends=True) == ["Enqueued"]


def test_a_group_of_one_pod_gets_an_enqueued_event_only_after_a_wait() -> None:
    """A one-pod group admitted at once: its phase and its pod say it all, so no
    event (one API write of a single-pod job's few). Admitted after it was told it
    waits: the event marks the end of that wait. A gang always gets one."""
    one = _group()
    one.min_member = 1
    assert _events_after_admitting(_job(one, [_pod("a")]), said=False) == []
    assert _events_after_admitting(_job(one, [_pod("a")]), said=True) == ["Enqueued"]
    # minMember 1 with two members is a group, not a pod: its admission is news
    assert _events_after_admitting(_job(one, [_pod("a"), _pod("b")]), said=False) == ["Enqueued"]
    gang = _job(_group(), [_pod("a"), _pod("b")])
    assert _events_after_admitting(gang, said=False) == ["Enqueued"]


def test_a_transient_failure_is_retried_then_succeeds() -> None:
    act, api, metrics = _actuator()
    api.script["patch_namespaced_pod"] = [
        ApiException(status=429, reason="TooManyRequests"),
        ConnectionError("reset"),
        None,
    ]
    t = Task(pod=_pod("a", group=""), request=np.zeros(5, dtype=np.int64), node=-1)
    out = asyncio.run(act.apply(Decisions(lift=[t])))
    assert out.failed_lifts == []
    assert len(api.ops("patch_namespaced_pod")) == 3
    assert _count(metrics, "lift", "retried") == 2 and _count(metrics, "lift", "ok") == 1


def test_a_failed_admission_keeps_the_gates_and_is_reported() -> None:
    act, api, metrics = _actuator()
    api.script["patch_namespaced_custom_object_status"] = [ApiException(status=409)]
    group = _group()
    job = _job(group, [_pod("a"), _pod("b")])
    out = asyncio.run(act.apply(Decisions(admit=[job], lift=job.tasks)))
    assert out.failed_admissions == ["uid-g"]
    assert sorted(out.failed_lifts) == ["uid-a", "uid-b"]
    assert api.ops("patch_namespaced_pod") == [], "gates lifted for a gang not admitted"
    assert _count(metrics, "admit", "failed") == 1


def test_fenced_writes_are_never_sent() -> None:
    act, api, metrics = _actuator()
    group = _group()
    job = _job(group, [_pod("a"), _pod("b")])
    victim = Task(pod=_pod("v", group=""), request=np.zeros(5, dtype=np.int64), node=0)
    d = Decisions(admit=[job], lift=job.tasks, evictions=[Eviction(victim, "preempt", "x", "y")])
    out = asyncio.run(act.apply(d, allowed=lambda: False))
    assert api.calls == []
    assert out.failed_admissions == ["uid-g"] and out.failed_evictions == ["uid-v"]
    assert _count(metrics, "admit", "fenced") == 1 and _count(metrics, "evict", "fenced") == 1


def test_eviction_names_the_uid_and_a_pdb_refusal_is_not_retried() -> None:
    act, api, metrics = _actuator()
    api.script["create_namespaced_pod_eviction"] = [ApiException(status=429)]
    victim = Task(pod=_pod("v", group=""), request=np.zeros(5, dtype=np.int64), node=0)
    out = asyncio.run(act.apply(Decisions(evictions=[Eviction(victim, "preempt", "x", "y")])))
    ((args, _),) = api.ops("create_namespaced_pod_eviction")
    assert args[2]["deleteOptions"] == {"preconditions": {"uid": "uid-v"}}
    assert out.failed_evictions == ["uid-v"]
    assert (
        metrics.registry.get_sample_value(
            "pyextender_evictions_total", {"action": "preempt", "result": "blocked_by_pdb"}
        )
        == 1.0
    )


def test_the_loop_forgets_failed_writes_so_the_next_cycle_retries() -> None:
    loop = SchedulerLoop.__new__(SchedulerLoop)
    loop._writes = set()
    loop.admitted = {"uid-g": 1.0, "uid-h": 1.0}
    loop.lifted = {"uid-a": 1.0, "uid-b": 1.0}
    loop.evicted = {"uid-v": 1.0}

    async def main() -> None:
        out = actuator_mod.Applied(["uid-g"], ["uid-a"], ["uid-v"])

        async def done() -> actuator_mod.Applied:
            return out

        fut = asyncio.ensure_future(done())
        await fut
        loop._written(fut)

    asyncio.run(main())
    assert loop.admitted == {"uid-h": 1.0}
    assert loop.lifted == {"uid-b": 1.0}
    assert loop.evicted == {}


def test_memory_of_vanished_jobs_is_dropped() -> None:
    act, _, _ = _actuator()
    act.said = {"ns/a": ("x", 1.0), "ns/b": ("y", 1.0)}
    act.forget({"ns/b"})
    assert set(act.said) == {"ns/b"}


def test_pending_is_written_once_with_the_resource_version() -> None:
    """A PodGroup with no phase that stays waiting is written phase Pending (Volcano's
    scheduler does, pkg/scheduler/framework/session.go jobStatus), guarded by its
    resourceVersion; a 409 (changed meanwhile) is reported, not logged as an error."""
    act, api, metrics = _actuator()
    job = _job(_group("7"), [_pod("a")])
    out = asyncio.run(act.apply(Decisions(pending=[job])))
    ((args, _),) = api.ops("patch_namespaced_custom_object_status")
    assert args[-1] == {"status": {"phase": "Pending"}, "metadata": {"resourceVersion": "7"}}
    assert out.failed_pending == [] and _count(metrics, "pending", "ok") == 1
    api.script["patch_namespaced_custom_object_status"] = [ApiException(status=409)]
    out = asyncio.run(act.apply(Decisions(pending=[job])))
    assert out.failed_pending == ["uid-g"]


def _rv(version: str) -> bytes:
    return json.dumps({"metadata": {"resourceVersion": version}}).encode()


def test_a_version_only_our_own_write_replaced_is_not_a_conflict() -> None:
    """The cycle after the Pending write admits on the version the watch still shows
    (7): the admission is sent on the version our Pending write produced (8), so it
    does not fail with 409; versions someone else produced are sent as they are."""
    act, api, _ = _actuator()
    op = "patch_namespaced_custom_object_status"
    api.replies[op] = [_rv("8"), _rv("9"), _rv("11"), _rv("12")]
    job = _job(_group("7"), [_pod("a")])
    asyncio.run(act.apply(Decisions(pending=[job])))
    out = asyncio.run(act.apply(Decisions(admit=[job])))  # decided on 7, before the watch saw 8
    assert not out.failed_admissions
    sent = [args[-1]["metadata"]["resourceVersion"] for args, _ in api.ops(op)]
    assert sent == ["7", "8"]
    # a third write decided on 7 or on 8 (both replaced by our writes) goes on 9
    asyncio.run(act._unschedulable("ns/g", "why", _group("8"), lambda: True))
    assert api.ops(op)[-1][0][-1]["metadata"] == {"resourceVersion": "9"}
    # a version someone else wrote (10) is ours to respect: sent as it is
    asyncio.run(act._unschedulable("ns/g", "why not", _group("10"), lambda: True))
    assert api.ops(op)[-1][0][-1]["metadata"] == {"resourceVersion": "10"}
    # and from there on 7, 8 and 9 are no longer known as ours
    assert act.ours["ns/g"] == (frozenset({"10"}), "12", False)
    act.forget(set())
    assert act.ours == {}


def test_a_phase_write_never_rides_over_our_own_admission() -> None:
    """Our admission replaced 7 with 8. A cycle that still sees 7 (the watch lags
    longer than the loop remembers the admission, or a new term began) must not
    admit again (a second Enqueued event) nor write Pending over Inqueue: both go
    on 7 and fail (409). A condition write still goes on 8. A new leadership term
    forgets the chain entirely."""
    act, api, _ = _actuator()
    op = "patch_namespaced_custom_object_status"
    api.replies[op] = [_rv("8"), _rv("9")]
    job = _job(_group("7"), [_pod("a")])
    out = asyncio.run(act.apply(Decisions(admit=[job])))
    assert not out.failed_admissions
    api.script[op] = [ApiException(status=409), ApiException(status=409)]
    out = asyncio.run(act.apply(Decisions(admit=[job])))
    assert out.failed_admissions == ["uid-g"]
    out = asyncio.run(act.apply(Decisions(pending=[job])))
    assert out.failed_pending == ["uid-g"]
    sent = [args[-1]["metadata"]["resourceVersion"] for args, _ in api.ops(op)]
    assert sent == ["7", "7", "7"]
    asyncio.run(act._unschedulable("ns/g", "why", _group("7"), lambda: True))
    assert api.ops(op)[-1][0][-1]["metadata"] == {"resourceVersion": "8"}
    assert act.ours["ns/g"][2] is True
    act.cancel_background()
    assert act.ours == {}


def test_writes_to_one_podgroup_wait_for_the_one_in_flight() -> None:
    """The Pending write is still in flight when the next cycle admits on the same
    version (7): the admission waits for it and goes on the version it produced."""
    act, api, _ = _actuator()
    op = "patch_namespaced_custom_object_status"
    api.replies[op] = [_rv("8"), _rv("9")]
    api.delay[op] = 0.05
    job = _job(_group("7"), [_pod("a")])

    async def both() -> None:
        pending = asyncio.ensure_future(act.apply(Decisions(pending=[job])))
        await asyncio.sleep(0.01)  # the Pending write has left
        admitted = await act.apply(Decisions(admit=[job]))
        assert not admitted.failed_admissions
        await pending

    asyncio.run(both())
    sent = [(args[-1]["status"].get("phase"), args[-1]["metadata"]) for args, _ in api.ops(op)]
    assert sent == [("Pending", {"resourceVersion": "7"}), ("Inqueue", {"resourceVersion": "8"})]
