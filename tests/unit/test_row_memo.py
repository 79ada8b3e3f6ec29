"""framework.row_memo: plugins' answers kept per row must equal a fresh call.

The default profile with its memos against the same plugins run afresh on every
call, after any run of cluster changes: nodes added, changed, cordoned, removed
and their rows reused, pods bound, moved and removed (which also moves the learned
class model gpu-share scores with), supernode tiers set, a new resource column, the
state's capacity grown.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyextender.api.objects import NodeInfo, PodInfo, node_from_dict, pod_from_dict
from pyextender.api.resources import PYEXTENDER_GPU_MILLI
from pyextender.cache import state as state_module
from pyextender.cache.state import ClusterState
from pyextender.framework import row_memo
from pyextender.framework.interfaces import PodContext
from pyextender.framework.runtime import Profile, build_profile
from pyextender.plugins.defaults import load, plugins_of

NODES = row_memo.MIN_ROWS + 32  # calls over fewer rows run the plugins as before


def _node(i: int, cpu: int = 16, gpus: int = 8, cordoned: bool = False) -> NodeInfo:
    alloc = {"cpu": str(cpu), "memory": "64Gi", "pods": "110"}
    if gpus:
        alloc["nvidia.com/gpu"] = str(gpus)
    return node_from_dict(
        {
            "metadata": {"name": f"n{i}"},
            "spec": {"unschedulable": cordoned},
            "status": {"allocatable": alloc},
        }
    )


def _pod(name: str, cpu: int, gpus: int = 0, milli: int = 0) -> PodInfo:
    req: dict[str, str] = {"cpu": str(cpu), "memory": "1Gi"}
    if gpus:
        req["nvidia.com/gpu"] = str(gpus)
    annotations = {PYEXTENDER_GPU_MILLI: str(milli)} if milli else {}
    return pod_from_dict(
        {
            "metadata": {"name": name, "namespace": "t", "uid": f"uid-{name}",
                         "annotations": annotations},
            "spec": {
                "schedulerName": "volcano",
                "containers": [{"name": "c", "resources": {"requests": req}}],
            },
        }
    )  # fmt: skip


SHAPES = (
    _pod("whole1", 2, 1),
    _pod("whole4", 4, 4),
    _pod("whole8", 1, 8),
    _pod("share", 1, 1, 300),
    _pod("cpu", 6),
    _pod("big", 20),
)


def _profiles() -> tuple[Profile, Profile]:
    """(the default profile, the same plugins with no memo keys)."""
    memo = build_profile(plugins_of(load(None)))
    plain = Profile(filters=memo.filters, scorers=memo.scorers)
    plain._filter_keys = [None] * len(plain.filters)
    plain._score_keys = [None] * len(plain.scorers)
    assert any(k is not None for k in memo._filter_keys)
    assert any(k is not None for k in memo._score_keys)
    return memo, plain


def _same_answers(memo: Profile, plain: Profile, s: ClusterState, rows: Any) -> None:
    for p in SHAPES:
        ctx = PodContext(pod=p, state=s, request=s.vector(p.requests))
        fresh = PodContext(pod=p, state=s, request=s.vector(p.requests))
        got, want = memo.filter(ctx, rows), plain.filter(fresh, rows)
        assert np.array_equal(got.codes, want.codes), p.name
        assert got.reasons == want.reasons, p.name
        ok = rows[got.codes == 0]
        assert np.array_equal(memo.score(ctx, ok), plain.score(fresh, ok)), p.name


OPS = st.lists(
    st.tuples(st.integers(0, 8), st.integers(0, NODES + 8), st.integers(0, 7)),
    min_size=1,
    max_size=30,
)


@pytest.mark.parametrize("log", [state_module.CHANGE_LOG, 3])
@settings(max_examples=40, deadline=None)
@given(OPS, st.integers(0, 2**32 - 1))
def test_memo_answers_equal_fresh_calls_after_any_cluster_change(
    log: int, ops: list[tuple[int, int, int]], seed: int
) -> None:
    """``log``: the change log's length (3: memos often older than its oldest entry)."""
    kept = state_module.CHANGE_LOG
    state_module.CHANGE_LOG = log
    try:
        _run_ops(ops, seed)
    finally:
        state_module.CHANGE_LOG = kept


def _run_ops(ops: list[tuple[int, int, int]], seed: int) -> None:
    memo, plain = _profiles()
    s = ClusterState(capacity=NODES)  # grows when the ops add nodes past it
    for i in range(NODES):
        s.set_node(_node(i))
    for i in range(0, NODES, 3):
        s.add_pod(_pod(f"run{i}", 2, 1 + i % 4), f"n{i}")
    rng = np.random.default_rng(seed)
    live = s.live_rows()
    _same_answers(memo, plain, s, rng.permutation(live))  # every memo filled
    for op, a, b in ops:
        name = f"n{a}"
        if op == 0:
            s.set_node(_node(a, cpu=4 + 4 * b, gpus=(0, 2, 4, 8)[b % 4]))
        elif op == 1:
            s.set_node(_node(a, cordoned=True))
        elif op == 2:
            s.remove_node(name)
        elif op in (3, 4):
            milli = 250 * (b % 4) if op == 4 else 0
            s.add_pod(_pod(f"p{b}", 1 + b, 1 + b % 3, milli), name)
        elif op == 5:
            s.remove_pod(f"uid-p{b}")
        elif op == 6 and a in s.index.values():
            s.set_tiers(a, [f"sn{b}"])
        elif op == 7:
            s.vector({f"example.com/r{b}": 1})  # a new resource column
        else:
            s.add_pod(_pod(f"run{a}", 2, 1), name)  # a pod placed again (or moved)
        live = s.live_rows()
        rows = rng.permutation(live)
        if b % 2:  # a subset too: the nodes kube-scheduler's own filters passed
            rows = rows[: max(row_memo.MIN_ROWS, rows.shape[0] * 3 // 4)]
        _same_answers(memo, plain, s, rows)


def test_memos_stay_with_their_state_and_are_bounded(monkeypatch: Any) -> None:
    memo, _ = _profiles()
    s = ClusterState(capacity=NODES)
    for i in range(NODES):
        s.set_node(_node(i))
    rows = s.live_rows()
    for cpu in range(1, 40):  # a new request vector each: a new predicates key
        p = _pod(f"x{cpu}", cpu)
        memo.filter(PodContext(pod=p, state=s, request=s.vector(p.requests)), rows)
    # 39 predicates keys, and one gpu-share key (no GPUs asked) used by every pod
    assert len(s.row_memos) == 40
    # a byte budget for less than MIN_MEMOS keeps MIN_MEMOS, the most recent
    monkeypatch.setattr(row_memo, "MEMO_BYTES", 1)
    for cpu in range(40, 50):
        p = _pod(f"x{cpu}", cpu)
        memo.filter(PodContext(pod=p, state=s, request=s.vector(p.requests)), rows)
    assert len(s.row_memos) == row_memo.MIN_MEMOS
    newest = s.vector(_pod("x49", 49).requests).tobytes()
    assert any(key[2] == newest for key in s.row_memos)  # type: ignore[index]
    # a reading copy (the cycle's thread) starts with none, and never writes the original's
    snap = s.snapshot()
    assert snap.row_memos == {}
    before = dict(s.row_memos)
    p = _pod("y", 3)
    memo.filter(PodContext(pod=p, state=snap, request=snap.vector(p.requests)), rows)
    assert snap.row_memos and s.row_memos == before


def test_a_filter_memo_whose_reasons_outgrow_its_table_answers_afresh(monkeypatch: Any) -> None:
    """A plugin with a new reason on every call (an amount in it) would grow a memo's
    reason table without end: past MAX_REASONS the memo starts over, and the call is
    answered by the plugin itself."""
    from pyextender.framework.interfaces import FilterResult

    class Counting:
        name = "counting"
        calls = 0

        def filter_key(self, ctx: PodContext) -> str:
            return "one key"

        def filter(self, ctx: PodContext, rows: Any) -> FilterResult:
            self.calls += 1
            n = rows.shape[0]
            reasons = ["", f"short by {self.calls}"]
            return FilterResult(np.ones(n, np.int8), np.ones(n, np.int32), reasons)

    monkeypatch.setattr(row_memo, "MAX_REASONS", 5)
    s = ClusterState(capacity=NODES)
    for i in range(NODES):
        s.set_node(_node(i))
    plugin = Counting()
    profile = Profile(filters=[plugin])
    rows = s.live_rows()
    for i in range(8):
        s.add_pod(_pod(f"p{i}", 1), f"n{i}")  # a changed row: the memo computes it
        p = _pod("x", 1)
        out = profile.filter(PodContext(pod=p, state=s, request=s.vector(p.requests)), rows)
        assert set(out.reasons) <= {f"short by {c}" for c in range(1, plugin.calls + 1)}
        assert f"short by {plugin.calls}" in out.reasons
        assert all(len(m.reasons) <= 5 for m in s.row_memos.values())  # type: ignore[attr-defined]
