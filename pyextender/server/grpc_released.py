"""gRPC WatchReleased: the gang barrier's releases, streamed to the framework shim.

Pods annotated pyextender.io/gang-barrier wait in kube-scheduler's queue (the
shim's PreEnqueue) until they appear here. The first message of a stream lists
every released pod not yet bound (``full``), so a shim that reconnects, or a
kube-scheduler that just took over, starts from the cache's truth; later
messages carry each release as the cache sees it: our own actions' (at once)
or another replica's (from its PodGroup annotation, through the watch).

The shim moves every listed pod it queues to the active queue, so the stream
also carries pods to try again: members refused because their PodGroup did not
exist yet, once it appears (at once, or in the next stream's first message when
it appeared while no shim was listening). For those the listing releases
nothing: without the barrier annotation the shim never held them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from pyextender.api.objects import PodInfo
from pyextender.cache.cluster import ClusterCache
from pyextender.server.metrics import Metrics
from pyextender.server.proto_gen.pyextender.v1 import scheduler_pb2 as pb

log = logging.getLogger(__name__)

LABEL = "grpc_watchreleased"


def _refs(pods: list[PodInfo]) -> list[Any]:
    return [pb.PodRef(uid=p.uid, namespace=p.namespace, name=p.name) for p in pods]


class ReleasedStream:
    """Serves WatchReleased from the cache's pod_released listeners."""

    def __init__(self, cache: ClusterCache, metrics: Metrics) -> None:
        self.cache = cache
        self.metrics = metrics
        self.watchers = 0

    async def watch(self, raw: bytes, context: Any) -> AsyncIterator[bytes]:
        try:
            req = pb.WatchReleasedRequest.FromString(raw)
        except DecodeError as exc:
            self.metrics.requests.labels(LABEL, "INVALID_ARGUMENT").inc()
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"not a valid pyextender.v1.WatchReleasedRequest: {exc}",
            )
            return
        self.metrics.requests.labels(LABEL, "OK").inc()
        who = req.client or "unnamed client"
        queue: asyncio.Queue[list[PodInfo]] = asyncio.Queue()
        self.cache.pod_released.append(queue.put_nowait)
        self.watchers += 1
        try:
            first = self.cache.released_pending()
            # and members that may have been refused while their PodGroup was missing
            retries = self.cache.waiting_members()
            log.info(
                "WatchReleased: %s watching, %d released pod(s) pending, %d to try again",
                who,
                len(first),
                len(retries),
            )
            first += retries
            yield pb.ReleasedPods(full=True, pods=_refs(first)).SerializeToString()
            while True:
                pods = await queue.get()
                while not queue.empty():  # what piled up while we sent: one message
                    pods = pods + queue.get_nowait()
                yield pb.ReleasedPods(pods=_refs(pods)).SerializeToString()
        finally:
            self.watchers -= 1
            self.cache.pod_released.remove(queue.put_nowait)
            log.info("WatchReleased: %s stopped watching", who)
