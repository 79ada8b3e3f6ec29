"""The gRPC front end (pyextender.v1.Scheduler): framework extension points.

Same cache, profile and decision log as the HTTP verbs (verbs.Extender); this
module only translates messages. Filter and Score run the profile's array
code inside the event loop, exactly as the HTTP verbs do.

Requests arrive as raw bytes and are parsed here, so a message that does not
parse is an INVALID_ARGUMENT naming the message type (grpc's own deserializer
would answer INTERNAL). A missing required field is INVALID_ARGUMENT naming
the field. Any other failure is a reply with code ERROR: the server keeps
serving.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import grpc
import numpy as np
from google.protobuf.message import DecodeError, Message

from pyextender.api.names import GPU_INDEX_ANNOTATION
from pyextender.api.objects import ObjectError, PodInfo, pod_from_dict
from pyextender.framework.status import Code
from pyextender.server.grpc_permit import quorum
from pyextender.server.proto_gen.pyextender.v1 import scheduler_pb2 as pb
from pyextender.server.threads import API_THREADS
from pyextender.server.verbs import NOT_IN_CACHE, Extender

log = logging.getLogger(__name__)

SERVICE = "pyextender.v1.Scheduler"
RECENT_PODS = 4096
"""Pods read from the API server (not yet in the cache), kept for the rest of their cycle."""

# our framework codes -> the wire's (the kube-scheduler framework's numbers)
_WIRE_CODE = {
    int(Code.SUCCESS): pb.SUCCESS,
    int(Code.UNSCHEDULABLE): pb.UNSCHEDULABLE,
    int(Code.UNRESOLVABLE): pb.UNSCHEDULABLE_AND_UNRESOLVABLE,
    int(Code.WAIT): pb.WAIT,
    int(Code.ERROR): pb.ERROR,
}
_SUCCESS = int(Code.SUCCESS)
_OK = pb.Status()


class BadMessage(ValueError):
    """A request the service cannot serve; the text names the field."""


def _status(code: int, reason: str = "") -> Any:
    return pb.Status(code=code, reason=reason)


def _require(value: str, field: str) -> str:
    if not value:
        raise BadMessage(f"{field}: required")
    return value


def _check_ref(req: Any) -> Any:
    if not req.HasField("pod"):
        raise BadMessage("pod: required")
    ref = req.pod
    _require(ref.uid, "pod.uid")
    _require(ref.namespace, "pod.namespace")
    _require(ref.name, "pod.name")
    return ref


class SchedulerService:
    """Handlers of pyextender.v1.Scheduler over an Extender."""

    def __init__(self, extender: Extender, gang_timeout: float) -> None:
        self.ext = extender
        self.gang_timeout = gang_timeout
        """Seconds a gang member waits in Permit (the shim's WaitingPod timeout)."""
        self.recent: OrderedDict[str, PodInfo] = OrderedDict()

    # -- pods ----------------------------------------------------------------
    def _known(self, ref: Any) -> PodInfo | None:
        pod = self.ext.cache.pods_by_uid.get(ref.uid)
        return pod if pod is not None else self.recent.get(ref.uid)

    async def _pod(self, ref: Any, context: grpc.aio.ServicerContext[Any, Any]) -> PodInfo | None:
        """The pod from the cache; else read from the API server (a pod newer than our
        watch), kept for the rest of its cycle. None when no pod has this UID."""
        pod = self._known(ref)
        if pod is not None:
            return pod
        remaining = context.time_remaining()
        read = asyncio.get_running_loop().run_in_executor(
            API_THREADS, self.ext.binder.read_pod, ref.namespace, ref.name
        )
        raw = await asyncio.wait_for(read, remaining)
        if raw is None or (raw.get("metadata") or {}).get("uid") != ref.uid:
            return None
        try:
            pod = pod_from_dict(raw)
        except ObjectError as exc:
            raise BadMessage(f"pod {ref.namespace}/{ref.name}: {exc}") from exc
        self.recent[ref.uid] = pod
        while len(self.recent) > RECENT_PODS:
            self.recent.popitem(last=False)
        return pod

    def _unknown(self, ref: Any) -> Any:
        return _status(
            pb.ERROR,
            f"pod {ref.namespace}/{ref.name} (uid {ref.uid}) is not known to the sidecar yet",
        )

    def _ours(self, pod: PodInfo) -> bool:
        return pod.scheduler_name == self.ext.cache.scheduler_name

    # -- extension points ------------------------------------------------------
    async def pre_filter(self, req: Any, context: Any) -> Any:
        ref = _check_ref(req)
        pod = await self._pod(ref, context)
        if pod is None:
            return pb.PreFilterResponse(status=self._unknown(ref))
        if not self._ours(pod):
            return pb.PreFilterResponse(
                status=_status(pb.SKIP, f"schedulerName {pod.scheduler_name!r} is not ours")
            )
        key = self.ext.cache.group_of(pod)
        if key and key not in self.ext.cache.groups:
            return pb.PreFilterResponse(
                status=_status(pb.UNSCHEDULABLE_AND_UNRESOLVABLE, f"PodGroup {key} does not exist")
            )
        return pb.PreFilterResponse(status=_OK)

    async def filter(self, req: Any, context: Any) -> Any:
        ref = _check_ref(req)
        names = list(req.node_names)
        pod = await self._pod(ref, context)
        if pod is None:
            return pb.FilterResponse(status=self._unknown(ref))
        if not self._ours(pod):
            return pb.FilterResponse(status=_OK)
        ext = self.ext
        rows, known, unknown = ext.cache.state.rows_of(names)
        outcome = ext.profile.filter(ext._context(pod), rows)
        codes, table, ridx = outcome.codes, outcome.table, outcome.reason_idx
        rejected = [
            pb.NodeStatus(node_name=n, code=pb.UNSCHEDULABLE, reason=NOT_IN_CACHE) for n in unknown
        ]
        bad = np.flatnonzero(codes != _SUCCESS).tolist()
        wire = [_WIRE_CODE[c] for c in codes[bad].tolist()]
        reasons = [table[r] for r in ridx[bad].tolist()]
        rejected += [
            pb.NodeStatus(node_name=known[i], code=c, reason=r)
            for i, c, r in zip(bad, wire, reasons, strict=True)
        ]
        ext._decide(
            pod.key,
            "filter",
            via="grpc",
            feasible=len(known) - len(bad),
            failed=len(rejected),
            reasons=sorted(set(reasons)),
        )
        return pb.FilterResponse(status=_OK, rejected=rejected)

    async def score(self, req: Any, context: Any) -> Any:
        ref = _check_ref(req)
        names = list(req.node_names)
        pod = await self._pod(ref, context)
        if pod is None:
            return pb.ScoreResponse(status=self._unknown(ref))
        if not self._ours(pod):
            return pb.ScoreResponse(status=_OK, scores=[0] * len(names))
        ext = self.ext
        rows, known, unknown = ext.cache.state.rows_of(names)
        # weighted mean of the plugins, already 0..100 (the framework's MaxNodeScore)
        scores: list[int] = (
            np.rint(ext.profile.score(ext._context(pod), rows)).astype(np.int64).tolist()
        )
        if unknown:
            by_name = dict(zip(known, scores, strict=True))
            scores = [by_name.get(n, 0) for n in names]
        if known:
            best = int(np.argmax(scores))
            ext._decide(
                pod.key, "score", via="grpc", best=names[best], score=scores[best], nodes=len(names)
            )
        return pb.ScoreResponse(status=_OK, scores=scores)

    async def reserve(self, req: Any, context: Any) -> Any:
        ref = _check_ref(req)
        node = _require(req.node_name, "node_name")
        pod = await self._pod(ref, context)
        if pod is None:
            return pb.ReserveResponse(status=self._unknown(ref))
        if not self._ours(pod):
            return pb.ReserveResponse(status=_OK)
        ext = self.ext
        row = ext.cache.state.index.get(node)
        if row is None:
            why = f"node {node}: {NOT_IN_CACHE}"
            ext._decide(pod.key, "reserve", via="grpc", node=node, result="no_fit", error=why)
            return pb.ReserveResponse(status=_status(pb.UNSCHEDULABLE, why))
        held = ext.cache.state.pods.get(pod.uid)
        if pod.node_name != node and (held is None or held.node != row):
            if held is not None and held.assumed:
                ext.cache.forget_assumed(pod.uid)  # reserved elsewhere before: moved
            # the node must still fit, counting every other reservation
            outcome = ext.profile.filter(ext._context(pod), np.asarray([row], dtype=np.int64))
            if outcome.codes[0] != _SUCCESS:
                why = f"pod {pod.key} no longer fits node {node}: {outcome.reason(0)}"
                ext._decide(pod.key, "reserve", via="grpc", node=node, result="no_fit", error=why)
                return pb.ReserveResponse(status=_status(pb.UNSCHEDULABLE, why))
            gpus = ext._choose_gpus(pod, row)
            if gpus:
                pod = replace(pod, annotations={**pod.annotations, GPU_INDEX_ANNOTATION: gpus})
            ext.cache.assume(pod, node)
        ext._decide(
            pod.key, "reserve", via="grpc", node=node, result="reserved", rv=ref.resource_version
        )
        return pb.ReserveResponse(status=_OK)

    async def unreserve(self, req: Any, context: Any) -> Any:
        ref = _check_ref(req)
        node = _require(req.node_name, "node_name")
        self.ext.cache.forget_assumed(ref.uid)
        self.ext._decide(f"{ref.namespace}/{ref.name}", "unreserve", via="grpc", node=node)
        return pb.UnreserveResponse(status=_OK)

    async def permit(self, req: Any, context: Any) -> Any:
        ref = _check_ref(req)
        node = _require(req.node_name, "node_name")
        pod = await self._pod(ref, context)
        if pod is None:
            # never let a gang member through on a guess
            return pb.PermitResponse(status=self._unknown(ref))
        if not self._ours(pod):
            return pb.PermitResponse(status=_OK)
        q = quorum(self.ext.cache, pod, req.waiting_member_uids)
        if q.reached:
            status, why = _OK, ""
        else:
            why = q.reason(self.gang_timeout)
            status = _status(pb.WAIT, why)
        self.ext._decide(
            pod.key,
            "permit",
            via="grpc",
            node=node,
            result="allow" if q.reached else "wait",
            ready=q.ready,
            min_member=q.min_member,
        )
        resp = pb.PermitResponse(status=status, gang=q.gang, ready=q.ready, min_member=q.min_member)
        if not q.reached:
            resp.timeout.FromNanoseconds(int(self.gang_timeout * 1e9))
        return resp

    async def post_bind(self, req: Any, context: Any) -> Any:
        ref = _check_ref(req)
        node = _require(req.node_name, "node_name")
        # kube-scheduler's DefaultBinder has bound it; counted like the HTTP bind verb
        self.ext._bound(f"{ref.namespace}/{ref.name}", node, "bound", "")
        return pb.PostBindResponse(status=_OK)

    # -- wiring -----------------------------------------------------------------
    def handler(self) -> grpc.GenericRpcHandler:
        """Every method, taking and returning raw bytes (parsed and checked here)."""
        methods: dict[str, tuple[Callable[[Any, Any], Awaitable[Any]], type[Message], Any]] = {
            "PreFilter": (self.pre_filter, pb.PreFilterRequest, pb.PreFilterResponse),
            "Filter": (self.filter, pb.FilterRequest, pb.FilterResponse),
            "Score": (self.score, pb.ScoreRequest, pb.ScoreResponse),
            "Reserve": (self.reserve, pb.ReserveRequest, pb.ReserveResponse),
            "Unreserve": (self.unreserve, pb.UnreserveRequest, pb.UnreserveResponse),
            "Permit": (self.permit, pb.PermitRequest, pb.PermitResponse),
            "PostBind": (self.post_bind, pb.PostBindRequest, pb.PostBindResponse),
        }
        return grpc.method_handlers_generic_handler(
            SERVICE,
            {
                name: grpc.unary_unary_rpc_method_handler(self._wrap(name, *spec))
                for name, spec in methods.items()
            },
        )

    def _wrap(
        self,
        name: str,
        fn: Callable[[Any, Any], Awaitable[Any]],
        request_type: type[Message],
        response_type: Any,
    ) -> Callable[[bytes, Any], Awaitable[bytes]]:
        metrics = self.ext.metrics
        label = f"grpc_{name.lower()}"
        full = request_type.DESCRIPTOR.full_name

        async def handle(raw: bytes, context: Any) -> bytes:
            start = time.perf_counter()
            code = grpc.StatusCode.OK
            try:
                remaining = context.time_remaining()
                if remaining is not None and remaining <= 0:
                    code = grpc.StatusCode.DEADLINE_EXCEEDED
                else:
                    try:
                        req = request_type.FromString(raw)
                        reply = await fn(req, context)
                    except DecodeError as exc:
                        code, text = grpc.StatusCode.INVALID_ARGUMENT, f"not a valid {full}: {exc}"
                    except BadMessage as exc:
                        code, text = grpc.StatusCode.INVALID_ARGUMENT, f"{full}: {exc}"
                    except TimeoutError:
                        code = grpc.StatusCode.DEADLINE_EXCEEDED
                    except Exception as exc:
                        log.exception("gRPC %s failed", name)
                        metrics.errors.labels(label, "internal").inc()
                        reply = response_type(status=_status(pb.ERROR, f"{name}: {exc}"))
                if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                    text = f"{name}: deadline exceeded before the sidecar could answer"
                if code != grpc.StatusCode.OK:
                    metrics.errors.labels(label, code.name.lower()).inc()
                    await context.abort(code, text)
                return bytes(reply.SerializeToString())
            finally:
                metrics.requests.labels(label, code.name).inc()
                if code == grpc.StatusCode.OK:
                    metrics.verb_seconds.labels(label).observe(time.perf_counter() - start)

        return handle
