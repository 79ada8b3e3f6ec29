"""The extender verbs: filter, prioritize, preempt, bind.

Pure logic over the cache and a profile; HTTP framing lives in http.py.
Filter and prioritize run inside kube-scheduler's serial cycle, so they only
do array work on rows (no API calls, no per-node Python objects beyond the
reply itself).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

from pyextender.actions.evict import proposal_allowed
from pyextender.api.client import refused
from pyextender.api.extender import (
    MAX_EXTENDER_PRIORITY,
    ExtenderArgs,
    ExtenderBindingArgs,
    ExtenderBindingResult,
    ExtenderFilterResult,
    ExtenderPreemptionArgs,
    ExtenderPreemptionResult,
    HostPriority,
    MetaPod,
    MetaVictims,
)
from pyextender.api.names import BARRIER_GATE, BATCH_RESOURCE, GPU_INDEX_ANNOTATION
from pyextender.api.object_names import (
    NAME_RULE,
    NAMESPACE_RULE,
    is_namespace_name,
    is_object_name,
)
from pyextender.api.objects import ObjectError, PodInfo, pod_from_dict, tolerates_all
from pyextender.cache.cluster import ClusterCache
from pyextender.framework.interfaces import MAX_NODE_SCORE, FloatArray, IntArray, PodContext
from pyextender.framework.runtime import FilterOutcome, Profile, first_of_best
from pyextender.framework.session import Session
from pyextender.framework.status import Code
from pyextender.plugins.gpu_share import choose_gpus
from pyextender.server.barrier import GangBarrier
from pyextender.server.binder import BindConflict, Binder
from pyextender.server.courtesy import Courtesy
from pyextender.server.extender_wire import (
    ExtenderArgsWire,
    RowNames,
    RowRecords,
    decode_names,
    decode_pod,
    host_scores,
    name_list,
    reason_map,
    unknown_failed,
    unknown_scores,
)
from pyextender.server.metrics import Metrics
from pyextender.server.threads import API_THREADS

BoolArray = npt.NDArray[np.bool_]

log = logging.getLogger(__name__)
_encode = msgspec.json.Encoder().encode

# plain ints: comparing numpy arrays with IntEnum members is slow per element
_SUCCESS = int(Code.SUCCESS)
_UNSCHEDULABLE = int(Code.UNSCHEDULABLE)
_UNRESOLVABLE = int(Code.UNRESOLVABLE)
_PICKED_HEAD = b'{"Nodes":null,"NodeNames":'
_PICKED_TAIL = b',"FailedNodes":{},"FailedAndUnresolvableNodes":{},"Error":""}'

NOT_IN_CACHE = "node is not in the pyextender cache yet"
DECISION_LOG_SIZE = 2000
"""Most recent decisions kept for /debug/decisions (a ring; older ones drop)."""
REQUESTED_PODS = 256
"""Pods remembered from the verbs' requests, for a bind that comes before the watch
shows the pod (kube-scheduler's informer can be ahead of ours): it then needs no
GET. 0.04-0.07 binds per pod went that way in bench/e2e.py's extender plain phases.
One scheduling cycle is filter then bind, so a few hundred cover the pods in flight."""


class BadRequest(ValueError):
    """The request is well-formed JSON but cannot be served; names the problem."""


def _victim_uid(node: str, pod: dict[str, Any] | None) -> str:
    """A proposed victim's metadata.uid ("" when absent)."""
    meta = (pod or {}).get("metadata")
    if meta is not None and not isinstance(meta, dict):
        raise BadRequest(f"NodeNameToVictims[{node}].Pods: a victim's metadata must be an object")
    return str((meta or {}).get("uid") or "")


def _node_names(args: ExtenderArgs) -> list[str]:
    if args.NodeNames is not None:
        return args.NodeNames
    if args.Nodes is not None:
        items = args.Nodes.get("items")
        if not isinstance(items, list):
            raise BadRequest("Nodes.items must be a list")
        names: list[str] = []
        for item in items:
            meta = item.get("metadata") if isinstance(item, dict) else None
            name = meta.get("name") if isinstance(meta, dict) else None
            if not isinstance(name, str):
                raise BadRequest("Nodes.items[].metadata.name must be a string")
            names.append(name)
        return names
    return []


def _reasons_by_name(
    names: list[str], table: list[str], ridx: npt.NDArray[np.int32], mask: npt.NDArray[np.bool_]
) -> dict[str, str]:
    """{node name: reason} for the candidates selected by ``mask``."""
    hit = np.flatnonzero(mask)
    keys = [names[i] for i in hit.tolist()]
    return dict(zip(keys, [table[r] for r in ridx[hit].tolist()], strict=True))


class Extender:
    """Answers kube-scheduler's extender calls from the cache."""

    def __init__(
        self,
        cache: ClusterCache,
        profile: Profile,
        binder: Binder,
        metrics: Metrics,
        barrier: GangBarrier | None = None,
        session: Callable[[], Awaitable[Session]] | None = None,
        courtesy: Courtesy | None = None,
        pick_node: bool = False,
    ) -> None:
        self.cache = cache
        self.courtesy = courtesy or Courtesy()
        """Counts filter and prioritize in flight: the cycle's thread gives way to them."""
        self.profile = profile
        self.binder = binder
        self.metrics = metrics
        self.barrier = barrier
        self.session = session
        """Builds a session (off the event loop) for preempt proposals; None passes
        them through."""
        self.decisions: deque[dict[str, Any]] = deque(maxlen=DECISION_LOG_SIZE)
        # Wire-path memory (filter_json / prioritize_json): the last Pod bytes and
        # what they decoded to; the last NodeNames bytes with their row mapping
        # (valid while the node set is the same); names pre-encoded per row.
        self._last_pod: tuple[bytes, PodInfo] | None = None
        self._last_names: (
            tuple[bytes, object, int, tuple[IntArray, Sequence[str], list[str]]] | None
        ) = None
        self._answered: (
            tuple[bytes, object, int, tuple[IntArray, Sequence[str], list[str]]] | None
        ) = None
        """The node list of the last filter reply (without the padding between names)
        and its rows: kube-scheduler asks prioritize about exactly those nodes, in that
        order, in the same compact JSON (HTTPExtender: the names of the nodes the
        extender answered), so prioritize finds its rows by one comparison of bytes."""
        self._records: RowRecords | None = None
        self._requested: OrderedDict[str, PodInfo] = OrderedDict()
        """Key -> the pod in the latest verb request about it (REQUESTED_PODS most recent)."""
        self.pick_node = pick_node
        """filter answers only the feasible node our score plugins rank first (when
        there are score plugins): kube-scheduler then binds it without scoring, and
        without calling prioritize (it does so only when several nodes are left)."""

    def _decide(self, pod: str, verb: str, **what: Any) -> None:
        self.decisions.append({"time": time.time(), "pod": pod, "verb": verb, **what})

    # -- helpers -------------------------------------------------------------
    def _pod(self, raw: dict[str, Any] | None) -> PodInfo:
        if raw is None:
            raise BadRequest("Pod is required")
        try:
            pod = pod_from_dict(raw)
        except ObjectError as exc:
            raise BadRequest(f"Pod: {exc}") from exc
        requested = self._requested
        requested[pod.key] = pod
        requested.move_to_end(pod.key)
        if len(requested) > REQUESTED_PODS:
            requested.popitem(last=False)
        return pod

    def _pod_for_bind(self, key: str, uid: str) -> PodInfo | None:
        """The pod as the watch shows it, else as a verb's request showed it (the same
        UID, when the bind names one); None: neither has it."""
        pod = self.cache.pods_by_key.get(key)
        if pod is not None:
            return pod
        seen = self._requested.get(key)
        if seen is not None and (not uid or seen.uid == uid):
            return seen
        return None

    def _ours(self, pod: PodInfo) -> bool:
        """Our scheduler name, or (plugged into the cluster's own kube-scheduler) the
        marker resource the webhook puts on adopted pods."""
        return pod.scheduler_name == self.cache.scheduler_name or BATCH_RESOURCE in pod.requests

    def _context(self, pod: PodInfo) -> PodContext:
        state = self.cache.state
        group = self.cache.groups.get(self.cache.group_of(pod)) if pod.group_name else None
        return PodContext(pod=pod, state=state, request=state.vector(pod.requests), group=group)

    # -- verbs -----------------------------------------------------------------
    def held(self, pod: PodInfo) -> str:
        """Why the pod may not be placed yet: it waits at the gang barrier (an annotated pod
        reaches the HTTP extender only when its kube-scheduler has no framework shim to
        hold it, so the filter holds it instead), else ""."""
        cached = self.cache.pods_by_uid.get(pod.uid)
        if cached is None or BARRIER_GATE not in cached.gates:
            return ""
        return f"held at the gang barrier: PodGroup {self.cache.group_of(cached)} not released yet"

    def waits(self, pod: PodInfo) -> str:
        """Why the filter places the pod on no node yet, else "": held at the barrier, or
        (ours) its PodGroup is not known. An error, not failed nodes: kube-scheduler
        retries after its backoff (1-10 s) instead of parking the pod until some
        cluster event, and a PodGroup our watch shows late costs one retry."""
        return self.held(pod) or (self.cache.missing_group(pod) if self._ours(pod) else "")

    def filter(self, args: ExtenderArgs) -> ExtenderFilterResult:
        pod = self._pod(args.Pod)
        names = _node_names(args)
        if why := self.waits(pod):
            return ExtenderFilterResult(Error=why)
        if not self._ours(pod):
            # Not our pod (a misconfigured scheduler sent it): do not interfere.
            return ExtenderFilterResult(
                NodeNames=names if args.NodeNames is not None else None,
                Nodes=args.Nodes,
                FailedNodes={},
                FailedAndUnresolvableNodes={},
            )
        rows, known, unknown = self.cache.state.rows_of(names)
        ctx = self._context(pod)
        outcome = self.profile.filter(ctx, rows)
        codes = outcome.codes
        table = outcome.table
        ridx = outcome.reason_idx
        ok = codes == _SUCCESS
        picked = self.pick(ctx, rows, ok, known) if self.pick_node else None
        failed: dict[str, str] = {n: NOT_IN_CACHE for n in unknown}
        failed.update(_reasons_by_name(known, table, ridx, codes == _UNSCHEDULABLE))
        unresolvable = _reasons_by_name(known, table, ridx, codes == _UNRESOLVABLE)
        self._decide(
            pod.key,
            "filter",
            feasible=int(np.count_nonzero(codes == _SUCCESS)),
            failed=len(failed),
            unresolvable=len(unresolvable),
            reasons=sorted({table[r] for r in np.unique(ridx).tolist() if r}),
        )
        if picked is not None:  # the one node, and no failures: see filter_json
            passed = [known[picked]]
            failed, unresolvable = {}, {}
        else:
            passed = [known[i] for i in np.flatnonzero(ok).tolist()]
        if args.NodeNames is not None or args.Nodes is None:
            return ExtenderFilterResult(
                NodeNames=passed, FailedNodes=failed, FailedAndUnresolvableNodes=unresolvable
            )
        keep = set(passed)
        items = [i for i in args.Nodes.get("items") or [] if i["metadata"]["name"] in keep]
        return ExtenderFilterResult(
            Nodes={**args.Nodes, "items": items},
            FailedNodes=failed,
            FailedAndUnresolvableNodes=unresolvable,
        )

    def prioritize(self, args: ExtenderArgs) -> list[HostPriority]:
        pod = self._pod(args.Pod)
        names = _node_names(args)
        if not self._ours(pod):
            return [HostPriority(Host=n, Score=0) for n in names]
        rows, known, unknown = self.cache.state.rows_of(names)
        scores = self.profile.score(self._context(pod), rows)
        # 0..100 -> 0..10, rounded to nearest
        ext = np.rint(scores * (MAX_EXTENDER_PRIORITY / MAX_NODE_SCORE)).astype(np.int64)
        out = list(map(HostPriority, known, ext.tolist()))
        if known:
            best = int(ext.argmax())
            self._decide(
                pod.key, "prioritize", best=known[best], score=int(ext[best]), nodes=len(out)
            )
        out.extend(HostPriority(Host=n, Score=0) for n in unknown)
        return out

    # -- wire path: the same verbs from raw JSON to reply bytes (http.py) ---------
    def _wire_args(self, wire: ExtenderArgsWire) -> ExtenderArgs:
        return ExtenderArgs(
            Pod=decode_pod(bytes(wire.Pod)),
            Nodes=wire.Nodes,
            NodeNames=decode_names(bytes(wire.NodeNames)),
        )

    def _wire_inputs(
        self, wire: ExtenderArgsWire
    ) -> tuple[PodInfo, IntArray, Sequence[str], list[str], RowRecords] | None:
        """(pod, rows, known names, unknown names, row records); None when the
        struct path must answer (node objects sent instead of names, or not our pod).
        Raises msgspec.ValidationError when Pod or NodeNames has a wrong type."""
        if wire.Nodes is not None:
            return None
        state = self.cache.state
        records = self._records
        if records is None or not records.current(state):
            records = self._records = RowRecords.build(state)
        names_raw = bytes(wire.NodeNames)
        known: Sequence[str]
        # the last list asked about, then the last list filter answered (prioritize's)
        seen = next(
            (
                m[3]
                for m in (self._last_names, self._answered)
                if m is not None
                and m[1] is state
                and m[2] == state.node_generation
                and m[0] == names_raw
            ),
            None,
        )
        if seen is not None:
            rows, known, unknown = seen
        else:
            mapped = records.names.rows(names_raw)
            if mapped is not None:  # every name a node the cache holds
                rows, known, unknown = mapped, RowNames(state.node_names, mapped), []
            else:  # anything else: decoded (and validated) name by name
                rows, known, unknown = state.rows_of(decode_names(names_raw) or [])
            self._last_names = (names_raw, state, state.node_generation, (rows, known, unknown))
        # the names are decoded first: a wrong type there is a 400 even without a Pod
        pod_raw = bytes(wire.Pod)
        last_pod = self._last_pod
        if last_pod is not None and last_pod[0] == pod_raw:
            pod = last_pod[1]
        else:
            pod = self._pod(decode_pod(pod_raw))
            self._last_pod = (pod_raw, pod)
        if not self._ours(pod):
            return None
        return pod, rows, known, unknown, records

    def filter_json(self, wire: ExtenderArgsWire) -> bytes:
        """filter, from the request's raw fields to the reply's bytes."""
        got = self._wire_inputs(wire)
        if got is None:
            return _encode(self.filter(self._wire_args(wire)))
        pod, rows, known, unknown, records = got
        if why := self.waits(pod):
            return _encode(ExtenderFilterResult(Error=why))
        ctx = self._context(pod)
        outcome = self.profile.filter(ctx, rows)
        codes = outcome.codes
        table = outcome.table
        ridx = outcome.reason_idx
        # positions, not boolean masks: indexing 5,000 rows with a mask costs ~10 us
        # each, np.flatnonzero once and small gathers a few (bench/verbs.py pick)
        ok = codes == _SUCCESS
        if self.pick_node:
            at = self.pick(ctx, rows, ok, known)
            if at is not None:
                return self._picked_reply(pod, outcome, unknown, records.named, rows[at : at + 1])
        passed = np.flatnonzero(ok)
        feasible = passed.shape[0]
        failed = np.flatnonzero(~ok) if feasible < rows.shape[0] else passed[:0]
        failed_codes = codes[failed]
        unsched = failed[failed_codes == _UNSCHEDULABLE]
        unres = failed[failed_codes == _UNRESOLVABLE]
        used = np.flatnonzero(np.bincount(ridx[failed], minlength=len(table)))
        self._decide(
            pod.key,
            "filter",
            feasible=feasible,
            failed=len(unknown) + unsched.shape[0],
            unresolvable=unres.shape[0],
            reasons=sorted({table[r] for r in used.tolist() if r}),
        )
        answered = rows[passed]
        names_json = name_list(records.named, answered)
        state = self.cache.state
        # node names hold no spaces (DNS subdomains): only the padding goes
        self._answered = (
            names_json.replace(b" ", b""),
            state,
            state.node_generation,
            (answered, RowNames(state.node_names, answered), []),
        )
        return b"".join(
            (
                b'{"Nodes":null,"NodeNames":',
                names_json,
                b',"FailedNodes":',
                reason_map(
                    records.quoted,
                    rows[unsched],
                    ridx[unsched],
                    table,
                    unknown_failed(unknown, NOT_IN_CACHE),
                ),
                b',"FailedAndUnresolvableNodes":',
                reason_map(records.quoted, rows[unres], ridx[unres], table, b""),
                b',"Error":""}',
            )
        )

    def _picked_reply(
        self,
        pod: PodInfo,
        outcome: FilterOutcome,
        unknown: list[str],
        named: npt.NDArray[np.uint8],
        row: IntArray,
    ) -> bytes:
        """filter_json's reply when ``pick`` chose ``row``: that node alone, and neither
        failure map. kube-scheduler reads why nodes failed only when none is feasible
        (its FitError, and preemption's PostFilter); with one feasible node it binds
        there without prioritize (schedule_one.go, schedulePod). So the maps, a name
        and a reason for every node that failed (75 KB for 1,875 of 5,000 nodes), cost
        the sidecar their encoding and kube-scheduler their decoding for nothing; its
        log's evaluatedNodes then counts the nodes its own filters failed, not ours.
        The decision log keeps the counts and the reasons."""
        codes = outcome.codes
        unsched = int(np.count_nonzero(codes == _UNSCHEDULABLE))
        table = outcome.table
        used = np.flatnonzero(np.bincount(outcome.reason_idx, minlength=len(table)))
        self._decide(
            pod.key,
            "filter",
            feasible=int(np.count_nonzero(codes == _SUCCESS)),
            failed=len(unknown) + unsched,
            unresolvable=int(np.count_nonzero(codes == _UNRESOLVABLE)),
            reasons=sorted({table[r] for r in used.tolist() if r}),
        )
        return b"".join((_PICKED_HEAD, name_list(named, row), _PICKED_TAIL))

    def pick(
        self,
        ctx: PodContext,
        rows: IntArray,
        ok: BoolArray,
        names: Sequence[str],
        scores: FloatArray | None = None,
        lone: bool = False,
    ) -> int | None:
        """Index (into ``rows``) of the feasible row our score plugins rank first (of
        equals, one in use before one whose GPUs are all free, then the lowest
        ``tie_rank``: a fixed order of our own, not the order kube-scheduler listed
        them in, which its parallel filter makes change from pod to pod; see
        first_of_best); None for no pick: without score plugins,
        with one feasible node (unless ``lone``: then that node) or none, and for a pod
        with soft preferences (preferred affinity, ScheduleAnyway spread) or a feasible
        node with a PreferNoSchedule taint it does not tolerate, which only
        kube-scheduler's score plugins weigh: it scores every feasible node and adds
        ours. ``scores``, when given, are the profile's scores of ``rows`` (read at the
        feasible rows only)."""
        feasible = np.flatnonzero(ok)
        if feasible.shape[0] == 1 and lone:
            self.metrics.picks.labels("picked").inc()
            self._decide(ctx.pod.key, "pick", best=names[int(feasible[0])], nodes=1)
            return int(feasible[0])
        if feasible.shape[0] < 2 or not self.profile.scorers:
            return None
        if ctx.pod.soft_preferences:
            self.metrics.picks.labels("soft_preferences").inc()
            self._decide(ctx.pod.key, "pick", skipped="soft preferences: kube-scheduler scores")
            return None
        if self._avoids_a_taint(ctx, rows[feasible]):
            self.metrics.picks.labels("prefer_no_schedule").inc()
            why = "PreferNoSchedule taints: kube-scheduler scores"
            self._decide(ctx.pod.key, "pick", skipped=why)
            return None
        candidates = rows[feasible]
        ranked = self.profile.score(ctx, candidates) if scores is None else scores[feasible]
        at = first_of_best(
            ranked,
            ctx.state.tie_rank[candidates],
            ctx.state.gpu.idle_among(candidates),
        )
        self.metrics.picks.labels("picked").inc()
        # the prioritize entry of the decision log: the choice is made here now
        self._decide(
            ctx.pod.key,
            "pick",
            best=names[int(feasible[at])],
            score=round(float(ranked[at]), 2),
            nodes=int(feasible.shape[0]),
        )
        return int(feasible[at])

    def _avoids_a_taint(self, ctx: PodContext, rows: IntArray) -> bool:
        """Some feasible node has a PreferNoSchedule taint the pod does not tolerate:
        kube-scheduler's TaintToleration would rank it lower, our scores do not."""
        state = ctx.state
        ids = state.prefer_taints[rows]
        if not ids.any():
            return False
        tolerations = ctx.pod.soft_tolerations
        return any(
            not tolerates_all(tolerations, state.taint_sets[i])
            for i in np.unique(ids).tolist()
            if i
        )

    def prioritize_json(self, wire: ExtenderArgsWire) -> bytes:
        """prioritize, from the request's raw fields to the reply's bytes."""
        got = self._wire_inputs(wire)
        if got is None:
            return _encode(self.prioritize(self._wire_args(wire)))
        pod, rows, known, unknown, records = got
        scores = self.profile.score(self._context(pod), rows)
        # 0..100 -> 0..10, rounded to nearest
        ext = np.rint(scores * (MAX_EXTENDER_PRIORITY / MAX_NODE_SCORE)).astype(np.int64)
        if known:
            best = int(ext.argmax())
            self._decide(
                pod.key, "prioritize", best=known[best], score=int(ext[best]), nodes=len(known)
            )
        return host_scores(records.hosts, rows, ext, unknown_scores(unknown))

    async def preempt(self, args: ExtenderPreemptionArgs) -> ExtenderPreemptionResult:
        """kube-scheduler's victim proposals, minus the nodes our rules forbid.

        A node stays only if every proposed victim there may go under the same
        rules as our preempt/reclaim actions (priority, conformance, queue
        shares, gangs whole). Pods that are not ours are not judged.
        """
        pod = self._pod(args.Pod)
        if args.NodeNameToMetaVictims is not None:
            proposals = dict(args.NodeNameToMetaVictims)
        else:
            proposals = {}
            for node, victims in (args.NodeNameToVictims or {}).items():
                if victims is None:
                    proposals[node] = None
                    continue
                metas: list[MetaPod | None] = [
                    MetaPod(UID=_victim_uid(node, p)) for p in victims.Pods or []
                ]
                proposals[node] = MetaVictims(Pods=metas, NumPDBViolations=victims.NumPDBViolations)
        if self.session is None or not self._ours(pod):
            return ExtenderPreemptionResult(NodeNameToMetaVictims=proposals)
        ssn = await self.session()
        job = ssn.job_of.get(pod.uid)
        if job is None:
            return ExtenderPreemptionResult(NodeNameToMetaVictims=proposals)
        kept: dict[str, MetaVictims | None] = {}
        for node, mv in proposals.items():
            uids = {p.UID for p in (mv.Pods or []) if p is not None} if mv else set()
            tasks = [ssn.task_of[u] for u in uids if u in ssn.task_of]
            if proposal_allowed(ssn, job, tasks):
                kept[node] = mv
        self._decide(pod.key, "preempt", proposed=len(proposals), kept=sorted(kept))
        return ExtenderPreemptionResult(NodeNameToMetaVictims=kept)

    async def bind(self, args: ExtenderBindingArgs) -> ExtenderBindingResult:
        if not args.PodName or not args.PodNamespace or not args.Node:
            raise BadRequest("PodName, PodNamespace and Node are required")
        if not is_namespace_name(args.PodNamespace):
            raise BadRequest(f"PodNamespace {args.PodNamespace!r} is not {NAMESPACE_RULE}")
        if not is_object_name(args.PodName):
            raise BadRequest(f"PodName {args.PodName!r} is not {NAME_RULE}")
        key = f"{args.PodNamespace}/{args.PodName}"
        pod = self._pod_for_bind(key, args.PodUID)
        if pod is None:
            # Neither the watch nor a request has shown us the pod: read it, so the
            # fit guard runs.
            try:
                raw = await asyncio.get_running_loop().run_in_executor(
                    API_THREADS, self.binder.read_pod, args.PodNamespace, args.PodName
                )
            except Exception as exc:  # the API server down, or refusing: kube-scheduler retries
                return self._bound(key, args.Node, "error", f"reading pod {key}: {exc}")
            if raw is None:
                return self._bound(key, args.Node, "error", f"pod {key} does not exist")
            pod = pod_from_dict(raw)
        if not self._ours(pod):
            # bind is a write: never for a pod another scheduler owns
            return self._bound(
                key,
                args.Node,
                "not_ours",
                f"pod {key} has schedulerName {pod.scheduler_name!r}; pyextender binds only "
                f"pods of {self.cache.scheduler_name!r} or pods adopted with {BATCH_RESOURCE}",
            )
        row = self.cache.state.index.get(args.Node)
        if row is None:
            return self._bound(key, args.Node, "no_fit", f"node {args.Node}: {NOT_IN_CACHE}")
        if pod.node_name == args.Node:
            return self._bound(key, args.Node, "already_bound", "")
        if pod.node_name:
            return self._bound(
                key, args.Node, "conflict", f"pod {key} is already bound to {pod.node_name}"
            )
        held = self.cache.state.pods.get(pod.uid)
        # a retried bind to the same node keeps the GPUs chosen the first time
        gpus = held.pod.annotations.get(GPU_INDEX_ANNOTATION, "") if held else ""
        if held is None or held.node != row:
            # Final guard: the node must still fit, counting binds in flight.
            outcome = self.profile.filter(self._context(pod), np.asarray([row], dtype=np.int64))
            if outcome.codes[0] != Code.SUCCESS:
                return self._bound(
                    key,
                    args.Node,
                    "no_fit",
                    f"pod {key} no longer fits node {args.Node}: {outcome.reason(0)}",
                )
            gpus = self._choose_gpus(pod, row)
            if gpus:
                pod = replace(pod, annotations={**pod.annotations, GPU_INDEX_ANNOTATION: gpus})
            self.cache.assume(pod, args.Node)
        uid = args.PodUID or pod.uid
        extra = {GPU_INDEX_ANNOTATION: gpus} if gpus else {}
        write = functools.partial(
            self._write_binding, key, args.PodNamespace, args.PodName, uid, args.Node, extra
        )
        settle = functools.partial(self._settle, key, args.Node, pod.uid)
        if self.barrier is None:
            written = await write()
            settle(written)
        else:
            # gang members wait for their gang; the barrier binds them together
            written = await self.barrier.wait(pod, write, settle)
        return ExtenderBindingResult(Error=written[1])

    async def _write_binding(
        self, key: str, namespace: str, name: str, uid: str, node: str, extra: dict[str, str]
    ) -> tuple[str, str]:
        """One Binding write: (result, error); never raises."""
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(
                API_THREADS,
                functools.partial(self.binder.bind, namespace, name, uid, node, extra),
            )
        except BindConflict as exc:
            try:
                raw = await loop.run_in_executor(API_THREADS, self.binder.read_pod, namespace, name)
            except Exception as read_exc:
                return "error", f"binding {key} to {node}: {exc}; reading it back: {read_exc}"
            current = ((raw or {}).get("spec") or {}).get("nodeName")
            if current == node:
                return "already_bound", ""
            return "conflict", f"binding {key} to {node}: {exc}"
        except Exception as exc:
            log.warning("bind %s -> %s failed: %s", key, node, exc)
            if getattr(exc, "status", None) == 404:
                return "gone", f"binding {key} to {node}: the pod no longer exists"
            if refused(exc):
                # the API server refused it as it is: trying again cannot help
                return "rejected", f"binding {key} to {node}: {exc}"
            return "error", f"binding {key} to {node}: {exc}"  # transient: retried
        return "bound", ""

    def _settle(self, key: str, node: str, uid: str, outcome: tuple[str, str]) -> None:
        """The final outcome of one bind, told once (even when its caller has gone)."""
        result, error = outcome
        if error and result != "superseded":
            self.cache.forget_assumed(uid)  # nothing holds the node for it any more
        if result == "gang_timeout":
            self.metrics.barrier_timeouts.inc()
        elif result == "bound":
            log.info("bound %s to %s", key, node)
        self._bound(key, node, result, error)

    def _choose_gpus(self, pod: PodInfo, row: int) -> str:
        """GPU indices for the pod on ``row`` ("0,1,2,3"), or "" when it asks for none."""
        ctx = self._context(pod)
        chosen = choose_gpus(ctx, row)
        return ",".join(str(g) for g in chosen)

    def _bound(self, key: str, node: str, result: str, error: str) -> ExtenderBindingResult:
        """Count and log a bind outcome; "" error means success."""
        self.metrics.binds.labels(result).inc()
        self._decide(key, "bind", node=node, result=result, error=error)
        return ExtenderBindingResult(Error=error)
