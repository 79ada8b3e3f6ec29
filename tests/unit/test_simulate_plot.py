"""The replay plot: readable y range, and one PNG per workload."""

from pathlib import Path

import numpy as np

from pyextender.simulate.plot import alloc_ylim, plot_workload
from pyextender.simulate.protocol import Curves
from pyextender.simulate.runs import Run


def _run(policy: str, seed: int, level: float) -> Run:
    x = np.arange(131, dtype=np.float64)
    alloc = np.minimum(x, level)
    ratio = np.minimum(x, 99.0)
    return Run("w", policy, seed, 10, 9, 1.0, Curves(alloc, 100.0 - alloc, ratio))


def test_alloc_range_is_the_policies_not_the_ideal_line() -> None:
    lo, hi = alloc_ylim(88.9, 89.2)
    assert 88.7 < lo < 88.9
    assert 89.2 < hi < 89.5  # 100 % (the ideal line) is out of view


def test_alloc_range_is_padded_when_policies_agree() -> None:
    lo, hi = alloc_ylim(95.0, 95.0)
    assert lo < 95.0 < hi


def test_plot_writes_one_png(tmp_path: Path) -> None:
    runs = {
        "pyextender": [_run("pyextender", s, 89.1 + 0.01 * s) for s in (1, 2)],
        "fgd": [_run("fgd", s, 89.0) for s in (1, 2)],
    }
    out = tmp_path / "w.png"
    plot_workload("w", runs, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
