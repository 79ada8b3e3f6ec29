"""``pyextender simulate`` plumbing: pod-list folders, run records, summaries, the table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pyextender.simulate.cli import parse_seeds, pod_lists
from pyextender.simulate.protocol import COLUMNS, Curves
from pyextender.simulate.report import compare_to_fgd
from pyextender.simulate.runs import Run, load_run, save_run, summarise, workload_name
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
    assert "BELOW" in line and "vs our FGD replay +0.10 / +0.10 pp" in line
