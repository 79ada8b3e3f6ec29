"""Cycle: the scheduling cycle's Filter and Reserve as messages on one stream.

A unary gRPC call costs grpc.aio far more CPU than a message on an open
stream: each call is a new HTTP/2 stream with its headers and trailers, and a
new handler task. Every pod of ours makes two calls in its cycle, Filter at
PreFilter and Reserve, so the shim sends them on one long-lived bidirectional
stream instead (CycleRequest in proto/pyextender/v1/scheduler.proto). With
kube-scheduler's Go client the two cost the sidecar about 0.72–0.83 ms of CPU
per pod as unary calls and 0.45–0.51 ms as stream messages (bench/grpc_verbs.py,
1,000 and 5,000 nodes).

The stream is lock-step: one request, then its reply, in order. Each message
is answered exactly as its unary method would be (same parsing, checks,
metrics labels); a message the unary method would refuse with a gRPC code
(a request that does not parse, a deadline passed) ends the stream with that
code and message, and the shim opens a new stream for its next call. The
shim's wait for each reply is its call timeout, sent as ``timeout_ms``: the
handler sees it as ``time_remaining()``, as a unary call's deadline.

The envelope is read and written here by hand (a few varints around the inner
message's bytes), so the inner bytes reach the same parsers as the unary
methods (the Filter parser's name memo included) without a re-encode.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import grpc
from google.protobuf.message import DecodeError

log = logging.getLogger(__name__)

CYCLE_FILTER = 1
"""CycleRequest.filter / CycleResponse.filter (field number)."""
CYCLE_RESERVE = 2
"""CycleRequest.reserve / CycleResponse.reserve (field number)."""
_SEQ = 3
_TIMEOUT_MS = 4
DEFAULT_TIMEOUT_S = 5.0
"""A message's budget when the shim sends none (the shim's default call timeout)."""
_VARINT, _LEN = 0, 2  # protobuf wire types
_MAX_VARINT_BYTES = 10

Answer = Callable[[bytes, Any], Awaitable[bytes]]
"""Parses one request's bytes and returns the reply's; raises Refused."""


class Refused(Exception):
    """The request cannot be answered: the gRPC code and message to end the call with."""

    def __init__(self, code: grpc.StatusCode, text: str) -> None:
        super().__init__(text)
        self.code = code
        self.text = text


class MessageDeadline:
    """What a handler sees of a stream message's call: the time left of the shim's
    wait for this reply (seconds)."""

    __slots__ = ("_until",)

    def __init__(self, seconds: float) -> None:
        self._until = time.monotonic() + seconds

    def time_remaining(self) -> float:
        return self._until - time.monotonic()


def _varint(raw: bytes, i: int) -> tuple[int, int]:
    """The varint at ``raw[i:]`` and the index after it; DecodeError when cut short."""
    value = shift = 0
    for n in range(_MAX_VARINT_BYTES):
        if i + n >= len(raw):
            break
        byte = raw[i + n]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i + n + 1
        shift += 7
    raise DecodeError("truncated or overlong varint")


def read_request(raw: bytes) -> tuple[int, bytes, int, int]:
    """(call field, the call's bytes, seq, timeout_ms) of a CycleRequest. Unknown
    fields are skipped, as protobuf does; the last call field wins, as protobuf's
    oneof does. Raises DecodeError."""
    call, inner, seq, timeout_ms = 0, b"", 0, 0
    i = 0
    while i < len(raw):
        key, i = _varint(raw, i)
        field, wire = key >> 3, key & 7
        if field == 0:
            raise DecodeError("field number 0")
        if wire == _VARINT:
            value, i = _varint(raw, i)
            if field == _SEQ:
                seq = value
            elif field == _TIMEOUT_MS:
                timeout_ms = value
        elif wire == _LEN:
            length, i = _varint(raw, i)
            end = i + length
            if end > len(raw):
                raise DecodeError(f"field {field}: {length} bytes, {len(raw) - i} left")
            if field in (CYCLE_FILTER, CYCLE_RESERVE):
                call, inner = field, raw[i:end]
            i = end
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            raise DecodeError(f"field {field}: wire type {wire} is not supported")
    if i > len(raw):
        raise DecodeError("message ends inside a fixed-size field")
    return call, inner, seq, timeout_ms


def _put_varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_REFUSED_CODE = 4
"""CycleResponse.refused_code (field number): the cycle socket's refusal."""
_REFUSED_MESSAGE = 5


def write_refusal(code: grpc.StatusCode, text: str) -> bytes:
    """A CycleResponse saying the request was refused (the cycle socket's answer
    where a gRPC stream would end with the status)."""
    number = code.value[0]
    message = text.encode()
    return (
        _put_varint(_REFUSED_CODE << 3 | _VARINT)
        + _put_varint(number)
        + _put_varint(_REFUSED_MESSAGE << 3 | _LEN)
        + _put_varint(len(message))
        + message
    )


def delimited(message: bytes) -> bytes:
    """``message`` preceded by its length as a varint (protobuf's delimited form)."""
    return _put_varint(len(message)) + message


def write_response(call: int, inner: bytes, seq: int) -> bytes:
    """A CycleResponse carrying the reply ``inner`` as field ``call``, echoing ``seq``."""
    head = _put_varint(call << 3 | _LEN) + _put_varint(len(inner))
    tail = _put_varint(_SEQ << 3 | _VARINT) + _put_varint(seq) if seq else b""
    return head + inner + tail


class CycleStream:
    """Serves Cycle streams: each request answered by the unary method of its call."""

    def __init__(self, answers: Mapping[int, Answer], metrics: Any) -> None:
        self.answers = dict(answers)
        self.metrics = metrics
        self._counted = {
            CYCLE_FILTER: metrics.cycle_messages.labels("filter"),
            CYCLE_RESERVE: metrics.cycle_messages.labels("reserve"),
        }

    async def answer(self, raw: bytes) -> bytes:
        """The CycleResponse to one CycleRequest's bytes; raises Refused when the
        request cannot be answered (it does not parse, names no call we serve, or
        its call refuses it)."""
        try:
            call, inner, seq, timeout_ms = read_request(raw)
        except DecodeError as exc:
            self.metrics.errors.labels("grpc_cycle", "invalid_argument").inc()
            raise Refused(
                grpc.StatusCode.INVALID_ARGUMENT, f"not a valid pyextender.v1.CycleRequest: {exc}"
            ) from exc
        answer = self.answers.get(call)
        if answer is None:
            self.metrics.errors.labels("grpc_cycle", "invalid_argument").inc()
            raise Refused(
                grpc.StatusCode.INVALID_ARGUMENT,
                "pyextender.v1.CycleRequest names no call this sidecar serves "
                f"(call field {call}; it serves filter (1) and reserve (2))",
            )
        self._counted[call].inc()
        budget = timeout_ms / 1000.0 if timeout_ms else DEFAULT_TIMEOUT_S
        reply = await answer(inner, MessageDeadline(budget))
        return write_response(call, reply, seq)

    async def serve(self, requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
        """The gRPC Cycle method: a refusal ends the stream with its status."""
        self.metrics.cycle_streams.labels("grpc").inc()
        log.debug("a Cycle stream opened")
        async for raw in requests:
            try:
                reply = await self.answer(raw)
            except Refused as exc:
                await context.abort(exc.code, exc.text)
                return
            yield reply
