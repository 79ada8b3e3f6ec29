"""Applies a cycle's decisions to the API server.

PodGroup status (phase Inqueue, condition Unschedulable) is written through
the status subresource with a merge patch touching only what the scheduler
owns; gates are removed with a JSON patch guarded by a ``test`` of the gate's
name, so a concurrent change to the pod cannot make us remove the wrong one;
evictions go through the Eviction API so PodDisruptionBudgets are honoured.
Blocking client calls run in threads, several at a time.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import uuid
from collections.abc import Awaitable, Coroutine
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pyextender.actions.decisions import Decisions, Eviction
from pyextender.api.client import body_of
from pyextender.api.names import GANG_GATE
from pyextender.api.objects import PodInfo
from pyextender.cache.batch import GroupView
from pyextender.framework.session import Job
from pyextender.server.metrics import Metrics
from pyextender.server.threads import API_THREADS

log = logging.getLogger(__name__)

GROUP, VERSION, PLURAL = "scheduling.volcano.sh", "v1beta1", "podgroups"
MERGE = "application/merge-patch+json"
COMPONENT = "pyextender"
CONDITION_INTERVAL_S = 5.0
"""Shortest time between two Unschedulable condition writes for one PodGroup."""


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Actuator:
    def __init__(self, api: client.ApiClient, metrics: Metrics, parallel: int = 32) -> None:
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.metrics = metrics
        self._limit = asyncio.Semaphore(parallel)
        self._background: set[asyncio.Task[None]] = set()
        self.said: dict[str, tuple[str, float]] = {}
        """job key -> (last Unschedulable message written, when): no repeats, and at
        most one write per CONDITION_INTERVAL_S while a reason keeps changing."""

    async def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        async with self._limit:
            call = functools.partial(fn, *args, **kwargs)
            return await asyncio.get_running_loop().run_in_executor(API_THREADS, call)

    async def apply(self, d: Decisions) -> None:
        """A gang's status first, then its gates (so a crash leaves an Inqueue
        gang whose gates the next leader lifts, never ungated pods of a Pending
        gang); gangs proceed in parallel, each as soon as its own status lands."""
        admitted = {job.key: asyncio.ensure_future(self._admit(job)) for job in d.admit}

        async def lift(pod: PodInfo) -> None:
            status = admitted.get(f"{pod.namespace}/{pod.group_name}")
            if status is not None and not await status:
                return  # the status write failed: the gang is not admitted
            await self._lift_pod(pod)

        work: list[Awaitable[object]] = [lift(t.pod) for t in d.lift if GANG_GATE in t.pod.gates]
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
                self._later(self._unschedulable(key, message, groups.get(key)))
        for ev in d.evictions:
            work.append(self._evict(ev))
        if work:
            await asyncio.gather(*work)

    # -- admission -------------------------------------------------------------
    async def _admit(self, job: Job) -> bool:
        group = job.group
        assert group is not None
        conditions = [c for c in group.conditions if c.get("type") != "Unschedulable"]
        body = {"status": {"phase": "Inqueue", "conditions": conditions}}
        try:
            await self._call(
                self.custom.patch_namespaced_custom_object_status,
                GROUP,
                VERSION,
                group.namespace,
                PLURAL,
                group.name,
                body,
                _content_type=MERGE,
            )
        except ApiException as exc:
            log.warning("admitting %s: %s", job.key, exc.reason)
            return False
        self.said.pop(job.key, None)
        self.metrics.admissions.labels(job.queue).inc()
        log.info("admitted %s (queue %s, minMember %d)", job.key, job.queue, job.min_member)
        self._later(
            self._event_group(group, "Normal", "Enqueued", "all minMember tasks fit; gang admitted")
        )
        return True

    def _later(self, work: Coroutine[Any, Any, None]) -> None:
        """Run without waiting (events): a slow event must not hold a gate."""
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _lift_pod(self, pod: PodInfo) -> None:
        i = pod.gates.index(GANG_GATE)
        patch = [
            {"op": "test", "path": f"/spec/schedulingGates/{i}/name", "value": GANG_GATE},
            {"op": "remove", "path": f"/spec/schedulingGates/{i}"},
        ]
        try:
            await self._call(self.core.patch_namespaced_pod, pod.name, pod.namespace, patch)
        except ApiException as exc:
            if exc.status not in (404, 422):  # gone, or the gate moved: next cycle retries
                log.warning("lifting gate of %s: %s", pod.key, exc.reason)

    # -- reasons ---------------------------------------------------------------
    async def _unschedulable(self, key: str, message: str, group: GroupView | None) -> None:
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
        try:
            await self._call(
                self.custom.patch_namespaced_custom_object_status,
                GROUP,
                VERSION,
                ns,
                PLURAL,
                name,
                {"status": {"conditions": conditions}},
                _content_type=MERGE,
            )
        except ApiException as exc:
            if exc.status != 404:
                log.warning("condition on %s: %s", key, exc.reason)
            self.said.pop(key, None)  # not written: try again next cycle
            return
        if group is not None:
            self._later(self._event_group(group, "Warning", "Unschedulable", message))
        else:
            self._later(self._event("PodGroup", ns, name, "", "Warning", "Unschedulable", message))

    # -- evictions -------------------------------------------------------------
    async def _evict(self, ev: Eviction) -> None:
        pod = ev.task.pod
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": pod.name, "namespace": pod.namespace},
        }
        try:
            await self._call(
                self.core.create_namespaced_pod_eviction, pod.name, pod.namespace, body
            )
        except ApiException as exc:
            if exc.status == 429:  # a PodDisruptionBudget says not now
                self.metrics.evictions.labels(ev.action, "blocked_by_pdb").inc()
                log.info("eviction of %s blocked by a PodDisruptionBudget", pod.key)
            elif exc.status != 404:
                self.metrics.evictions.labels(ev.action, "error").inc()
                log.warning("evicting %s: %s", pod.key, exc.reason)
            return
        self.metrics.evictions.labels(ev.action, "evicted").inc()
        log.info("evicted %s: %s", pod.key, ev.reason)
        reason = "Preempted" if ev.action == "preempt" else "Reclaimed"
        self._later(
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
            resp = await self._call(
                self.core.create_namespaced_event, ns, body, _preload_content=False
            )
            body_of(resp)
        except ApiException as exc:
            log.debug("event on %s %s/%s: %s", what, ns, name, exc.reason)
