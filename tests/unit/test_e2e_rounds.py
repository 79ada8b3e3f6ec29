"""bench/e2e.py over several rounds: each round's ratio is against its own stock
phase, and a goal is called met or not only when the rounds' 95 % interval says so."""

from __future__ import annotations

import math

import pytest

from bench.e2e import _ratio, goal_verdict, summarise
from pyextender.simulate.runs import interval95

KEY = "gang_vs_stock_pods_per_s_ratio"


def test_interval_of_three_rounds() -> None:
    mean, half = interval95([0.84, 0.78, 0.81])
    assert mean == pytest.approx(0.81)
    # sd 0.03, t(2 dof) 4.303: 4.303 * 0.03 / sqrt(3)
    assert half == pytest.approx(0.0745, abs=1e-4)
    assert math.isnan(interval95([0.9])[1])


def test_a_goal_is_called_only_when_the_interval_clears_it() -> None:
    assert goal_verdict(1.10, 0.05, 1.0, 3) == "met"
    assert goal_verdict(0.81, 0.07, 1.0, 3) == "not met"
    # sd behind the half-width: 0.10 * sqrt(3) / 4.303 = 0.0403; five rounds bring the
    # half-width to 2.776 * 0.0403 / sqrt(5) = 0.04997, under the gap of 0.05 (four: 0.064)
    assert (
        goal_verdict(0.95, 0.10, 1.0, 3) == "cannot tell from 3 rounds (~5 would tell 0.95 from 1)"
    )


def test_rounds_are_summarised_with_their_interval() -> None:
    rounds = [{KEY: r} for r in (0.84, 0.78, 0.81)]
    res = summarise("framework", rounds)
    assert res[KEY] == pytest.approx(0.81)  # the median stays the headline
    assert res[KEY + "_by_round"] == [0.84, 0.78, 0.81]
    assert res[KEY + "_ci95"] == pytest.approx(0.0745, abs=1e-4)
    line = _ratio(res, KEY, 1.0)
    assert line == (
        "0.81 median of 3 rounds (0.84 / 0.78 / 0.81); mean 0.81 ± 0.07 (95 %), goal >= 1: not met"
    )
    # wide spread: three rounds cannot say
    wide = summarise("extender", [{KEY: r} for r in (0.95, 0.81, 0.85)])
    assert "goal >= 0.9: cannot tell from 3 rounds (~" in _ratio(wide, KEY, 0.9)
