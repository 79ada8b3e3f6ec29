"""Fake kwok nodes with CPU, memory, pods and GPU capacity."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyextender.api.gpu import GpuTopology
from pyextender.api.names import GPU_TOPOLOGY_ANNOTATION, SUPERNODE_LABEL

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
"""kwok manages the nodes carrying this annotation (value "fake")."""


@dataclass(frozen=True, slots=True)
class NodeShape:
    cpu: str = "64"
    """CPU cores per node."""
    memory: str = "512Gi"
    """Memory per node."""
    pods: int = 110
    """Pod slots per node."""
    gpus: int = 8
    """GPUs per node (0 for CPU-only nodes)."""
    gpu_resource: str = "nvidia.com/gpu"
    """The extended resource the nodes advertise their GPUs as (e.g. amd.com/gpu)."""
    gpu_model: str = "A100-SXM4-80GB"
    gpu_memory_mib: int = 81920
    nvlink_group: int = 4
    """GPUs per NVLink domain in the topology annotation."""


def gpu_topology(shape: NodeShape) -> str:
    n = shape.gpus
    topo = GpuTopology(
        count=n,
        model=shape.gpu_model,
        memory_mib=shape.gpu_memory_mib,
        nvlink_domain=tuple(i // max(shape.nvlink_group, 1) for i in range(n)),
        pcie_switch=tuple(i // 2 for i in range(n)),
        numa_node=tuple(i // max(n // 2, 1) for i in range(n)),
    )
    return topo.to_json()


def node_manifest(name: str, shape: NodeShape, supernode: str | None) -> dict[str, Any]:
    capacity: dict[str, str] = {
        "cpu": shape.cpu,
        "memory": shape.memory,
        "pods": str(shape.pods),
        "ephemeral-storage": "1Ti",
    }
    annotations = {KWOK_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"}
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "type": "kwok",
    }
    if shape.gpus > 0:
        capacity[shape.gpu_resource] = str(shape.gpus)
        annotations[GPU_TOPOLOGY_ANNOTATION] = gpu_topology(shape)
        labels["nvidia.com/gpu.product"] = shape.gpu_model
    if supernode:
        labels[SUPERNODE_LABEL] = supernode
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": {},
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "nodeInfo": {
                "kubeletVersion": "fake",
                "architecture": "amd64",
                "operatingSystem": "linux",
            },
        },
    }


def supernode_of(index: int, nodes: int, supernodes: int) -> str | None:
    """Split nodes into ``supernodes`` contiguous, near-equal groups."""
    if supernodes <= 0:
        return None
    per = -(-nodes // supernodes)
    return f"supernode-{index // per}"
