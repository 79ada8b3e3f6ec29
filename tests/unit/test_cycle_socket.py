"""The cycle socket: the Cycle messages on a plain Unix socket, against the real
sidecar server in-process (the same Sidecar as test_grpc_service, with the
socket on).

Each message is answered as on the gRPC Cycle stream; a request the stream
would end with a status gets a reply naming that status, and the connection
closes; bad framing is refused the same way; the server keeps serving.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from pyextender.cli import build_parser
from pyextender.server import serve_cli
from pyextender.server.grpc_cycle import delimited
from pyextender.server.grpc_server import MAX_MESSAGE_BYTES
from pyextender.server.proto_gen.pyextender.v1 import scheduler_pb2 as pb
from tests.unit.test_grpc_service import Sidecar, _group, _pod, _ref


@pytest.fixture
def side(tmp_path: Path) -> Iterator[Sidecar]:
    s = Sidecar(tmp_path / "sched.sock", tmp_path / "cycle.sock")
    s.cycle_path = tmp_path / "cycle.sock"  # type: ignore[attr-defined]
    yield s
    s.close()


class Conn:
    """One connection to the cycle socket, lock-step as the shim uses it."""

    def __init__(self, side: Sidecar) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(str(side.cycle_path))  # type: ignore[attr-defined]

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _byte(self) -> int | None:
        b = self.sock.recv(1)
        return b[0] if b else None

    def reply(self) -> pb.CycleResponse | None:
        """The next reply; None when the sidecar closed the connection."""
        length = shift = 0
        while True:
            byte = self._byte()
            if byte is None:
                return None
            length |= (byte & 0x7F) << shift
            if byte < 0x80:
                break
            shift += 7
        data = b""
        while len(data) < length:
            chunk = self.sock.recv(length - len(data))
            assert chunk, "closed inside a message"
            data += chunk
        return pb.CycleResponse.FromString(data)

    def ask(self, request: Any) -> pb.CycleResponse:
        raw = request if isinstance(request, bytes) else request.SerializeToString()
        self.send_raw(delimited(raw))
        got = self.reply()
        assert got is not None, "the sidecar closed the connection"
        return got

    def close(self) -> None:
        self.sock.close()


def test_filter_and_reserve_on_the_socket_answer_as_on_the_stream(side: Sidecar) -> None:
    side.cache.group_event("ADDED", _group("g", 2))
    side.add(_pod("g-0", 8, group="g"), _pod("g-1", 4, group="g"), _pod("big", 8))
    names = ["n8", "n4", "ghost"]
    unary = side.stub.Filter(pb.FilterRequest(pod=_ref("g-0"), node_names=names, with_scores=True))
    conn = Conn(side)
    first = conn.ask(
        pb.CycleRequest(
            filter=pb.FilterRequest(pod=_ref("g-0"), node_names=names, with_scores=True), seq=1
        )
    )
    assert first.WhichOneof("reply") == "filter" and first.seq == 1 and not first.refused_code
    assert first.filter == unary
    reserved = conn.ask(
        pb.CycleRequest(
            reserve=pb.ReserveRequest(pod=_ref("g-0"), node_name="n8", with_permit=True), seq=2
        )
    )
    assert reserved.seq == 2 and reserved.reserve.status.code == pb.SUCCESS
    assert reserved.reserve.annotations["pyextender.io/gpu-index"] == "0,1,2,3,4,5,6,7"
    permit = reserved.reserve.permit
    assert permit.status.code == pb.WAIT and (permit.ready, permit.min_member) == (1, 2)
    # the reservation counts for the next pod on the same connection
    full = conn.ask(pb.CycleRequest(reserve=pb.ReserveRequest(pod=_ref("big"), node_name="n8")))
    assert "no longer fits node n8" in full.reserve.status.reason
    conn.close()
    metrics = side.ext.metrics
    assert metrics.cycle_streams.labels("socket")._value.get() == 1  # the connection
    assert metrics.cycle_streams.labels("grpc")._value.get() == 0
    assert metrics.cycle_messages.labels("filter")._value.get() == 1
    assert metrics.cycle_messages.labels("reserve")._value.get() == 2
    assert len(side.cache.state.pods) == 1


def test_many_messages_on_one_connection(side: Sidecar) -> None:
    side.add(*(_pod(f"p-{i}", 1) for i in range(12)))
    conn = Conn(side)
    for i in range(12):
        filt = conn.ask(
            pb.CycleRequest(filter=pb.FilterRequest(pod=_ref(f"p-{i}"), node_names=["n8"]), seq=i)
        )
        assert filt.seq == i
        assert filt.filter.codes == bytes([pb.SUCCESS if i < 8 else pb.UNSCHEDULABLE])
        if i < 8:
            res = conn.ask(
                pb.CycleRequest(reserve=pb.ReserveRequest(pod=_ref(f"p-{i}"), node_name="n8"))
            )
            assert res.reserve.status.code == pb.SUCCESS
    conn.close()
    assert len(side.cache.state.pods) == 8


def _refused(conn: Conn, data: bytes) -> pb.CycleResponse:
    conn.send_raw(data)
    got = conn.reply()
    assert got is not None and got.refused_code, got
    assert conn.reply() is None, "the connection stays open after a refusal"
    return got


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        # a Reserve without its node: refused as the unary call refuses it
        (
            delimited(
                pb.CycleRequest(reserve=pb.ReserveRequest(pod=_ref("p"))).SerializeToString()
            ),
            "pyextender.v1.ReserveRequest: node_name: required",
        ),
        # no call at all
        (delimited(pb.CycleRequest(seq=4).SerializeToString()), "names no call"),
        # the envelope cut short
        (delimited(b"\x0a\x05\x0a"), "not a valid pyextender.v1.CycleRequest"),
        # a length past the limit: refused before a byte of the message is read
        (bytes([0x80, 0x80, 0x80, 0x10]), f"{2**25} bytes; the limit is {MAX_MESSAGE_BYTES}"),
        # a length that never ends
        (b"\xff" * 6, "longer than 5 bytes"),
    ],
)
def test_a_request_the_stream_would_refuse_gets_its_code_and_the_connection_closes(
    side: Sidecar, frame: bytes, expected: str
) -> None:
    side.add(_pod("p", 1))
    ok = pb.CycleRequest(filter=pb.FilterRequest(pod=_ref("p"), node_names=["n8"]), seq=1)
    conn = Conn(side)
    assert conn.ask(ok).filter.codes == b"\x00"
    got = _refused(conn, frame)
    assert got.refused_code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert expected in got.refused_message, got.refused_message
    conn.close()
    again = Conn(side)  # the sidecar keeps serving
    assert again.ask(ok).filter.codes == b"\x00"
    again.close()


def test_a_shim_gone_inside_a_message_leaves_the_socket_serving(side: Sidecar) -> None:
    side.add(_pod("p", 1))
    whole = delimited(
        pb.CycleRequest(
            filter=pb.FilterRequest(pod=_ref("p"), node_names=["n8"])
        ).SerializeToString()
    )
    cut = Conn(side)
    cut.send_raw(whole[:5])
    cut.close()
    conn = Conn(side)
    conn.send_raw(whole)
    got = conn.reply()
    assert got is not None and got.filter.codes == b"\x00"
    conn.close()


def test_serve_refuses_a_cycle_socket_without_grpc(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["serve", "--cycle-socket", "/tmp/x.sock"])
    assert serve_cli.run(args) == 2
    assert "--cycle-socket needs --grpc-socket or --grpc-address" in capsys.readouterr().err
