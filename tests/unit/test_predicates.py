"""predicates' resource fit against a row-by-row reading of its rule."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyextender.framework.status import Code
from pyextender.plugins import predicates
from pyextender.plugins.predicates import Args, Predicates

RESOURCES = ["cpu", "memory", "pods", "nvidia.com/gpu", "example.com/fpga"]


def _reference(state: Any, need: np.ndarray, rows: np.ndarray) -> tuple[list[int], list[str]]:
    """Per row: the code and reason, read off the rule one row and resource at a time."""
    asked = [c for c in range(len(RESOURCES)) if need[c] > 0]
    codes, reasons = [], []
    for r in rows.tolist():
        if not state.schedulable[r]:
            codes.append(int(Code.UNRESOLVABLE))
            reasons.append("node is cordoned or not Ready")
            continue
        short = [c for c in asked if state.alloc[r, c] - state.used[r, c] < need[c]]
        never = [c for c in short if state.alloc[r, c] < need[c]]
        if never:
            codes.append(int(Code.UNRESOLVABLE))
            reasons.append(f"node allocatable {RESOURCES[never[0]]} is less than the pod requests")
        elif short:
            codes.append(int(Code.UNSCHEDULABLE))
            reasons.append(f"Insufficient {RESOURCES[short[0]]}")
        else:
            codes.append(int(Code.SUCCESS))
            reasons.append("")
    return codes, reasons


@pytest.mark.parametrize("few", [0, 64])
@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 30))
def test_fit_codes_and_reasons_equal_a_row_by_row_reading(few: int, seed: int, cap: int) -> None:
    """Both paths (arrays; row by row, for FEW_ROWS rows or fewer), each forced for
    every size by ``few``."""
    rng = np.random.default_rng(seed)
    alloc = rng.integers(0, 9, (cap, len(RESOURCES))).astype(np.int64)
    used = np.minimum(alloc, rng.integers(0, 9, (cap, len(RESOURCES)))).astype(np.int64)
    need = rng.integers(0, 6, len(RESOURCES)) * (rng.random(len(RESOURCES)) < 0.6)
    state = SimpleNamespace(
        alloc=alloc,
        used=used,
        alloc_by_col=np.ascontiguousarray(alloc.T),
        free_by_col=np.ascontiguousarray((alloc - used).T),
        resources=RESOURCES,
        schedulable=rng.random(cap) < 0.85,
    )
    rows = rng.permutation(cap)[: int(rng.integers(1, cap + 1))].astype(np.int64)
    ctx = SimpleNamespace(state=state, request=need.astype(np.int64))
    kept = predicates.FEW_ROWS
    predicates.FEW_ROWS = few
    try:
        out = Predicates(Args()).filter(ctx, rows)  # type: ignore[arg-type]
    finally:
        predicates.FEW_ROWS = kept
    codes, reasons = _reference(state, need, rows)
    assert out.codes.tolist() == codes
    assert [out.reasons[i] for i in out.reason_ids.tolist()] == reasons
