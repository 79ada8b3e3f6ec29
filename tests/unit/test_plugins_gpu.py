"""gpu-share, gpu-topology and supernode plugins on small clusters."""

from __future__ import annotations

import numpy as np

from pyextender.api import names
from pyextender.api.gpu import GpuTopology
from pyextender.api.objects import NodeInfo, PodInfo
from pyextender.api.resources import CPU, GPU, PYEXTENDER_GPU_MILLI
from pyextender.cache.state import ClusterState
from pyextender.framework.interfaces import PodContext
from pyextender.framework.runtime import Profile
from pyextender.framework.status import Code
from pyextender.plugins import gpu_share, gpu_topology, supernode

ISLANDS = GpuTopology(8, "H100", 81920, (0, 0, 0, 0, 1, 1, 1, 1), (0,) * 8, (0,) * 8)


def _state(nodes: list[tuple[str, str]]) -> ClusterState:
    state = ClusterState()
    for name, sn in nodes:
        labels = {names.SUPERNODE_LABEL: sn} if sn else {}
        state.set_node(
            NodeInfo(
                name,
                {CPU: 128_000, GPU: 8, "pods": 110},
                labels=labels,
                annotations={names.GPU_TOPOLOGY_ANNOTATION: ISLANDS.to_json()},
            )
        )
    return state


def _pod(uid: str, requests: dict[str, int], ann: dict[str, str] | None = None) -> PodInfo:
    return PodInfo("ns", f"p-{uid}", uid, "volcano", "", "Pending", requests,
                   annotations=dict(ann or {}))  # fmt: skip


def _bind(state: ClusterState, node: str, uid: str, gpus: str) -> None:
    pod = _pod(uid, {GPU: len(gpus.split(","))}, {names.GPU_INDEX_ANNOTATION: gpus})
    state.add_pod(pod, node)


def _ctx(state: ClusterState, pod: PodInfo) -> PodContext:
    return PodContext(pod=pod, state=state, request=state.vector(pod.requests))


def _place(profile: Profile, ctx: PodContext) -> tuple[int, np.ndarray]:
    rows = ctx.state.live_rows()
    feasible = profile.filter(ctx, rows).feasible()
    scores = profile.score(ctx, feasible)
    return int(feasible[int(np.argmax(scores))]), feasible


def test_four_gpu_pod_lands_in_one_island_on_the_node_it_fragments_least() -> None:
    state = _state([("a", ""), ("b", ""), ("c", "")])
    _bind(state, "a", "x1", "0,1,4")  # a: islands with 2 and 3 free -> no 4 in one island
    _bind(state, "b", "x2", "0,1,2,3")  # b: exactly one island free -> a perfect fit
    # c: all 8 free -> would break a whole node
    topo = gpu_topology.GpuTopology(gpu_topology.Args())
    profile = Profile(filters=[gpu_share.GpuShare(gpu_share.Args()), topo], scorers=[(topo, 1.0)])
    ctx = _ctx(state, _pod("p", {GPU: 4}))
    row, _ = _place(profile, ctx)
    assert state.node_names[row] == "b"
    assert gpu_topology.choose_gpus(ctx, row) == (4, 5, 6, 7)
    strict = gpu_topology.GpuTopology(gpu_topology.Args(single_domain=True))
    out = strict.filter(ctx, state.live_rows())
    assert out.codes.tolist() == [Code.UNSCHEDULABLE, Code.SUCCESS, Code.SUCCESS]


def test_sharing_pod_gets_a_gpu_and_a_reason_when_none_fits() -> None:
    state = _state([("a", "")])
    state.gpu.fixed_classes = None
    for g in range(8):
        state.add_pod(_pod(f"s{g}", {}, {PYEXTENDER_GPU_MILLI: "900",
                                          names.GPU_INDEX_ANNOTATION: str(g)}), "a")  # fmt: skip
    share = gpu_share.GpuShare(gpu_share.Args())
    ctx = _ctx(state, _pod("p", {}, {PYEXTENDER_GPU_MILLI: "200"}))
    out = share.filter(ctx, state.live_rows())
    assert out.codes.tolist() == [Code.UNSCHEDULABLE]
    assert "no GPU with 200 milli-GPU free" in out.reasons[int(out.reason_ids[0])]
    small = _ctx(state, _pod("q", {}, {PYEXTENDER_GPU_MILLI: "100"}))
    assert share.filter(small, state.live_rows()).codes.tolist() == [Code.SUCCESS]
    assert gpu_share.choose_gpus(small, 0) in {(g,) for g in range(8)}


def test_sharing_pod_takes_the_best_fitting_gpu_among_equal_scores() -> None:
    from pyextender.api.task_classes import TaskClass, TaskClasses

    state = _state([("a", "")])
    # only CPU-only tasks in the model: every GPU gives the same gradient, a tie
    state.gpu.fixed_classes = TaskClasses.build({TaskClass(1000, 0, 0): 1})
    for g, milli in ((1, "300"), (2, "600"), (3, "600")):
        state.add_pod(_pod(f"s{g}", {}, {PYEXTENDER_GPU_MILLI: milli,
                                          names.GPU_INDEX_ANNOTATION: str(g)}), "a")  # fmt: skip
    ctx = _ctx(state, _pod("p", {}, {PYEXTENDER_GPU_MILLI: "300"}))
    assert gpu_share.choose_gpus(ctx, 0) == (2,)  # 400 free: the least that fits
    assert gpu_share.choose_gpus(ctx, 0, best_fit_ties=False) == (0,)  # the FGD simulator


def _gang_pod(uid: str, size: int, group: int, extra: dict[str, str] | None = None) -> PodInfo:
    ann = {
        names.GROUP_NAME_ANNOTATION: "job",
        names.GANG_SIZE_ANNOTATION: str(size),
        "metax-tech.com/gpu-group-size": str(group),
        **(extra or {}),
    }
    return _pod(uid, {GPU: 8}, ann)


def test_gang_with_group_32_lands_inside_one_supernode() -> None:
    # two supernodes: s1 has 4 nodes (32 GPUs) free, s2 has 6 nodes but one is busy
    nodes = [(f"s1-{i}", "s1") for i in range(4)] + [(f"s2-{i}", "s2") for i in range(6)]
    state = _state(nodes)
    plugin = supernode.Supernode(supernode.Args())
    profile = Profile(filters=[plugin], scorers=[(plugin, 1.0)])
    placed: set[str] = set()
    for i in range(4):
        ctx = _ctx(state, _gang_pod(f"g{i}", 4, 32))
        row, feasible = _place(profile, ctx)
        name = state.node_names[row]
        placed.add(name.split("-")[0])
        free = [r for r in feasible.tolist() if state.gpu.free_mask[r] == 0xFF]
        assert free  # there is always room in the planned supernode
        pod = ctx.pod
        pod.node_name = name
        state.add_pod(pod, name)
        state.gpu.free_mask[row] = 0  # node is now full
    assert placed == {"s1"}  # best fit: the supernode that holds the gang exactly


def test_hard_tier_limit_that_cannot_be_met_keeps_the_gang_pending() -> None:
    state = _state([("a0", "s1"), ("a1", "s1"), ("b0", "s2")])
    plugin = supernode.Supernode(supernode.Args())
    ann = {supernode.TIER_ANNOTATION: "1", supernode.MODE_ANNOTATION: "hard"}
    ctx = _ctx(state, _gang_pod("g", 3, 8, ann))
    out = plugin.filter(ctx, state.live_rows())
    assert (out.codes == Code.UNSCHEDULABLE).all()
    assert "within one tier-1 domain" in out.reasons[1]
    state.gang_plans.clear()  # plans are per gang and kept in the state; this is a new gang
    soft = supernode.Supernode(supernode.Args())
    ann_soft = {supernode.TIER_ANNOTATION: "1", supernode.MODE_ANNOTATION: "soft"}
    ok = soft.filter(_ctx(state, _gang_pod("h", 3, 8, ann_soft)), state.live_rows())
    assert (ok.codes == Code.SUCCESS).all()


def test_fgd_memo_recomputes_exactly_the_rows_that_changed() -> None:
    state = _state([("a", ""), ("b", ""), ("c", "")])
    for i, node in enumerate(("a", "b", "c")):  # half-GPU pods: the class model to learn
        share = {PYEXTENDER_GPU_MILLI: "500", names.GPU_INDEX_ANNOTATION: "0"}
        state.add_pod(_pod(f"seed-{i}", {GPU: 1}, share), node)
    state.gpu.fixed_classes = state.gpu.classes()  # hold the model still for this test
    ctx = _ctx(state, _pod("x", {GPU: 1}, {PYEXTENDER_GPU_MILLI: "300"}))
    rows = state.live_rows()
    first, _ = gpu_share.gradient(ctx, rows)
    again, _ = gpu_share.gradient(ctx, rows)
    assert np.array_equal(first, again)
    _bind(state, "b", "busy", "1,2,3,4,5,6,7")  # b keeps only its half-used GPU 0
    memoised, _ = gpu_share.gradient(ctx, rows)
    state.gpu.fgd_memo.clear()
    fresh, _ = gpu_share.gradient(ctx, rows)
    assert np.array_equal(memoised, fresh)  # the memo saw b's change...
    assert memoised[1] != first[1]  # ...which moved b's gradient
    assert memoised[0] == first[0] and memoised[2] == first[2]


def test_fgd_memos_are_bounded_in_bytes_and_keep_the_shapes_in_use() -> None:
    from pyextender.kernels.gpu_share import FgdMemo

    memo = FgdMemo.empty(10)
    assert sum(getattr(memo, f).nbytes for f in memo.__slots__) == FgdMemo.ROW_BYTES * 10
    assert gpu_share.memo_shapes(1000) == gpu_share.MEMO_SHAPES
    big = gpu_share.memo_shapes(10_000)
    assert gpu_share.MIN_SHAPES < big < gpu_share.MEMO_SHAPES
    assert big * 10_000 * FgdMemo.ROW_BYTES <= gpu_share.MEMO_BYTES
    assert gpu_share.memo_shapes(10**7) == gpu_share.MIN_SHAPES
    state = _state([("a", ""), ("b", "")])
    state.add_pod(_pod("seed", {GPU: 1}, {PYEXTENDER_GPU_MILLI: "500"}), "a")
    state.gpu.fixed_classes = state.gpu.classes()
    rows = state.live_rows()
    shapes = [{CPU: 1000 + i, GPU: 1} for i in range(gpu_share.MEMO_SHAPES + 5)]
    hot = _pod("hot", {CPU: 7, GPU: 1}, {PYEXTENDER_GPU_MILLI: "300"})
    gpu_share.gradient(_ctx(state, hot), rows)
    memos = state.gpu.fgd_memo
    (hot_key,) = memos
    hot_memo = memos[hot_key]
    for i, req in enumerate(shapes):
        gpu_share.gradient(_ctx(state, _pod(f"p{i}", req, {PYEXTENDER_GPU_MILLI: "300"})), rows)
        gpu_share.gradient(_ctx(state, hot), rows)  # in use between the others
    assert len(memos) == gpu_share.memo_shapes(state.gpu.count.shape[0])
    assert memos[hot_key] is hot_memo  # the shape in use was never dropped


def test_topology_scores_nothing_when_no_candidate_has_nvlink_domains() -> None:
    # flat nodes (GPU count and model labels only): one domain each, no set is better
    state = ClusterState()
    for name in ("a", "b"):
        state.set_node(NodeInfo(name, {CPU: 128_000, GPU: 8, "pods": 110}))
    _bind(state, "a", "w", "0,1,2")  # a: 5 free GPUs, b: 8
    ctx = _ctx(state, _pod("p", {GPU: 2}))
    plugin = gpu_topology.GpuTopology(gpu_topology.Args())
    rows = state.live_rows()
    assert not gpu_topology.multi_domain(ctx, rows)
    assert plugin.score(ctx, rows).tolist() == [0.0, 0.0]
    # an islanded node among the candidates: all are scored as before
    state.set_node(
        NodeInfo(
            "c",
            {CPU: 128_000, GPU: 8, "pods": 110},
            annotations={names.GPU_TOPOLOGY_ANNOTATION: ISLANDS.to_json()},
        )
    )
    rows = state.live_rows()
    ctx = _ctx(state, _pod("q", {GPU: 2}))
    assert gpu_topology.multi_domain(ctx, rows)
    assert plugin.score(ctx, rows).max() > 0
    # the islanded node in the cluster but not among the candidates: flat again
    flat = np.asarray([state.index["a"], state.index["b"]], dtype=np.int64)
    assert not gpu_topology.multi_domain(ctx, flat)


def test_topology_filter_without_single_domain_turns_down_what_the_kernel_finds_no_set_on() -> None:
    # islanded and flat nodes, GPUs taken at random: for every request size the
    # popcount filter agrees with the kernel's "no k-GPU set" (domains == 0)
    rng = np.random.default_rng(7)
    state = ClusterState()
    for i in range(40):
        ann = {names.GPU_TOPOLOGY_ANNOTATION: ISLANDS.to_json()} if i % 2 else {}
        state.set_node(NodeInfo(f"n{i}", {CPU: 128_000, GPU: 8, "pods": 110}, annotations=ann))
        taken = sorted(rng.choice(8, size=int(rng.integers(0, 9)), replace=False).tolist())
        if taken:
            _bind(state, f"n{i}", f"x{i}", ",".join(map(str, taken)))
    rows = state.live_rows()
    plugin = gpu_topology.GpuTopology(gpu_topology.Args())
    seen = set()
    for k in range(1, 9):
        ctx = _ctx(state, _pod(f"p{k}", {GPU: k}))
        got = plugin.filter(ctx, rows).codes == Code.SUCCESS
        kernel = gpu_topology.evaluate(ctx, rows).domains > 0
        assert got.tolist() == kernel.tolist(), k
        seen.update(got.tolist())
    assert seen == {True, False}


def test_a_node_is_gpu_idle_only_while_every_gpu_is_wholly_free() -> None:
    state = _state([("a", ""), ("b", ""), ("c", "")])
    state.set_node(NodeInfo("cpu-only", {CPU: 64_000, "pods": 110}))
    _bind(state, "b", "u1", "3")
    share = _pod("u2", {}, {PYEXTENDER_GPU_MILLI: "100", names.GPU_INDEX_ANNOTATION: "0"})
    state.add_pod(share, "c")
    rows = np.asarray([state.index[n] for n in ("a", "b", "c", "cpu-only")], dtype=np.int64)
    # a tenth of one GPU makes a node in use; a node without GPUs is never idle
    assert state.gpu.idle(rows).tolist() == [True, False, False, False]
    state.remove_pod(share.uid)
    assert state.gpu.idle(rows).tolist() == [True, False, True, False]
    # the picks ask with indices into their candidates: entries 2 and 0 here
    asked = state.gpu.idle_among(rows)(np.asarray([2, 0], dtype=np.int64))
    assert asked.tolist() == [True, True]
    assert state.gpu.idle_among(rows[1:])(np.asarray([0, 1, 2])).tolist() == [False, True, False]


def test_of_equal_scores_a_node_in_use_goes_first_then_the_fixed_order() -> None:
    from pyextender.framework.runtime import first_of_best

    scores = np.asarray([50.0, 70.0, 70.0, 70.0, 10.0])
    rank = np.asarray([0, 1, 3, 2, 4], dtype=np.int64)
    asked: list[list[int]] = []

    def idle_of(flags: list[bool]) -> object:
        def idle(at: np.ndarray) -> np.ndarray:
            asked.append(at.tolist())
            return np.asarray(flags, dtype=np.bool_)[at]

        return idle

    assert first_of_best(scores, rank) == 1  # lowest rank of the three at 70
    assert first_of_best(scores, rank, idle_of([False, True, False, True, False])) == 2
    assert asked == [[1, 2, 3]]  # asked about the tied entries only
    # all tied nodes idle, or none: the fixed order alone
    assert first_of_best(scores, rank, idle_of([False, True, True, True, False])) == 1
    assert first_of_best(scores, rank, idle_of([True, False, False, False, True])) == 1
    # one top score: no question asked
    asked.clear()
    assert first_of_best(np.asarray([1.0, 2.0]), rank[:2], idle_of([True, True])) == 1
    assert asked == []


def test_gpu_share_filter_codes_and_reasons_per_row() -> None:
    """Each row's code and reason: fits, too few free now (UNSCHEDULABLE), too few on
    the node or none (UNRESOLVABLE), an invalid topology annotation (UNRESOLVABLE,
    winning over the others)."""
    state = _state([("ok", ""), ("busy", "")])
    _bind(state, "busy", "b1", "0,1,2,3,4,5")
    state.set_node(NodeInfo("two", {CPU: 8000, GPU: 2, "pods": 110}))
    state.set_node(NodeInfo("none", {CPU: 8000, "pods": 110}))
    state.set_node(NodeInfo("broken", {CPU: 8000, GPU: 8, "pods": 110},
                            annotations={names.GPU_TOPOLOGY_ANNOTATION: "{not json"}))  # fmt: skip
    share = gpu_share.GpuShare(gpu_share.Args())
    rows = np.asarray([state.index[n] for n in ("ok", "busy", "two", "none", "broken")])
    out = share.filter(_ctx(state, _pod("w", {GPU: 4})), rows)
    ok, now, never = Code.SUCCESS, Code.UNSCHEDULABLE, Code.UNRESOLVABLE
    assert out.codes.tolist() == [ok, now, never, never, never]
    assert [out.reasons[i] for i in out.reason_ids.tolist()] == [
        "",
        "fewer than 4 wholly free GPUs (nvidia.com/gpu)",
        "node has fewer than 4 GPUs (nvidia.com/gpu)",
        "node has fewer than 4 GPUs (nvidia.com/gpu)",
        "GPU topology annotation is invalid; GPUs unusable",
    ]
    state.gpu.fixed_classes = None
    for g in range(6, 8):  # busy: its last two GPUs 900 milli used
        state.add_pod(_pod(f"s{g}", {}, {PYEXTENDER_GPU_MILLI: "900",
                                          names.GPU_INDEX_ANNOTATION: str(g)}), "busy")  # fmt: skip
    out = share.filter(_ctx(state, _pod("s", {}, {PYEXTENDER_GPU_MILLI: "300"})), rows)
    assert out.codes.tolist() == [ok, now, ok, never, never]
    assert [out.reasons[i] for i in out.reason_ids.tolist()] == [
        "",
        "no GPU with 300 milli-GPU free",
        "",
        "no GPU can hold 300 milli-GPU (none, or GPU memory unknown or too small)",
        "GPU topology annotation is invalid; GPUs unusable",
    ]
