"""``pyextender simulate`` plumbing: pod-list folders, run records, summaries, the table."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from pyextender.simulate.cli import parse_seeds, pod_lists
from pyextender.simulate.protocol import COLUMNS, Curves
from pyextender.simulate.report import compare_to_fgd
from pyextender.simulate.runs import (
    Run,
    load_run,
    paired,
    samples_to_tell,
    save_run,
    summarise,
    t975,
    verdict,
    workload_name,
)
from pyextender.simulate.trace import TraceError


def _run(policy: str, seed: int, alloc: float) -> Run:
    curve = np.full(COLUMNS, alloc)
    curve[0] = np.nan
    return Run("gpushare40", policy, seed, 10, 9, 1.5, Curves(curve, curve / 10, curve / 2))


def test_a_folder_stands_for_its_pod_lists(tmp_path: Path) -> None:
    for name in ("openb_pod_list_b.csv", "openb_pod_list_a.csv", "openb_node_list_x.csv"):
        (tmp_path / name).write_text("")
    files = pod_lists([tmp_path, Path("/x/other.csv")])
    assert [f.name for f in files] == [
        "openb_pod_list_a.csv",
        "openb_pod_list_b.csv",
        "other.csv",
    ]
    assert [workload_name(f) for f in files] == ["a", "b", "other"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(TraceError):
        pod_lists([tmp_path / "empty"])


def test_seeds() -> None:
    assert parse_seeds("42-44,50") == [42, 43, 44, 50]


def test_run_records_round_trip_and_are_reused(tmp_path: Path) -> None:
    run = _run("fgd", 42, 93.0)
    save_run(tmp_path, run)
    back = load_run(tmp_path, "gpushare40", "fgd", 42)
    assert back is not None
    assert (back.policy, back.seed, back.placed) == ("fgd", 42, 9)
    assert np.isnan(back.curves.alloc[0]) and back.curves.alloc[130] == 93.0
    assert load_run(tmp_path, "gpushare40", "fgd", 43) is None


def test_summary_and_verdict_against_fgd() -> None:
    ours = summarise([_run("pyextender", 42, 94.0), _run("pyextender", 43, 94.2)])
    fgd = summarise([_run("fgd", 42, 94.0), _run("fgd", 43, 94.0)])
    assert ours["alloc_at_100"] == pytest.approx(94.1)
    assert ours["alloc_at_100_sd"] == pytest.approx(0.141, abs=1e-3)
    (line,) = compare_to_fgd({"gpushare40": {"pyextender": ours, "fgd": fgd}})
    assert "BELOW" in line and "vs our FGD replay +0.10 / +0.10 pp (means" in line


def test_ours_against_fgd_seed_by_seed_with_a_95_percent_interval() -> None:
    # the two policies' spread over seeds (1 pp) is far larger than their difference
    # on each seed (0.1 ± 0.05): only a paired comparison sees who is ahead
    base = [93.0, 94.0, 95.0, 93.5]
    step = [0.10, 0.15, 0.05, 0.10]
    pairs = enumerate(zip(base, step, strict=True))
    ours = [_run("pyextender", 42 + i, b + d) for i, (b, d) in pairs]
    fgd = [_run("fgd", 42 + i, b) for i, b in enumerate(base)]
    fgd.append(_run("fgd", 99, 50.0))  # a seed ours did not run: not compared
    row = paired(ours, fgd)
    assert row["seeds"] == 4
    assert row["alloc_at_100"] == pytest.approx(0.1, abs=1e-3)
    # sd of the differences 0.0408; t(3 dof) 3.182; half-width 3.182 * 0.0408 / 2
    assert row["alloc_at_100_ci95"] == pytest.approx(0.065, abs=1e-3)
    assert row["alloc_at_130_ahead"] == 4
    assert verdict(row["alloc_at_100"], row["alloc_at_100_ci95"]) == "ahead"
    # the same differences the other way round are behind; half of them would be noise
    back = paired(fgd[:4], ours)
    assert verdict(back["alloc_at_130"], back["alloc_at_130_ci95"]) == "behind"
    assert back["alloc_at_130_ahead"] == 0
    mixed = paired([_run("pyextender", 42, 93.1), _run("pyextender", 43, 93.9)], fgd)
    assert mixed["alloc_at_100"] == pytest.approx(0.0, abs=1e-3)  # +0.1 and -0.1
    assert mixed["alloc_at_100_ahead"] == 1
    assert verdict(mixed["alloc_at_100"], mixed["alloc_at_100_ci95"]) == "within noise"
    one = paired(ours[:1], fgd)
    assert one["seeds"] == 1 and math.isnan(one["alloc_at_100_ci95"])
    assert verdict(one["alloc_at_100"], one["alloc_at_100_ci95"]) == "one seed"
    summary = {"gpushare40": {"pyextender": summarise(ours), "fgd": summarise(fgd[:4])}}
    (line,) = compare_to_fgd(summary, {"gpushare40": row})
    assert "vs our FGD replay +0.10 ± 0.07 / +0.10 ± 0.07 pp, ahead on 4/4 and 4/4 seeds" in line
    assert line.endswith("ahead / ahead")


def test_how_many_seeds_would_tell_a_difference_within_noise() -> None:
    # sd 0.2 pp over 10 seeds: half-width t(9 dof) 2.262 * 0.2 / sqrt(10) = 0.143
    half = 2.262 * 0.2 / math.sqrt(10)
    m = samples_to_tell(0.05, half, 10)
    assert m is not None
    # the least m whose interval clears 0.05: t(m) * 0.2 / sqrt(m) < 0.05 <= at m - 1
    assert t975(m) * 0.2 / math.sqrt(m) < 0.05 <= t975(m - 1) * 0.2 / math.sqrt(m - 1)
    assert 60 <= m <= 70  # (1.96 * 0.2 / 0.05)^2 = 61.5, plus t's margin
    assert samples_to_tell(-0.05, half, 10) == m  # the sign does not matter
    assert samples_to_tell(0.0, half, 10) is None  # nothing to tell
    assert samples_to_tell(0.05, math.nan, 1) is None  # no spread to go by
    assert samples_to_tell(1e-9, half, 10) == 10_000  # capped

    # the report says so for a comparison within noise, and only then
    base = [93.0, 94.0, 95.0, 93.5]
    ours = [_run("pyextender", 42 + i, b + d) for i, (b, d) in
            enumerate(zip(base, [0.3, -0.2, 0.1, 0.0], strict=True))]  # fmt: skip
    fgd = [_run("fgd", 42 + i, b) for i, b in enumerate(base)]
    row = paired(ours, fgd)
    assert verdict(row["alloc_at_100"], row["alloc_at_100_ci95"]) == "within noise"
    summary = {"gpushare40": {"pyextender": summarise(ours), "fgd": summarise(fgd)}}
    (line,) = compare_to_fgd(summary, {"gpushare40": row})
    want = samples_to_tell(row["alloc_at_100"], row["alloc_at_100_ci95"], 4)
    assert line.endswith(
        f"within noise / within noise (~{want} seeds would tell a difference this size)"
    )
    clear = paired([_run("pyextender", 42 + i, b + 0.1) for i, b in enumerate(base)], fgd)
    (line,) = compare_to_fgd(summary, {"gpushare40": clear})
    assert "would tell" not in line


def test_ours_against_fgd_learning_online_on_a_line_of_its_own() -> None:
    base = [93.0, 94.0, 95.0, 93.5]
    ours = [_run("pyextender", 42 + i, b + 0.1) for i, b in enumerate(base)]
    fgd = [_run("fgd", 42 + i, b + 0.2) for i, b in enumerate(base)]
    online = [_run("fgd-online", 42 + i, b - 0.1 * (i % 2)) for i, b in enumerate(base)]
    runs = {"pyextender": ours, "fgd": fgd, "fgd-online": online}
    summary = {"gpushare40": {n: summarise(r) for n, r in runs.items()}}
    pairs = {"gpushare40": paired(ours, fgd)}, {"gpushare40": paired(ours, online)}
    (line,) = compare_to_fgd(summary, *pairs)
    first, second, third = line.split("\n")
    assert first.startswith("gpushare40") and "vs paper FGD" in first
    assert "vs our FGD replay -0.10" in second and second.endswith("behind / behind")
    # +0.1, +0.2, +0.1, +0.2: mean 0.15 (sd 0.058, t(3) 3.182: ± 0.09), ahead on every seed
    assert third.strip().startswith("vs fgd-online +0.15 ± 0.09 / +0.15 ± 0.09 pp")
    assert "ahead on 4/4 and 4/4 seeds: ahead / ahead" in third
    # without online runs, no such line
    (line,) = compare_to_fgd(summary, pairs[0])
    assert "fgd-online" not in line


def test_the_diagnostic_told_fgds_classes_is_paired_with_fgd_on_its_own_line() -> None:
    """pyextender-known's claim (our scoring equals FGD's when told the same classes)
    comes from the tool's own seed-by-seed pairing, not from a script of one's own."""
    base = [93.0, 94.0, 95.0, 93.5]
    ours = [_run("pyextender", 42 + i, b + 0.1) for i, b in enumerate(base)]
    fgd = [_run("fgd", 42 + i, b + 0.2) for i, b in enumerate(base)]
    known = [_run("pyextender-known", 42 + i, b + 0.2 - 0.02 * i) for i, b in enumerate(base)]
    runs = {"pyextender": ours, "fgd": fgd, "pyextender-known": known}
    summary = {"default": {n: summarise(r) for n, r in runs.items()}}
    (line,) = compare_to_fgd(summary, {"default": paired(ours, fgd)}, None,
                             {"default": paired(known, fgd)})  # fmt: skip
    _, second, third = line.split("\n")
    assert "vs our FGD replay -0.10" in second
    # 0, -0.02, -0.04, -0.06: mean -0.03, behind on every seed but the first (a tie)
    assert third.strip().startswith("(pyextender-known vs our FGD replay -0.03 ±")
    assert "ahead on 0/4 and 0/4 seeds" in third and third.endswith(")")
    # and not without its runs
    (line,) = compare_to_fgd(summary, {"default": paired(ours, fgd)})
    assert "pyextender-known" not in line


def test_stored_runs_report_ours_and_the_diagnostic_against_fgd(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--stored-only over stored runs: the table's pairing lines and the JSON line's
    seed-by-seed fields, for ours and for pyextender-known, each against FGD."""
    import argparse
    import json
    from dataclasses import replace

    from pyextender.simulate.cli import run
    from pyextender.simulate.trace import default_traces

    base = [93.0, 94.0, 95.0, 93.5]
    for policy, shift in (("pyextender", 0.1), ("fgd", 0.2), ("pyextender-known", 0.25)):
        for i, b in enumerate(base):
            save_run(tmp_path, replace(_run(policy, 42 + i, b + shift), workload="default"))
    args = argparse.Namespace(
        policy=["pyextender", "fgd", "pyextender-known"],
        results=tmp_path,
        stored_only=True,
        pods=[default_traces() / "openb_pod_list_default.csv"],
        nodes=default_traces() / "openb_node_list_gpu_node.csv",
        seeds=[42, 43, 44, 45],
        jobs=1,
        plot=None,
    )
    assert run(args) == 0
    out = capsys.readouterr().out
    assert "vs our FGD replay -0.10 ± 0.00 / -0.10 ± 0.00 pp" in out
    assert "(pyextender-known vs our FGD replay +0.05 ± 0.00 / +0.05 ± 0.00 pp" in out
    summary = json.loads(out.strip().splitlines()[-1])["default"]
    assert summary["pyextender"]["vs_fgd_alloc_at_100"] == -0.1
    assert summary["pyextender-known"]["vs_fgd_alloc_at_100"] == 0.05
    assert "vs_fgd_alloc_at_100" not in summary["fgd"]
