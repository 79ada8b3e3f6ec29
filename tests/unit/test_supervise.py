"""Background loops that die are seen: /healthz turns red, the metric counts it;
an informer with no contact for too long makes readiness say so."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from pyextender.api.informer import STALE_AFTER_S, Informer
from pyextender.api.supervise import Supervisor
from tests.unit.test_extender_app import Client


def test_a_crashed_loop_makes_health_fail_and_is_counted() -> None:
    died: list[str] = []

    async def main() -> tuple[bool, str]:
        sup = Supervisor(died.append)

        async def crash() -> None:
            await asyncio.sleep(0.01)
            raise KeyError("gone")

        async def fine() -> None:
            await asyncio.sleep(3600)

        sup.spawn("housekeeping", crash())
        sup.spawn("actions", fine())
        await asyncio.sleep(0.05)
        health = sup.health()
        await sup.stop()
        return health

    ok, why = asyncio.run(main())
    assert not ok and "housekeeping: KeyError" in why
    assert died == ["housekeeping"]


def test_a_loop_that_returns_is_a_failure_and_cancel_is_not() -> None:
    async def main() -> Supervisor:
        sup = Supervisor()

        async def quits() -> None:
            return None

        async def waits() -> None:
            await asyncio.sleep(3600)

        sup.spawn("watcher", quits())
        sup.spawn("once", quits(), forever=False)
        sup.spawn("actions", waits())
        await asyncio.sleep(0.02)
        await sup.stop()  # cancelling on shutdown is not a failure
        return sup

    sup = asyncio.run(main())
    assert set(sup.failures) == {"watcher"}


def test_healthz_answers_500_with_the_reason() -> None:
    c = Client()
    c.app.health = lambda: (False, "housekeeping: KeyError: 'gone'")
    code, text = c.call("/healthz", b"", "GET")
    assert code == 500 and "housekeeping" in text
    c.app.health = None
    assert c.call("/healthz", b"", "GET") == (200, "ok")


def test_informer_reports_staleness() -> None:
    loop = asyncio.new_event_loop()
    try:

        def never(**_: Any) -> Any:
            raise AssertionError("not called")

        inf = Informer("pods", never, loop, lambda items: None, lambda kind, obj: None)
        inf.thread = type("T", (), {"is_alive": lambda self: True})()  # type: ignore[assignment]
        assert "not listed yet" in inf.stale()
        inf.last_contact = time.monotonic()
        assert inf.stale() == ""
        assert "no contact" in inf.stale(now=inf.last_contact + STALE_AFTER_S + 1)
        inf.thread = type("T", (), {"is_alive": lambda self: False})()  # type: ignore[assignment]
        assert "died" in inf.stale()
    finally:
        loop.close()
