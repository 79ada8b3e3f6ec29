"""Controller plumbing: work queue, store ordering, leader election rule, command routing, HTTP."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from controllers.command import route
from controllers.http import HealthServer
from controllers.store import Store
from controllers.workqueue import WorkQueue
from pyextender.api.leader import may_acquire


def test_workqueue_dedups_and_never_runs_a_key_twice_at_once() -> None:
    async def scenario() -> list[str]:
        q = WorkQueue("t")
        q.add("a")
        q.add("a")
        q.add("b")
        first = await q.get()
        q.add(first)  # re-added while processing: waits until done
        second = await q.get()
        assert {first, second} == {"a", "b"}
        q.done(second)
        q.done(first)
        third = await q.get()
        return [first, second, third]

    got = asyncio.run(scenario())
    assert got[2] == got[0]


def test_workqueue_backoff_grows() -> None:
    async def scenario() -> list[float]:
        q = WorkQueue("t")
        delays = [q.retry("k") for _ in range(4)]
        q.forget("k")
        delays.append(q.retry("k"))
        return delays

    d = asyncio.run(scenario())
    assert d[0] < d[1] < d[2] < d[3]
    assert d[4] == d[0]


def obj(name: str, rv: int, uid: str = "u", **extra: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": str(rv), "uid": uid},
        **extra,
    }


def test_workqueue_coalesces_adds_within_a_window() -> None:
    """Many coalesced adds of one key in a window: one get, at the window's end; a key
    already queued is not queued again; after the window a new add starts another."""

    async def scenario() -> tuple[list[str], float, list[str]]:
        q = WorkQueue("t")
        loop = asyncio.get_running_loop()
        start = loop.time()
        for _ in range(50):
            q.add_coalesced("default", 0.2)
        q.add("root")
        q.add_coalesced("root", 0.2)  # queued already: nothing more
        first = [await q.get(), await q.get()]
        waited = loop.time() - start
        for key in first:
            q.done(key)
        await asyncio.sleep(0.3)
        assert len(q) == 0  # nothing was left over from the 50
        q.add_coalesced("default", 0.05)
        again = [await asyncio.wait_for(q.get(), 1.0)]
        return first, waited, again

    first, waited, again = asyncio.run(scenario())
    assert first == ["root", "default"]
    assert waited >= 0.2
    assert again == ["default"]


def test_store_ignores_stale_versions_and_echoes() -> None:
    seen: list[tuple[str, Any, Any]] = []
    s = Store("things")
    s.add_index("color", lambda o: [o.get("color", "")])
    s.add_handler(lambda k, old, new: seen.append((k, old and old["color"], new and new["color"])))
    s.replace([obj("a", 5, color="red")])
    s.remember(obj("a", 7, color="blue"))  # our own write
    s.event("MODIFIED", obj("a", 7, color="blue"))  # its echo: dropped
    s.event("MODIFIED", obj("a", 6, color="green"))  # older than what we hold: dropped
    assert [x for x in seen] == [("ns/a", None, "red"), ("ns/a", "red", "blue")]
    assert [o["metadata"]["name"] for o in s.by_index("color", "blue")] == ["a"]
    assert s.by_index("color", "red") == []
    s.event("DELETED", obj("a", 8, uid="other"))  # a previous object of that name
    assert s.get("ns/a") is not None
    s.event("DELETED", obj("a", 8))
    assert s.get("ns/a") is None and s.by_index("color", "blue") == []


def test_store_does_not_resurrect_what_we_deleted() -> None:
    s = Store("things")
    s.replace([obj("a", 1)])
    s.forget("ns/a")  # we deleted it
    s.event("MODIFIED", obj("a", 2))  # an update that was already in flight
    assert s.get("ns/a") is None
    s.event("DELETED", obj("a", 3))
    s.event("ADDED", obj("a", 4, uid="new"))  # a new object of the same name is welcome
    assert s.get("ns/a") is not None


def test_store_keeps_a_deleted_object_gone_when_a_write_reply_comes_late() -> None:
    """The reply of a status patch that was in flight when the object went (a PodGroup
    patched while its job restarts) must not bring it back: the job's next run would
    find the old PodGroup and create its pods ungated, with no PodGroup behind them."""
    s = Store("things")
    s.replace([obj("a", 1)])
    s.forget("ns/a")  # we deleted it
    s.remember(obj("a", 2))  # the reply of our patch, sent before the delete
    assert s.get("ns/a") is None
    s.event("DELETED", obj("a", 3))
    s.remember(obj("a", 2))  # later still: after the watch said it is gone
    assert s.get("ns/a") is None
    s.replace([obj("b", 1)])
    s.event("DELETED", obj("b", 2))  # deleted by someone else
    s.remember(obj("b", 1))
    assert s.get("ns/b") is None
    s.remember(obj("a", 5, uid="next"))  # the next object of the same name is welcome
    assert s.get("ns/a") is not None


def test_store_relist_reports_missed_deletions() -> None:
    gone: list[str] = []
    s = Store("things")
    s.add_handler(lambda k, old, new: gone.append(k) if new is None else None)
    s.replace([obj("a", 1), obj("b", 1)])
    s.replace([obj("b", 2)])
    assert gone == ["ns/a"] and s.synced


@pytest.mark.parametrize(
    ("holder", "observed_at", "now", "want"),
    [
        ("", 0.0, 0.0, True),  # free (released)
        ("me", 0.0, 100.0, True),  # ours: renew
        ("other", 0.0, 10.0, False),  # held and fresh
        ("other", 0.0, 15.5, True),  # not renewed for a full lease duration
    ],
)
def test_may_acquire(holder: str, observed_at: float, now: float, want: bool) -> None:
    assert may_acquire(holder, "me", observed_at, now, 15.0) is want


@pytest.mark.parametrize(
    ("cmd", "want"),
    [
        ({"action": "AbortJob", "target": {"kind": "Job", "name": "j"}}, ("job", "j", "AbortJob")),
        (
            {"action": "CloseQueue", "target": {"kind": "Queue", "name": "q"}},
            ("queue", "q", "CloseQueue"),
        ),
        ({"action": "CloseQueue", "target": {"kind": "Job", "name": "j"}}, None),
        ({"action": "AbortJob", "target": {"kind": "Job"}}, None),
        ({"target": {"kind": "Job", "name": "j"}}, None),
    ],
)
def test_command_route(cmd: dict[str, Any], want: tuple[str, str, str] | None) -> None:
    got = route(cmd)
    if want is None:
        assert isinstance(got, str) and got  # a reason, for the CommandRejected event
    else:
        assert got == want


def test_health_server_routes() -> None:
    ready = [False]
    srv = HealthServer(CollectorRegistry(), lambda: (ready[0], "why"), lambda: None)
    assert srv.respond("GET", "/healthz")[0] == 200
    assert srv.respond("GET", "/readyz")[0] == 503
    ready[0] = True
    assert srv.respond("GET", "/readyz?verbose")[0] == 200
    assert srv.respond("GET", "/metrics")[0] == 200
    assert srv.respond("POST", "/metrics")[0] == 405
    assert srv.respond("GET", "/nope")[0] == 404
