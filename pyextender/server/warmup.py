"""Compile the numba kernels before the sidecar reports ready.

numba compiles on first call (or loads its on-disk cache); doing that inside
kube-scheduler's scheduling cycle would stall it. So the sidecar runs the
configured profile once over a synthetic 8-GPU node, for a whole-GPU pod, a
GPU-sharing pod and a supernode gang pod, before /readyz turns 200.
"""

from __future__ import annotations

import logging
import time

from pyextender.api.gpu import GpuTopology
from pyextender.api.names import GPU_GROUP_SIZE_ANNOTATIONS, GPU_TOPOLOGY_ANNOTATION
from pyextender.api.objects import NodeInfo, pod_from_dict
from pyextender.api.resources import PYEXTENDER_GPU_MILLI, gpu_resources
from pyextender.cache.state import ClusterState
from pyextender.framework.interfaces import PodContext
from pyextender.framework.runtime import Profile
from pyextender.plugins.gpu_share import choose_gpus

log = logging.getLogger(__name__)


def _pod(name: str, gpus: int, annotations: dict[str, str]) -> dict[str, object]:
    return {
        "metadata": {"name": name, "namespace": "warmup", "uid": name, "annotations": annotations},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "resources": {"requests": {"cpu": "1", gpu_resources()[0]: str(gpus)}},
                }
            ]
        },
    }


def warm_up(profile: Profile) -> float:
    """Run every plugin once on a synthetic node; returns the seconds it took."""
    start = time.perf_counter()
    topo = GpuTopology(
        count=8,
        model="warmup",
        memory_mib=81920,
        nvlink_domain=(0, 0, 0, 0, 1, 1, 1, 1),
        pcie_switch=(0, 0, 1, 1, 2, 2, 3, 3),
        numa_node=(0, 0, 0, 0, 1, 1, 1, 1),
    )
    state = ClusterState()
    state.set_node(
        NodeInfo(
            name="warmup",
            allocatable={"cpu": 64000, "memory": 2**39, "pods": 110, gpu_resources()[0]: 8},
            annotations={GPU_TOPOLOGY_ANNOTATION: topo.to_json()},
        )
    )
    pods = [
        _pod("whole", 4, {}),
        _pod("share", 1, {PYEXTENDER_GPU_MILLI: "300"}),
        _pod("gang", 8, {GPU_GROUP_SIZE_ANNOTATIONS[0]: "8"}),
    ]
    rows = state.live_rows()
    for raw in pods:
        pod = pod_from_dict(raw)
        ctx = PodContext(pod=pod, state=state, request=state.vector(pod.requests))
        profile.filter(ctx, rows)
        profile.score(ctx, rows)
        choose_gpus(ctx, int(rows[0]))
    seconds = time.perf_counter() - start
    log.info("kernels ready in %.2fs", seconds)
    return seconds
