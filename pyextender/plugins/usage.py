"""Per-resource utilisation after placing the pod, shared by binpack and nodeorder."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from pyextender.framework.interfaces import FloatArray, IntArray, PodContext


def utilisation_after(
    ctx: PodContext, rows: IntArray, weights: Mapping[str, float]
) -> tuple[FloatArray, FloatArray]:
    """(fraction used after placement [n, k], weights [k]) over the weighted
    resources the pod requests. Fractions are in [0, 1]; columns where the
    node has no allocatable count as fully used (1.0)."""
    state = ctx.state
    cols: list[int] = []
    ws: list[float] = []
    for name, weight in weights.items():
        col = state.column.get(name)
        if col is None or weight <= 0 or ctx.request[col] <= 0:
            continue
        cols.append(col)
        ws.append(float(weight))
    if not cols:
        return np.zeros((rows.shape[0], 0)), np.zeros(0)
    c = np.asarray(cols)
    # np.take on rows, then columns: the cheapest gather numpy offers here
    alloc = np.take(state.alloc, rows, axis=0)[:, c].astype(np.float64)
    after = np.take(state.used, rows, axis=0)[:, c] + ctx.request[c]
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(alloc > 0, after / alloc, 1.0)
    return np.clip(frac, 0.0, 1.0), np.asarray(ws)
