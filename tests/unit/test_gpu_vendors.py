"""Any GPU vendor: the configured GPU resource names drive every GPU decision."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import numpy as np
import pytest

from pyextender.api import names
from pyextender.api.gpu import GpuTopology, gpu_demand
from pyextender.api.objects import NodeInfo, PodInfo
from pyextender.api.resources import (
    CPU,
    GPU,
    KNOWN_GPU_RESOURCES,
    VOLCANO_GPU_NUMBER,
    configure_gpu_resources,
    gpu_count,
    gpu_resources,
)
from pyextender.cache.state import ClusterState
from pyextender.framework.interfaces import PodContext
from pyextender.framework.runtime import Profile
from pyextender.framework.status import Code
from pyextender.plugins import binpack, gpu_share, gpu_topology, nodeorder, predicates, supernode

ISLANDS = GpuTopology(8, "X", 65536, (0, 0, 0, 0, 1, 1, 1, 1), (0,) * 8, (0,) * 8)
VENDORS = ["amd.com/gpu", "metax-tech.com/gpu", "huawei.com/Ascend910"]


@pytest.fixture
def vendors() -> Iterator[None]:
    """Every known vendor's name configured (as the chart ships), restored afterwards."""
    previous = configure_gpu_resources(KNOWN_GPU_RESOURCES)
    try:
        yield
    finally:
        configure_gpu_resources(previous)


def _node(name: str, resource: str, count: int = 8, topo: bool = True) -> NodeInfo:
    ann = {names.GPU_TOPOLOGY_ANNOTATION: ISLANDS.to_json()} if topo else {}
    return NodeInfo(name, {CPU: 128_000, resource: count, "pods": 110}, annotations=ann)


def _pod(uid: str, requests: dict[str, int], ann: dict[str, str] | None = None) -> PodInfo:
    return PodInfo("ns", f"p-{uid}", uid, "volcano", "", "Pending", requests,
                   annotations=dict(ann or {}))  # fmt: skip


def _ctx(state: ClusterState, pod: PodInfo) -> PodContext:
    return PodContext(pod=pod, state=state, request=state.vector(pod.requests))


def _bind(state: ClusterState, node: str, uid: str, resource: str, gpus: str) -> None:
    pod = _pod(uid, {resource: len(gpus.split(","))}, {names.GPU_INDEX_ANNOTATION: gpus})
    state.add_pod(pod, node)


def test_default_is_nvidia_only() -> None:
    assert gpu_resources() == (GPU,) == ("nvidia.com/gpu",)
    # another vendor's name is then a plain extended resource: no GPU demand
    assert gpu_demand(_pod("a", {"amd.com/gpu": 2})).none
    for vendor in ("metax-tech.com/gpu", "amd.com/gpu", "huawei.com/Ascend910"):
        assert vendor in KNOWN_GPU_RESOURCES


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (["nvidia"], "must be an extended resource name"),
        (["kubernetes.io/gpu"], "must be an extended resource name"),
        (["a/b/c"], "must be an extended resource name"),
        ([VOLCANO_GPU_NUMBER], "GPU-sharing resource"),
        ([], "at least one"),
    ],
)
def test_bad_names_are_refused_and_nothing_changes(bad: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        configure_gpu_resources(bad)
    assert gpu_resources() == (GPU,)


@pytest.mark.usefixtures("vendors")
@pytest.mark.parametrize("vendor", VENDORS)
def test_vendor_gpus_get_topology_aware_placement_and_indices(vendor: str) -> None:
    """The NVLink-island choice of test_plugins_gpu, under another vendor's name."""
    state = ClusterState()
    for name in ("a", "b", "c"):
        state.set_node(_node(name, vendor))
    _bind(state, "a", "x1", vendor, "0,1,4")  # a: no island with 4 free
    _bind(state, "b", "x2", vendor, "0,1,2,3")  # b: one island exactly free
    topo = gpu_topology.GpuTopology(gpu_topology.Args())
    profile = Profile(filters=[gpu_share.GpuShare(gpu_share.Args()), topo], scorers=[(topo, 1.0)])
    ctx = _ctx(state, _pod("p", {vendor: 4}))
    rows = state.live_rows()
    feasible = profile.filter(ctx, rows).feasible()
    row = int(feasible[int(np.argmax(profile.score(ctx, feasible)))])
    assert state.node_names[row] == "b"
    assert gpu_topology.choose_gpus(ctx, row) == (4, 5, 6, 7)
    assert gpu_share.choose_gpus(ctx, row) == (4, 5, 6, 7)
    assert state.gpu.count[rows].tolist() == [8, 8, 8]
    # the GPUs the bound pods hold are taken, per index
    assert state.gpu.free_mask[state.index["a"]] == 0b11101100


@pytest.mark.usefixtures("vendors")
def test_mixed_cluster_keeps_each_vendor_on_its_nodes_and_reasons_name_it() -> None:
    state = ClusterState()
    state.set_node(_node("nv", "nvidia.com/gpu"))
    state.set_node(_node("amd", "amd.com/gpu", count=2, topo=False))
    ctx = _ctx(state, _pod("p", {"amd.com/gpu": 4}))
    rows = state.live_rows()
    fit = predicates.Predicates(predicates.Args()).filter(ctx, rows)
    assert fit.codes.tolist() == [Code.UNRESOLVABLE, Code.UNRESOLVABLE]
    assert "amd.com/gpu" in fit.reasons[int(fit.reason_ids[0])]
    share = gpu_share.GpuShare(gpu_share.Args()).filter(ctx, rows)
    # the nvidia node has 8 GPUs (the fit predicate turns it down); the amd node has 2
    assert share.codes.tolist() == [Code.SUCCESS, Code.UNRESOLVABLE]
    assert share.reasons[int(share.reason_ids[1])] == "node has fewer than 4 GPUs (amd.com/gpu)"
    topo = gpu_topology.GpuTopology(gpu_topology.Args())
    _bind(state, "amd", "x", "amd.com/gpu", "0")
    small = _ctx(state, _pod("q", {"amd.com/gpu": 2}))
    out = topo.filter(small, rows)
    assert out.reasons[int(out.reason_ids[1])] == "fewer than 2 wholly free GPUs (amd.com/gpu)"


@pytest.mark.usefixtures("vendors")
def test_topology_annotation_count_checked_against_the_vendor_resource() -> None:
    state = ClusterState()
    warnings = state.set_node(_node("m", "metax-tech.com/gpu", count=4))
    assert len(warnings) == 1
    assert "is 8 but allocatable metax-tech.com/gpu is 4" in warnings[0]
    assert not state.gpu.usable[state.index["m"]]


def test_volcano_gpu_number_counts_as_whole_gpus() -> None:
    pod = _pod("v", {VOLCANO_GPU_NUMBER: 2})
    demand = gpu_demand(pod)
    assert (demand.count, demand.whole, demand.resource) == (2, True, VOLCANO_GPU_NUMBER)
    assert gpu_count({VOLCANO_GPU_NUMBER: 2, GPU: 3}) == 3  # a GPU name wins, no double count
    state = ClusterState()
    state.set_node(_node("a", GPU))
    state.set_node(_node("v", VOLCANO_GPU_NUMBER, count=8, topo=False))  # Volcano's device plugin
    ctx = _ctx(state, pod)
    # it takes the GPU column, so fit, queues and binpack count it
    assert ctx.request[state.column[GPU]] == 2
    assert state.alloc[state.index["v"], state.column[GPU]] == 8
    assert state.gpu.count[state.index["v"]] == 8
    rows = state.live_rows()
    assert predicates.Predicates(predicates.Args()).filter(ctx, rows).codes.tolist() == [0, 0]
    assert gpu_topology.choose_gpus(ctx, int(rows[0])) == (0, 1)
    state.add_pod(pod, "a")
    assert state.used[state.index["a"], state.column[GPU]] == 2
    assert state.gpu.free_mask[state.index["a"]] == 0b11111100


@pytest.mark.usefixtures("vendors")
def test_supernode_plans_vendor_gangs() -> None:
    state = ClusterState()
    for i in range(4):
        node = _node(f"n{i}", "metax-tech.com/gpu")
        node.labels[names.SUPERNODE_LABEL] = "s1" if i < 2 else "s2"
        state.set_node(node)
    plugin = supernode.Supernode(supernode.Args())
    ann = {
        names.GROUP_NAME_ANNOTATION: "job",
        names.GANG_SIZE_ANNOTATION: "2",
        "metax-tech.com/gpu-group-size": "16",
    }
    ctx = _ctx(state, _pod("g0", {"metax-tech.com/gpu": 8}, ann))
    out = plugin.filter(ctx, state.live_rows())
    # a 16-GPU unit fits one supernode: only that supernode's two nodes pass
    passing = [state.node_names[r] for r in np.flatnonzero(out.codes == Code.SUCCESS).tolist()]
    assert passing in (["n0", "n1"], ["n2", "n3"])


@pytest.mark.usefixtures("vendors")
def test_binpack_and_nodeorder_weigh_every_gpu_resource() -> None:
    assert "amd.com/gpu" in binpack.Binpack(binpack.Args()).weights
    assert "huawei.com/Ascend910" in nodeorder.NodeOrder(nodeorder.Args()).resources
    only = binpack.Binpack(binpack.Args(resources=("example.com/fpga",)))
    assert "amd.com/gpu" not in only.weights


def test_serve_refuses_a_bad_gpu_resource(capsys: pytest.CaptureFixture[str]) -> None:
    from pyextender.cli import build_parser
    from pyextender.server import serve_cli

    args = build_parser().parse_args(["serve", "--gpu-resource", "gpu"])
    assert isinstance(args, argparse.Namespace)
    assert serve_cli.run(args) == 2
    assert "--gpu-resource: GPU resource 'gpu': must be an extended resource name" in (
        capsys.readouterr().err
    )
    assert gpu_resources() == (GPU,)


@pytest.mark.usefixtures("vendors")
def test_gpu_gauge_totals_per_vendor() -> None:
    from pyextender.server.app import gpu_totals

    state = ClusterState()
    state.set_node(_node("nv", "nvidia.com/gpu"))
    state.set_node(_node("m1", "metax-tech.com/gpu"))
    state.set_node(_node("m2", "metax-tech.com/gpu"))
    _bind(state, "m1", "x", "metax-tech.com/gpu", "0,1,2")
    state.remove_node("m2")
    totals = gpu_totals(state)
    assert totals["nvidia.com/gpu"] == (8, 0)
    assert totals["metax-tech.com/gpu"] == (8, 3)
    assert totals["amd.com/gpu"] == (0, 0)
    assert set(totals) == set(KNOWN_GPU_RESOURCES)
