"""Batched requests (Filter, Score): a pod and the names of every candidate node.

kube-scheduler asks about the same candidate list call after call, and turning
10,000 names into Python strings costs about as much as judging the nodes. So
a list is parsed once: the bytes after the pod field are compared with the last
request's, and when they match the previous list is reused and only the
PodRef is parsed. Reusing the very same list object also keeps the cache's
``rows_of`` on its fast path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyextender.server.proto_gen.pyextender.v1 import scheduler_pb2 as pb

_POD_TAG = 0x0A  # field 1 (pod), wire type 2 (length-delimited)
_MAX_VARINT_SHIFT = 35  # a length fits in 5 varint bytes


@dataclass(slots=True)
class Batch:
    pod: Any | None
    """The PodRef, or None when the request has none."""
    names: list[str]
    """Candidate node names, in request order. Shared between calls: never mutate."""
    with_scores: bool = False
    """FilterRequest.with_scores (always False for a ScoreRequest)."""


def pod_span(raw: bytes) -> tuple[int, int] | None:
    """(start, end) of the PodRef's bytes when the message starts with the pod field,
    as encoders write it (fields in number order); None otherwise."""
    if len(raw) < 2 or raw[0] != _POD_TAG:
        return None
    length = shift = 0
    i = 1
    while i < len(raw) and shift <= _MAX_VARINT_SHIFT:
        byte = raw[i]
        i += 1
        length |= (byte & 0x7F) << shift
        if byte < 0x80:
            end = i + length
            return (i, end) if end <= len(raw) else None
        shift += 7
    return None


class BatchParser:
    """Parses one request type (FilterRequest or ScoreRequest), remembering the last list."""

    def __init__(self, message: Any) -> None:
        self.message = message
        self.tail = b""
        """The bytes after the pod field in the request the cached names came from."""
        self.names: list[str] = []
        self.with_scores = False

    def parse(self, raw: bytes) -> Batch:
        """Raises google.protobuf.message.DecodeError for bytes that are not the message."""
        span = pod_span(raw)
        if span is not None and self.tail and raw[span[1] :] == self.tail:
            # the tail holds every later field: the same tail, the same flag
            pod = pb.PodRef.FromString(raw[span[0] : span[1]])
            return Batch(pod, self.names, self.with_scores)
        req = self.message.FromString(raw)
        names = list(req.node_names)
        pod = req.pod if req.HasField("pod") else None
        with_scores = bool(getattr(req, "with_scores", False))
        # cache only when the leading pod field is the whole pod (no second pod
        # field further on, which protobuf would merge in)
        if span is not None and pod == pb.PodRef.FromString(raw[span[0] : span[1]]):
            self.tail, self.names, self.with_scores = raw[span[1] :], names, with_scores
        return Batch(pod, names, with_scores)
