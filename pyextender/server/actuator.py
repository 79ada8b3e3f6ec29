"""Applies a cycle's decisions to the API server.

PodGroup status (phase Inqueue, phase Pending for a group that has none yet,
condition Unschedulable) is written through
the status subresource (or the object itself when the installed CRD has none,
as Volcano's does; ``pyextender.api.status_route``) with a merge patch that carries the PodGroup's
resourceVersion and keeps every condition type but ours, so a write based on
a stale view fails (409) instead of erasing another writer's conditions;
gates are removed with a JSON patch guarded by a ``test`` of the gate's name,
so a concurrent change to the pod cannot make us remove the wrong one; pods
held at the gang barrier instead (pyextender.io/gang-barrier, framework mode)
are released with one merge patch of their PodGroup's
pyextender.io/released-pods annotation per gang, not one write per pod (and
when the gang is admitted in the same cycle and its status is written through
the object, as with our CRDs and Volcano's, that patch is the admission's own);
evictions go through the Eviction API (PodDisruptionBudgets honoured) with a
uid precondition, so a pod recreated under the same name is never evicted in
its predecessor's place.

Every write is fenced: it runs only while the leadership term the cycle was
decided in is still valid (checked in the API thread right before sending).
Transient failures (429, 5xx, timeouts, dropped connections) are retried with
exponential backoff and jitter; what still fails is counted, logged and
reported back, so the scheduler loop forgets it and decides again next cycle.
Blocking client calls run in threads, several at a time.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pyextender.actions.decisions import Decisions, Eviction
from pyextender.api.leader import Fenced
from pyextender.api.names import BARRIER_GATE, GANG_GATE, RELEASED_ANNOTATION
from pyextender.api.objects import PodInfo
from pyextender.api.raw_requests import JSON_PATCH, RawApi, object_path
from pyextender.api.status_route import StatusRoute
from pyextender.api.volcano.podgroup import one_pod_group
from pyextender.cache.batch import GroupView
from pyextender.cache.cluster import ClusterCache, released_uids
from pyextender.framework.session import Job
from pyextender.server.metrics import Metrics
from pyextender.server.threads import API_THREADS

log = logging.getLogger(__name__)

GROUP, VERSION, PLURAL = "scheduling.volcano.sh", "v1beta1", "podgroups"
COMPONENT = "pyextender"
CONDITION_INTERVAL_S = 5.0
"""Shortest time between two Unschedulable condition writes for one PodGroup."""
RETRIES = 3
"""Attempts after the first for a transient failure."""
BACKOFF_S = 0.1
"""First retry delay (seconds); doubles per attempt, with +-50 % jitter."""
TRANSIENT = frozenset({429, 500, 502, 503, 504})
"""HTTP statuses worth trying again as they are (the API server is busy or restarting)."""
PHASE_WRITES = frozenset({"admit", "pending"})
"""Status writes that set a PodGroup's phase (``_patch_group_status``'s ``what``)."""

Allowed = Callable[[], bool]


def _always() -> bool:
    return True


@dataclass(slots=True)
class Applied:
    """What a cycle's writes did not achieve; the scheduler loop decides them again."""

    failed_admissions: list[str] = field(default_factory=list)
    """PodGroup uids whose Inqueue write failed (their gates stay on)."""
    failed_lifts: list[str] = field(default_factory=list)
    """Pod uids whose gate is still on."""
    failed_evictions: list[str] = field(default_factory=list)
    """Pod uids not evicted (error or fenced; a PDB refusal counts too)."""
    failed_pending: list[str] = field(default_factory=list)
    """PodGroup uids whose first phase (Pending) was not written."""


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Actuator:
    def __init__(
        self,
        api: client.ApiClient,
        metrics: Metrics,
        parallel: int = 32,
        cache: ClusterCache | None = None,
        raw: RawApi | None = None,
    ) -> None:
        self.cache = cache
        """The sidecar's cache: pods released at the barrier are let through in it at
        once (the gRPC watchers hear of them) rather than when the watch shows the
        PodGroup's annotation."""
        self.released: dict[str, frozenset[str]] = {}
        """PodGroup key -> the uids our last release write listed: the next write
        keeps them even before the watch shows that one."""
        self.core = client.CoreV1Api(api)
        self.status = StatusRoute(api)
        """PodGroup status goes to /status or, with Volcano's CRDs, to the object."""
        self.raw = raw or RawApi(api.configuration)
        """The writes made per gang or per pod (gate lifts, releases, status, events)
        go through libcurl: a third of the generated client's CPU per request."""
        self.metrics = metrics
        self._limit = asyncio.Semaphore(parallel)
        self._background: set[asyncio.Task[None]] = set()
        self._events: set[asyncio.Task[None]] = set()
        self.said: dict[str, tuple[str, float]] = {}
        """job key -> (last Unschedulable message written, when): no repeats, and at
        most one write per CONDITION_INTERVAL_S while a reason keeps changing."""
        self.ours: dict[str, tuple[frozenset[str], str, bool]] = {}
        """PodGroup key -> (resourceVersions our own status writes replaced, the one
        the last of them produced, whether one of them admitted the gang). See
        ``_patch_group_status``."""
        self._group_locks: dict[str, asyncio.Lock] = {}
        """PodGroup key -> held while a status write to it is in flight."""

    async def _call(
        self,
        op: str,
        fn: Any,
        *args: Any,
        allowed: Allowed = _always,
        transient: frozenset[int] = TRANSIENT,
        **kwargs: Any,
    ) -> Any:
        """One API write: fenced, with a timeout (the client's), retried when transient."""

        def send() -> Any:
            # checked in the API thread right before the request leaves: a cycle
            # decided under a leadership term that has ended is never written
            if not allowed():
                raise Fenced(f"{op}: leadership ended before the write")
            return fn(*args, **kwargs)

        loop = asyncio.get_running_loop()
        for attempt in range(RETRIES + 1):
            try:
                async with self._limit:
                    return await loop.run_in_executor(API_THREADS, send)
            except Fenced:
                self.metrics.writes.labels(op, "fenced").inc()
                raise
            except ApiException as exc:
                if exc.status not in transient or attempt == RETRIES:
                    self.metrics.writes.labels(op, "failed").inc()
                    raise
                why = f"{exc.status} {exc.reason}"
            except Exception as exc:  # timeouts, refused or dropped connections
                if attempt == RETRIES:
                    self.metrics.writes.labels(op, "failed").inc()
                    raise
                why = str(exc) or type(exc).__name__
            self.metrics.writes.labels(op, "retried").inc()
            delay = BACKOFF_S * 2**attempt * random.uniform(0.5, 1.5)
            log.info("%s: %s; retrying in %.2fs", op, why, delay)
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    async def apply(self, d: Decisions, allowed: Allowed = _always) -> Applied:
        """A gang's status first, then its gates (so a crash leaves an Inqueue
        gang whose gates the next leader lifts, never ungated pods of a Pending
        gang); gangs proceed in parallel, each as soon as its own status lands.

        ``allowed`` says whether the leadership term these decisions were made in
        is still valid; returns what did not get written."""
        out = Applied()
        held: dict[str, list[PodInfo]] = {}
        for t in d.lift:
            if BARRIER_GATE in t.pod.gates and t.pod.group_name:
                held.setdefault(f"{t.pod.namespace}/{t.pod.group_name}", []).append(t.pod)
        # PodGroup key -> the release list its admission write carried (see _admit)
        carried: dict[str, frozenset[str]] = {}
        admitted = {
            job.key: asyncio.ensure_future(
                self._admit(job, allowed, out, held.get(job.key, []), carried)
            )
            for job in d.admit
        }

        async def lift(pod: PodInfo) -> None:
            status = admitted.get(f"{pod.namespace}/{pod.group_name}")
            if status is not None and not await status:
                out.failed_lifts.append(pod.uid)
                return  # the status write failed: the gang is not admitted
            if not await self._lift_pod(pod, allowed):
                out.failed_lifts.append(pod.uid)

        work: list[Awaitable[object]] = [lift(t.pod) for t in d.lift if GANG_GATE in t.pod.gates]
        for key, pods in held.items():
            work.append(self._release(key, pods, admitted.get(key), allowed, out, carried))
        work += admitted.values()
        now = time.monotonic()
        groups = {j.key: j.group for j in d.starving}
        for key, message in d.unschedulable.items():
            if key in d.assembling:
                continue  # its pods are still being created: nothing to explain yet
            last, when = self.said.get(key, ("", -CONDITION_INTERVAL_S))
            if message != last and now - when >= CONDITION_INTERVAL_S:
                self.said[key] = (message, now)
                # in the background: explaining must never hold up admitting
                self._later(self._unschedulable(key, message, groups.get(key), allowed))
        for ev in d.evictions:
            work.append(self._evict(ev, allowed, out))
        for job in d.pending:
            if job.group is not None:
                work.append(self._pending(job.group, allowed, out))
        if work:
            await asyncio.gather(*work)
        return out

    def forget(self, live_jobs: set[str]) -> None:
        """Drop what we remember of jobs that no longer exist (bounded memory)."""
        for key in [k for k in self.said if k not in live_jobs]:
            del self.said[key]
        for key in [k for k in self.ours if k not in live_jobs]:
            del self.ours[key]
        for key in [k for k in self.released if k not in live_jobs]:
            del self.released[key]
        for key in [k for k in self._group_locks if k not in live_jobs]:
            if not self._group_locks[key].locked():
                del self._group_locks[key]

    # -- PodGroup status ------------------------------------------------------
    async def _patch_group_status(
        self,
        what: str,
        namespace: str,
        name: str,
        status: dict[str, Any],
        resource_version: str,
        allowed: Allowed,
        annotate: Callable[[], dict[str, str]] | None = None,
    ) -> ReplyMeta:
        """Merge-patch a PodGroup's status, guarded by the resourceVersion the decision
        was made on (when known), so a write never lands on a newer object; the
        reply's metadata.
        ``annotate``, called under the PodGroup's lock, gives annotations to send along
        (they land only where the status is written through the object itself).

        A version that only our own earlier status write replaced is not stale for
        this purpose: the guard is against other writers. The cycle after the one that
        wrote phase Pending usually admits the gang before the watch shows that
        write, and its guard on the older version failed (409) for 73 of 100
        single-pod gangs in bench/e2e.py --shapes single, costing a wasted write and
        a cycle (~0.8 s) each. So the version our write produced stands in for the
        one it replaced; if anyone else wrote since, it is stale too and still 409s.
        Writes to one PodGroup go one at a time for this (the Pending write is often
        still in flight when the next cycle admits): each waits for the version the
        one before it produced.

        A phase write (admit, pending) never rides over our own admission: a
        decision made on a version from before it did not see the gang admitted
        (the watch lagged longer than the loop remembers its admissions, or a new
        leadership term started from a stale cache); admitting again would repeat
        the Enqueued event and writing Pending would undo the admission. It is sent
        on its own version and fails (409)."""
        key = f"{namespace}/{name}"
        lock = self._group_locks.setdefault(key, asyncio.Lock())
        async with lock:
            return await self._patch_group_status_locked(
                what, key, status, resource_version, allowed, annotate
            )

    async def _patch_group_status_locked(
        self,
        what: str,
        key: str,
        status: dict[str, Any],
        resource_version: str,
        allowed: Allowed,
        annotate: Callable[[], dict[str, str]] | None,
    ) -> ReplyMeta:
        namespace, _, name = key.partition("/")
        based_on = resource_version
        replaced, latest, admitted = self.ours.get(key, (frozenset(), "", False))
        phase_write = what in PHASE_WRITES
        if resource_version and resource_version in replaced and not (phase_write and admitted):
            resource_version = latest
        body: dict[str, Any] = {"status": status}
        meta: dict[str, Any] = {"annotations": annotate()} if annotate is not None else {}
        if resource_version:
            meta["resourceVersion"] = resource_version
        if meta:
            body["metadata"] = meta
        reply: bytes = await self._call(
            what,
            self.status.patch_status,
            self.raw,
            GROUP,
            VERSION,
            PLURAL,
            namespace,
            name,
            body,
            allowed=allowed,
        )
        meta_back = reply_meta(reply)
        produced = meta_back.resourceVersion
        if based_on and produced:
            if based_on in replaced:
                chain, admitted_before = replaced, admitted
            else:
                chain, admitted_before = frozenset(), False
            self.ours[key] = (
                chain | {based_on, resource_version},
                produced,
                admitted_before or what == "admit",
            )
        return meta_back

    # -- admission -------------------------------------------------------------
    async def _admit(
        self,
        job: Job,
        allowed: Allowed,
        out: Applied,
        release: list[PodInfo] | None = None,
        carried: dict[str, frozenset[str]] | None = None,
    ) -> bool:
        """Write phase Inqueue. With ``release`` (members this cycle lets through the
        barrier) the same merge patch sets the PodGroup's RELEASED_ANNOTATION: where
        the status is written through the object itself (a PodGroup CRD without a
        status subresource, ours and Volcano's) admission and release are one write,
        not two. The reply says whether the annotation landed (a /status write drops
        metadata); if it did, ``carried[job.key]`` is the list written and _release
        writes nothing more."""
        group = job.group
        assert group is not None
        conditions = [c for c in group.conditions if c.get("type") != "Unschedulable"]
        status = {"phase": "Inqueue", "conditions": conditions}
        listed = ""

        def annotate() -> dict[str, str]:
            nonlocal listed
            listed = ",".join(sorted(self._release_list(job.key, [p.uid for p in release or []])))
            return {RELEASED_ANNOTATION: listed}

        try:
            reply = await self._patch_group_status(
                "admit",
                group.namespace,
                group.name,
                status,
                group.resource_version,
                allowed,
                annotate if release else None,
            )
        except Fenced:
            out.failed_admissions.append(group.uid)
            return False
        except Exception as exc:
            out.failed_admissions.append(group.uid)
            log.warning("admitting %s: %s", job.key, _why(exc))
            if not (isinstance(exc, ApiException) and exc.status in (404, 409)):
                self._report(
                    self._event_group(
                        group, "Warning", "AdmitFailed", f"could not admit: {_why(exc)}"
                    )
                )
            return False
        self.metrics.writes.labels("admit", "ok").inc()
        landed = (reply.annotations or {}).get(RELEASED_ANNOTATION)
        if release and carried is not None and landed == listed:
            carried[job.key] = frozenset(listed.split(","))
        waited = self.said.pop(job.key, None) is not None
        self.metrics.admissions.labels(job.queue).inc()
        log.info("admitted %s (queue %s, minMember %d)", job.key, job.queue, job.min_member)
        # after a wait it was told of, even one pod's admission is news; otherwise one
        # pod's event was one API write of a single-pod job's 7 (bench/e2e.py --shapes)
        if waited or not one_pod_group(job.min_member, len(job.tasks) + job.succeeded):
            self._report(self._event_group(group, "Normal", "Enqueued", _enqueued_message(job)))
        return True

    async def _pending(self, group: GroupView, allowed: Allowed, out: Applied) -> None:
        """A PodGroup with no phase yet stays Pending: say so (Volcano's scheduler writes
        Pending for every group not Inqueue or Running). Guarded by resourceVersion,
        so it never overwrites a phase written meanwhile."""
        try:
            await self._patch_group_status(
                "pending",
                group.namespace,
                group.name,
                {"phase": "Pending"},
                group.resource_version,
                allowed,
            )
        except Exception as exc:
            quiet = isinstance(exc, Fenced) or (
                isinstance(exc, ApiException) and exc.status in (404, 409)
            )
            if not quiet:
                log.warning("phase Pending on %s: %s", group.key, _why(exc))
            out.failed_pending.append(group.uid)
            return
        self.metrics.writes.labels("pending", "ok").inc()

    def cancel_background(self) -> None:
        """Stop condition writes still running (leadership ended).

        Events are left to finish: each reports a write that already landed, which
        stays true after the term ends (cancelling them lost the Enqueued event of a
        gang admitted just before a slow leader stepped down).
        """
        for task in list(self._background):
            task.cancel()
        # the next term decides from what the API server says: none of this term's
        # writes may stand in for the version a decision was made on
        self.ours.clear()

    def _later(self, work: Coroutine[Any, Any, None]) -> None:
        """Run a condition write without waiting: a slow write must not hold a gate."""
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _report(self, work: Coroutine[Any, Any, None]) -> None:
        """Send an event without waiting; it outlives the leadership term."""
        task = asyncio.ensure_future(work)
        self._events.add(task)
        task.add_done_callback(self._events.discard)

    def _patch_pod(self, name: str, namespace: str, patch: list[dict[str, Any]]) -> None:
        """JSON-PATCH a pod; the reply is dropped."""
        self.raw.patch(f"/api/v1/namespaces/{namespace}/pods/{name}", patch, JSON_PATCH)

    async def _lift_pod(self, pod: PodInfo, allowed: Allowed) -> bool:
        """True when the gate is off (or the pod is gone)."""
        patch = lift_patch(pod.uid, pod.gates.index(GANG_GATE))
        try:
            await self._call(
                "lift", self._patch_pod, pod.name, pod.namespace, patch, allowed=allowed
            )
        except Fenced:
            return False
        except Exception as exc:
            if isinstance(exc, ApiException) and exc.status == 404:
                return True  # gone: nothing to lift
            # 422: the gate moved (or the pod was replaced): the next cycle decides again
            log.warning("lifting gate of %s: %s", pod.key, _why(exc))
            return False
        self.metrics.writes.labels("lift", "ok").inc()
        return True

    async def _release(
        self,
        key: str,
        pods: list[PodInfo],
        admission: Awaitable[bool] | None,
        allowed: Allowed,
        out: Applied,
        carried: dict[str, frozenset[str]] | None = None,
    ) -> None:
        """Release a gang's members held at the barrier: one write to its PodGroup's
        RELEASED_ANNOTATION (_release_list). After the gang's admission, as gates come
        off after it; none when the admission write carried the list (``carried``)."""
        uids = [p.uid for p in pods]
        if admission is not None and not await admission:
            out.failed_lifts.extend(uids)
            return
        namespace, _, name = key.partition("/")
        lock = self._group_locks.setdefault(key, asyncio.Lock())
        async with lock:
            wanted = (carried or {}).get(key)
            if wanted is not None:
                self.released[key] = wanted
                self.metrics.writes.labels("release", "with_admission").inc()
                if self.cache is not None:
                    self.cache.release(uids)
                return
            wanted = self._release_list(key, uids)
            body = {"metadata": {"annotations": {RELEASED_ANNOTATION: ",".join(sorted(wanted))}}}
            try:
                await self._call(
                    "release",
                    self.raw.patch,
                    object_path(GROUP, VERSION, PLURAL, namespace, name),
                    body,
                    allowed=allowed,
                )
            except Fenced:
                out.failed_lifts.extend(uids)
                return
            except Exception as exc:
                # 404: the PodGroup is gone, and its pods with it; else the next cycle retries
                log.warning("releasing %d member(s) of %s: %s", len(uids), key, _why(exc))
                out.failed_lifts.extend(uids)
                return
            self.released[key] = wanted
        self.metrics.writes.labels("release", "ok").inc()
        if self.cache is not None:
            self.cache.release(uids)

    def _release_list(self, key: str, uids: list[str]) -> frozenset[str]:
        """What a release of ``uids`` writes: them, with the members released before
        that are still unbound (bound or gone ones drop out, so the list stays short).
        Called under the PodGroup's lock."""
        listed = set(self.released.get(key, frozenset()))
        group = self.cache.groups.get(key) if self.cache is not None else None
        if group is not None:
            listed.update(released_uids(group))
        if self.cache is not None:
            pods_by_uid = self.cache.pods_by_uid
            listed = {
                u for u in listed if (p := pods_by_uid.get(u)) is not None and not p.node_name
            }
        return frozenset(listed.union(uids))

    # -- reasons ---------------------------------------------------------------
    async def _unschedulable(
        self, key: str, message: str, group: GroupView | None, allowed: Allowed
    ) -> None:
        ns, _, name = key.partition("/")
        current = group.conditions if group is not None else []
        conditions = [c for c in current if c.get("type") != "Unschedulable"]
        conditions.append(
            {
                "type": "Unschedulable",
                "status": "True",
                "reason": "NotEnoughResources",
                "message": message,
                "transitionID": str(uuid.uuid4()),
                "lastTransitionTime": _now(),
            }
        )
        version = group.resource_version if group is not None else ""
        try:
            await self._patch_group_status(
                "condition", ns, name, {"conditions": conditions}, version, allowed
            )
        except Exception as exc:
            quiet = isinstance(exc, Fenced) or (
                isinstance(exc, ApiException) and exc.status in (404, 409)
            )
            if not quiet:
                log.warning("condition on %s: %s", key, _why(exc))
            self.said.pop(key, None)  # not written: try again next cycle
            return
        self.metrics.writes.labels("condition", "ok").inc()
        if group is not None:
            self._report(self._event_group(group, "Warning", "Unschedulable", message))
        else:
            self._report(self._event("PodGroup", ns, name, "", "Warning", "Unschedulable", message))

    # -- evictions -------------------------------------------------------------
    async def _evict(self, ev: Eviction, allowed: Allowed, out: Applied) -> None:
        pod = ev.task.pod
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": pod.name, "namespace": pod.namespace},
            # the pod we chose, not a successor created under the same name
            "deleteOptions": {"preconditions": {"uid": pod.uid}},
        }
        try:
            await self._call(
                "evict",
                self.core.create_namespaced_pod_eviction,
                pod.name,
                pod.namespace,
                body,
                allowed=allowed,
                # for an eviction 429 is a PodDisruptionBudget's "not now", not "busy"
                transient=TRANSIENT - {429},
            )
            self.metrics.writes.labels("evict", "ok").inc()
        except Fenced:
            out.failed_evictions.append(pod.uid)
            return
        except Exception as exc:
            status = exc.status if isinstance(exc, ApiException) else 0
            if status == 429:
                self.metrics.evictions.labels(ev.action, "blocked_by_pdb").inc()
                log.info("eviction of %s blocked by a PodDisruptionBudget", pod.key)
                out.failed_evictions.append(pod.uid)
            elif status in (404, 409):  # gone, or replaced by a pod of the same name
                self.metrics.evictions.labels(ev.action, "gone").inc()
            else:
                self.metrics.evictions.labels(ev.action, "error").inc()
                log.warning("evicting %s: %s", pod.key, _why(exc))
                out.failed_evictions.append(pod.uid)
            return
        self.metrics.evictions.labels(ev.action, "evicted").inc()
        log.info("evicted %s: %s", pod.key, ev.reason)
        reason = "Preempted" if ev.action == "preempt" else "Reclaimed"
        self._report(
            self._event("Pod", pod.namespace, pod.name, pod.uid, "Normal", reason, ev.reason)
        )

    # -- events ----------------------------------------------------------------
    async def _event_group(self, g: GroupView, kind: str, reason: str, message: str) -> None:
        await self._event("PodGroup", g.namespace, g.name, g.uid, kind, reason, message)

    async def _event(
        self, what: str, ns: str, name: str, uid: str, kind: str, reason: str, message: str
    ) -> None:
        now = _now()
        api_version = f"{GROUP}/{VERSION}" if what == "PodGroup" else "v1"
        body = {
            "metadata": {"generateName": f"{name}.", "namespace": ns},
            "involvedObject": {
                "kind": what,
                "namespace": ns,
                "name": name,
                "uid": uid,
                "apiVersion": api_version,
            },
            "type": kind,
            "reason": reason,
            "message": message[:1024],
            "source": {"component": COMPONENT},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            await self._call("event", self.raw.post, f"/api/v1/namespaces/{ns}/events", body)
        except Exception as exc:
            log.debug("event on %s %s/%s: %s", what, ns, name, _why(exc))


def lift_patch(uid: str, index: int) -> list[dict[str, Any]]:
    """The JSON patch that removes the gang gate at ``index`` of pod ``uid``'s
    schedulingGates: it fails (422) if the pod was replaced or its gates moved."""
    return [
        {"op": "test", "path": "/metadata/uid", "value": uid},
        {"op": "test", "path": f"/spec/schedulingGates/{index}/name", "value": GANG_GATE},
        {"op": "remove", "path": f"/spec/schedulingGates/{index}"},
    ]


def _enqueued_message(job: Job) -> str:
    return f"gang admitted (Pending -> Inqueue) in queue {job.queue}"


class ReplyMeta(msgspec.Struct):
    """What a PodGroup write's reply tells us: the version it produced and the
    annotations it holds (the rest of the object is skipped unread)."""

    resourceVersion: str = ""
    annotations: dict[str, str] | None = None


class _Reply(msgspec.Struct):
    metadata: ReplyMeta = msgspec.field(default_factory=ReplyMeta)


_reply_decoder = msgspec.json.Decoder(_Reply)


def reply_meta(raw: bytes) -> ReplyMeta:
    """The metadata of a raw object reply, decoded once; empty when unreadable."""
    try:
        return _reply_decoder.decode(raw).metadata
    except (msgspec.DecodeError, msgspec.ValidationError):
        return ReplyMeta()


def _why(exc: BaseException) -> str:
    if isinstance(exc, ApiException):
        return f"{exc.status} {exc.reason}"
    return str(exc) or type(exc).__name__
