"""The gRPC front end, against the real grpc.aio server in-process (over a Unix socket).

Round trips of every method, the same verdicts as the HTTP verbs, the Permit
quorum, bad messages (INVALID_ARGUMENT naming the field, server keeps serving),
deadlines, health checking and reflection.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from devcluster import pki
from pyextender.api.extender import ExtenderArgs
from pyextender.cache.cluster import ClusterCache
from pyextender.framework.runtime import build_profile
from pyextender.plugins.defaults import load, plugins_of
from pyextender.server.grpc_batch import BatchParser
from pyextender.server.grpc_server import GrpcOptions, GrpcServer
from pyextender.server.grpc_service import SERVICE, SchedulerService
from pyextender.server.http import ExtenderApp
from pyextender.server.metrics import Metrics
from pyextender.server.proto_gen.pyextender.v1 import scheduler_pb2 as pb
from pyextender.server.proto_gen.pyextender.v1 import scheduler_pb2_grpc as pb_grpc
from pyextender.server.verbs import Extender
from tests.unit.test_extender_app import FakeBinder, _node

GANG_TIMEOUT = 7.0
GANG_MAX_WAIT = 90.0


def _pod(name: str, gpus: int, group: str = "", scheduler: str = "volcano") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"uid-{name}"}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    return {
        "metadata": {**meta, "resourceVersion": "1"},
        "spec": {
            "schedulerName": scheduler,
            "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}],
        },
        "status": {"phase": "Pending"},
    }


def _group(name: str, min_member: int) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"minMember": min_member},
        "status": {"phase": "Inqueue"},
    }


def _ref(name: str) -> pb.PodRef:
    return pb.PodRef(uid=f"uid-{name}", namespace="ns", name=name, resource_version="1")


def _rejected(reply: Any, names: list[str]) -> dict[str, tuple[int, str]]:
    """{node: (code, reason)} for the nodes that do not fit, read from the columns."""
    assert len(reply.codes) == len(names) and len(reply.reason_index) == 2 * len(names)
    out = {}
    for i, name in enumerate(names):
        if reply.codes[i]:
            idx = int.from_bytes(reply.reason_index[2 * i : 2 * i + 2], "little")
            out[name] = (reply.codes[i], reply.reasons[idx])
    return out


class Sidecar:
    """An Extender and its gRPC server on a loop in a background thread."""

    def __init__(self, socket: Path, cycle_socket: Path | None = None) -> None:
        self.cache = ClusterCache()
        self.cache.replace_nodes([_node("n8", 8), _node("n4", 4)])
        self.cache.replace_pods([])
        self.cache.replace_groups([])
        self.binder = FakeBinder()
        metrics = Metrics()
        profile = build_profile(plugins_of(load(None)), metrics.observe_plugin)
        self.ext = Extender(self.cache, profile, self.binder, metrics)
        self.ready = True
        self.annotated: list[tuple[str, str, str, dict[str, str]]] = []
        self.annotate_error: Exception | None = None
        self.service = SchedulerService(self.ext, GANG_TIMEOUT, self.annotate, GANG_MAX_WAIT)
        self.server = GrpcServer(
            self.service,
            GrpcOptions(
                socket=str(socket), cycle_socket=str(cycle_socket) if cycle_socket else None
            ),
            lambda: (self.ready, "test"),
        )
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.run(self.server.start())
        self.channel = grpc.insecure_channel(f"unix://{socket}")
        self.stub = pb_grpc.SchedulerStub(self.channel)

    def annotate(self, namespace: str, name: str, uid: str, annotations: dict[str, str]) -> None:
        if self.annotate_error is not None:
            raise self.annotate_error
        self.annotated.append((namespace, name, uid, annotations))

    def run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)

    def slow_api_pod(self, name: str, seconds: float) -> None:
        """Pod ``name`` exists in the API server only (newer than the cache), and
        reading it takes ``seconds``."""
        self.binder.pods[f"ns/{name}"] = _pod(name, 1)
        read = self.binder.read_pod

        def slow_read(namespace: str, name: str) -> dict[str, Any] | None:
            threading.Event().wait(seconds)
            return read(namespace, name)

        self.binder.read_pod = slow_read  # type: ignore[method-assign]

    def add(self, *pods: dict[str, Any]) -> None:
        for p in pods:
            self.cache.pod_event("ADDED", p)

    def close(self) -> None:
        self.channel.close()
        self.run(self.server.stop(0))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@pytest.fixture
def sc(tmp_path: Path) -> Iterator[Sidecar]:
    s = Sidecar(tmp_path / "sched.sock")
    yield s
    s.close()


def test_filter_matches_the_http_verb(sc: Sidecar) -> None:
    sc.add(_pod("p", 8))
    names = ["n8", "n4", "ghost"]
    reply = sc.stub.Filter(pb.FilterRequest(pod=_ref("p"), node_names=names), timeout=5)
    assert reply.status.code == pb.SUCCESS
    got = _rejected(reply, names)
    http = sc.ext.filter(ExtenderArgs(Pod=_pod("p", 8), NodeNames=names))
    assert got == {
        **{n: (pb.UNSCHEDULABLE, r) for n, r in (http.FailedNodes or {}).items()},
        **{
            n: (pb.UNSCHEDULABLE_AND_UNRESOLVABLE, r)
            for n, r in (http.FailedAndUnresolvableNodes or {}).items()
        },
    }
    assert set(names) - set(got) == set(http.NodeNames or []) == {"n8"}


def test_score_is_per_node_in_request_order(sc: Sidecar) -> None:
    sc.add(_pod("p", 2))
    reply = sc.stub.Score(pb.ScoreRequest(pod=_ref("p"), node_names=["n4", "ghost", "n8"]))
    assert reply.status.code == pb.SUCCESS
    assert len(reply.scores) == 3 and reply.scores[1] == 0  # one byte per node
    assert all(0 <= s <= 100 for s in reply.scores)
    args = ExtenderArgs(Pod=_pod("p", 2), NodeNames=["n4", "n8"])
    http = {h.Host: h.Score for h in sc.ext.prioritize(args)}
    # the extender scale is the framework's divided by 10, rounded
    assert round(reply.scores[0] / 10) == http["n4"] and round(reply.scores[2] / 10) == http["n8"]


def test_prefilter_skips_pods_of_other_schedulers_and_names_missing_groups(sc: Sidecar) -> None:
    sc.add(_pod("other", 1, scheduler="default-scheduler"), _pod("lost", 1, group="nogroup"))
    other = sc.stub.PreFilter(pb.PreFilterRequest(pod=_ref("other")))
    assert other.status.code == pb.SKIP
    lost = sc.stub.PreFilter(pb.PreFilterRequest(pod=_ref("lost")))
    assert lost.status.code == pb.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert lost.status.reason.startswith("PodGroup ns/nogroup does not exist")


def test_filter_answers_what_prefilter_would(sc: Sidecar) -> None:
    sc.add(_pod("other", 1, scheduler="default-scheduler"), _pod("lost", 1, group="nogroup"))
    other = sc.stub.Filter(pb.FilterRequest(pod=_ref("other"), node_names=["n4", "n8"]))
    assert other.status.code == pb.SUCCESS and _rejected(other, ["n4", "n8"]) == {}
    lost = sc.stub.Filter(pb.FilterRequest(pod=_ref("lost"), node_names=["n4"], with_scores=True))
    assert lost.status.code == pb.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert lost.status.reason.startswith("PodGroup ns/nogroup does not exist")


def test_filter_with_scores_scores_the_nodes_that_fit_as_score_does(sc: Sidecar) -> None:
    sc.add(_pod("p", 6))
    names = ["n4", "ghost", "n8"]
    plain = sc.stub.Filter(pb.FilterRequest(pod=_ref("p"), node_names=names))
    assert plain.scores == b""  # not asked
    both = sc.stub.Filter(pb.FilterRequest(pod=_ref("p"), node_names=names, with_scores=True))
    assert list(_rejected(both, names)) == ["n4", "ghost"]
    assert both.codes == plain.codes and both.reason_index == plain.reason_index
    score = sc.stub.Score(pb.ScoreRequest(pod=_ref("p"), node_names=["n8"]))
    # the node that fits scores as Score scores it; the rejected and unknown ones 0
    assert list(both.scores) == [0, 0, score.scores[0]] and score.scores[0] > 0


def _filter(sc: Sidecar, name: str, names: list[str]) -> Any:
    return sc.stub.Filter(pb.FilterRequest(pod=_ref(name), node_names=names, with_scores=True))


def test_filter_names_the_node_the_http_filter_picks(sc: Sidecar) -> None:
    names = ["n4", "n8"]
    sc.add(_pod("p", 2))
    assert _filter(sc, "p", names).pick == ""  # not asked to pick: kube-scheduler scores
    sc.ext.pick_node = True
    reply = _filter(sc, "p", names)
    http = sc.ext.filter(ExtenderArgs(Pod=_pod("p", 2), NodeNames=names))
    assert http.NodeNames is not None and len(http.NodeNames) == 1
    assert reply.pick == http.NodeNames[0]
    # every verdict is still there; the score column is left out (nothing is scored)
    assert _rejected(reply, names) == {} and reply.scores == b""


def test_a_lone_fitting_node_is_picked_and_none_fitting_picks_none(sc: Sidecar) -> None:
    sc.ext.pick_node = True
    sc.add(_pod("six", 6), _pod("nine", 9))
    assert _filter(sc, "six", ["n4", "n8"]).pick == "n8"
    nine = _filter(sc, "nine", ["n4", "n8"])
    assert nine.pick == "" and set(_rejected(nine, ["n4", "n8"])) == {"n4", "n8"}


def test_a_pod_with_soft_preferences_gets_no_pick(sc: Sidecar) -> None:
    sc.ext.pick_node = True
    pod = _pod("soft", 1)
    term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
    pod["spec"]["affinity"] = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "preference": term}]
        }
    }
    sc.add(pod)
    reply = _filter(sc, "soft", ["n4", "n8"])
    assert reply.pick == "" and len(reply.scores) == 2  # kube-scheduler scores both
    assert _picks(sc) == {"soft_preferences": 1.0}


def test_a_pick_that_never_reached_reserve_is_not_repeated_until_the_pod_is_reserved(
    sc: Sidecar,
) -> None:
    sc.ext.pick_node = True
    sc.add(_pod("p", 2))
    names = ["n4", "n8"]
    first = _filter(sc, "p", names).pick
    assert first
    # no Reserve came: kube-scheduler turned the node down; the next attempt sees every node
    again = _filter(sc, "p", names)
    assert again.pick == "" and _rejected(again, names) == {} and len(again.scores) == 2
    skipped = [d for d in sc.ext.decisions if d["verb"] == "pick" and "skipped" in d]
    assert skipped and f"the pick of {first} was not reserved" in skipped[-1]["skipped"]
    assert _filter(sc, "p", names).pick == ""
    # reserved elsewhere, unreserved (e.g. its gang was rejected at Permit): picks again
    other = "n8" if first == "n4" else "n4"
    reserved = sc.stub.Reserve(pb.ReserveRequest(pod=_ref("p"), node_name=other))
    assert reserved.status.code == pb.SUCCESS
    sc.stub.Unreserve(pb.UnreserveRequest(pod=_ref("p"), node_name=other))
    assert _filter(sc, "p", names).pick == first
    # pyextender_picks_total: two picks, two attempts after the one turned down
    assert _picks(sc) == {"picked": 2.0, "not_reserved": 2.0}


def _counts(counter: Any, name: str, label: str) -> dict[str, float]:
    """A labelled counter's non-zero values by its one label."""
    counts: dict[str, float] = {}
    for metric in counter.collect():
        for sample in metric.samples:
            if sample.name == name and sample.value:
                counts[sample.labels[label]] = sample.value
    return counts


def _picks(sc: Sidecar) -> dict[str, float]:
    return _counts(sc.ext.metrics.picks, "pyextender_picks_total", "result")


def test_batch_parser_keeps_the_with_scores_flag_of_a_cached_list() -> None:
    parser = BatchParser(pb.FilterRequest)
    names = [f"node-{i}" for i in range(10)]
    for flag in (True, True, False, False, True):
        raw = pb.FilterRequest(pod=_ref("a"), node_names=names, with_scores=flag)
        assert parser.parse(raw.SerializeToString()).with_scores is flag


def test_pod_newer_than_the_cache_is_read_from_the_api(sc: Sidecar) -> None:
    sc.binder.pods["ns/fresh"] = _pod("fresh", 1)
    assert sc.stub.PreFilter(pb.PreFilterRequest(pod=_ref("fresh"))).status.code == pb.SUCCESS
    gone = sc.stub.PreFilter(pb.PreFilterRequest(pod=_ref("never")))
    assert gone.status.code == pb.ERROR and "not known to the sidecar" in gone.status.reason


def test_reserve_counts_the_pod_and_guards_against_overcommit(sc: Sidecar) -> None:
    sc.add(_pod("a", 8), _pod("b", 8))
    ok = sc.stub.Reserve(pb.ReserveRequest(pod=_ref("a"), node_name="n8"))
    assert ok.status.code == pb.SUCCESS
    again = sc.stub.Reserve(pb.ReserveRequest(pod=_ref("a"), node_name="n8"))
    assert again.status.code == pb.SUCCESS  # idempotent
    full = sc.stub.Reserve(pb.ReserveRequest(pod=_ref("b"), node_name="n8"))
    assert full.status.code == pb.UNSCHEDULABLE
    assert "no longer fits node n8" in full.status.reason
    filt = sc.stub.Filter(pb.FilterRequest(pod=_ref("b"), node_names=["n8"]))
    assert list(_rejected(filt, ["n8"])) == ["n8"]  # the reservation counts
    sc.stub.Unreserve(pb.UnreserveRequest(pod=_ref("a"), node_name="n8"))
    filt = sc.stub.Filter(pb.FilterRequest(pod=_ref("b"), node_names=["n8"]))
    assert _rejected(filt, ["n8"]) == {}


def test_permit_waits_for_min_member_then_allows(sc: Sidecar) -> None:
    sc.cache.group_event("ADDED", _group("g", 3))
    sc.add(*(_pod(f"g-{i}", 1, group="g") for i in range(3)))
    for i in range(3):
        assert (
            sc.stub.Reserve(pb.ReserveRequest(pod=_ref(f"g-{i}"), node_name="n8")).status.code == 0
        )
    # reserved here: the first two wait, the third allows all
    sc.stub.Unreserve(pb.UnreserveRequest(pod=_ref("g-2"), node_name="n8"))
    first = sc.stub.Permit(pb.PermitRequest(pod=_ref("g-0"), node_name="n8"))
    assert first.status.code == pb.WAIT and first.gang == "ns/g"
    assert (first.ready, first.min_member) == (2, 3)
    # the shim waits while members keep arriving: the stall window, and the cap
    assert first.timeout.ToNanoseconds() == int(GANG_TIMEOUT * 1e9)
    assert first.HasField("max_wait")
    assert first.max_wait.ToNanoseconds() == int(GANG_MAX_WAIT * 1e9)
    assert first.status.reason == (
        "gang ns/g: 2/3 members reserved; waiting while members keep arriving "
        "(rejected after 7s without a new one, or 90s in all)"
    )
    sc.stub.Reserve(pb.ReserveRequest(pod=_ref("g-2"), node_name="n8"))
    last = sc.stub.Permit(pb.PermitRequest(pod=_ref("g-2"), node_name="n8"))
    assert last.status.code == pb.SUCCESS and last.ready == 3


def test_permit_refuses_a_member_whose_podgroup_went_away(sc: Sidecar) -> None:
    """A job restarting drops its PodGroup: a member reserved before that is never
    allowed on its own, whatever the quorum would have said."""
    sc.cache.group_event("ADDED", _group("g", 1))
    sc.add(_pod("g-0", 1, group="g"))
    assert sc.stub.Reserve(pb.ReserveRequest(pod=_ref("g-0"), node_name="n8")).status.code == 0
    sc.cache.group_event("DELETED", _group("g", 1))
    reply = sc.stub.Permit(pb.PermitRequest(pod=_ref("g-0"), node_name="n8"))
    assert reply.status.code == pb.UNSCHEDULABLE
    assert reply.status.reason.startswith("PodGroup ns/g does not exist")


def test_permit_counts_members_waiting_in_the_caller(sc: Sidecar) -> None:
    """After a sidecar restart the reservations are gone; kube-scheduler's waiting pods count."""
    sc.cache.group_event("ADDED", _group("g", 3))
    sc.add(*(_pod(f"g-{i}", 1, group="g") for i in range(3)))
    alone = sc.stub.Permit(pb.PermitRequest(pod=_ref("g-2"), node_name="n8"))
    assert alone.status.code == pb.WAIT and alone.ready == 1
    helped = sc.stub.Permit(
        pb.PermitRequest(
            pod=_ref("g-2"), node_name="n8", waiting_member_uids=["uid-g-0", "uid-g-1"]
        )
    )
    assert helped.status.code == pb.SUCCESS and helped.ready == 3


def test_reserve_answers_permit_when_asked_as_permit_would(sc: Sidecar) -> None:
    """kube-scheduler runs Permit right after Reserve: the shim asks for its answer there."""
    sc.cache.group_event("ADDED", _group("g", 3))
    sc.add(*(_pod(f"g-{i}", 1, group="g") for i in range(3)))

    def reserve(name: str, waiting: list[str], ask: bool = True) -> Any:
        return sc.stub.Reserve(
            pb.ReserveRequest(
                pod=_ref(name), node_name="n8", with_permit=ask, waiting_member_uids=waiting
            )
        )

    assert not reserve("g-0", [], ask=False).HasField("permit")  # not asked: Permit is called
    sc.stub.Unreserve(pb.UnreserveRequest(pod=_ref("g-0"), node_name="n8"))
    first = reserve("g-0", []).permit
    assert first.status.code == pb.WAIT and (first.ready, first.min_member) == (1, 3)
    assert first.timeout.ToNanoseconds() == int(GANG_TIMEOUT * 1e9)
    # members waiting in the caller count, as in Permit; and this reservation counts
    last = reserve("g-2", ["uid-g-1"])
    assert last.permit.status.code == pb.SUCCESS and last.permit.ready == 3
    again = sc.stub.Permit(pb.PermitRequest(pod=_ref("g-2"), node_name="n8"))
    assert again.ready == 2  # without the caller's waiting member: the same count as Permit's
    permits = [d for d in sc.ext.decisions if d["verb"] == "permit"]
    assert [d["result"] for d in permits] == ["wait", "allow", "wait"]


@pytest.mark.parametrize(
    ("flags", "ok"),
    [
        ([], True),  # 20 s stall window, 600 s cap
        (["--gang-timeout", "30", "--gang-max-wait", "900"], True),
        (["--gang-max-wait", "901"], False),  # beyond kube-scheduler's 15 min
        (["--gang-timeout", "60", "--gang-max-wait", "30"], False),  # cap below the window
        (["--gang-timeout", "0"], False),
    ],
)
def test_serve_checks_the_gang_wait_flags(
    flags: list[str], ok: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    from pyextender.cli import build_parser
    from pyextender.server import serve_cli

    # a bad --gpu-resource stops a valid command line right after the gang check
    args = build_parser().parse_args(["serve", *flags, "--gpu-resource", "gpu"])
    assert serve_cli.run(args) == 2
    err = capsys.readouterr().err
    assert ("--gang-timeout <= --gang-max-wait <= 900" in err) is not ok, err
    if ok:
        assert "--gpu-resource" in err


def _binds(sc: Sidecar, key: str) -> list[dict[str, Any]]:
    return [d for d in sc.ext.decisions if d["pod"] == key and d["verb"] == "bind"]


def test_pods_without_a_gang_are_permitted_and_the_watch_counts_the_bind(sc: Sidecar) -> None:
    sc.add(_pod("solo", 1))
    assert sc.stub.Reserve(pb.ReserveRequest(pod=_ref("solo"), node_name="n4")).status.code == 0
    reply = sc.stub.Permit(pb.PermitRequest(pod=_ref("solo"), node_name="n4"))
    assert reply.status.code == pb.SUCCESS and reply.gang == ""
    before = sc.ext.metrics.binds.labels("bound")._value.get()
    # the shim's Bind wrote the Binding and calls nothing more: the watch shows it bound
    bound = _pod("solo", 1)
    bound["spec"]["nodeName"] = "n4"
    sc.cache.pod_event("MODIFIED", bound)
    assert [(d["node"], d["result"]) for d in _binds(sc, "ns/solo")] == [("n4", "bound")]
    # a later event of the same pod, or an older shim's PostBind, counts nothing more
    sc.cache.pod_event("MODIFIED", bound)
    sc.stub.PostBind(pb.PostBindRequest(pod=_ref("solo"), node_name="n4"))
    assert len(_binds(sc, "ns/solo")) == 1
    assert sc.ext.metrics.binds.labels("bound")._value.get() == before + 1


def test_a_bind_by_another_plugin_is_counted_by_post_bind_once(sc: Sidecar) -> None:
    sc.add(_pod("other", 1))
    sc.stub.Reserve(pb.ReserveRequest(pod=_ref("other"), node_name="n8"))
    sc.stub.PostBind(pb.PostBindRequest(pod=_ref("other"), node_name="n8"))
    bound = _pod("other", 1)
    bound["spec"]["nodeName"] = "n8"
    sc.cache.pod_event("MODIFIED", bound)
    assert [(d["node"], d["result"]) for d in _binds(sc, "ns/other")] == [("n8", "bound")]


def test_an_unreserved_pod_is_not_counted_bound(sc: Sidecar) -> None:
    sc.add(_pod("gone", 1))
    sc.stub.Reserve(pb.ReserveRequest(pod=_ref("gone"), node_name="n8"))
    sc.stub.Unreserve(pb.UnreserveRequest(pod=_ref("gone"), node_name="n8"))
    assert sc.service.reserved == {}
    sc.stub.PostBind(pb.PostBindRequest(pod=_ref("gone"), node_name="n8"))
    assert _binds(sc, "ns/gone") == []


@pytest.mark.parametrize(
    ("method", "request_bytes", "expected"),
    [
        ("Filter", b"\xff\xff\xff", "not a valid pyextender.v1.FilterRequest"),
        ("Filter", pb.FilterRequest().SerializeToString(), "pod: required"),
        (
            "Score",
            pb.ScoreRequest(pod=pb.PodRef(name="x")).SerializeToString(),
            "pod.uid: required",
        ),
        (
            "PreFilter",
            pb.PreFilterRequest(pod=pb.PodRef(uid="u", name="x")).SerializeToString(),
            "pod.namespace: required",
        ),
        ("Reserve", pb.ReserveRequest(pod=_ref("p")).SerializeToString(), "node_name: required"),
        # names no pod can have (the API server would refuse the read with a 400)
        (
            "Filter",
            pb.FilterRequest(pod=pb.PodRef(uid="u", namespace="ns", name="%")).SerializeToString(),
            "pod.name: '%' is not a DNS subdomain",
        ),
        (
            "Reserve",
            pb.ReserveRequest(
                pod=pb.PodRef(uid="u", namespace="No_Such", name="p"), node_name="n8"
            ).SerializeToString(),
            "pod.namespace: 'No_Such' is not a DNS label",
        ),
        ("Permit", pb.PermitRequest(pod=_ref("p")).SerializeToString(), "node_name: required"),
        # a string field holding bytes that are not UTF-8
        ("Score", b"\x0a\x03\x0a\x01\xff", "not a valid pyextender.v1.ScoreRequest"),
    ],
)
def test_bad_messages_are_invalid_argument_naming_the_field(
    sc: Sidecar, method: str, request_bytes: bytes, expected: str
) -> None:
    raw = sc.channel.unary_unary(f"/{SERVICE}/{method}")
    with pytest.raises(grpc.RpcError) as err:
        raw(request_bytes, timeout=5)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]
    assert expected in err.value.details(), err.value.details()  # type: ignore[attr-defined]
    # the server keeps serving
    sc.add(_pod("p", 1))
    filt = sc.stub.Filter(pb.FilterRequest(pod=_ref("p"), node_names=["n8"]))
    assert filt.status.code == pb.SUCCESS and filt.codes == b"\x00"


def test_an_expired_deadline_is_deadline_exceeded(sc: Sidecar) -> None:
    # The pod is newer than the cache, so the sidecar must read it from the API server,
    # and that read takes longer than the caller allows: the server gives up at the
    # deadline (counted as DEADLINE_EXCEEDED) instead of answering late. (A zero timeout
    # raced: the server could answer before the client's own timer fired.)
    sc.slow_api_pod("p", 2.0)
    with pytest.raises(grpc.RpcError) as err:
        sc.stub.Filter(pb.FilterRequest(pod=_ref("p"), node_names=["n8"]), timeout=0.3)
    assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED  # type: ignore[attr-defined]
    # Once the slow read is over, the server has still not answered: whether it gave up
    # itself or grpc cancelled the handler (a loaded machine can dispatch it after the
    # deadline), the call is counted as DEADLINE_EXCEEDED, never as OK.
    requests = sc.ext.metrics.requests
    threading.Event().wait(2.5)
    assert requests.labels("grpc_filter", "OK")._value.get() == 0
    assert requests.labels("grpc_filter", "DEADLINE_EXCEEDED")._value.get() <= 1


def test_health_follows_readiness_and_reflection_lists_the_service(sc: Sidecar) -> None:
    check = health_pb2_grpc.HealthStub(sc.channel)

    def status() -> int:
        return int(check.Check(health_pb2.HealthCheckRequest(service=SERVICE), timeout=5).status)

    assert status() == health_pb2.HealthCheckResponse.SERVING
    sc.ready = False
    for _ in range(40):
        if status() == health_pb2.HealthCheckResponse.NOT_SERVING:
            break
        threading.Event().wait(0.1)
    assert status() == health_pb2.HealthCheckResponse.NOT_SERVING
    refl = reflection_pb2_grpc.ServerReflectionStub(sc.channel)
    replies = list(
        refl.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
    )
    names = {s.name for s in replies[0].list_services_response.service}
    assert SERVICE in names and "grpc.health.v1.Health" in names


def test_decisions_of_both_front_ends_share_one_log(sc: Sidecar) -> None:
    sc.add(_pod("p", 1))
    sc.stub.Filter(pb.FilterRequest(pod=_ref("p"), node_names=["n8"]))
    app = ExtenderApp(sc.ext, lambda: (True, "ok"))
    assert app.extender.decisions[-1]["via"] == "grpc"
    assert json.dumps(list(app.extender.decisions))  # JSON-able for /debug/decisions


def test_batch_parser_reuses_an_unchanged_candidate_list() -> None:
    parser = BatchParser(pb.ScoreRequest)
    names = [f"node-{i}" for i in range(100)]
    first = parser.parse(pb.ScoreRequest(pod=_ref("a"), node_names=names).SerializeToString())
    again = parser.parse(pb.ScoreRequest(pod=_ref("b"), node_names=names).SerializeToString())
    assert first.names == names and again.names is first.names  # parsed once
    assert again.pod.name == "b"  # the pod is always this request's
    other = parser.parse(pb.ScoreRequest(pod=_ref("b"), node_names=names[:-1]).SerializeToString())
    assert other.names == names[:-1] and other.names is not first.names
    empty = parser.parse(pb.ScoreRequest(node_names=names).SerializeToString())
    assert empty.pod is None and empty.names == names


def test_batch_parser_does_not_cache_a_request_with_a_second_pod_field() -> None:
    """protobuf merges a repeated pod field; the cached fast path must not skip it."""
    parser = BatchParser(pb.ScoreRequest)
    tail = pb.ScoreRequest(pod=pb.PodRef(name="late"), node_names=["n"]).SerializeToString()
    raw = pb.ScoreRequest(pod=_ref("a")).SerializeToString() + tail
    for _ in range(2):
        batch = parser.parse(raw)
        assert batch.pod.name == "late" and batch.pod.uid == "uid-a"


def test_the_same_candidates_for_another_pod_are_judged_for_that_pod(sc: Sidecar) -> None:
    sc.add(_pod("small", 1), _pod("big", 8))
    names = ["n8", "n4"]
    small = sc.stub.Filter(pb.FilterRequest(pod=_ref("small"), node_names=names))
    big = sc.stub.Filter(pb.FilterRequest(pod=_ref("big"), node_names=names))
    assert _rejected(small, names) == {}
    assert list(_rejected(big, names)) == ["n4"]
    bad = pb.FilterRequest(pod=_ref("big"), node_names=names).SerializeToString()
    corrupt = bad[:2] + b"\xff" + bad[3:]  # same candidates, a pod that does not parse
    with pytest.raises(grpc.RpcError) as err:
        sc.channel.unary_unary(f"/{SERVICE}/Filter")(corrupt, timeout=5)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]


def test_reserve_answers_the_gpus_it_chose_for_the_binding(sc: Sidecar) -> None:
    sc.add(_pod("g", 2), _pod("cpu-only", 0))
    reply = sc.stub.Reserve(pb.ReserveRequest(pod=_ref("g"), node_name="n8"))
    assert reply.status.code == 0
    gpus = reply.annotations["pyextender.io/gpu-index"].split(",")
    assert len(gpus) == 2 and len(set(gpus)) == 2, gpus
    # a retried Reserve on the same node keeps them; a pod without GPUs gets none
    again = sc.stub.Reserve(pb.ReserveRequest(pod=_ref("g"), node_name="n8"))
    assert dict(again.annotations) == dict(reply.annotations)
    cpu = sc.stub.Reserve(pb.ReserveRequest(pod=_ref("cpu-only"), node_name="n8"))
    assert cpu.status.code == 0 and dict(cpu.annotations) == {}
    assert sc.annotated == []  # Reserve itself writes nothing


def test_prebind_writes_the_gpus_chosen_at_reserve_onto_the_pod(sc: Sidecar) -> None:
    sc.add(_pod("g", 2), _pod("cpu-only", 0))
    assert sc.stub.Reserve(pb.ReserveRequest(pod=_ref("g"), node_name="n8")).status.code == 0
    assert sc.stub.PreBind(pb.PreBindRequest(pod=_ref("g"), node_name="n8")).status.code == 0
    [(ns, name, uid, annotations)] = sc.annotated
    assert (ns, name, uid) == ("ns", "g", "uid-g")
    assert len(annotations["pyextender.io/gpu-index"].split(",")) == 2
    sc.stub.Reserve(pb.ReserveRequest(pod=_ref("cpu-only"), node_name="n8"))
    assert sc.stub.PreBind(pb.PreBindRequest(pod=_ref("cpu-only"), node_name="n8")).status.code == 0
    assert len(sc.annotated) == 1  # nothing to write for a pod without GPUs


def test_prebind_failure_keeps_the_pod_unbound_with_the_reason(sc: Sidecar) -> None:
    sc.add(_pod("g", 1))
    sc.stub.Reserve(pb.ReserveRequest(pod=_ref("g"), node_name="n8"))
    sc.annotate_error = RuntimeError("409 Conflict: uid precondition failed")
    reply = sc.stub.PreBind(pb.PreBindRequest(pod=_ref("g"), node_name="n8"))
    assert reply.status.code == pb.ERROR
    assert "pod ns/g: 409 Conflict" in reply.status.reason, reply.status.reason


def test_tcp_with_tls(sc: Sidecar, tmp_path: Path) -> None:
    pki.generate(tmp_path, ["127.0.0.1", "localhost"])
    server = GrpcServer(
        SchedulerService(sc.ext, GANG_TIMEOUT),
        GrpcOptions(
            address="127.0.0.1:0",
            tls_cert=str(tmp_path / "apiserver.crt"),
            tls_key=str(tmp_path / "apiserver.key"),
        ),
        lambda: (True, "ok"),
    )
    [where] = sc.run(server.start())
    assert where.startswith("tls://127.0.0.1:")
    creds = grpc.ssl_channel_credentials(root_certificates=(tmp_path / "ca.crt").read_bytes())
    sc.add(_pod("p", 1))
    with grpc.secure_channel(where.removeprefix("tls://"), creds) as channel:
        reply = pb_grpc.SchedulerStub(channel).Filter(
            pb.FilterRequest(pod=_ref("p"), node_names=["n8"]), timeout=5
        )
    assert reply.status.code == pb.SUCCESS and reply.codes == b"\x00"
    plain = grpc.insecure_channel(where.removeprefix("tls://"))
    with plain, pytest.raises(grpc.RpcError):  # no TLS: refused
        pb_grpc.SchedulerStub(plain).Filter(
            pb.FilterRequest(pod=_ref("p"), node_names=["n8"]), timeout=2
        )
    sc.run(server.stop(0))


def test_a_pod_held_at_the_barrier_is_refused_until_released_and_streamed(sc: Sidecar) -> None:
    """The real server: WatchReleased's first message lists nothing, the release of the
    gang's member arrives next; before it, Filter (gRPC) and filter (HTTP) refuse the
    held pod, naming the barrier."""
    held = _pod("m", 1, group="g")
    held["metadata"]["annotations"]["pyextender.io/gang-barrier"] = "true"
    sc.run(_apply(sc, lambda: sc.cache.group_event("ADDED", _group("g", 1))))
    sc.run(_apply(sc, lambda: sc.add(held)))
    reply = sc.stub.Filter(pb.FilterRequest(pod=_ref("m"), node_names=["n8"], with_scores=True))
    assert reply.status.code == pb.UNSCHEDULABLE
    assert reply.status.reason == "held at the gang barrier: ns/g not released yet"
    http = sc.ext.filter(ExtenderArgs(Pod=held, NodeNames=["n8"]))
    assert http.Error == "held at the gang barrier: PodGroup ns/g not released yet"
    stream = sc.stub.WatchReleased(pb.WatchReleasedRequest(client="test"), timeout=10)
    first = next(stream)
    assert first.full and list(first.pods) == []
    sc.run(_apply(sc, lambda: sc.cache.release(["uid-m"])))
    second = next(stream)
    assert not second.full and [(p.uid, p.namespace, p.name) for p in second.pods] == [
        ("uid-m", "ns", "m")
    ]
    stream.cancel()
    reply = sc.stub.Filter(pb.FilterRequest(pod=_ref("m"), node_names=["n8"], with_scores=True))
    assert reply.status.code == pb.SUCCESS and _rejected(reply, ["n8"]) == {}


async def _apply(sc: Sidecar, fn: Any) -> None:
    """Run a cache change on the server's loop (the cache has one thread)."""
    fn()


def _reserve_checks(sc: Sidecar) -> dict[str, float]:
    return _counts(sc.ext.metrics.reserve_checks, "pyextender_reserve_checks_total", "check")


def _filter_runs(sc: Sidecar) -> float:
    """How many times the profile's filters ran (predicates, the first, observes each)."""
    for metric in sc.ext.metrics.plugin_seconds.collect():
        for sample in metric.samples:
            if sample.name.endswith("_count") and sample.labels == {
                "plugin": "predicates",
                "point": "filter",
            }:
                return sample.value
    return 0.0


def test_reserve_of_the_pick_at_an_unchanged_cache_keeps_filters_verdict(sc: Sidecar) -> None:
    sc.ext.pick_node = True
    sc.add(_pod("a", 6))
    assert _filter(sc, "a", ["n4", "n8"]).pick == "n8"
    runs = _filter_runs(sc)
    ok = sc.stub.Reserve(pb.ReserveRequest(pod=_ref("a"), node_name="n8"))
    assert ok.status.code == pb.SUCCESS
    assert _filter_runs(sc) == runs and _reserve_checks(sc) == {"unchanged": 1.0}
    assert sc.ext.cache.state.pods[_ref("a").uid].assumed  # counted as ever


def test_reserve_filters_again_once_anything_changed_since_the_pick(sc: Sidecar) -> None:
    sc.ext.pick_node = True
    sc.add(_pod("a", 6), _pod("b", 6), _pod("c", 1))
    assert _filter(sc, "a", ["n4", "n8"]).pick == "n8"
    runs = _filter_runs(sc)
    # another pod takes the node between a's Filter and its Reserve (e.g. through
    # a second scheduler's extender verbs): the pick's verdict is stale
    taken = sc.stub.Reserve(pb.ReserveRequest(pod=_ref("b"), node_name="n8"))
    assert taken.status.code == pb.SUCCESS
    late = sc.stub.Reserve(pb.ReserveRequest(pod=_ref("a"), node_name="n8"))
    assert late.status.code == pb.UNSCHEDULABLE and "no longer fits node n8" in late.status.reason
    assert _filter_runs(sc) == runs + 2 and _reserve_checks(sc) == {"filtered": 2.0}
    # a watch event alone (a pod elsewhere arrived) is enough to check again
    pick = _filter(sc, "c", ["n4", "n8"]).pick
    assert pick
    sc.run(_apply(sc, lambda: sc.add(_pod("d", 1))))
    reply = sc.stub.Reserve(pb.ReserveRequest(pod=_ref("c"), node_name=pick))
    assert reply.status.code == pb.SUCCESS
    assert _filter_runs(sc) == runs + 4 and _reserve_checks(sc) == {"filtered": 3.0}
    # a Reserve of another node than the pick checks that node
    pick = _filter(sc, "d", ["n4", "n8"]).pick
    other = "n4" if pick == "n8" else "n8"
    reply = sc.stub.Reserve(pb.ReserveRequest(pod=_ref("d"), node_name=other))
    assert reply.status.code == pb.SUCCESS
    assert _filter_runs(sc) == runs + 6 and _reserve_checks(sc) == {"filtered": 4.0}
