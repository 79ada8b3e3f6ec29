"""The replay protocol of REPLAY.md: arrival sequence, task classes, metric buckets.

Random draws use numpy's PCG64 seeded with the protocol seed; per-seed
numbers therefore differ from the Go simulator's, the spread over seeds is
what matches (REPLAY.md §5).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from pyextender.api.task_classes import TaskClass, TaskClasses, select_classes
from pyextender.simulate.trace import PodRow

F64 = npt.NDArray[np.float64]

TUNE_RATIO = 1.3
"""Arrivals are tuned to this multiple of the cluster's GPU milli (§2)."""
COLUMNS = 131
"""Metric columns x = 0..130 (% of cluster GPU milli arrived)."""


def arrival_sequence(pods: Sequence[PodRow], total_gpus: int, seed: int) -> list[PodRow]:
    """Pods in arrival order for one seed (§2): sort, shuffle, tune to 130 %."""
    rng = np.random.default_rng(seed)
    ordered = sorted(pods, key=lambda p: p.name)
    seq = [ordered[i] for i in rng.permutation(len(ordered))]
    target = TUNE_RATIO * 1000 * total_gpus
    demand = sum(p.demand for p in seq)
    copies = 0
    if demand < target:
        while True:
            pick = ordered[int(rng.integers(len(ordered)))]
            # the protocol's stop test uses the per-GPU milli, not the demand
            if demand + pick.gpu_milli > target:
                break
            copies += 1
            seq.append(replace(pick, name=f"{pick.name}-copy-{copies}"))
            demand += pick.demand
    elif demand > target:
        while demand > target and seq:
            gone = seq.pop(int(rng.integers(len(seq))))
            demand -= gone.demand
    return seq


def class_of(pod: PodRow, model_ids: Callable[[str], int]) -> TaskClass:
    """A pod's task class (memory left out, §4); the spec becomes a model-id bitmask."""
    mask = 0
    for model in pod.gpu_spec:
        mask |= 1 << model_ids(model)
    return TaskClass(pod.cpu_milli, pod.gpu_milli, pod.num_gpu, mask)


def task_classes(pods: Sequence[PodRow], model_ids: Callable[[str], int]) -> TaskClasses:
    """The most frequent classes of the original trace covering ≥ 95 % of pods."""
    counts = Counter(class_of(p, model_ids) for p in pods)
    return select_classes(counts)


def node_order(n: int, seed: int) -> npt.NDArray[np.int64]:
    """Rank of each node in a random permutation, for tie-breaks (§2.3)."""
    rng = np.random.default_rng(seed + 1_000_003)  # independent of the arrival stream
    rank = np.empty(n, dtype=np.int64)
    rank[rng.permutation(n)] = np.arange(n)
    return rank


def bucket_of(arrived_pct: float) -> int:
    """Column of an event: round half away from zero, as Go's math.Round."""
    return math.floor(arrived_pct + 0.5)


@dataclass(frozen=True, slots=True)
class Curves:
    """Per column 0..130: mean of a metric over the events bucketed there."""

    alloc: F64
    frag_amount: F64
    frag_ratio: F64


def bucket(arrived_pct: F64, alloc_pct: F64, frag_amount_pct: F64, frag_ratio_pct: F64) -> Curves:
    """Column means (§5); a column without events uses the events of X−1..X+1 (NaN if none)."""
    cols = np.floor(arrived_pct + 0.5).astype(np.int64)

    def curve(values: F64) -> F64:
        out = np.full(COLUMNS, np.nan)
        for x in range(COLUMNS):
            hit = cols == x
            if not hit.any():
                hit = (cols >= x - 1) & (cols <= x + 1)
            if hit.any():
                out[x] = float(values[hit].mean())
        return out

    return Curves(curve(alloc_pct), curve(frag_amount_pct), curve(frag_ratio_pct))
