"""The e2e sampler fails when it cannot sample (it used to swallow every error,
so "no partial gang" passed with zero samples)."""

from __future__ import annotations

import time

import pytest

from tests.e2e.waits import Sampler


def test_a_sampler_that_cannot_sample_fails() -> None:
    def broken() -> int:
        raise ConnectionError("apiserver down")

    s = Sampler(broken, interval=0.001, max_failures=5)
    time.sleep(0.1)
    with pytest.raises(AssertionError, match="could not sample"):
        s.close()


def test_too_few_samples_fail_and_counts_are_kept() -> None:
    s = Sampler(lambda: 3, interval=0.001, min_samples=10_000)
    time.sleep(0.05)
    with pytest.raises(AssertionError, match="samples taken"):
        s.close(patience=0.05)
    ok = Sampler(lambda: 2, interval=0.001, min_samples=3)
    time.sleep(0.05)
    seen = ok.close()
    # too few so far: close() keeps looking until min_samples are in
    slow = Sampler(lambda: 1, interval=0.05, min_samples=8)
    assert len(slow.close()) >= 8
    assert len(seen) >= 3 and set(seen) == {2}
    assert ok.partial_runs(4) == len(seen) - 1
