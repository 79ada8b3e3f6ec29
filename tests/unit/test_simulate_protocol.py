"""The replay protocol (REPLAY.md): tuning, task classes, bucketing, one tiny replay."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from pyextender.cache.state import ClusterState
from pyextender.simulate.protocol import (
    TUNE_RATIO,
    arrival_sequence,
    bucket,
    bucket_of,
    node_order,
    task_classes,
)
from pyextender.simulate.trace import (
    NodeRow,
    PodRow,
    TraceError,
    default_traces,
    load_nodes,
    load_pods,
)

TRACES = default_traces()


def _pod(name: str, num: int, milli: int, cpu: int = 1000) -> PodRow:
    return PodRow(name, cpu, 1024, num, milli, ())


def test_tuning_grows_to_130_percent_with_copies_at_the_end() -> None:
    pods = [_pod(f"p{i}", 1, 1000) for i in range(10)] + [_pod("s", 1, 300)]
    seq = arrival_sequence(pods, total_gpus=10, seed=42)
    target = TUNE_RATIO * 1000 * 10
    demand = sum(p.demand for p in seq)
    assert demand <= target
    assert sorted(p.name for p in seq[:11]) == sorted(p.name for p in pods)
    assert all("-copy-" in p.name for p in seq[11:])
    assert target - demand < 1000  # it stopped at the first draw that would overshoot


def test_tuning_shrinks_when_the_trace_is_too_big() -> None:
    pods = [_pod(f"p{i}", 1, 1000) for i in range(40)]
    seq = arrival_sequence(pods, total_gpus=10, seed=1)
    assert sum(p.demand for p in seq) == 13_000


def test_sequence_depends_on_seed_only() -> None:
    pods = [_pod(f"p{i}", 1, 500) for i in range(30)]
    assert arrival_sequence(pods, 10, 7) == arrival_sequence(list(reversed(pods)), 10, 7)
    assert arrival_sequence(pods, 10, 7) != arrival_sequence(pods, 10, 8)


def test_node_order_is_a_permutation() -> None:
    rank = node_order(50, 42)
    assert sorted(rank.tolist()) == list(range(50))


def test_bucket_rounds_half_up_and_falls_back_to_neighbours() -> None:
    assert (bucket_of(99.5), bucket_of(100.49), bucket_of(0.5)) == (100, 100, 1)
    arrived = np.asarray([0.2, 0.4, 2.0, 2.2])
    alloc = np.asarray([1.0, 3.0, 5.0, 7.0])
    curves = bucket(arrived, alloc, alloc, alloc)
    assert curves.alloc[0] == 2.0  # mean of the two events in column 0
    assert curves.alloc[2] == 6.0
    assert curves.alloc[1] == 4.0  # no event at 1: use columns 0..2
    assert np.isnan(curves.alloc[10])


def test_openb_trace_has_35_task_classes_and_the_documented_mix() -> None:
    # The trace ships with the project (shared/traces beside the checkout): a
    # missing trace is a broken checkout, so this fails rather than skips.
    assert TRACES.is_dir(), f"openb trace not found at {TRACES} (set PYEXTENDER_TRACES)"
    pods = load_pods(TRACES / "openb_pod_list_default.csv")
    nodes = load_nodes(TRACES / "openb_node_list_gpu_node.csv")
    assert (len(pods), len(nodes), sum(n.gpus for n in nodes)) == (8152, 1213, 6212)
    assert sum(1 for p in pods if p.num_gpu == 0) == 1088
    assert sum(1 for p in pods if p.sharing) == 3078
    models: dict[str, int] = {}
    classes = task_classes(pods, lambda m: models.setdefault(m, len(models)))
    # REPLAY.md's 35 classes, its 5 CPU-only ones counted as one (task_classes.CPU_ONLY:
    # the same measure)
    assert classes.size == 31
    assert int((classes.num == 0).sum()) == 1
    assert classes.weight_sum >= 0.95 * len(pods)
    seq = arrival_sequence(pods, 6212, 42)
    assert 10_500 < len(seq) < 11_100  # "about 10.8k pods"


def test_every_pod_list_of_the_family_loads() -> None:
    # multigpu30 has only the five required columns (REPLAY.md §8)
    pods = load_pods(TRACES / "openb_pod_list_multigpu30.csv")
    assert len(pods) == 8508
    assert all(p.gpu_spec == () for p in pods)
    assert sum(1 for p in pods if p.num_gpu > 1) == 112 + 83 + 236
    spec = load_pods(TRACES / "openb_pod_list_gpuspec20.csv")
    assert sum(1 for p in spec if p.gpu_spec) == 1444
    for name in ("cpu250", "gpushare40", "gpushare80"):
        assert load_pods(TRACES / f"openb_pod_list_{name}.csv")


def test_loader_requires_only_the_four_columns(tmp_path: Path) -> None:
    ok = tmp_path / "ok.csv"
    ok.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,4000,100,1,500\n")
    assert load_pods(ok) == [PodRow("p1", 4000, 100, 1, 500, ())]
    bad = tmp_path / "bad.csv"
    bad.write_text("name,cpu_milli,memory_mib,gpu_milli\np1,4000,100,500\n")
    with pytest.raises(TraceError, match=r"missing column.*num_gpu"):
        load_pods(bad)


def test_a_pod_list_without_memory_asks_for_none(tmp_path: Path) -> None:
    """The family's nomem lists (openb_pod_list_nomem.csv upstream) have no memory_mib
    column: memory is only a hard constraint, so those pods ask for none, and a node
    short of memory still takes them."""
    from pyextender.simulate.policies import POLICIES
    from pyextender.simulate.replay import replay

    nomem = tmp_path / "nomem.csv"
    nomem.write_text(
        "name,cpu_milli,num_gpu,gpu_milli,gpu_spec,qos\np1,4000,1,500,,LS\np2,2000,0,0,,BE\n"
    )
    pods = load_pods(nomem)
    assert pods == [PodRow("p1", 4000, 0, 1, 500, ()), PodRow("p2", 2000, 0, 0, 0, ())]
    nodes = [NodeRow("n0", 32_000, 0, 1, "T4")]  # no memory at all
    assert replay(nodes, pods, pods, POLICIES["fgd"], 42, time.perf_counter).placed == 2


def test_tiny_replay_places_what_fits() -> None:
    from pyextender.simulate.policies import POLICIES
    from pyextender.simulate.replay import replay

    nodes = [NodeRow(f"n{i}", 32_000, 65536, 2, "T4") for i in range(3)]
    pods = [_pod("a", 1, 1000), _pod("b", 1, 500), _pod("c", 1, 500), _pod("d", 2, 1000),
            _pod("e", 0, 0)]  # fmt: skip
    for name in ("pyextender", "pyextender-known", "fgd", "fgd-online", "best-fit", "random",
                 "gpu-packing", "volcano-binpack"):  # fmt: skip
        res = replay(nodes, pods, pods, POLICIES[name], 42, time.perf_counter)
        assert res.placed == 5, name


def test_replay_classes_are_rebuilt_as_the_sample_grows() -> None:
    from pyextender.api.task_classes import TaskClass
    from pyextender.simulate.replay import ReplayClasses

    learned = ReplayClasses(growth=0.5)
    assert learned.classes().size == 0  # nothing seen yet
    learned.observe(TaskClass(1000, 500, 1))
    one = learned.classes()  # 1 >= 0 * 1.5 + 1: rebuilt
    assert one.weight_sum == 1
    learned.observe(TaskClass(1000, 500, 1))
    assert learned.classes() is one  # 2 < 1 * 1.5 + 1
    learned.observe(TaskClass(2000, 1000, 1))
    three = learned.classes()  # 3 >= 2.5
    assert three.weight_sum == 3 and three.size == 2
    for _ in range(2):
        learned.observe(TaskClass(2000, 1000, 1))
    assert learned.classes() is three  # 5 < 3 * 1.5 + 1


def _states_built(monkeypatch: pytest.MonkeyPatch) -> list[ClusterState]:
    """Every ClusterState the replay builds from now on, in order."""
    from pyextender.simulate import replay as replay_module

    seen: list[ClusterState] = []
    original = replay_module.build_state

    def spy(nodes: Sequence[NodeRow]) -> ClusterState:
        state = original(nodes)
        seen.append(state)
        return state

    monkeypatch.setattr(replay_module, "build_state", spy)
    return seen


def test_ours_never_sees_the_protocol_classes(monkeypatch: pytest.MonkeyPatch) -> None:
    from pyextender.simulate import replay as replay_module
    from pyextender.simulate.policies import POLICIES

    seen = _states_built(monkeypatch)
    nodes = [NodeRow(f"n{i}", 32_000, 65536, 2, "T4") for i in range(2)]
    pods = [_pod("a", 1, 1000), _pod("b", 1, 500), _pod("c", 4, 1000)]  # c fits nowhere
    replay_module.replay(nodes, pods, pods, POLICIES["pyextender"], 42, time.perf_counter)
    replay_module.replay(nodes, pods, pods, POLICIES["fgd"], 42, time.perf_counter)
    replay_module.replay(nodes, pods, pods, POLICIES["pyextender-known"], 42, time.perf_counter)
    replay_module.replay(nodes, pods, pods, POLICIES["fgd-online"], 42, time.perf_counter)
    ours, fgd, known, online = seen
    # ours learns as the sidecar does, from the pods bound (c never is); the
    # protocol's classes (the whole trace's) are only for the metric
    assert ours.gpu.fixed_classes is None and ours.gpu.learned.counts.total() == 2
    assert ours.gpu.learn_on_bind
    assert fgd.gpu.fixed_classes is not None
    # the diagnostic variant: our scoring, told the protocol's classes as FGD is
    assert known.gpu.fixed_classes is not None and known.gpu.learned.counts.total() == 0
    # FGD's scoring with only what the sidecar knows: it learns as ours does
    assert online.gpu.fixed_classes is None and online.gpu.learned.counts.total() == 2
    assert online.gpu.learn_on_bind


def test_gpu_spec_limits_a_pod_to_the_models_it_accepts() -> None:
    from pyextender.simulate.policies import POLICIES
    from pyextender.simulate.replay import replay

    nodes = [NodeRow("t4", 32_000, 65536, 2, "T4"), NodeRow("p100", 32_000, 65536, 1, "P100")]
    only_p100 = [PodRow(f"p{i}", 1000, 1024, 1, 1000, ("P100",)) for i in range(2)]
    anywhere = [PodRow("q", 1000, 1024, 1, 1000, ())]
    for name in ("pyextender", "fgd", "best-fit"):
        # one P100 GPU: the second P100-only pod is turned away although the T4s are free
        res = replay(nodes, only_p100, only_p100 + anywhere, POLICIES[name], 42, time.perf_counter)
        assert res.placed == 2, name


def test_the_sidecars_model_is_rebuilt_as_the_sample_grows_not_only_every_10_s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A sidecar started on an empty cluster placed its first 10 s of pods with the model
    of its first pod (or none): now a growing sample rebuilds it, as in the replay, and
    the time limit only brings in changes too small to count as growth."""
    from pyextender.api import task_classes
    from pyextender.api.task_classes import LearnedClasses, TaskClass

    now = [1000.0]
    monkeypatch.setattr(task_classes.time, "monotonic", lambda: now[0])
    learned = LearnedClasses(rebuild_s=10.0, growth=0.5)
    assert learned.classes().size == 0
    learned.observe(TaskClass(1000, 500, 1))
    assert learned.classes().weight_sum == 1  # no time passed: rebuilt on growth
    learned.observe(TaskClass(1000, 500, 1))
    two = learned.classes()
    assert two.weight_sum == 1  # 2 < 1 * 1.5 + 1, and no time passed
    now[0] += 10.0
    assert learned.classes().weight_sum == 2  # the time limit brings it in
    settled = learned.classes()
    now[0] += 60.0
    assert learned.classes() is settled  # nothing new seen: kept


def test_the_shipped_policy_spares_an_idle_node_where_fgd_takes_the_random_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Of equally scored nodes the replay of the shipped policy takes the one in use,
    as the sidecar's pick does; the paper's FGD (online or not) keeps the protocol's
    random order. The first pod fits only n0 (CPU); the second, a small 1-GPU pod,
    scores alike on both nodes (FGD: either placement removes one fragment GPU for a
    class that needs 30 CPUs), and n1 comes first in the random order."""
    from pyextender.simulate import replay as replay_module
    from pyextender.simulate.policies import POLICIES

    seed = next(s for s in range(100) if node_order(2, s)[1] < node_order(2, s)[0])
    seen = _states_built(monkeypatch)
    nodes = [NodeRow("n0", 32_000, 65536, 2, "T4"), NodeRow("n1", 16_000, 65536, 2, "T4")]
    pods = [_pod("big", 1, 1000, cpu=30_000), _pod("small", 1, 1000)]
    where: dict[str, dict[str, str]] = {}
    for name in ("pyextender", "pyextender-known", "fgd", "fgd-online"):
        seen.clear()
        res = replay_module.replay(nodes, pods, pods, POLICIES[name], seed, time.perf_counter)
        assert res.placed == 2, name
        state = seen[0]
        where[name] = {r.pod.name: state.node_names[r.node] for r in state.pods.values()}
    assert where["fgd"] == where["fgd-online"] == {"big": "n0", "small": "n1"}
    assert where["pyextender"] == where["pyextender-known"] == {"big": "n0", "small": "n0"}


def test_a_replay_can_order_equals_as_the_sidecar_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``rank`` replaces the seed's node permutation: with the sidecar's order (a hash
    of each name) a pod that scores alike everywhere goes to the node first in it."""
    from pyextender.cache.state import tie_rank
    from pyextender.simulate import replay as replay_module
    from pyextender.simulate.policies import POLICIES
    from pyextender.simulate.replay import sidecar_order

    nodes = [NodeRow(f"node-{i}", 32_000, 65536, 2, "T4") for i in range(6)]
    order = sidecar_order(nodes)
    assert sorted(order.tolist()) == list(range(6))
    first = min(nodes, key=lambda n: tie_rank(n.name)).name
    assert nodes[int(order.argmin())].name == first
    assert int(node_order(6, 42).argmin()) != int(order.argmin())  # the seed's would differ
    seen = _states_built(monkeypatch)
    pods = [_pod("a", 1, 1000)]
    for name in ("pyextender", "fgd"):
        seen.clear()
        replay_module.replay(nodes, pods, pods, POLICIES[name], 42, time.perf_counter, order)
        state = seen[0]
        (rec,) = state.pods.values()
        assert state.node_names[rec.node] == first, name
