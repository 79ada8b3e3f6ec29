"""The cycle's thread gives way to filter and prioritize in flight, within bounds."""

from __future__ import annotations

import json
import threading
import time

from pyextender.plugins.defaults import load
from pyextender.server.actuator import Actuator
from pyextender.server.courtesy import Courtesy
from pyextender.server.metrics import Metrics
from pyextender.server.scheduler_loop import SchedulerLoop
from tests.unit.batch_fixtures import World
from tests.unit.test_extender_app import Client, _pod


def test_no_verb_in_flight_no_pause() -> None:
    c = Courtesy()
    c.start_cycle()
    c.pause()
    assert c.paused_total_s == 0.0


def test_pause_lasts_until_the_verb_has_replied() -> None:
    pausing = threading.Event()

    def sleep(s: float) -> None:
        pausing.set()  # the cycle is inside pause(), waiting
        time.sleep(s)

    c = Courtesy(max_wait_s=10.0, sleep=sleep)
    c.start_cycle()
    time.sleep(0.02)  # the cycle has worked: it may give way as long
    c.enter()
    left = threading.Event()

    def verb() -> None:
        # the verb replies only once the cycle waits for it (on a busy machine the thread
        # could otherwise finish before pause() is even called, and nothing is tested)
        assert pausing.wait(10.0)
        time.sleep(0.003)
        left.set()
        c.leave()

    threading.Thread(target=verb).start()
    c.pause()
    assert left.is_set() and c.in_flight == 0  # returned once the verb left, not before
    assert c.paused_total_s > 0


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


def test_a_pause_is_bounded_and_a_cycle_is_never_starved() -> None:
    t = FakeTime()
    c = Courtesy(max_wait_s=0.002, share=1.0, poll_s=0.0001, clock=t.clock, sleep=t.sleep)
    c.enter()  # a verb that never replies
    c.start_cycle()
    pauses = []
    for _ in range(100):
        t.now += 0.0005  # a unit of the cycle's work
        before = c.paused_total_s
        c.pause()
        pauses.append(c.paused_total_s - before)
    worked = 100 * 0.0005
    assert c.in_flight == 1
    assert max(pauses) <= 0.002 + 0.0001  # each pause ends within a step of max_wait_s
    assert worked - 0.002 <= c.paused_total_s <= worked + 0.002  # share 1.0: half speed
    assert 0.0 in pauses  # pauses were skipped once the allowance was used


def test_the_cycle_gives_way_and_decides_the_same() -> None:
    w = World(nodes=2, gpus=8)
    for i in range(80):
        w.gang(f"g{i}", 1, gpus=1, phase="Pending")
    cfg = load(None)
    quiet = SchedulerLoop(w.cache, lambda: cfg, Actuator.__new__(Actuator), Metrics())
    busy_courtesy = Courtesy(max_wait_s=0.001)
    busy = SchedulerLoop(
        w.cache, lambda: cfg, Actuator.__new__(Actuator), Metrics(), courtesy=busy_courtesy
    )
    busy_courtesy.enter()  # a verb in flight the whole time
    now = time.time()
    ssn_q, dec_q = quiet.decide(now)
    ssn_b, dec_b = busy.decide(now)
    assert busy_courtesy.paused_total_s > 0 and quiet.courtesy.paused_total_s == 0
    assert set(ssn_q.jobs) == set(ssn_b.jobs)
    assert [j.key for j in dec_q.admit] == [j.key for j in dec_b.admit]


def test_http_filter_and_prioritize_count_as_in_flight_also_when_they_fail() -> None:
    c = Client()
    seen: list[int] = []
    real = c.ext.filter_json

    def filter_json(wire: object) -> bytes:
        seen.append(c.ext.courtesy.in_flight)
        return real(wire)  # type: ignore[arg-type]

    c.ext.filter_json = filter_json  # type: ignore[method-assign]
    body = json.dumps({"Pod": _pod("p", 1), "NodeNames": ["n8"]}).encode()
    assert c.call("/filter", body)[0] == 200
    assert seen == [1] and c.ext.courtesy.in_flight == 0
    assert c.call("/prioritize", b"{not json")[0] == 400
    assert c.call("/filter", b"[1, 2]")[0] == 400
    assert c.ext.courtesy.in_flight == 0
