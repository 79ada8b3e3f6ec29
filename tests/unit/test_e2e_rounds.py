"""bench/e2e.py over several rounds: each round's ratio is against its own stock
phase, and a goal is called met or not only when the rounds' 95 % interval says so."""

from __future__ import annotations

import math

import pytest

from bench.e2e import _ratio, _said_vs_volcano, against_volcano, goal_verdict, summarise
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


def _gangs(p99: float) -> dict[str, float]:
    return {"job_all_bound_p99_s": p99}


def test_our_modes_are_set_against_volcanos_scheduler_each_on_its_own_stock() -> None:
    ours = summarise(
        "framework",
        [{KEY: 0.9, "gangs": _gangs(1.0)}, {KEY: 1.0, "gangs": _gangs(3.0)}],
    )
    vc = summarise("volcano", [{KEY: 0.6, "gangs": _gangs(4.0)}])
    assert against_volcano([ours]) == {}  # no Volcano run: nothing to say
    vs = against_volcano([ours, vc])
    assert set(vs) == {"framework"}
    c = vs["framework"]
    assert c["gang_ratio_vs_volcano"] == pytest.approx(0.95 / 0.6)  # medians
    assert c["job_all_bound_p99_s"] == pytest.approx(2.0)  # median over the rounds
    assert c["volcano_job_all_bound_p99_s"] == pytest.approx(4.0)
    assert _said_vs_volcano("framework", c) == (
        "framework vs Volcano's scheduler: gang pods/s 1.58x (ratio to stock 0.95 against "
        "0.60), job all-bound p99 2.00s against 4.00s"
    )


def test_shapes_are_set_against_volcano_shape_by_shape() -> None:
    def shape(name: str, ratio: float, p99: float) -> dict[str, object]:
        return {"shape": name, KEY: ratio, "gangs": _gangs(p99)}

    ours = {"mode": "extender", "shapes": [shape("single", 0.5, 0.6), shape("huge", 0.7, 9.0)]}
    failed = {"shape": "huge", "jobs": 1, "size": 1000, "error": "timed out"}
    vc = {"mode": "volcano", "shapes": [shape("single", 0.4, 4.0), failed]}
    vs = against_volcano([ours, vc])
    # a shape Volcano did not finish has nothing to be set against
    assert list(vs["extender"]) == ["single"]
    assert vs["extender"]["single"]["gang_ratio_vs_volcano"] == pytest.approx(1.25)
    assert vs["extender"]["single"]["volcano_job_all_bound_p99_s"] == pytest.approx(4.0)
