"""Guarantees down the queue tree (pyextender/plugins/proportion.py), after Volcano's
capacity plugin (pkg/scheduler/plugins/capacity/capacity.go: checkHierarchicalQueue
carves the children's guarantees out of their parent's realCapability) and
proportion's realCapability (the cluster less the other queues' guarantees)."""

from __future__ import annotations

import numpy as np
import pytest

from pyextender.plugins.proportion import effective_guarantees, reaches, water_fill
from tests.unit.batch_fixtures import World

INF = np.inf


def v(*xs: float) -> np.ndarray:
    return np.asarray(xs, dtype=np.float64)


def test_a_parent_without_a_guarantee_reserves_its_childrens() -> None:
    parents = {"team": "root", "a": "team", "b": "team", "x": "root"}
    g = {"team": v(0), "a": v(4), "b": v(2), "x": v(0)}
    assert effective_guarantees(parents, g)["team"] == pytest.approx(v(6))
    g["team"] = v(8)  # its own, when set, is what it reserves
    assert effective_guarantees(parents, g)["team"] == pytest.approx(v(8))


def test_reach_carves_guarantees_level_by_level() -> None:
    """16 GPUs; team guarantees 8 with a (8) inside it: x may reach 8, not 0 (a's
    guarantee is part of team's, not on top of it); b, a's sibling, reaches 8."""
    parents = {"team": "root", "a": "team", "b": "team", "x": "root"}
    g = {"team": v(8), "a": v(8), "b": v(0), "x": v(0)}
    cap = dict.fromkeys(parents, v(INF))
    got = reaches(v(16), parents, g, cap)
    assert {n: float(r[0]) for n, r in got.items()} == {"team": 16, "a": 16, "b": 8, "x": 8}
    cap["team"] = v(10)  # a capability caps the subtree and what is carved below it
    got = reaches(v(16), parents, g, cap)
    assert got["team"] == pytest.approx(v(10)) and got["b"] == pytest.approx(v(2))


def test_flat_reach_is_the_cluster_less_the_other_guarantees() -> None:
    parents = {"p": "root", "q": "root"}
    got = reaches(v(16), parents, {"p": v(6), "q": v(0)}, {"p": v(INF), "q": v(8)})
    assert {n: float(r[0]) for n, r in got.items()} == {"p": 16, "q": 8}
    got = reaches(v(16), parents, {"p": v(6), "q": v(0)}, {"p": v(INF), "q": v(INF)})
    assert got["q"] == pytest.approx(v(10))


def test_floors_beyond_the_total_are_scaled_to_fit() -> None:
    got = water_fill(v(8), {"a": 1.0, "b": 1.0}, {"a": v(10), "b": v(10)},
                     {"a": v(6), "b": v(6)})  # fmt: skip
    assert got["a"] == pytest.approx(v(4)) and got["b"] == pytest.approx(v(4))


def _tree(gang: str, size: int, queue: str) -> str:
    """team (guarantee 8) > a (guarantee 8), b; x top-level; 16 GPUs. One gang of
    ``size`` x 4 GPUs in ``queue``: its admission, or why not."""
    w = World(nodes=2, gpus=8)
    w.queue("team", guarantee={"resource": {"nvidia.com/gpu": "8"}})
    w.queue("a", parent="team", guarantee={"resource": {"nvidia.com/gpu": "8"}})
    w.queue("b", parent="team")
    w.queue("x")
    w.gang(gang, size, gpus=4, queue=queue)
    d = w.cycle(actions=("enqueue",))
    return "admitted" if [j.key for j in d.admit] == [f"t/{gang}"] else d.unschedulable[f"t/{gang}"]


def test_admission_under_a_parent_guarantee() -> None:
    """x's 8-GPU gang fits in what team's guarantee leaves (a's guarantee is inside
    team's, not on top of it); a 12-GPU one does not, and says why. b may use team's
    room outside a's guarantee: 8 GPUs, not 12."""
    assert _tree("x8", 2, "x") == "admitted"
    assert _tree("x12", 3, "x").endswith(
        'proportion: queue "x" share left by other queues\' guarantees exceeded: '
        "nvidia.com/gpu 12/8"
    )
    assert _tree("b8", 2, "b") == "admitted"
    assert "share left by other queues' guarantees exceeded" in _tree("b12", 3, "b")
    assert _tree("a16", 4, "a") == "admitted"


def test_a_queue_bounded_by_the_cluster_says_so() -> None:
    """No queue guarantees anything: what stops a gang larger than the cluster is the
    cluster's capacity, not "other queues' guarantees" (the message said so before)."""
    w = World(nodes=4, gpus=4)
    w.gang("big", 17, gpus=1)  # within the overcommit factor (1.2 x 16 GPUs)
    d = w.cycle(actions=("enqueue",))
    assert d.unschedulable["t/big"].endswith(
        'proportion: queue "default" cluster capacity exceeded: nvidia.com/gpu 17/16'
    )
