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
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from typing import Any, NamedTuple

import grpc
import numpy as np
import numpy.typing as npt
from google.protobuf.message import DecodeError

from pyextender.api.names import BARRIER_GATE, GPU_INDEX_ANNOTATION
from pyextender.api.object_names import (
    NAME_RULE,
    NAMESPACE_RULE,
    is_namespace_name,
    is_object_name,
)
from pyextender.api.objects import ObjectError, PodInfo, pod_from_dict
from pyextender.framework.interfaces import MAX_NODE_SCORE, FloatArray, IntArray, PodContext
from pyextender.framework.status import Code
from pyextender.server.grpc_annotate import Annotator
from pyextender.server.grpc_batch import Batch, BatchParser
from pyextender.server.grpc_cycle import CYCLE_FILTER, CYCLE_RESERVE, Answer, CycleStream, Refused
from pyextender.server.grpc_permit import DEFAULT_MAX_WAIT_S, quorum
from pyextender.server.grpc_released import ReleasedStream
from pyextender.server.proto_gen.pyextender.v1 import scheduler_pb2 as pb
from pyextender.server.threads import API_THREADS
from pyextender.server.verbs import NOT_IN_CACHE, BoolArray, Extender

log = logging.getLogger(__name__)

SERVICE = "pyextender.v1.Scheduler"
RECENT_PODS = 4096
"""Pods read from the API server (not yet in the cache), kept for the rest of their cycle;
and Filter's picks not yet reserved."""
RESERVED_PODS = 65_536
"""Reserved pods remembered until bound: more than a huge gang waits in Permit."""


class Pick(NamedTuple):
    """The node Filter picked for a pod, and what that verdict was computed from."""

    node: str
    pod: PodInfo
    """The PodInfo object filtered (the cache replaces it on every pod event)."""
    profile: object
    """The profile that filtered (a config reload builds a new one)."""
    generation: int
    """ClusterState.generation then: bumped by every node, pod and assumed-pod change,
    and when a cycle hands the verbs new reservations and gang plans."""
    version: int
    """ClusterCache.version then: bumped by every applied watch event (pods,
    PodGroups, Queues, topology)."""


# our framework codes (index) -> the wire's (the kube-scheduler framework's numbers)
_WIRE_CODE = np.zeros(max(Code) + 1, dtype=np.uint8)
_WIRE_CODE[[Code.SUCCESS, Code.UNSCHEDULABLE, Code.UNRESOLVABLE, Code.WAIT, Code.ERROR]] = [
    pb.SUCCESS,
    pb.UNSCHEDULABLE,
    pb.UNSCHEDULABLE_AND_UNRESOLVABLE,
    pb.WAIT,
    pb.ERROR,
]
_SUCCESS = int(Code.SUCCESS)
MAX_REASONS = 2**16
"""Distinct reasons one Filter reply can carry (reason_index is a uint16 column)."""
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
    return _require_ref(req.pod if req.HasField("pod") else None)


def _require_ref(ref: Any | None) -> Any:
    if ref is None:
        raise BadMessage("pod: required")
    _require(ref.uid, "pod.uid")
    _require(ref.namespace, "pod.namespace")
    _require(ref.name, "pod.name")
    # a pod the API server could never hold: say so, instead of asking it for one
    if not is_namespace_name(ref.namespace):
        raise BadMessage(f"pod.namespace: {ref.namespace!r} is not {NAMESPACE_RULE}")
    if not is_object_name(ref.name):
        raise BadMessage(f"pod.name: {ref.name!r} is not {NAME_RULE}")
    return ref


class SchedulerService:
    """Handlers of pyextender.v1.Scheduler over an Extender."""

    def __init__(
        self,
        extender: Extender,
        gang_timeout: float,
        annotate: Annotator | None = None,
        gang_max_wait: float = DEFAULT_MAX_WAIT_S,
    ) -> None:
        self.ext = extender
        self.gang_timeout = gang_timeout
        """Stall window, seconds: the shim rejects a gang waiting in Permit once no new
        member has arrived for this long."""
        self.gang_max_wait = gang_max_wait
        """Cap on a gang's whole wait in Permit, seconds, from its first waiting member."""
        self.annotate = annotate
        """Writes the GPU indices chosen at Reserve onto the pod at PreBind (which the shim
        calls only after another bind plugin bound the pod); None: not written."""
        self.recent: OrderedDict[str, PodInfo] = OrderedDict()
        self.picks: OrderedDict[str, Pick] = OrderedDict()
        """Pod UID -> the node Filter picked for it, until the pod is reserved
        (the most recent RECENT_PODS)."""
        self.reserve_checks = {
            check: extender.metrics.reserve_checks.labels(check)
            for check in ("filtered", "unchanged")
        }
        self.reserved: OrderedDict[str, None] = OrderedDict()
        """UIDs of pods reserved here and not yet seen bound (the most recent
        RESERVED_PODS): the watch's binding, or an older shim's PostBind, counts
        each as bound once."""
        extender.cache.pod_bound.append(self._confirm)
        extender.cache.pod_gone.append(self._forget_reserved)
        self.released = ReleasedStream(extender.cache, extender.metrics)
        """WatchReleased: the gang barrier's releases, for the shim's PreEnqueue."""

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

    def _held_gpus(self, uid: str) -> str:
        """The GPU indices chosen for the pod counted under ``uid`` ("" for none)."""
        held = self.ext.cache.state.pods.get(uid)
        return held.pod.annotations.get(GPU_INDEX_ANNOTATION, "") if held is not None else ""

    # -- extension points ------------------------------------------------------
    def _group_missing(self, pod: PodInfo) -> Any | None:
        """UNSCHEDULABLE_AND_UNRESOLVABLE when the pod's PodGroup does not exist; UNSCHEDULABLE
        while it is held at the gang barrier (the shim's PreEnqueue normally keeps such a
        pod out of the cycle; this covers a release the shim heard of before we did)."""
        if why := self.ext.cache.missing_group(pod):
            return _status(pb.UNSCHEDULABLE_AND_UNRESOLVABLE, why)
        key = self.ext.cache.group_of(pod)
        if BARRIER_GATE in pod.gates:
            return _status(pb.UNSCHEDULABLE, f"held at the gang barrier: {key} not released yet")
        return None

    async def pre_filter(self, req: Any, context: Any) -> Any:
        ref = _check_ref(req)
        pod = await self._pod(ref, context)
        if pod is None:
            return pb.PreFilterResponse(status=self._unknown(ref))
        if not self._ours(pod):
            return pb.PreFilterResponse(
                status=_status(pb.SKIP, f"schedulerName {pod.scheduler_name!r} is not ours")
            )
        return pb.PreFilterResponse(status=self._group_missing(pod) or _OK)

    async def filter(self, req: Batch, context: Any) -> Any:
        ref = _require_ref(req.pod)
        names = req.names
        pod = await self._pod(ref, context)
        if pod is None:
            return pb.FilterResponse(status=self._unknown(ref))
        if not self._ours(pod):
            return pb.FilterResponse(
                status=_OK,
                codes=bytes(len(names)),
                reasons=[""],
                reason_index=bytes(2 * len(names)),
            )
        missing = self._group_missing(pod)
        if missing is not None:
            return pb.FilterResponse(status=missing)
        ext = self.ext
        state = ext.cache.state
        rows, known, unknown = state.rows_of(names)
        ctx = ext._context(pod)
        with ext.courtesy.serving():
            outcome = ext.profile.filter(ctx, rows)
            fits = outcome.codes == _SUCCESS
            raw = self._scores_of_fitting(ctx, rows, fits) if req.with_scores else None
            pick = self._pick(pod, ctx, rows, fits, known, raw)
        # with a pick, kube-scheduler scores nothing: the column is left out
        scores = None if raw is None or pick else self._wire_scores(pod, raw, fits, known)
        table = list(outcome.table)
        codes = _WIRE_CODE[outcome.codes]
        ridx = outcome.reason_idx.astype("<u2")
        if unknown:
            # nodes we have not seen yet: UNSCHEDULABLE, in their request positions
            seen = np.fromiter((n in state.index for n in names), dtype=bool, count=len(names))
            all_codes = np.full(len(names), pb.UNSCHEDULABLE, dtype=np.uint8)
            all_ridx = np.full(len(names), len(table), dtype="<u2")
            table.append(NOT_IN_CACHE)
            all_codes[seen], all_ridx[seen] = codes, ridx
            codes, ridx = all_codes, all_ridx
            if scores is not None:
                all_scores = np.zeros(len(names), dtype=np.uint8)
                all_scores[seen] = scores
                scores = all_scores
        if len(table) > MAX_REASONS:
            raise RuntimeError(f"{len(table)} distinct reasons; a reply carries {MAX_REASONS}")
        failed = int(np.count_nonzero(codes))
        ext._decide(
            pod.key,
            "filter",
            via="grpc",
            feasible=len(names) - failed,
            failed=failed,
            reasons=sorted({table[r] for r in np.unique(ridx).tolist() if r}),
        )
        return pb.FilterResponse(
            status=_OK,
            codes=codes.tobytes(),
            reasons=table,
            reason_index=ridx.tobytes(),
            scores=b"" if scores is None else scores.tobytes(),
            pick=pick,
        )

    def _pick(
        self,
        pod: PodInfo,
        ctx: PodContext,
        rows: IntArray,
        fits: BoolArray,
        known: list[str],
        raw: FloatArray | None,
    ) -> str:
        """The node the shim narrows the cycle to ("" for none): as extender mode's
        filter picks it, and also a lone fitting node (narrowing spares kube-scheduler
        its filters on every other node). A pod whose last pick never reached Reserve
        gets no pick until it is reserved: one of kube-scheduler's filters (or another
        plugin) turned that node down, so it must see every node."""
        ext = self.ext
        if not ext.pick_node:
            return ""
        last = self.picks.get(pod.uid)
        if last is not None:
            why = f"the pick of {last.node} was not reserved (turned down in kube-scheduler)"
            ext.metrics.picks.labels("not_reserved").inc()
            ext._decide(pod.key, "pick", via="grpc", skipped=why)
            return ""
        at = ext.pick(ctx, rows, fits, known, scores=raw, lone=True)
        if at is None:
            return ""
        state = ext.cache.state
        self.picks[pod.uid] = Pick(known[at], pod, ext.profile, state.generation, ext.cache.version)
        while len(self.picks) > RECENT_PODS:
            self.picks.popitem(last=False)
        return known[at]

    def _scores_of_fitting(self, ctx: PodContext, rows: IntArray, fits: BoolArray) -> FloatArray:
        """The profile's scores (0..100) of ``rows`` for the rows that fit, 0 for the
        others: the Score call's answer, from the pod context the filter built."""
        raw = np.zeros(len(rows), dtype=np.float64)
        if fits.any():
            raw[fits] = self.ext.profile.score(ctx, rows[fits])
        return raw

    def _wire_scores(
        self, pod: PodInfo, raw: FloatArray, fits: BoolArray, known: list[str]
    ) -> npt.NDArray[np.uint8]:
        """``raw`` as the wire's one byte per node, logged as a score decision."""
        scores = np.clip(np.rint(raw), 0, MAX_NODE_SCORE).astype(np.uint8)
        if fits.any():
            best = int(np.argmax(scores))
            self.ext._decide(
                pod.key,
                "score",
                via="grpc",
                best=known[best],
                score=int(scores[best]),
                nodes=int(np.count_nonzero(fits)),
            )
        return scores

    async def score(self, req: Batch, context: Any) -> Any:
        ref = _require_ref(req.pod)
        names = req.names
        pod = await self._pod(ref, context)
        if pod is None:
            return pb.ScoreResponse(status=self._unknown(ref))
        if not self._ours(pod):
            return pb.ScoreResponse(status=_OK, scores=bytes(len(names)))
        ext = self.ext
        state = ext.cache.state
        rows, known, unknown = state.rows_of(names)
        # weighted mean of the plugins, already 0..100 (the framework's MaxNodeScore)
        with ext.courtesy.serving():
            raw = ext.profile.score(ext._context(pod), rows)
        scores = np.clip(np.rint(raw), 0, MAX_NODE_SCORE).astype(np.uint8)
        if known:
            best = int(np.argmax(scores))
            ext._decide(
                pod.key,
                "score",
                via="grpc",
                best=known[best],
                score=int(scores[best]),
                nodes=len(names),
            )
        if unknown:
            seen = np.fromiter((n in state.index for n in names), dtype=bool, count=len(names))
            all_scores = np.zeros(len(names), dtype=np.uint8)
            all_scores[seen] = scores
            scores = all_scores
        return pb.ScoreResponse(status=_OK, scores=scores.tobytes())

    async def reserve(self, req: Any, context: Any) -> Any:
        ref = _check_ref(req)
        node = _require(req.node_name, "node_name")
        pick = self.picks.pop(ref.uid, None)  # the pick (if any) came through kube-scheduler
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
            if self._unchanged_since(pick, pod, node):
                # Filter passed this node moments ago, and nothing it read has changed
                # since: its verdict stands (typically the same cycle, a few hundred µs
                # earlier, while kube-scheduler checked the one node it was narrowed to)
                self.reserve_checks["unchanged"].inc()
            else:
                # the node must still fit, counting every other reservation
                self.reserve_checks["filtered"].inc()
                outcome = ext.profile.filter(ext._context(pod), np.asarray([row], dtype=np.int64))
                if outcome.codes[0] != _SUCCESS:
                    why = f"pod {pod.key} no longer fits node {node}: {outcome.reason(0)}"
                    ext._decide(
                        pod.key, "reserve", via="grpc", node=node, result="no_fit", error=why
                    )
                    return pb.ReserveResponse(status=_status(pb.UNSCHEDULABLE, why))
            gpus = ext._choose_gpus(pod, row)
            if gpus:
                pod = replace(pod, annotations={**pod.annotations, GPU_INDEX_ANNOTATION: gpus})
            ext.cache.assume(pod, node)
        # the GPUs chosen here (or at an earlier Reserve on this node) travel on
        # the shim's Binding: the pod gets them without a write of its own
        gpus = self._held_gpus(pod.uid)
        if not pod.node_name:
            self.reserved[pod.uid] = None
            while len(self.reserved) > RESERVED_PODS:
                self.reserved.popitem(last=False)
        ext._decide(
            pod.key,
            "reserve",
            via="grpc",
            node=node,
            result="reserved",
            rv=ref.resource_version,
            **({"gpus": gpus} if gpus else {}),
        )
        return pb.ReserveResponse(
            status=_OK,
            annotations={GPU_INDEX_ANNOTATION: gpus} if gpus else None,
            # Permit follows at once in the same cycle: its answer saves the shim a call
            permit=self._permit(pod, node, req.waiting_member_uids) if req.with_permit else None,
        )

    def _unchanged_since(self, pick: Pick | None, pod: PodInfo, node: str) -> bool:
        """Whether Filter's pick of ``node`` for ``pod`` was computed from what the
        cache holds now: the same PodInfo, profile, node and pod rows and watched
        objects. Anything else (another pod assumed or bound, any watch event, a
        cycle's new reservations) sends Reserve through the filters again."""
        ext = self.ext
        return (
            pick is not None
            and pick.node == node
            and pick.pod is pod
            and pick.profile is ext.profile
            and pick.generation == ext.cache.state.generation
            and pick.version == ext.cache.version
        )

    async def unreserve(self, req: Any, context: Any) -> Any:
        ref = _check_ref(req)
        node = _require(req.node_name, "node_name")
        self.ext.cache.forget_assumed(ref.uid)
        self.reserved.pop(ref.uid, None)
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
        return self._permit(pod, node, req.waiting_member_uids)

    def _permit(self, pod: PodInfo, node: str, waiting: Iterable[str]) -> Any:
        """The Permit answer for ``pod`` reserved on ``node`` (at Permit, or at Reserve
        when the shim asks for it there)."""
        if why := self.ext.cache.missing_group(pod):
            # gone since PreFilter (a job restarting drops its PodGroup): never bind a
            # member of a gang on its own
            self.ext._decide(pod.key, "permit", via="grpc", node=node, result="reject", error=why)
            return pb.PermitResponse(status=_status(pb.UNSCHEDULABLE, why))
        q = quorum(self.ext.cache, pod, waiting)
        if q.reached:
            status, why = _OK, ""
        else:
            why = q.reason(self.gang_timeout, self.gang_max_wait)
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
            resp.max_wait.FromNanoseconds(int(self.gang_max_wait * 1e9))
        return resp

    async def pre_bind(self, req: Any, context: Any) -> Any:
        ref = _check_ref(req)
        node = _require(req.node_name, "node_name")
        gpus = self._held_gpus(ref.uid)
        if not gpus or self.annotate is None:
            return pb.PreBindResponse(status=_OK)
        write = asyncio.get_running_loop().run_in_executor(
            API_THREADS,
            self.annotate,
            ref.namespace,
            ref.name,
            ref.uid,
            {GPU_INDEX_ANNOTATION: gpus},
        )
        key = f"{ref.namespace}/{ref.name}"
        try:
            await asyncio.wait_for(write, context.time_remaining())
        except TimeoutError:
            raise  # past the caller's deadline: DEADLINE_EXCEEDED (see _wrap)
        except Exception as exc:
            why = f"writing {GPU_INDEX_ANNOTATION}={gpus} to pod {key}: {exc}"
            self.ext._decide(key, "prebind", via="grpc", node=node, result="error", error=why)
            return pb.PreBindResponse(status=_status(pb.ERROR, why))
        self.ext._decide(key, "prebind", via="grpc", node=node, result="annotated", gpus=gpus)
        return pb.PreBindResponse(status=_OK)

    async def post_bind(self, req: Any, context: Any) -> Any:
        """Bound by another bind plugin (the shim calls PostBind only then; older shims
        always): counted like the HTTP bind verb, unless the watch showed it first."""
        ref = _check_ref(req)
        node = _require(req.node_name, "node_name")
        if ref.uid in self.reserved:
            del self.reserved[ref.uid]
            self.ext._bound(f"{ref.namespace}/{ref.name}", node, "bound", "")
        return pb.PostBindResponse(status=_OK)

    def _confirm(self, pod: PodInfo) -> None:
        """The watch shows a pod reserved here bound: counted like the HTTP bind verb
        (the shim's Bind wrote the Binding; no PostBind call is needed to know)."""
        if pod.uid in self.reserved:
            del self.reserved[pod.uid]
            self.ext._bound(pod.key, pod.node_name or "", "bound", "")

    def _forget_reserved(self, uid: str) -> None:
        self.reserved.pop(uid, None)

    # -- wiring -----------------------------------------------------------------
    def handler(self) -> grpc.GenericRpcHandler:
        """Every method, taking and returning raw bytes (parsed and checked here)."""
        filters, scores = BatchParser(pb.FilterRequest), BatchParser(pb.ScoreRequest)
        methods: dict[str, tuple[Callable[[Any, Any], Awaitable[Any]], Any, Any]] = {
            "PreFilter": (self.pre_filter, pb.PreFilterRequest, pb.PreFilterResponse),
            "Filter": (self.filter, filters, pb.FilterResponse),
            "Score": (self.score, scores, pb.ScoreResponse),
            "Reserve": (self.reserve, pb.ReserveRequest, pb.ReserveResponse),
            "Unreserve": (self.unreserve, pb.UnreserveRequest, pb.UnreserveResponse),
            "Permit": (self.permit, pb.PermitRequest, pb.PermitResponse),
            "PreBind": (self.pre_bind, pb.PreBindRequest, pb.PreBindResponse),
            "PostBind": (self.post_bind, pb.PostBindRequest, pb.PostBindResponse),
        }
        handlers = {
            name: grpc.unary_unary_rpc_method_handler(self._wrap(name, *spec))
            for name, spec in methods.items()
        }
        handlers["WatchReleased"] = grpc.unary_stream_rpc_method_handler(self.released.watch)
        handlers["Cycle"] = grpc.stream_stream_rpc_method_handler(self.cycle_stream().serve)
        return grpc.method_handlers_generic_handler(SERVICE, handlers)

    def cycle_stream(self) -> CycleStream:
        """The cycle's calls as messages (the gRPC Cycle method, or a connection to
        the cycle socket): their own parsers (the Filter name memo follows one
        sequence of requests) and the unary methods' metrics labels."""
        return CycleStream(
            {
                CYCLE_FILTER: self._answerer(
                    "Filter", self.filter, BatchParser(pb.FilterRequest), pb.FilterResponse
                ),
                CYCLE_RESERVE: self._answerer(
                    "Reserve", self.reserve, pb.ReserveRequest, pb.ReserveResponse
                ),
            },
            self.ext.metrics,
        )

    def _wrap(
        self,
        name: str,
        fn: Callable[[Any, Any], Awaitable[Any]],
        request: Any,
        response_type: Any,
    ) -> Callable[[bytes, Any], Awaitable[bytes]]:
        """A unary method: the answer, or the call ended with the refusal's code."""
        answer = self._answerer(name, fn, request, response_type)

        async def handle(raw: bytes, context: Any) -> bytes:
            try:
                return await answer(raw, context)
            except Refused as exc:
                await context.abort(exc.code, exc.text)
                raise  # abort raises; never reached

        return handle

    def _answerer(
        self,
        name: str,
        fn: Callable[[Any, Any], Awaitable[Any]],
        request: Any,
        response_type: Any,
    ) -> Answer:
        """Parses one request, runs ``fn`` and serialises its reply, counting it in the
        metrics; raises Refused with the gRPC code when the request cannot be answered.
        ``request`` is the message class, or a BatchParser for Filter and Score.
        ``context`` needs only ``time_remaining()`` (a unary call's, or a stream
        message's own; see grpc_cycle)."""
        metrics = self.ext.metrics
        label = f"grpc_{name.lower()}"
        if isinstance(request, BatchParser):
            parse, full = request.parse, request.message.DESCRIPTOR.full_name
        else:
            parse, full = request.FromString, request.DESCRIPTOR.full_name

        async def answer(raw: bytes, context: Any) -> bytes:
            start = time.perf_counter()
            code = grpc.StatusCode.OK
            text = ""
            try:
                remaining = context.time_remaining()
                if remaining is not None and remaining <= 0:
                    code = grpc.StatusCode.DEADLINE_EXCEEDED
                else:
                    try:
                        req = parse(raw)
                        reply = await fn(req, context)
                    except DecodeError as exc:
                        code, text = grpc.StatusCode.INVALID_ARGUMENT, f"not a valid {full}: {exc}"
                    except BadMessage as exc:
                        code, text = grpc.StatusCode.INVALID_ARGUMENT, f"{full}: {exc}"
                    except TimeoutError:
                        code = grpc.StatusCode.DEADLINE_EXCEEDED
                    except asyncio.CancelledError:
                        # grpc.aio cancels the handler when the caller's deadline passes or
                        # the caller goes away; count it as what it is, never as OK
                        left = context.time_remaining()
                        past = left is not None and left <= 0
                        code = (
                            grpc.StatusCode.DEADLINE_EXCEEDED if past else grpc.StatusCode.CANCELLED
                        )
                        metrics.errors.labels(label, code.name.lower()).inc()
                        raise
                    except Exception as exc:
                        log.exception("gRPC %s failed", name)
                        metrics.errors.labels(label, "internal").inc()
                        reply = response_type(status=_status(pb.ERROR, f"{name}: {exc}"))
                if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                    text = f"{name}: deadline exceeded before the sidecar could answer"
                if code != grpc.StatusCode.OK:
                    metrics.errors.labels(label, code.name.lower()).inc()
                    raise Refused(code, text)
                return bytes(reply.SerializeToString())
            finally:
                metrics.requests.labels(label, code.name).inc()
                if code == grpc.StatusCode.OK:
                    metrics.verb_seconds.labels(label).observe(time.perf_counter() - start)

        return answer
