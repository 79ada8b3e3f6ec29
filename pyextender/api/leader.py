"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection.

Only the holder of the Lease acts; other replicas keep their caches warm and
wait. Expiry is judged by the local clock from when we last saw the Lease
record change (never by comparing our clock with the holder's renewTime), so
clock skew between replicas cannot make two leaders. Writes are optimistic
(resourceVersion), so two candidates racing for a free Lease cannot both win.
On a clean shutdown the leader empties holderIdentity so a standby takes over
at once instead of after leaseDurationSeconds.

Used by the controllers and by the sidecar (whose actions run only on the
leader, while every replica answers extender verbs).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pyextender.api.client import body_of, conflict

log = logging.getLogger(__name__)


class LeaseStore(Protocol):
    """Reads and writes Lease objects as plain JSON."""

    def read_lease(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def create_lease(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]: ...

    def replace_lease(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]: ...


class KubeLeases:
    """LeaseStore over the Kubernetes client."""

    def __init__(self, api: client.ApiClient) -> None:
        self.coord = client.CoordinationV1Api(api)

    def read_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        read: Any = self.coord.read_namespaced_lease
        try:
            raw = body_of(read(name, namespace, _preload_content=False))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        doc: dict[str, Any] = json.loads(raw)
        return doc

    def create_lease(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        create: Any = self.coord.create_namespaced_lease
        doc: dict[str, Any] = json.loads(body_of(create(namespace, body, _preload_content=False)))
        return doc

    def replace_lease(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        replace: Any = self.coord.replace_namespaced_lease
        raw = body_of(replace(name, namespace, body, _preload_content=False))
        doc: dict[str, Any] = json.loads(raw)
        return doc


@dataclass(frozen=True, slots=True)
class LeaseConfig:
    namespace: str = "kube-system"
    """Namespace of the Lease."""
    name: str = "pyextender-controllers"
    """Name of the Lease; replicas sharing it elect one leader."""
    identity: str = ""
    """This replica's holderIdentity (unique per process)."""
    lease_duration_s: float = 15.0
    """How long a standby waits after the last observed renewal before taking over."""
    renew_deadline_s: float = 10.0
    """How long the leader keeps trying to renew before it stops acting."""
    retry_period_s: float = 2.0
    """Pause between acquire/renew attempts."""


def _micro_time(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def may_acquire(
    holder: str, me: str, observed_at: float, now: float, lease_duration_s: float
) -> bool:
    """Whether ``me`` may write itself into a Lease held by ``holder``.

    ``observed_at`` and ``now`` are local monotonic seconds; ``observed_at`` is
    when the current record was first seen.
    """
    if not holder or holder == me:
        return True
    return now - observed_at > lease_duration_s


class LeaderElector:
    def __init__(self, kube: LeaseStore, cfg: LeaseConfig) -> None:
        self.kube = kube
        self.cfg = cfg
        self.is_leader = False
        self.transitions = 0
        self._observed: tuple[str, str] | None = None
        self._observed_at = 0.0

    def _spec(self, acquire_time: str, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": self.cfg.identity,
            "leaseDurationSeconds": max(1, round(self.cfg.lease_duration_s)),
            "acquireTime": acquire_time,
            "renewTime": _micro_time(time.time()),
            "leaseTransitions": transitions,
        }

    def try_acquire_or_renew(self) -> bool:
        """One blocking attempt; True when we hold the Lease afterwards."""
        cfg = self.cfg
        lease = self.kube.read_lease(cfg.namespace, cfg.name)
        if lease is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": cfg.name, "namespace": cfg.namespace},
                "spec": self._spec(_micro_time(time.time()), 0),
            }
            try:
                self.kube.create_lease(cfg.namespace, body)
            except Exception as exc:
                if conflict(exc):
                    return False
                raise
            return True
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        record = (holder, str(spec.get("renewTime") or ""))
        now = time.monotonic()
        if record != self._observed:
            self._observed, self._observed_at = record, now
        if not may_acquire(holder, cfg.identity, self._observed_at, now, cfg.lease_duration_s):
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        acquire = str(spec.get("acquireTime") or "")
        if holder != cfg.identity:
            transitions += 1
            acquire = _micro_time(time.time())
        lease["spec"] = self._spec(acquire, transitions)
        try:
            self.kube.replace_lease(cfg.namespace, cfg.name, lease)
        except Exception as exc:
            if conflict(exc):
                return False
            raise
        return True

    def release(self) -> None:
        lease = self.kube.read_lease(self.cfg.namespace, self.cfg.name)
        if lease is None:
            return
        spec = lease.get("spec") or {}
        if spec.get("holderIdentity") != self.cfg.identity:
            return
        spec["holderIdentity"] = ""
        spec["leaseDurationSeconds"] = 1
        spec["renewTime"] = _micro_time(time.time())
        self.kube.replace_lease(self.cfg.namespace, self.cfg.name, lease)

    async def _attempt(self) -> bool:
        try:
            return await asyncio.to_thread(self.try_acquire_or_renew)
        except Exception as exc:
            log.warning("lease %s/%s: %s", self.cfg.namespace, self.cfg.name, exc)
            return False

    @staticmethod
    async def _lead(lead: Callable[[], Awaitable[None]]) -> None:
        await lead()

    async def run(self, lead: Callable[[], Awaitable[None]]) -> None:
        """Forever: wait to acquire, run ``lead`` while we renew, stop it when we cannot."""
        cfg = self.cfg
        task: asyncio.Task[None] | None = None
        try:
            while True:
                while not await self._attempt():
                    await asyncio.sleep(cfg.retry_period_s)
                self.is_leader = True
                self.transitions += 1
                log.info("became leader (lease %s/%s as %s)", cfg.namespace, cfg.name, cfg.identity)
                task = asyncio.create_task(self._lead(lead))
                last_renew = time.monotonic()
                while True:
                    await asyncio.sleep(cfg.retry_period_s)
                    if task.done():
                        break
                    if await self._attempt():
                        last_renew = time.monotonic()
                    elif time.monotonic() - last_renew > cfg.renew_deadline_s:
                        log.error(
                            "could not renew lease for %.0fs; stepping down", cfg.renew_deadline_s
                        )
                        break
                self.is_leader = False
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        finally:
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            if self.is_leader:
                self.is_leader = False
                try:
                    await asyncio.to_thread(self.release)
                    log.info("released lease %s/%s", cfg.namespace, cfg.name)
                except Exception as exc:
                    log.warning("could not release lease: %s", exc)
