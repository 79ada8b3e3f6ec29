"""ClusterState bookkeeping and the resource plugins, table-driven."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyextender.cache.state import ClusterState
from pyextender.framework.interfaces import PodContext
from pyextender.framework.runtime import Profile
from pyextender.framework.status import Code
from pyextender.plugins import binpack, nodeorder, predicates
from tests.unit.helpers import node, pod, state


def _ctx(s, p):  # type: ignore[no-untyped-def]
    return PodContext(pod=p, state=s, request=s.vector(p.requests))


def test_rows_grow_and_are_reused() -> None:
    s = state(*(node(f"n{i}") for i in range(5)))
    assert s.size == 5 and s.alloc.shape[0] >= 5
    s.remove_node("n2")
    s.set_node(node("n9"))
    assert s.index["n9"] == 2 and s.size == 5


def test_pods_count_once_and_release_on_removal() -> None:
    s = state(node("a", gpus=8))
    p = pod("p", gpus=4)
    assert s.add_pod(p, "a") and s.add_pod(p, "a")  # idempotent per uid
    gpu = s.column["nvidia.com/gpu"]
    assert s.used[0, gpu] == 4
    s.remove_pod(p.uid)
    assert s.used[0, gpu] == 0 and not s.pods


def test_moving_a_pod_releases_the_old_node() -> None:
    s = state(node("a", gpus=8), node("b", gpus=8))
    p = pod("p", gpus=8)
    s.add_pod(p, "a")
    s.add_pod(p, "b")
    gpu = s.column["nvidia.com/gpu"]
    assert list(s.used[:2, gpu]) == [0, 8]


def test_new_extended_resource_gets_a_column() -> None:
    s = state(node("a"))
    vec = s.vector({"example.com/fpga": 1})
    assert "example.com/fpga" in s.column and vec[s.column["example.com/fpga"]] == 1


def test_a_request_vector_is_remembered_at_the_state_width() -> None:
    s = state(node("a"))
    asked = {"cpu": 1000, "example.com/fpga": 1}
    first = s.vector(asked)
    first[0] += 7  # a caller adding to its own vector changes nobody else's
    again = s.vector(asked)
    assert again[0] == 1000 and again[s.column["example.com/fpga"]] == 1
    s.vector({"example.com/nic": 2})  # one more column: remembered vectors are too short
    wide = s.vector(asked)
    assert wide.shape[0] == len(s.resources) and wide[s.column["example.com/nic"]] == 0
    assert wide[s.column["example.com/fpga"]] == 1 and wide[s.column["pods"]] == 1


def test_gpu_pods_of_a_row_in_a_snapshot_and_after_the_node_goes() -> None:
    s = state(node("a", gpus=8), node("b", gpus=8))
    first, second = pod("p", gpus=2), pod("q", gpus=4)
    s.add_pod(first, "a")
    s.add_pod(second, "a")
    snap = s.snapshot()
    s.remove_pod(first.uid)
    assert s.gpu.pod_gpus(first.uid) == () and s.gpu.pod_gpus(second.uid) == (2, 3, 4, 5)
    # the copy keeps the free GPUs it saw; which pod holds which GPU is the bind
    # path's bookkeeping, left out of the copy (the cycle never reads it)
    with pytest.raises(RuntimeError, match=r"GpuState\.placed is not part of a reading copy"):
        snap.gpu.pod_gpus(first.uid)
    assert list(snap.gpu.free_milli[0, :8]) == [0] * 6 + [1000] * 2
    assert list(s.gpu.free_milli[0, :8]) == [1000, 1000] + [0] * 4 + [1000] * 2
    s.remove_node("a")
    assert s.gpu.pod_gpus(second.uid) == () and second.uid not in s.gpu.placed
    assert list(snap.gpu.free_milli[0, :8]) == [0] * 6 + [1000] * 2
    assert int(snap.gpu.count[0]) == 8 and int(s.gpu.count[0]) == 0
    s.add_pod(second, "b")  # placed afresh elsewhere
    assert s.gpu.pod_gpus(second.uid) == (0, 1, 2, 3)


@pytest.mark.parametrize(
    ("gpus_free", "ask", "code", "reason"),
    [
        (8, 8, Code.SUCCESS, ""),
        (4, 8, Code.UNSCHEDULABLE, "Insufficient nvidia.com/gpu"),
        (0, 1, Code.UNSCHEDULABLE, "Insufficient nvidia.com/gpu"),
    ],
)
def test_predicates_gpu_fit(gpus_free: int, ask: int, code: Code, reason: str) -> None:
    s = state(node("a", gpus=8))
    if gpus_free < 8:
        s.add_pod(pod("busy", gpus=8 - gpus_free), "a")
    out = Profile(filters=[predicates.Predicates(predicates.Args())]).filter(
        _ctx(s, pod("p", gpus=ask)), np.asarray([0])
    )
    assert out.codes[0] == code and out.reasons[0] == reason


def test_predicates_unresolvable_when_node_too_small_or_cordoned() -> None:
    s = state(
        node("small", gpus=4),
        node("cordoned", gpus=8, conditions=[{"type": "Ready", "status": "False"}]),
    )
    out = Profile(filters=[predicates.Predicates(predicates.Args())]).filter(
        _ctx(s, pod("p", gpus=8)), np.asarray([0, 1])
    )
    assert list(out.codes) == [Code.UNRESOLVABLE, Code.UNRESOLVABLE]
    assert "less than the pod requests" in out.reasons[0]
    assert "cordoned or not Ready" in out.reasons[1]


def test_assumed_pods_count_in_filter() -> None:
    s = state(node("a", gpus=8))
    s.add_pod(pod("inflight", gpus=6), "a", assumed=True)
    out = Profile(filters=[predicates.Predicates(predicates.Args())]).filter(
        _ctx(s, pod("p", gpus=4)), np.asarray([0])
    )
    assert out.codes[0] == Code.UNSCHEDULABLE


def test_binpack_prefers_fuller_node_and_nodeorder_the_emptier() -> None:
    s = state(node("empty", gpus=8), node("half", gpus=8))
    s.add_pod(pod("x", cpu="4", gpus=4), "half")
    ctx = _ctx(s, pod("p", gpus=2))
    rows = np.asarray([0, 1])
    bp = binpack.Binpack(binpack.Args()).score(ctx, rows)
    no = nodeorder.NodeOrder(nodeorder.Args()).score(ctx, rows)
    assert bp[1] > bp[0]
    assert no[0] > no[1]
    assert ((bp >= 0) & (bp <= 100)).all() and ((no >= 0) & (no <= 100)).all()


def test_binpack_formula() -> None:
    # gpu only: (4 used + 2 asked) / 8 = 0.75; cpu (0+1)/8; memory 1Gi/32Gi
    s = state(node("a", gpus=8))
    s.add_pod(pod("x", cpu="0", gpus=4), "a")
    ctx = _ctx(s, pod("p", gpus=2))
    got = binpack.Binpack(binpack.Args()).score(ctx, np.asarray([0]))[0]
    want = 100 * (0.75 + (1 + 0) / 8 + (2 * 2**30) / (32 * 2**30)) / 3
    assert got == pytest.approx(want)


def test_profile_weights_scores() -> None:
    s = state(node("a", gpus=8), node("b", gpus=8))
    s.add_pod(pod("x", gpus=6), "b")
    ctx = _ctx(s, pod("p", gpus=1))
    bp = binpack.Binpack(binpack.Args())
    no = nodeorder.NodeOrder(nodeorder.Args())
    both = Profile(scorers=[(bp, 3.0), (no, 1.0)]).score(ctx, np.asarray([0, 1]))
    want = (3 * bp.score(ctx, np.asarray([0, 1])) + no.score(ctx, np.asarray([0, 1]))) / 4
    assert np.allclose(both, want)


def test_drf_shares_in_one_expression_equal_the_share_of_each_array() -> None:
    from pyextender.plugins.drf import dominant_share, dominant_shares

    rng = np.random.default_rng(3)
    total = np.array([96_000, 0, 8, 768], dtype=np.int64)  # a resource no node has
    held = [rng.integers(0, 9, size=4, dtype=np.int64) for _ in range(50)]
    held.append(np.zeros(4, dtype=np.int64))
    assert dominant_shares(held, total) == [dominant_share(a, total) for a in held]
    assert dominant_shares(held, np.zeros(4, dtype=np.int64)) == [0.0] * len(held)
    assert dominant_shares([], total) == []


def test_protocol_checks_are_remembered_per_plugin_class() -> None:
    from pyextender.framework.session import JobOrderKey, SessionOpener, implements
    from pyextender.plugins.drf import Args, Drf

    a, b = Drf(Args()), Drf(Args())
    assert implements(a, SessionOpener) and implements(b, SessionOpener)
    assert implements(a, JobOrderKey) == isinstance(a, JobOrderKey)
    assert not implements(object(), SessionOpener)


def _mirrors_agree(s: ClusterState) -> None:
    assert np.array_equal(s.alloc_by_col, s.alloc.T)
    assert np.array_equal(s.free_by_col, (s.alloc - s.used).T)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 6), st.integers(0, 3)), max_size=40))
def test_column_major_mirrors_follow_every_node_and_pod_change(
    ops: list[tuple[int, int, int]],
) -> None:
    """alloc_by_col and free_by_col equal alloc and alloc - used, transposed, after
    any run of node adds/updates/removals (rows reused, capacity grown), pod adds,
    moves and removals, newly seen extended resources, and in a reading copy whose
    original keeps changing."""
    s = state(node("n0", gpus=2))
    snap = s.snapshot()
    frozen = (snap.alloc_by_col.copy(), snap.free_by_col.copy())
    for op, a, b in ops:
        if op == 0:
            s.set_node(node(f"n{a}", cpu=str(2 + b), gpus=2 * b))
        elif op == 1:
            s.remove_node(f"n{a}")
        elif op == 2:
            s.add_pod(pod(f"p{b}", cpu=str(b), gpus=b % 2), f"n{a}")
        elif op == 3:
            s.remove_pod(f"uid-p{b}")
        elif op == 4:
            s.vector({f"example.com/r{b}": 1})  # a new column
        else:
            extra = node(f"n{a}", cpu="4")
            s.set_node(extra)
            s.add_pod(pod(f"q{b}", cpu="1"), extra.name)
        _mirrors_agree(s)
    _mirrors_agree(snap)
    assert np.array_equal(snap.alloc_by_col, frozen[0])
    assert np.array_equal(snap.free_by_col, frozen[1])
