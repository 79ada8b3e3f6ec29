"""The gpu-topology annotation schema, pod GPU demand, and GpuState arrays."""

from __future__ import annotations

import json

import pytest

from pyextender.api import names
from pyextender.api.gpu import (
    GpuTopology,
    GpuTopologyError,
    gpu_demand,
    parse_gpu_topology,
)
from pyextender.api.objects import NodeInfo, PodInfo
from pyextender.api.resources import CPU, GPU, PYEXTENDER_GPU_MILLI, VOLCANO_GPU_MEMORY
from pyextender.cache.state import ClusterState

DGX = GpuTopology(
    count=8,
    model="H100",
    memory_mib=81920,
    nvlink_domain=(0, 0, 0, 0, 1, 1, 1, 1),
    pcie_switch=(0, 0, 1, 1, 2, 2, 3, 3),
    numa_node=(0, 0, 0, 0, 1, 1, 1, 1),
)


def test_round_trip() -> None:
    assert parse_gpu_topology(DGX.to_json()) == DGX


def _doc(**change: object) -> str:
    doc = json.loads(DGX.to_json())
    doc.update(change)
    return json.dumps(doc)


def _gpus(i: int, **change: object) -> str:
    doc = json.loads(DGX.to_json())
    doc["gpus"][i].update(change)
    return json.dumps(doc)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("not json", "<root>"),
        ("[]", "<root>"),
        (_doc(version=2), "version"),
        (_doc(count=0), "count"),
        (_doc(count=17), "count"),
        (_doc(count="8"), "count"),
        (_doc(model=""), "model"),
        (_doc(memoryMiB=-1), "memoryMiB"),
        (_doc(colour="red"), "colour"),
        (_doc(gpus=[]), "gpus"),
        (_gpus(3, nvlinkDomain="a"), "gpus[3].nvlinkDomain"),
        (_gpus(2, index=1), "gpus[2].index"),
        (_gpus(5, numaNode=-1), "gpus[5].numaNode"),
        (_gpus(0, speed=1), "gpus[0].speed"),
    ],
)
def test_bad_annotation_names_the_field(text: str, field: str) -> None:
    with pytest.raises(GpuTopologyError) as err:
        parse_gpu_topology(text)
    assert err.value.field == field
    assert str(err.value).startswith(f"{field}: ")


def test_without_gpus_list_is_one_flat_domain() -> None:
    topo = parse_gpu_topology('{"version":1,"count":4,"model":"T4","memoryMiB":15360}')
    assert topo.nvlink_domain == (0, 0, 0, 0)


def _pod(uid: str, requests: dict[str, int], annotations: dict[str, str] | None = None) -> PodInfo:
    return PodInfo("ns", f"p{uid}", uid, "volcano", "", "Pending", requests,
                   annotations=annotations or {})  # fmt: skip


def test_gpu_demand_kinds() -> None:
    assert gpu_demand(_pod("1", {GPU: 4})).whole
    share = gpu_demand(_pod("2", {}, {PYEXTENDER_GPU_MILLI: "250"}))
    assert share.sharing and share.milli == 250
    mem = gpu_demand(_pod("3", {VOLCANO_GPU_MEMORY: 20480}))
    assert mem.sharing and mem.milli_on(81920) == 250 and mem.milli_on(0) == 1001
    assert gpu_demand(_pod("4", {CPU: 1000})).none


def _node(name: str, annotation: str | None, gpus: int = 8, sn: str = "") -> NodeInfo:
    ann = {names.GPU_TOPOLOGY_ANNOTATION: annotation} if annotation is not None else {}
    labels = {names.SUPERNODE_LABEL: sn} if sn else {}
    return NodeInfo(name, {CPU: 64000, GPU: gpus, "pods": 110}, labels=labels, annotations=ann)


def test_bad_annotation_makes_gpus_unusable_with_a_warning() -> None:
    state = ClusterState()
    warnings = state.set_node(_node("n0", '{"version":1,"count":8}'))
    assert len(warnings) == 1 and "model: is required" in warnings[0]
    row = state.index["n0"]
    assert not state.gpu.usable[row] and state.gpu.free_mask[row] == 0
    assert state.set_node(_node("n0", DGX.to_json())) == []
    assert state.gpu.usable[row] and state.gpu.free_mask[row] == 0xFF


def test_count_mismatch_is_a_warning() -> None:
    state = ClusterState()
    assert "allocatable" in state.set_node(_node("n0", DGX.to_json(), gpus=4))[0]


def test_pods_take_gpus_and_give_them_back() -> None:
    state = ClusterState()
    state.set_node(_node("n0", DGX.to_json(), sn="sn-a"))
    gpu, row = state.gpu, state.index["n0"]
    assert gpu.supernodes[gpu.supernode[row]] == "1/sn-a"
    assert gpu.nvlink[row, :8].tolist() == list(DGX.nvlink_domain)
    whole = _pod("w", {GPU: 2}, {names.GPU_INDEX_ANNOTATION: "4,5"})
    state.add_pod(whole, "n0")
    assert gpu.free_mask[row] == 0b1100_1111
    share = _pod("s", {VOLCANO_GPU_MEMORY: 40960})  # half of an 80 GiB GPU, no index: best fit
    state.add_pod(share, "n0")
    assert gpu.free_milli[row, :8].tolist() == [500, 1000, 1000, 1000, 0, 0, 1000, 1000]
    state.remove_pod("w")
    state.remove_pod("s")
    assert gpu.free_mask[row] == 0xFF and gpu.free_milli[row, :8].tolist() == [1000] * 8


def test_node_problems_track_the_current_state_of_each_node() -> None:
    from pyextender.cache.cluster import ClusterCache

    def doc(annotation: str) -> dict[str, object]:
        return {
            "metadata": {
                "name": "n0",
                "annotations": {names.GPU_TOPOLOGY_ANNOTATION: annotation},
            },
            "status": {"allocatable": {"cpu": "64", "pods": "110", GPU: "8"}},
        }

    cache = ClusterCache()
    cache.replace_nodes([doc('{"version":1,"count":8}')])
    assert "model: is required" in cache.node_problems["n0"][0]
    cache.node_event("MODIFIED", doc(DGX.to_json()))
    assert cache.node_problems == {}, "a fixed node keeps its old problem"
    cache.node_event("MODIFIED", doc('{"version":1,"count":8}'))
    assert "n0" in cache.node_problems, "a problem that comes back is not seen"
    cache.node_event("DELETED", doc(DGX.to_json()))
    assert cache.node_problems == {}
