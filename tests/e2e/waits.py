"""Waiting on what the system shows, instead of sleeping and hoping.

"Nothing happened" is only evidence when the system had its chance to act:
``cycles_pass`` waits until the sidecar has run N more scheduling cycles (each
one a chance to admit, lift a gate or evict), and ``Sampler`` watches a count
in the background and fails loudly when it cannot look.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from tests.e2e.kube import metrics

CYCLES = 'pyextender_action_duration_seconds_count{action="cycle"}'


def cycles(url: str) -> float:
    """Scheduling cycles the sidecar (the Lease holder) has completed."""
    return metrics(url).get(CYCLES, 0.0)


def cycles_pass(url: str, n: int = 3, timeout: float = 60.0) -> None:
    """Return once the sidecar has completed ``n`` more cycles than now."""
    start = cycles(url)
    deadline = time.monotonic() + timeout
    while cycles(url) < start + n:
        if time.monotonic() > deadline:
            raise AssertionError(f"the sidecar ran fewer than {n} cycles in {timeout:.0f}s")
        time.sleep(0.1)


def barrier_waiting(url: str) -> float:
    """Gang members the sidecar holds in its bind verb right now."""
    return metrics(url).get("pyextender_gang_barrier_waiting", 0.0)


class Sampler:
    """Samples a count every ``interval`` seconds in a thread.

    A sample that fails (the API server did not answer) is counted; more than
    ``max_failures`` in a row, or fewer than ``min_samples`` in all, fails the
    test at ``close()``: a sampler that could not look proves nothing.
    """

    def __init__(
        self,
        count: Callable[[], int],
        interval: float = 0.1,
        max_failures: int = 20,
        min_samples: int = 5,
    ) -> None:
        self.count = count
        self.interval = interval
        self.max_failures = max_failures
        self.min_samples = min_samples
        self.seen: list[int] = []
        self.failures = 0
        self.worst_run = 0
        self.last_error = ""
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        run = 0
        while not self.stop.is_set():
            try:
                self.seen.append(self.count())
                run = 0
            except Exception as exc:
                self.failures += 1
                run += 1
                self.worst_run = max(self.worst_run, run)
                self.last_error = f"{type(exc).__name__}: {exc}"
            time.sleep(self.interval)

    def partial_runs(self, size: int) -> int:
        """Pairs of consecutive samples both strictly between 0 and size: a partial gang
        that lasted over one interval (one sample may catch the binds of a burst)."""
        return sum(
            1
            for a, b in zip(self.seen, self.seen[1:], strict=False)
            if 0 < a < size and 0 < b < size
        )

    def close(self, patience: float = 30.0) -> list[int]:
        # On a loaded machine one sample (an API list) can take a second; keep looking
        # until min_samples are in (up to ``patience`` s) rather than judge on too few.
        # Later samples still test the claim: the count must hold at every sample.
        deadline = time.monotonic() + patience
        while len(self.seen) < self.min_samples and time.monotonic() < deadline:
            if not self.thread.is_alive() or self.worst_run > self.max_failures:
                break
            time.sleep(self.interval)
        self.stop.set()
        self.thread.join(5)
        assert self.worst_run <= self.max_failures, (
            f"the sampler could not sample {self.worst_run} times in a row "
            f"(last error: {self.last_error})"
        )
        assert len(self.seen) >= self.min_samples, (
            f"only {len(self.seen)} samples taken ({self.failures} failed: {self.last_error})"
        )
        return self.seen
