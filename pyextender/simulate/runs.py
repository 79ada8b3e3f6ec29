"""Replay runs as records: one JSON file per (workload, policy, seed), and their summary.

A run's record keeps the metric curves (columns 0..130, % of cluster GPUs), so
tables and plots can be redrawn, and long experiments resumed, without
replaying again. ``--results DIR`` stores them as ``DIR/<workload>/<policy>-<seed>.json``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from pyextender.simulate.protocol import Curves

F64 = npt.NDArray[np.float64]

POD_LIST_PREFIX = "openb_pod_list_"


def workload_name(pods: Path) -> str:
    """``openb_pod_list_gpushare40.csv`` -> ``gpushare40`` (any other file: its stem)."""
    stem = pods.stem
    return stem[len(POD_LIST_PREFIX) :] if stem.startswith(POD_LIST_PREFIX) else stem


@dataclass(frozen=True, slots=True)
class Run:
    """One replay: a policy on a workload with a seed."""

    workload: str
    policy: str
    seed: int
    pods: int
    placed: int
    seconds: float
    curves: Curves

    def to_json(self) -> str:
        def clean(a: F64) -> list[float | None]:
            return [None if math.isnan(v) else round(float(v), 6) for v in a]

        return json.dumps(
            {
                "workload": self.workload,
                "policy": self.policy,
                "seed": self.seed,
                "pods": self.pods,
                "placed": self.placed,
                "seconds": round(self.seconds, 3),
                "alloc": clean(self.curves.alloc),
                "frag_amount": clean(self.curves.frag_amount),
                "frag_ratio": clean(self.curves.frag_ratio),
            }
        )

    @staticmethod
    def from_json(text: str) -> Run:
        raw = json.loads(text)

        def arr(key: str) -> F64:
            return np.asarray([math.nan if v is None else v for v in raw[key]], dtype=np.float64)

        return Run(
            workload=str(raw["workload"]),
            policy=str(raw["policy"]),
            seed=int(raw["seed"]),
            pods=int(raw["pods"]),
            placed=int(raw["placed"]),
            seconds=float(raw["seconds"]),
            curves=Curves(arr("alloc"), arr("frag_amount"), arr("frag_ratio")),
        )


def run_path(root: Path, workload: str, policy: str, seed: int) -> Path:
    return root / workload / f"{policy}-{seed}.json"


def load_run(root: Path, workload: str, policy: str, seed: int) -> Run | None:
    """A stored run, or None when absent or unreadable (it is then replayed again)."""
    path = run_path(root, workload, policy, seed)
    try:
        return Run.from_json(path.read_text())
    except (OSError, ValueError, KeyError):
        return None


def save_run(root: Path, run: Run) -> None:
    path = run_path(root, run.workload, run.policy, run.seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(run.to_json())
    tmp.replace(path)


# (json key, column, curve) reported per policy
METRICS: tuple[tuple[str, int, str], ...] = (
    ("alloc_at_100", 100, "alloc"),
    ("alloc_at_130", 130, "alloc"),
    ("frag_amount_at_100", 100, "frag_amount"),
    ("frag_ratio_at_80", 80, "frag_ratio"),
    ("frag_ratio_at_100", 100, "frag_ratio"),
)


def mean_sd(values: list[float]) -> tuple[float, float]:
    """Mean and sample sd (ddof 1; 0 for one value), NaN when there is nothing."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.shape[0] == 0 or np.isnan(arr).all():
        return math.nan, math.nan
    sd = float(np.nanstd(arr, ddof=1)) if arr.shape[0] > 1 else 0.0
    return float(np.nanmean(arr)), sd


def summarise(runs: list[Run]) -> dict[str, float]:
    """Mean and sd over seeds of every metric in METRICS (keys ``<name>``, ``<name>_sd``)."""
    row: dict[str, float] = {}
    for key, col, curve in METRICS:
        mean, sd = mean_sd([float(getattr(r.curves, curve)[col]) for r in runs])
        row[key] = round(mean, 3)
        row[f"{key}_sd"] = round(sd, 3)
    row["seeds"] = len(runs)
    return row


T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
         2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
         2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)  # fmt: skip
"""Student's t, two-sided 95 %, for 1..30 degrees of freedom (more: 1.96 is within 4 %)."""


def t975(n: int) -> float:
    """Student's t for a 95 % interval of the mean of ``n`` >= 2 values."""
    return T_975[n - 2] if n - 1 <= len(T_975) else 1.96


def interval95(values: Sequence[float]) -> tuple[float, float]:
    """Mean of ``values`` and the half-width of its 95 % confidence interval
    (Student's t; NaN with fewer than two values)."""
    arr = np.asarray(values, dtype=np.float64)
    n = arr.shape[0]
    if n == 0:
        return math.nan, math.nan
    if n < 2:
        return float(arr.mean()), math.nan
    return float(arr.mean()), t975(n) * float(arr.std(ddof=1)) / math.sqrt(n)


def samples_to_tell(gap: float, half: float, n: int, limit: int = 10_000) -> int | None:
    """Samples an interval with this one's spread needs to tell a ``gap`` from nothing:
    the least m whose 95 % half-width, t(m)·sd/√m with the sd behind ``half`` over
    ``n`` samples, is below |gap|. None without a gap or a spread to go by; ``limit``
    caps the answer (a gap far inside the noise)."""
    if n < 2 or math.isnan(half) or math.isnan(gap) or gap == 0:
        return None
    sd = half * math.sqrt(n) / t975(n)
    if sd == 0:
        return n
    m = max(2, math.ceil((1.96 * sd / abs(gap)) ** 2))
    while m < limit and t975(m) * sd / math.sqrt(m) >= abs(gap):
        m += 1
    return min(m, limit)


def paired(ours: list[Run], base: list[Run]) -> dict[str, float]:
    """Ours minus ``base`` seed by seed (the same arrivals, so the workload's own
    seed-to-seed spread cancels) at alloc@100 and @130, on the seeds both ran:
    the mean difference (pp), the half-width of its 95 % confidence interval
    (Student's t; NaN with one seed) and the seeds on which ours is ahead."""
    by_seed = {r.seed: r for r in base}
    pairs = [(r, by_seed[r.seed]) for r in ours if r.seed in by_seed]
    row: dict[str, float] = {"seeds": len(pairs)}
    for key, col, curve in METRICS[:2]:
        diffs = [
            float(getattr(a.curves, curve)[col]) - float(getattr(b.curves, curve)[col])
            for a, b in pairs
        ]
        mean, half = interval95(diffs)
        row[key] = round(mean, 3)
        row[f"{key}_ci95"] = round(half, 3)
        row[f"{key}_ahead"] = sum(d > 0 for d in diffs)
    return row


def verdict(diff: float, half: float) -> str:
    """The 95 % interval ``diff ± half`` above 0 ("ahead"), below it ("behind"),
    or holding it ("within noise")."""
    if math.isnan(half):
        return "one seed" if not math.isnan(diff) else "-"
    if diff - half > 0:
        return "ahead"
    if diff + half < 0:
        return "behind"
    return "within noise"
