"""Lease-based leader election (coordination.k8s.io/v1), as client-go does it.

Every replica answers extender verbs; only the lease holder runs the actions
(enqueue, preempt, reclaim), so two replicas never admit or evict twice. The
holder renews every ``retry`` seconds; another replica takes over once the
lease has not been renewed for ``duration`` seconds. Updates carry the
resourceVersion read, so two contenders cannot both win.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import uuid
from datetime import UTC, datetime
from typing import Any

import msgspec
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pyextender.api.client import body_of

log = logging.getLogger(__name__)


def _now() -> datetime:
    return datetime.now(UTC)


def _fmt(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


class LeaderElector:
    def __init__(
        self,
        api: client.ApiClient,
        namespace: str,
        name: str,
        duration: float = 15.0,
        retry: float = 2.0,
        identity: str | None = None,
    ) -> None:
        self.coord = client.CoordinationV1Api(api)
        self.namespace = namespace
        self.name = name
        self.duration = duration  # seconds a lease lasts without renewal
        self.retry = retry  # seconds between renew/acquire attempts
        self.identity = identity or f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}"
        self.leader = False
        self.changed = asyncio.Event()

    def _spec(self, transitions: int, acquire: str | None = None) -> dict[str, Any]:
        now = _fmt(_now())
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.duration),
            "acquireTime": acquire or now,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    def _try(self) -> bool:
        read: Any = self.coord.read_namespaced_lease
        try:
            lease = msgspec.json.decode(
                body_of(read(self.name, self.namespace, _preload_content=False))
            )
        except ApiException as exc:
            if exc.status != 404:
                raise
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(0),
            }
            try:
                create: Any = self.coord.create_namespaced_lease
                body_of(create(self.namespace, body, _preload_content=False))
                return True
            except ApiException as exc2:
                if exc2.status == 409:
                    return False
                raise
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity")
        renew = _parse(spec.get("renewTime"))
        duration = float(spec.get("leaseDurationSeconds") or self.duration)
        expired = renew is None or (_now() - renew).total_seconds() > duration
        if holder != self.identity and not expired:
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        if holder != self.identity:
            transitions += 1
            lease["spec"] = self._spec(transitions)
        else:
            lease["spec"] = self._spec(transitions, spec.get("acquireTime"))
        try:
            replace: Any = self.coord.replace_namespaced_lease
            body_of(replace(self.name, self.namespace, lease, _preload_content=False))
            return True
        except ApiException as exc:
            if exc.status == 409:  # someone else wrote first
                return False
            raise

    async def run(self) -> None:
        while True:
            try:
                won = await asyncio.to_thread(self._try)
            except Exception as exc:
                log.warning("lease %s/%s: %s", self.namespace, self.name, exc)
                won = False
            if won != self.leader:
                self.leader = won
                self.changed.set()
                log.info(
                    "%s leadership of %s/%s as %s",
                    "acquired" if won else "lost",
                    self.namespace,
                    self.name,
                    self.identity,
                )
            await asyncio.sleep(self.retry)

    def release(self) -> None:
        """Give the lease up on shutdown so a standby takes over at once."""
        if not self.leader:
            return
        try:
            patch: Any = self.coord.patch_namespaced_lease
            resp = patch(
                self.name,
                self.namespace,
                {"spec": {"holderIdentity": None, "renewTime": None}},
                _content_type="application/merge-patch+json",
                _preload_content=False,
            )
            body_of(resp)
        except Exception as exc:
            log.warning("releasing lease: %s", exc)
        self.leader = False
