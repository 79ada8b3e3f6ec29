"""The gang barrier (--gang-barrier=scheduler): pods held by an annotation, released by one
PodGroup write per gang, seen gated by the actions until then, streamed to the shim."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import numpy as np

from controllers.job_pods import build_pod
from controllers.release import gated, release_patch
from pyextender.actions.decisions import Decisions
from pyextender.api.names import (
    BARRIER_ANNOTATION,
    BARRIER_GATE,
    GANG_GATE,
    GATED_BY_WEBHOOK_ANNOTATION,
    GROUP_NAME_ANNOTATION,
    RELEASED_ANNOTATION,
)
from pyextender.cache.cluster import ClusterCache
from pyextender.framework.session import Job, Task
from pyextender.server.actuator import Actuator
from pyextender.server.grpc_released import ReleasedStream
from pyextender.server.metrics import Metrics
from pyextender.server.proto_gen.pyextender.v1 import scheduler_pb2 as pb
from tests.unit.test_actuator import Api, _actuator, _count
from webhook.mutate_pod import Adoption, plan_pod, pod_patch


def _doc(name: str, node: str = "", barrier: bool = True) -> dict[str, Any]:
    annotations = {GROUP_NAME_ANNOTATION: "g"}
    if barrier:
        annotations[BARRIER_ANNOTATION] = "true"
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "annotations": annotations,
        },
        "spec": {"schedulerName": "volcano", "nodeName": node, "containers": [{"name": "c"}]},
        "status": {"phase": "Pending"},
    }


def _group_doc(released: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "g", "namespace": "ns", "uid": "uid-g", "resourceVersion": "41"}
    if released:
        meta["annotations"] = {RELEASED_ANNOTATION: released}
    return {"metadata": meta, "spec": {"minMember": 2}, "status": {"phase": "Pending"}}


def _cache(*names: str) -> ClusterCache:
    cache = ClusterCache()
    cache.group_event("ADDED", _group_doc())
    for n in names:
        cache.pod_event("ADDED", _doc(n))
    return cache


def test_an_annotated_pending_pod_shows_the_barrier_gate_until_its_group_lists_it() -> None:
    cache = _cache("a", "b")
    cache.pod_event("ADDED", _doc("plain", barrier=False))
    assert cache.pods_by_uid["uid-a"].gates == (BARRIER_GATE,)
    assert cache.pods_by_uid["uid-plain"].gates == ()
    heard: list[list[str]] = []
    cache.pod_released.append(lambda pods: heard.append([p.uid for p in pods]))
    # another replica released a: its PodGroup's annotation, through the watch
    cache.group_event("MODIFIED", _group_doc("uid-a"))
    assert cache.pods_by_uid["uid-a"].gates == ()
    assert cache.pending["uid-a"].gates == () and cache.pods_by_key["ns/a"].gates == ()
    assert cache.pods_by_uid["uid-b"].gates == (BARRIER_GATE,)
    assert heard == [["uid-a"]]
    # the pod's next event keeps it released; the same annotation again is no news
    cache.pod_event("MODIFIED", _doc("a"))
    cache.group_event("MODIFIED", _group_doc("uid-a"))
    assert cache.pods_by_uid["uid-a"].gates == () and heard == [["uid-a"]]
    assert [p.uid for p in cache.released_pending()] == ["uid-a"]
    # bound: never held again, and no longer pending
    cache.pod_event("MODIFIED", _doc("b", node="n1"))
    assert cache.pods_by_uid["uid-b"].gates == ()


def test_a_pod_seen_after_its_release_arrives_released_and_a_gone_pod_is_forgotten() -> None:
    cache = ClusterCache()
    cache.group_event("ADDED", _group_doc("uid-a"))
    cache.pod_event("ADDED", _doc("a"))
    assert cache.pods_by_uid["uid-a"].gates == ()
    cache.pod_event("DELETED", _doc("a"))
    assert "uid-a" not in cache.released


def test_members_tried_before_their_podgroup_existed_are_sent_again_once_it_appears() -> None:
    """Framework mode's PreFilter refused them as unresolvable (no PodGroup): when the
    PodGroup arrives, the WatchReleased stream lists them so the shim activates them.
    Held and gated members are not listed (nothing releases them but the barrier or the
    gate), nor bound pods, pods of other PodGroups, or members of a PodGroup seen before."""
    cache = ClusterCache()
    heard: list[list[str]] = []
    cache.pod_released.append(lambda pods: heard.append(sorted(p.uid for p in pods)))
    cache.pod_event("ADDED", _doc("early-0", barrier=False))
    cache.pod_event("ADDED", _doc("early-1", barrier=False))
    cache.pod_event("ADDED", _doc("held"))  # the barrier annotation: held
    gated_doc = _doc("gated", barrier=False)
    gated_doc["spec"]["schedulingGates"] = [{"name": GANG_GATE}]
    cache.pod_event("ADDED", gated_doc)
    cache.pod_event("ADDED", _doc("bound", node="n1", barrier=False))
    other = _doc("other", barrier=False)
    other["metadata"]["annotations"] = {GROUP_NAME_ANNOTATION: "h"}
    cache.pod_event("ADDED", other)
    assert cache.missing_group(cache.pods_by_uid["uid-early-0"])
    cache.group_event("ADDED", _group_doc())
    assert heard == [["uid-early-0", "uid-early-1"]]
    assert cache.pods_by_uid["uid-held"].gates == (BARRIER_GATE,), "still held"
    cache.group_event("MODIFIED", _group_doc())  # known already: nothing to retry
    assert heard == [["uid-early-0", "uid-early-1"]]
    # a relist that brings a PodGroup the watch missed does the same
    cache.group_event("DELETED", _group_doc())
    cache.replace_groups([_group_doc()])
    assert heard[-1] == ["uid-early-0", "uid-early-1"] and len(heard) == 2


def test_the_stream_sends_the_members_of_a_podgroup_that_appeared() -> None:
    cache = ClusterCache()
    cache.pod_event("ADDED", _doc("early", barrier=False))
    stream = ReleasedStream(cache, Metrics())

    async def first_two() -> list[Any]:
        gen = stream.watch(pb.WatchReleasedRequest(client="t").SerializeToString(), None)
        full = pb.ReleasedPods.FromString(await gen.__anext__())
        cache.group_event("ADDED", _group_doc())
        # bounded: without the message the stream would wait for ever
        later = pb.ReleasedPods.FromString(await asyncio.wait_for(gen.__anext__(), 5))
        await gen.aclose()
        return [full, later]

    full, later = asyncio.run(first_two())
    assert full.full and not full.pods
    assert not later.full and [r.uid for r in later.pods] == ["uid-early"]


def test_a_new_stream_lists_the_members_that_may_wait_for_a_podgroup_that_appeared() -> None:
    """The PodGroup appeared while no shim was listening (the stream reconnecting, or
    this sidecar restarting and listing everything anew): the next stream's first
    message lists its unbound members, so the shim activates any it parked. Not
    listed: bound, gated or held members, members of a PodGroup still missing. The
    barrier's released pods are listed as before."""
    cache = ClusterCache()
    for name in ("early", "bound", "gated"):
        cache.pod_event("ADDED", _doc(name, barrier=False))
    cache.pod_event("ADDED", _doc("held"))  # barrier annotation, not released
    orphan = _doc("orphan", barrier=False)
    orphan["metadata"]["annotations"] = {GROUP_NAME_ANNOTATION: "h"}  # PodGroup h: never made
    cache.pod_event("ADDED", orphan)
    cache.group_event("ADDED", _group_doc())  # nobody listening
    cache.pod_event("MODIFIED", _doc("bound", node="n1", barrier=False))
    gated_doc = _doc("gated", barrier=False)
    gated_doc["spec"]["schedulingGates"] = [{"name": GANG_GATE}]
    cache.pod_event("MODIFIED", gated_doc)
    stream = ReleasedStream(cache, Metrics())

    async def first() -> Any:
        gen = stream.watch(pb.WatchReleasedRequest(client="t").SerializeToString(), None)
        msg = pb.ReleasedPods.FromString(await gen.__anext__())
        await gen.aclose()
        return msg

    msg = asyncio.run(first())
    assert msg.full and [r.uid for r in msg.pods] == ["uid-early"]
    cache.release(["uid-held"])
    assert sorted(r.uid for r in asyncio.run(first()).pods) == ["uid-early", "uid-held"]


def _job(cache: ClusterCache, *names: str) -> Job:
    group = cache.groups["ns/g"]
    tasks = [
        Task(pod=cache.pods_by_uid[f"uid-{n}"], request=np.zeros(5, dtype=np.int64), node=-1)
        for n in names
    ]
    return Job(
        key=group.key, queue="default", priority=0, created=0.0, min_member=2, tasks=tasks,
        group=group,
    )  # fmt: skip


def _admit_and_release(
    served: list[str], *replies: bytes
) -> tuple[Actuator, Api, Metrics, ClusterCache, list[list[str]]]:
    """One cycle admits gang g (a, b) and lets both through the barrier; ``served``:
    what discovery lists for scheduling.volcano.sh, ``replies``: what the PodGroup's
    own endpoint answers, in turn. The pods the cache let through, per release."""
    act, api, metrics = _actuator()
    api.served = served
    api.replies["patch_namespaced_custom_object"] = list(replies)
    cache = _cache("a", "b")
    act.cache = cache
    heard: list[list[str]] = []
    cache.pod_released.append(lambda pods: heard.append(sorted(p.uid for p in pods)))
    job = _job(cache, "a", "b")
    out = asyncio.run(act.apply(Decisions(admit=[job], lift=job.tasks)))
    assert not out.failed_admissions and not out.failed_lifts
    return act, api, metrics, cache, heard


def test_a_gang_is_released_with_one_podgroup_write_after_its_admission() -> None:
    """A PodGroup CRD with a status subresource (ours before, still on a cluster whose
    CRDs a chart upgrade left as they were): /status drops metadata, so the reply of the
    admission does not show the release list and the release is a write of its own."""
    _, api, metrics, cache, heard = _admit_and_release(["podgroups", "podgroups/status"])
    assert not api.ops("patch_namespaced_pod"), "no write per pod"
    ((status, _),) = api.ops("patch_namespaced_custom_object_status")
    assert status[5]["metadata"]["annotations"] == {RELEASED_ANNOTATION: "uid-a,uid-b"}
    ((args, kwargs),) = api.ops("patch_namespaced_custom_object")
    assert args[:5] == ("scheduling.volcano.sh", "v1beta1", "ns", "podgroups", "g")
    assert args[5] == {"metadata": {"annotations": {RELEASED_ANNOTATION: "uid-a,uid-b"}}}
    assert kwargs["_content_type"] == "application/merge-patch+json"
    ops = [op for op, _, _ in api.calls]
    assert ops.index("patch_namespaced_custom_object_status") < ops.index(
        "patch_namespaced_custom_object"
    ), "admitted first, then released (as gates come off after the Inqueue write)"
    assert cache.pods_by_uid["uid-a"].gates == () and heard == [["uid-a", "uid-b"]]
    assert _count(metrics, "release", "ok") == 1
    assert _count(metrics, "release", "with_admission") == 0


def _reply(released: str) -> bytes:
    """The PodGroup the API server returns after a write that set the release list."""
    meta = {"resourceVersion": "42", "annotations": {RELEASED_ANNOTATION: released}}
    return json.dumps({"metadata": meta, "status": {"phase": "Inqueue"}}).encode()


def test_admission_and_release_are_one_write_where_status_goes_through_the_object() -> None:
    """Our CRDs and Volcano's: no /status for PodGroups. A gang admitted and let through
    the barrier in one cycle costs its PodGroup one write, with the phase, the
    resourceVersion guard and the release list together."""
    act, api, metrics, cache, heard = _admit_and_release(["podgroups"], _reply("uid-a,uid-b"))
    assert not api.ops("patch_namespaced_custom_object_status")
    ((args, kwargs),) = api.ops("patch_namespaced_custom_object")
    assert args[5]["status"]["phase"] == "Inqueue"
    assert args[5]["metadata"] == {
        "resourceVersion": "41",
        "annotations": {RELEASED_ANNOTATION: "uid-a,uid-b"},
    }
    assert kwargs["_content_type"] == "application/merge-patch+json"
    assert cache.pods_by_uid["uid-a"].gates == () and heard == [["uid-a", "uid-b"]]
    assert _count(metrics, "admit", "ok") == 1
    assert _count(metrics, "release", "with_admission") == 1
    assert _count(metrics, "release", "ok") == 0
    # a member that comes later is released on its own, listed with the unbound two
    cache.pod_event("ADDED", _doc("c"))
    asyncio.run(act.apply(Decisions(lift=_job(cache, "c").tasks)))
    later = api.ops("patch_namespaced_custom_object")[1][0][5]
    assert later == {"metadata": {"annotations": {RELEASED_ANNOTATION: "uid-a,uid-b,uid-c"}}}


def test_a_reply_without_the_release_list_sends_the_release_after_all() -> None:
    """The write went through the object, but the reply does not list the members (a
    CRD swapped under the sidecar, a mutating webhook that drops the annotation):
    nothing is taken for granted, the release is written on its own."""
    _, api, metrics, _, heard = _admit_and_release(["podgroups"], _reply("uid-a"))
    assert heard == [["uid-a", "uid-b"]]
    first, second = api.ops("patch_namespaced_custom_object")
    assert first[0][5]["status"]["phase"] == "Inqueue"
    assert second[0][5] == {"metadata": {"annotations": {RELEASED_ANNOTATION: "uid-a,uid-b"}}}
    assert _count(metrics, "release", "ok") == 1
    assert _count(metrics, "release", "with_admission") == 0


def test_a_later_release_keeps_unbound_members_and_drops_bound_ones() -> None:
    act, api, _ = _actuator()
    cache = _cache("a", "b", "c")
    act.cache = cache
    asyncio.run(act.apply(Decisions(lift=_job(cache, "a", "b").tasks)))
    cache.pod_event("MODIFIED", _doc("a", node="n1"))  # a bound meanwhile
    asyncio.run(act.apply(Decisions(lift=_job(cache, "c").tasks)))
    bodies = [args[5] for args, _ in api.ops("patch_namespaced_custom_object")]
    assert [b["metadata"]["annotations"][RELEASED_ANNOTATION] for b in bodies] == [
        "uid-a,uid-b",
        "uid-b,uid-c",
    ]


def test_no_release_when_the_admission_fails() -> None:
    act, api, _ = _actuator()
    cache = _cache("a", "b")
    act.cache = cache
    api.script["patch_namespaced_custom_object_status"] = [RuntimeError("boom")] * 9
    job = _job(cache, "a", "b")
    out = asyncio.run(act.apply(Decisions(admit=[job], lift=job.tasks)))
    assert sorted(out.failed_lifts) == ["uid-a", "uid-b"]
    assert not api.ops("patch_namespaced_custom_object")
    assert cache.pods_by_uid["uid-a"].gates == (BARRIER_GATE,)


class _Ctx:
    def __init__(self) -> None:
        self.aborted: tuple[Any, str] | None = None

    async def abort(self, code: Any, text: str) -> None:
        self.aborted = (code, text)
        raise RuntimeError("aborted")


def test_the_stream_starts_with_every_released_pending_pod_then_each_release() -> None:
    cache = _cache("a", "b", "c")
    cache.release(["uid-a"])
    stream = ReleasedStream(cache, Metrics())

    async def run() -> list[Any]:
        it = stream.watch(pb.WatchReleasedRequest(client="test").SerializeToString(), _Ctx())
        got = [pb.ReleasedPods.FromString(await it.__anext__())]
        assert stream.watchers == 1
        cache.release(["uid-b"])
        cache.release(["uid-c"])  # both before the next read: one message
        got.append(pb.ReleasedPods.FromString(await it.__anext__()))
        await it.aclose()
        return got

    first, second = asyncio.run(run())
    assert first.full and [p.uid for p in first.pods] == ["uid-a"]
    assert first.pods[0].namespace == "ns" and first.pods[0].name == "a"
    assert not second.full and [p.uid for p in second.pods] == ["uid-b", "uid-c"]
    assert stream.watchers == 0 and cache.pod_released == []


def test_a_bad_watch_request_is_invalid_argument() -> None:
    stream = ReleasedStream(_cache(), Metrics())
    ctx = _Ctx()

    async def run() -> None:
        with contextlib.suppress(RuntimeError, StopAsyncIteration):
            await stream.watch(b"\xff\xff", ctx).__anext__()

    asyncio.run(run())
    assert ctx.aborted is not None and "WatchReleasedRequest" in ctx.aborted[1]


def test_the_webhook_holds_with_the_annotation_in_barrier_mode() -> None:
    doc = _doc("a", barrier=False)
    doc["spec"]["schedulerName"] = "default-scheduler"
    adoption = Adoption(barrier=True)
    plan = plan_pod(doc, "CREATE", adoption)
    assert plan.changes == ("scheduler_name", "gang_barrier")
    ops = pod_patch(doc, plan, adoption)
    paths = [o["path"] for o in ops]
    assert "/spec/schedulingGates" not in paths
    assert "/metadata/annotations/pyextender.io~1gang-barrier" in paths
    assert "/metadata/annotations/pyextender.io~1gated-by-webhook" in paths
    # already held (e.g. the Job controller's pod): not held twice, in either mode
    doc["metadata"]["annotations"][BARRIER_ANNOTATION] = "true"
    doc["spec"]["schedulerName"] = "volcano"
    assert plan_pod(doc, "CREATE", Adoption()).skipped


def test_release_removes_the_annotation_of_a_pod_held_at_the_barrier() -> None:
    doc = _doc("a")
    doc["metadata"]["annotations"][GATED_BY_WEBHOOK_ANNOTATION] = "true"
    doc["metadata"]["resourceVersion"] = "7"
    assert gated(doc)
    patch = release_patch(doc)
    assert patch == {
        "metadata": {"resourceVersion": "7", "annotations": {BARRIER_ANNOTATION: None}}
    }
    assert not gated(_doc("b", node="n1")), "a bound pod is not held"


def test_job_pods_carry_the_annotation_instead_of_the_gate_in_barrier_mode() -> None:
    from tests.unit.test_controllers_job import make_job

    job = make_job(schedulerName="volcano")
    task = job.spec.tasks[0]
    held = build_pod(job, task, 0, gated=True, barrier=True)
    assert held["metadata"]["annotations"][BARRIER_ANNOTATION] == "true"
    assert GANG_GATE not in [g["name"] for g in held["spec"].get("schedulingGates") or []]
    gate = build_pod(job, task, 0, gated=True)
    assert BARRIER_ANNOTATION not in gate["metadata"]["annotations"]
    assert [g["name"] for g in gate["spec"]["schedulingGates"]] == [GANG_GATE]


def test_vcctl_explain_counts_gated_and_barrier_held_members_but_not_released_ones() -> None:
    from pyextender.cache.batch import group_from_dict
    from pyextender.vcctl_explain import _held_count

    gated = _doc("gated", barrier=False)
    gated["spec"]["schedulingGates"] = [{"name": GANG_GATE}]
    members = [gated, _doc("held"), _doc("freed"), _doc("bound", node="n1")]
    members.append(_doc("plain", barrier=False))
    group = group_from_dict(_group_doc("uid-freed"))
    assert _held_count(members, group) == 2  # gated and held
