"""The scheduling cycle's thread gives way to filter and prioritize.

The cycle (SchedulerLoop.decide) runs on its own thread over a snapshot, but its
session build is Python: it holds the GIL, and a verb that arrives meanwhile gets
the interpreter only in turns. Worse, a verb gives the GIL up at every large numpy
operation and socket write, and each time waits a whole switch interval to get it
back: at 10,000 nodes / 100,000 pods, where a cycle is ~1 s of Python, the verbs
served 396 filter + prioritize pairs in 15 s against 1,888 with no cycles
(bench/memory.py).

kube-scheduler waits on every verb, so the verbs come first. They count themselves
in and out (``enter`` / ``leave``); between small units of work the cycle calls
``pause``, which, while a verb is in flight, sleeps in short steps (each releases
the GIL) until none is. The cycle is never starved: one pause lasts at most
``max_wait_s``, and within one cycle the pauses add up to at most ``share`` times
the time the cycle has worked (1.0: it runs at least at half speed).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

POLL_S = 0.0001
"""Sleep step while a verb is in flight (s); each step releases the GIL."""
MAX_WAIT_S = 0.005
"""Longest single pause (s): filter or prioritize takes ~1 ms at 5,000 nodes."""
SHARE = 1.0
"""Pauses within one cycle stay below this multiple of the cycle's own work time."""


class Courtesy:
    """Verbs in flight (any thread) and the cycle thread's pauses for them."""

    def __init__(
        self,
        max_wait_s: float = MAX_WAIT_S,
        share: float = SHARE,
        poll_s: float = POLL_S,
        clock: Callable[[], float] = time.perf_counter,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.max_wait_s = max_wait_s
        self.share = share
        self.poll_s = poll_s
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._in_flight = 0
        self._started = clock()
        self._paused = 0.0
        self.paused_total_s = 0.0
        """Seconds the cycle thread has given way since start (metrics, tests)."""

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def enter(self) -> None:
        """A verb starts (event loop or gRPC thread)."""
        with self._lock:
            self._in_flight += 1

    def leave(self) -> None:
        """That verb has replied (or failed)."""
        with self._lock:
            self._in_flight -= 1

    @contextmanager
    def serving(self) -> Iterator[None]:
        """``enter`` and ``leave`` around a verb's work."""
        self.enter()
        try:
            yield
        finally:
            self.leave()

    def start_cycle(self) -> None:
        """On the cycle thread as a cycle begins: its pause allowance starts at zero."""
        self._started = self._clock()
        self._paused = 0.0

    def pause(self) -> None:
        """On the cycle thread, between units of work: give way to verbs in flight."""
        if not self._in_flight:
            return
        start = self._clock()
        if self._paused >= self.share * (start - self._started - self._paused):
            return  # this cycle has given way as much as it may
        now = start
        until = start + self.max_wait_s
        # one step may oversleep (on a busy machine ~100 µs asked were up to 7 ms)
        while self._in_flight and now < until:
            self._sleep(self.poll_s)
            now = self._clock()
        self._paused += now - start
        self.paused_total_s += now - start
