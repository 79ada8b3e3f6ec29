"""Cycle: Filter and Reserve as messages on one stream, against the real grpc.aio
server in-process (the same Sidecar as test_grpc_service).

Each message is answered as its unary method answers it; a message the unary
method would refuse ends the stream with the same code; the envelope codec
agrees with protobuf's on every message.
"""

from __future__ import annotations

import queue
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyextender.server.grpc_cycle import read_request, write_response
from pyextender.server.grpc_service import SERVICE
from pyextender.server.proto_gen.pyextender.v1 import scheduler_pb2 as pb
from tests.unit.test_grpc_service import Sidecar, _group, _pod, _ref, sc  # noqa: F401


class Stream:
    """One Cycle stream, lock-step as the shim uses it."""

    def __init__(self, side: Sidecar, raw: bool = False) -> None:
        self.sent: queue.Queue[Any] = queue.Queue()

        def requests() -> Iterator[Any]:
            while (item := self.sent.get()) is not None:
                yield item

        call = side.channel.stream_stream(f"/{SERVICE}/Cycle") if raw else side.stub.Cycle
        self.replies = call(requests(), timeout=10)

    def ask(self, request: Any) -> Any:
        self.sent.put(request)
        return next(self.replies)

    def close(self) -> None:
        self.sent.put(None)


def _count(side: Sidecar, label: str, code: str = "OK") -> float:
    value: float = side.ext.metrics.requests.labels(label, code)._value.get()
    return value


def test_filter_and_reserve_on_the_stream_answer_as_the_unary_calls(sc: Sidecar) -> None:  # noqa: F811
    sc.cache.group_event("ADDED", _group("g", 2))
    sc.add(_pod("g-0", 8, group="g"), _pod("g-1", 4, group="g"), _pod("big", 8))
    names = ["n8", "n4", "ghost"]
    unary = sc.stub.Filter(pb.FilterRequest(pod=_ref("g-0"), node_names=names, with_scores=True))
    stream = Stream(sc)
    first = stream.ask(
        pb.CycleRequest(
            filter=pb.FilterRequest(pod=_ref("g-0"), node_names=names, with_scores=True), seq=1
        )
    )
    assert first.WhichOneof("reply") == "filter" and first.seq == 1
    assert first.filter == unary  # the same verdicts, reasons and scores
    assert first.filter.codes == bytes(
        [pb.SUCCESS, pb.UNSCHEDULABLE_AND_UNRESOLVABLE, pb.UNSCHEDULABLE]  # n4: 4 GPUs in all
    )

    reserved = stream.ask(
        pb.CycleRequest(
            reserve=pb.ReserveRequest(pod=_ref("g-0"), node_name="n8", with_permit=True), seq=2
        )
    )
    assert reserved.WhichOneof("reply") == "reserve" and reserved.seq == 2
    assert reserved.reserve.status.code == pb.SUCCESS
    assert reserved.reserve.annotations["pyextender.io/gpu-index"] == "0,1,2,3,4,5,6,7"
    permit = reserved.reserve.permit
    assert permit.status.code == pb.WAIT and (permit.ready, permit.min_member) == (1, 2)

    # the reservation counts for the next pod's Filter on the same stream
    after = stream.ask(pb.CycleRequest(filter=pb.FilterRequest(pod=_ref("big"), node_names=names)))
    assert after.seq == 0 and after.filter.codes[0] == pb.UNSCHEDULABLE
    full = stream.ask(pb.CycleRequest(reserve=pb.ReserveRequest(pod=_ref("big"), node_name="n8")))
    assert full.reserve.status.code == pb.UNSCHEDULABLE
    assert "no longer fits node n8" in full.reserve.status.reason
    stream.close()

    # counted under the unary methods' labels, and as stream messages; decisions
    # logged as over unary calls
    assert _count(sc, "grpc_filter") == 3 and _count(sc, "grpc_reserve") == 2
    metrics = sc.ext.metrics
    assert metrics.cycle_streams.labels("grpc")._value.get() == 1
    assert metrics.cycle_messages.labels("filter")._value.get() == 2  # and one unary call
    assert metrics.cycle_messages.labels("reserve")._value.get() == 2
    verbs = [(d["verb"], d.get("result")) for d in sc.ext.decisions if d["pod"] == "ns/g-0"]
    assert ("reserve", "reserved") in verbs and ("permit", "wait") in verbs


def test_many_messages_on_one_stream(sc: Sidecar) -> None:  # noqa: F811
    sc.add(*(_pod(f"p-{i}", 1) for i in range(12)))
    stream = Stream(sc)
    for i in range(12):
        filt = stream.ask(
            pb.CycleRequest(filter=pb.FilterRequest(pod=_ref(f"p-{i}"), node_names=["n8"]), seq=i)
        )
        assert filt.seq == i and filt.filter.codes == bytes(
            [pb.SUCCESS if i < 8 else pb.UNSCHEDULABLE]
        )
        if i < 8:
            res = stream.ask(
                pb.CycleRequest(reserve=pb.ReserveRequest(pod=_ref(f"p-{i}"), node_name="n8"))
            )
            assert res.reserve.status.code == pb.SUCCESS
    stream.close()
    assert len(sc.cache.state.pods) == 8  # n8 holds eight one-GPU pods, no more


@pytest.mark.parametrize(
    ("request_bytes", "expected"),
    [
        # a Filter whose pod field is not a PodRef
        (
            pb.CycleRequest(filter=pb.FilterRequest(node_names=["n8"])).SerializeToString()[:-1]
            + b"\xff",
            "not a valid pyextender.v1.FilterRequest",
        ),
        # a Reserve without its node
        (
            pb.CycleRequest(reserve=pb.ReserveRequest(pod=_ref("p"))).SerializeToString(),
            "pyextender.v1.ReserveRequest: node_name: required",
        ),
        # no call at all
        (pb.CycleRequest(seq=4).SerializeToString(), "names no call this sidecar serves"),
        # a call field this sidecar does not know (a newer shim's)
        (b"\x4a\x00", "names no call this sidecar serves"),
        # the envelope itself cut short
        (b"\x0a\x05\x0a", "not a valid pyextender.v1.CycleRequest"),
    ],
)
def test_a_message_the_unary_call_would_refuse_ends_the_stream_with_its_code(
    sc: Sidecar,  # noqa: F811
    request_bytes: bytes,
    expected: str,
) -> None:
    sc.add(_pod("p", 1))
    stream = Stream(sc, raw=True)
    ok = pb.CycleRequest(filter=pb.FilterRequest(pod=_ref("p"), node_names=["n8"]), seq=1)
    first = pb.CycleResponse.FromString(stream.ask(ok.SerializeToString()))
    assert first.filter.codes == b"\x00"
    with pytest.raises(grpc.RpcError) as err:
        stream.ask(request_bytes)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]
    assert expected in err.value.details(), err.value.details()  # type: ignore[attr-defined]
    stream.close()
    # a new stream is served
    again = Stream(sc)
    assert again.ask(ok).filter.codes == b"\x00"
    again.close()


def test_a_message_past_its_timeout_ends_the_stream_with_deadline_exceeded(
    sc: Sidecar,  # noqa: F811
) -> None:
    # the pod is newer than the cache and reading it takes longer than the shim waits
    sc.slow_api_pod("p", 1.5)
    stream = Stream(sc)
    with pytest.raises(grpc.RpcError) as err:
        stream.ask(
            pb.CycleRequest(
                filter=pb.FilterRequest(pod=_ref("p"), node_names=["n8"]), timeout_ms=300
            )
        )
    assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED  # type: ignore[attr-defined]
    assert "Filter: deadline exceeded" in err.value.details()  # type: ignore[attr-defined]
    stream.close()
    assert _count(sc, "grpc_filter", "DEADLINE_EXCEEDED") == 1


_refs = st.builds(
    pb.PodRef,
    uid=st.text(max_size=8),
    namespace=st.text(max_size=8),
    name=st.text(max_size=8),
    resource_version=st.text(max_size=8),
)
_calls = st.one_of(
    st.builds(
        lambda r, names, scores: pb.CycleRequest(
            filter=pb.FilterRequest(pod=r, node_names=names, with_scores=scores)
        ),
        _refs,
        st.lists(st.text(max_size=12), max_size=5),
        st.booleans(),
    ),
    st.builds(
        lambda r, node, uids: pb.CycleRequest(
            reserve=pb.ReserveRequest(
                pod=r, node_name=node, with_permit=bool(uids), waiting_member_uids=uids
            )
        ),
        _refs,
        st.text(max_size=12),
        st.lists(st.text(max_size=6), max_size=4),
    ),
)


@settings(max_examples=300, deadline=None)
@given(
    message=_calls,
    seq=st.integers(0, 2**64 - 1),
    timeout_ms=st.integers(0, 2**32 - 1),
)
def test_the_envelope_codec_agrees_with_protobuf(message: Any, seq: int, timeout_ms: int) -> None:
    message.seq, message.timeout_ms = seq, timeout_ms
    raw = message.SerializeToString()
    call, inner, got_seq, got_timeout = read_request(raw)
    which = message.WhichOneof("call")
    assert call == {"filter": 1, "reserve": 2}[which]
    assert inner == getattr(message, which).SerializeToString()
    assert (got_seq, got_timeout) == (seq, timeout_ms)
    # the reply envelope, read back by protobuf
    answer = (
        pb.FilterResponse(codes=b"\x00\x01", reasons=["", "Insufficient cpu"])
        if which == "filter"
        else pb.ReserveResponse(annotations={"pyextender.io/gpu-index": "3"})
    )
    reply = pb.CycleResponse.FromString(write_response(call, answer.SerializeToString(), seq))
    assert reply.seq == seq and reply.WhichOneof("reply") == which
    assert getattr(reply, which) == answer
