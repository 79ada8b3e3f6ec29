"""Runs a profile's filter and score plugins over candidate rows.

Times every plugin call once here (not in plugins) through an observer, so the
sidecar's metrics and the simulator see the same numbers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from pyextender.framework.interfaces import (
    MAX_NODE_SCORE,
    FilterPlugin,
    FloatArray,
    IntArray,
    PodContext,
    ScorePlugin,
)
from pyextender.framework.status import Code

Observer = Callable[[str, str, float], None]
"""(plugin name, extension point, seconds) -> None."""


def _ignore(plugin: str, point: str, seconds: float) -> None:
    return None


@dataclass(slots=True)
class FilterOutcome:
    """Combined verdict of all filter plugins for each candidate row."""

    rows: IntArray
    codes: np.ndarray
    reasons: list[str]
    """One reason per row; "" for rows that passed."""

    def feasible(self) -> IntArray:
        feasible: IntArray = self.rows[self.codes == Code.SUCCESS]
        return feasible


@dataclass(slots=True)
class Profile:
    """An ordered set of filter plugins and weighted score plugins."""

    filters: Sequence[FilterPlugin] = ()
    scorers: Sequence[tuple[ScorePlugin, float]] = ()
    observe: Observer = field(default=_ignore)

    def filter(self, ctx: PodContext, rows: IntArray) -> FilterOutcome:
        """Run every filter on the rows still feasible; the first failure names the reason."""
        n = rows.shape[0]
        codes = np.zeros(n, dtype=np.int8)
        reasons = [""] * n
        alive = np.arange(n)
        for plugin in self.filters:
            if alive.shape[0] == 0:
                break
            start = time.perf_counter()
            result = plugin.filter(ctx, rows[alive])
            self.observe(plugin.name, "filter", time.perf_counter() - start)
            failed = np.flatnonzero(result.codes != Code.SUCCESS)
            if failed.shape[0]:
                idx = alive[failed]
                codes[idx] = result.codes[failed]
                table = result.reasons
                for i, rid in zip(idx.tolist(), result.reason_ids[failed].tolist(), strict=True):
                    reasons[i] = table[rid]
                alive = alive[result.codes == Code.SUCCESS]
        return FilterOutcome(rows=rows, codes=codes, reasons=reasons)

    def score(self, ctx: PodContext, rows: IntArray) -> FloatArray:
        """Weighted mean of plugin scores, in [0, MAX_NODE_SCORE]."""
        total = np.zeros(rows.shape[0], dtype=np.float64)
        weight_sum = 0.0
        for plugin, weight in self.scorers:
            if weight <= 0:
                continue
            start = time.perf_counter()
            part = plugin.score(ctx, rows)
            self.observe(plugin.name, "score", time.perf_counter() - start)
            total += weight * np.clip(part, 0.0, MAX_NODE_SCORE)
            weight_sum += weight
        if weight_sum > 0:
            total /= weight_sum
        return total
