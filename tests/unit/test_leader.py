"""Lease election: one leader, fencing by time and term, crashes not swallowed.

A shared in-memory Lease store stands in for the API server's optimistic
concurrency (resourceVersion); each elector reaches it through a link that a
test can cut (calls fail) or stall (calls hang), as a partitioned or slow API
server would. Durations are short (seconds) so the tests run quickly.
"""

from __future__ import annotations

import asyncio
import copy
import threading
import time
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from pyextender.api.leader import Fenced, LeaderElector, LeaseConfig


class Store:
    """One Lease, with resourceVersion checks like the API server's."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.rv = 0
        self.lock = threading.Lock()


class Link:
    """One elector's path to the store; ``cut`` fails calls, ``stall`` hangs them."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.cut = False
        self.stall = threading.Event()
        self.calls = 0

    def _enter(self) -> None:
        self.calls += 1
        while self.stall.is_set():
            time.sleep(0.01)
        if self.cut:
            raise ConnectionError("link cut")

    def read_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        self._enter()
        with self.store.lock:
            return copy.deepcopy(self.store.lease)

    def create_lease(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        self._enter()
        with self.store.lock:
            if self.store.lease is not None:
                raise ApiException(status=409, reason="AlreadyExists")
            self.store.rv += 1
            body = copy.deepcopy(body)
            body["metadata"]["resourceVersion"] = str(self.store.rv)
            self.store.lease = body
            return copy.deepcopy(body)

    def replace_lease(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        self._enter()
        with self.store.lock:
            assert self.store.lease is not None
            if (
                body["metadata"].get("resourceVersion")
                != self.store.lease["metadata"]["resourceVersion"]
            ):
                raise ApiException(status=409, reason="Conflict")
            self.store.rv += 1
            body = copy.deepcopy(body)
            body["metadata"]["resourceVersion"] = str(self.store.rv)
            self.store.lease = body
            return copy.deepcopy(body)


FAST = {"lease_duration_s": 1.5, "renew_deadline_s": 1.0, "retry_period_s": 0.1}


def _elector(link: Link, me: str, changes: list[bool] | None = None) -> LeaderElector:
    cfg = LeaseConfig("ns", "lease", me, **FAST)
    return LeaderElector(link, cfg, on_change=None if changes is None else changes.append)


async def _until(cond: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


def test_one_leader_runs_its_work_and_releases_on_stop() -> None:
    async def main() -> None:
        store = Store()
        changes: list[bool] = []
        el = _elector(Link(store), "a", changes)
        started = asyncio.Event()

        async def lead() -> None:
            started.set()
            await asyncio.sleep(3600)

        task = asyncio.create_task(el.run(lead))
        await asyncio.wait_for(started.wait(), 5)
        assert el.is_leader and el.epoch == 1 and el.valid(1)
        el.check(1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert changes == [True, False]
        assert store.lease is not None and store.lease["spec"]["holderIdentity"] == ""
        assert not el.valid(1)

    asyncio.run(main())


def test_a_stalled_renewal_fences_by_time_alone() -> None:
    """The campaign thread hangs in a call; validity still ends at the renew deadline,
    and the lead task is cancelled, before a standby could take the Lease."""

    async def main() -> None:
        store = Store()
        link = Link(store)
        el = _elector(link, "a")
        cancelled = asyncio.Event()

        async def lead() -> None:
            try:
                await asyncio.sleep(3600)
            finally:
                cancelled.set()

        task = asyncio.create_task(el.run(lead))
        await _until(lambda: el.is_leader)
        epoch = el.epoch
        link.stall.set()
        stalled_at = time.monotonic()
        await _until(lambda: not el.valid(epoch), timeout=3)
        fenced_after = time.monotonic() - stalled_at
        # within the renew deadline (plus one retry period), well inside the lease
        assert fenced_after < FAST["renew_deadline_s"] + 2 * FAST["retry_period_s"]
        with pytest.raises(Fenced):
            el.check(epoch)
        await asyncio.wait_for(cancelled.wait(), 3)
        link.stall.clear()
        # the link comes back: a new term, and work of the old one stays fenced
        await _until(lambda: el.is_leader, timeout=5)
        assert el.epoch == epoch + 1 and not el.valid(epoch) and el.valid(epoch + 1)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(main())


def test_cut_leader_stops_before_the_standby_starts() -> None:
    async def main() -> None:
        store = Store()
        link_a, link_b = Link(store), Link(store)
        a, b = _elector(link_a, "a"), _elector(link_b, "b")
        log: list[tuple[str, str, float]] = []

        def lead(me: str) -> Any:
            async def work() -> None:
                log.append((me, "start", time.monotonic()))
                try:
                    await asyncio.sleep(3600)
                finally:
                    log.append((me, "stop", time.monotonic()))

            return work

        ta = asyncio.create_task(a.run(lead("a")))
        await _until(lambda: a.is_leader)
        tb = asyncio.create_task(b.run(lead("b")))
        await asyncio.sleep(1.0)
        assert a.is_leader and not b.is_leader, "two leaders"
        a_epoch = a.epoch
        link_a.cut = True
        cut_at = time.monotonic()
        await _until(lambda: b.is_leader, timeout=6)
        b_started = time.monotonic()
        assert not a.valid(a_epoch)
        a_stops = [t for who, what, t in log if who == "a" and what == "stop"]
        assert a_stops and a_stops[0] < b_started, f"a still acted when b began: {log}"
        # b waited a whole lease duration after a's last renewal
        assert b_started - cut_at >= FAST["lease_duration_s"] - FAST["retry_period_s"]
        for t in (ta, tb):
            t.cancel()
        await asyncio.gather(ta, tb, return_exceptions=True)

    asyncio.run(main())


def test_a_crash_in_the_leaders_work_is_raised_not_swallowed() -> None:
    async def main() -> None:
        store = Store()
        el = _elector(Link(store), "a")

        async def lead() -> None:
            await asyncio.sleep(0.05)
            raise ValueError("boom")

        with pytest.raises(ValueError, match="boom"):
            await asyncio.wait_for(el.run(lead), 5)
        # the Lease is released so a standby takes over at once
        assert store.lease is not None and store.lease["spec"]["holderIdentity"] == ""

    asyncio.run(main())


def test_cancel_always_ends_the_campaign() -> None:
    """Cancelling ``run`` at any moment ends it (asyncio.wait_for on 3.11 could swallow a
    cancel that arrived as its wait finished, and the campaign loop then never ended)."""

    async def main() -> None:
        store = Store()
        fast = {"lease_duration_s": 0.05, "renew_deadline_s": 0.03, "retry_period_s": 0.001}
        hung = 0
        for i in range(300):
            el = LeaderElector(Link(store), LeaseConfig("ns", "lease", f"r{i}", **fast))

            async def lead() -> None:
                await asyncio.sleep(3600)

            task = asyncio.create_task(el.run(lead))
            await asyncio.sleep(0.0005 * (i % 20))
            task.cancel()
            done, _ = await asyncio.wait({task}, timeout=2.0)
            if not done:
                hung += 1
                el._stop.set()
        assert hung == 0, f"{hung} of 300 cancelled campaigns kept running"

    asyncio.run(main())
