"""Builders for unit tests: nodes, pods and a cluster state."""

from __future__ import annotations

from typing import Any

from pyextender.api.objects import NodeInfo, PodInfo, node_from_dict, pod_from_dict
from pyextender.cache.state import ClusterState


def node(name: str, cpu: str = "8", memory: str = "32Gi", gpus: int = 0, **extra: Any) -> NodeInfo:
    alloc = {"cpu": cpu, "memory": memory, "pods": "110"}
    if gpus:
        alloc["nvidia.com/gpu"] = str(gpus)
    status: dict[str, Any] = {"allocatable": alloc}
    status.update(extra)
    return node_from_dict({"metadata": {"name": name}, "status": status})


def pod(
    name: str, cpu: str = "1", gpus: int = 0, node_name: str = "", scheduler: str = "volcano"
) -> PodInfo:
    req: dict[str, str] = {"cpu": cpu, "memory": "1Gi"}
    if gpus:
        req["nvidia.com/gpu"] = str(gpus)
    return pod_from_dict(
        {
            "metadata": {"name": name, "namespace": "t", "uid": f"uid-{name}"},
            "spec": {
                "schedulerName": scheduler,
                "nodeName": node_name or None,
                "containers": [{"name": "c", "resources": {"requests": req}}],
            },
        }
    )


def state(*nodes: NodeInfo) -> ClusterState:
    s = ClusterState(capacity=2)
    for n in nodes:
        s.set_node(n)
    return s
