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
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pyextender.api.client import body_of, conflict
from pyextender.api.process import name_os_thread

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


class Fenced(RuntimeError):
    """A write was refused because the leadership it was decided under is gone."""


class LeaderElector:
    """Campaigns for a Lease on a thread of its own; the event loop only reads its state.

    Why a thread: acquiring and renewing are blocking API calls, and the processes
    that lead also run synchronous work on their event loop (a scheduling cycle).
    On the loop, a long cycle or a hung call could hold the renewal past its
    deadline and let the Lease expire while we still act.

    Fencing: leadership is valid only until ``renew_deadline_s`` after the start of
    the last successful renewal, judged by the local monotonic clock at the moment
    of each check, so even a campaign thread stuck in a hung call cannot keep a
    stale leader acting. ``renew_deadline_s < lease_duration_s``, and a standby
    waits a whole ``lease_duration_s`` after it last saw the record change, so we
    stop acting before anyone else may start. Each term of leadership has an
    ``epoch``; work decided in one term carries it, and ``valid(epoch)`` refuses
    it once that term is over, even if a later term has begun.
    """

    def __init__(
        self,
        kube: LeaseStore,
        cfg: LeaseConfig,
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        self.kube = kube
        self.cfg = cfg
        self.on_change = on_change
        """Called on the event loop with True/False when leadership starts/ends."""
        self.transitions = 0
        self._observed: tuple[str, str] | None = None
        self._observed_at = 0.0
        self._lock = threading.Lock()
        self._leading = False
        self._epoch = 0
        self._renewed_at = -1e18  # monotonic start of the last successful attempt
        self._stop = threading.Event()

    # -- state, safe from any thread -------------------------------------------
    @property
    def epoch(self) -> int:
        return self._epoch

    def _fresh(self, now: float) -> bool:
        return now - self._renewed_at < self.cfg.renew_deadline_s

    @property
    def is_leader(self) -> bool:
        """True while we hold the Lease and the last renewal is recent enough."""
        with self._lock:
            return self._leading and self._fresh(time.monotonic())

    def valid(self, epoch: int) -> bool:
        """Whether work decided in term ``epoch`` may still be written."""
        with self._lock:
            return self._leading and self._epoch == epoch and self._fresh(time.monotonic())

    def check(self, epoch: int) -> None:
        """Raise ``Fenced`` unless ``valid(epoch)``: call right before a write."""
        if not self.valid(epoch):
            raise Fenced(f"leadership term {epoch} of lease {self.cfg.name} is over")

    # -- the Lease --------------------------------------------------------------
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

    # -- the campaign thread ------------------------------------------------------
    def _campaign(self, notify: Callable[[], None]) -> None:
        name_os_thread()
        cfg = self.cfg
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                ok = self.try_acquire_or_renew()
            except Exception as exc:
                log.warning("lease %s/%s: %s", cfg.namespace, cfg.name, exc)
                ok = False
            changed = False
            with self._lock:
                if ok and not self._stop.is_set():
                    if not (self._leading and self._fresh(time.monotonic())):
                        # a new term: earlier decisions must not be written in it
                        self._epoch += 1
                        self._leading = True
                        changed = True
                    self._renewed_at = started
                elif self._leading and not self._fresh(time.monotonic()):
                    self._leading = False
                    changed = True
            if changed:
                notify()
            self._stop.wait(cfg.retry_period_s)

    async def run(self, lead: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Forever: run ``lead`` while we are the leader, cancel it when we are not.

        An error raised by ``lead`` is logged and re-raised (after the Lease is
        released): a leader whose work crashed must not keep the Lease, and the
        process's supervisor turns /healthz red.
        """
        cfg = self.cfg
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()
        thread = threading.Thread(
            target=self._campaign,
            args=(lambda: loop.call_soon_threadsafe(wake.set),),
            name=f"lease-{cfg.name}",
            daemon=True,
        )
        self._stop.clear()
        thread.start()
        task: asyncio.Task[None] | None = None
        try:
            while True:
                # the thread wakes us on a change; the timeout catches a term that
                # ran out while the thread was stuck in a hung call. asyncio.timeout,
                # not wait_for: on 3.11 wait_for can swallow a cancel that arrives as
                # the event is set, and this loop would then never end.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(cfg.retry_period_s):
                        await wake.wait()
                wake.clear()
                leading = self.is_leader
                if leading and task is None:
                    self.transitions += 1
                    log.info(
                        "became leader (lease %s/%s as %s, term %d)",
                        cfg.namespace,
                        cfg.name,
                        cfg.identity,
                        self._epoch,
                    )
                    self._changed(True)
                    task = asyncio.create_task(lead(), name=f"lead-{cfg.name}")
                    task.add_done_callback(lambda _t: wake.set())
                elif task is not None and (not leading or task.done()):
                    if not leading:
                        log.error(
                            "could not renew lease %s/%s within %.0fs; stopped acting",
                            cfg.namespace,
                            cfg.name,
                            cfg.renew_deadline_s,
                        )
                    done, task = task, None
                    self._changed(False)
                    await _finish(done)
        finally:
            self._stop.set()
            if task is not None:
                self._changed(False)
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            with self._lock:
                held, self._leading = self._leading, False
            if held:
                try:
                    await asyncio.to_thread(self.release)
                    log.info("released lease %s/%s", cfg.namespace, cfg.name)
                except Exception as exc:
                    log.warning("could not release lease: %s", exc)

    def _changed(self, leading: bool) -> None:
        if self.on_change is not None:
            self.on_change(leading)


async def _finish(task: asyncio.Task[None]) -> None:
    """Stop a lead task; re-raise what it died of (never swallow a crash)."""
    if not task.done():
        task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        if task.cancelled():
            return
        raise
    except Exception:
        log.exception("the leader's work failed")
        raise
    else:
        raise RuntimeError("the leader's work returned; it must run until cancelled")
