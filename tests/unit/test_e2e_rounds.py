"""bench/e2e.py over several rounds: each round's ratio is against its own stock
phase, and a goal is called met or not only when the rounds' 95 % interval says so."""

from __future__ import annotations

import math

import pytest

from bench.e2e import (
    _ratio,
    _said_vs_volcano,
    against_volcano,
    goal_verdict,
    report_shapes,
    shape_rounds,
    summarise,
)
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
    # a mean on the goal: no count of rounds on this machine would separate them
    assert goal_verdict(1.002, 0.21, 1.0, 3) == (
        "cannot tell from 3 rounds (the mean is within 0.002 of the goal: rounds will not tell)"
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


def _phase(pods_per_s: float, p99: float = 1.0) -> dict[str, float]:
    return {"pods_per_s": pods_per_s, "job_all_bound_p50_s": p99 / 2, "job_all_bound_p99_s": p99}


def _shape_round(stock: float, gangs: float, plain: float, p99: float) -> dict[str, object]:
    return {
        "shape": "single", "jobs": 50, "size": 1,
        "baseline": _phase(stock), "extender_no_gang": _phase(plain), "gangs": _phase(gangs, p99),
        KEY: gangs / stock, "extender_vs_stock_pods_per_s_ratio": plain / stock,
    }  # fmt: skip


def test_a_shape_over_rounds_gives_medians_intervals_and_every_round(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--shapes with --rounds: each round's ratio against its own stock phase, the
    median as the shape's figure, and the same interval and verdict as the default
    phases get; one round stays as it was."""
    rows = [_shape_round(100, 60, 95, 0.5), _shape_round(120, 78, 120, 0.7),
            _shape_round(80, 52, 76, 0.6)]  # fmt: skip
    one = shape_rounds(rows[:1])
    assert one is rows[0] and "rounds" not in one
    sh = shape_rounds(rows)
    assert (sh["shape"], sh["jobs"], sh["size"]) == ("single", 50, 1)
    assert sh["rounds"] == rows
    assert sh[KEY + "_by_round"] == pytest.approx([0.60, 0.65, 0.65])
    assert sh[KEY] == pytest.approx(0.65)
    assert sh[KEY + "_mean"] == pytest.approx(0.6333, abs=1e-4)
    # sd 0.02887, t(2 dof) 4.303: 4.303 * 0.02887 / sqrt(3)
    assert sh[KEY + "_ci95"] == pytest.approx(0.0717, abs=1e-4)
    assert sh["extender_vs_stock_pods_per_s_ratio_by_round"] == pytest.approx([0.95, 1.0, 0.95])
    vc = {"mode": "volcano", "shapes": [{"shape": "single", KEY: 0.5, "gangs": _phase(0, 2.0)}]}
    # against Volcano: the median ratio, and the median of the rounds' job p99
    c = against_volcano([{"mode": "framework", "shapes": [sh]}, vc])["framework"]["single"]
    assert c["gang_ratio_vs_volcano"] == pytest.approx(1.3)
    assert c["job_all_bound_p99_s"] == pytest.approx(0.6)
    report_shapes([{"mode": "framework", "shapes": [sh]}], 500)
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[1] for line in lines[1:10]] == ["single/1"] * 3 + ["single/2"] * 3 + [
        "single/3"
    ] * 3
    # plain: mean 0.967, sd 0.0289; four rounds: t(3 dof) 3.182 * 0.0289 / 2 = 0.046,
    # under the gap of 0.067 to the goal (three: 0.072, over it)
    assert lines[10] == (
        "framework single: gang pods/s vs stock 0.65 median of 3 rounds (0.60 / 0.65 / 0.65); "
        "mean 0.63 ± 0.07 (95 %), goal >= 1: not met; plain pods through our verbs 0.95 "
        "median of 3 rounds (0.95 / 1.00 / 0.95); mean 0.97 ± 0.07 (95 %), goal >= 0.9: "
        "cannot tell from 3 rounds (~4 would tell 0.97 from 0.9)"
    )
    assert lines[11] == "framework: worst gang pods/s vs stock over the shapes 0.65 (goal >= 1)"
