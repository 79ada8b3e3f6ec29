"""Compile the numba kernels before the sidecar reports ready.

numba compiles on first call (or loads its on-disk cache); doing that inside
kube-scheduler's scheduling cycle would stall it. So the sidecar runs the
configured profile over two synthetic 8-GPU nodes, for a whole-GPU pod, a
GPU-sharing pod and a supernode gang pod, and maps a list of node names to rows
(``kernels.name_rows``), before /readyz turns 200: once as on
an empty cluster, and once more after a pod is placed. The second pass is the
one a live cluster takes: placed pods teach the task-class model, and only with
a model does gpu-share score with the FGD kernels. Without it the first pod
scored after start-up compiled them in kube-scheduler's cycle (2.3 s with an
empty numba cache, 500 nodes).
"""

from __future__ import annotations

import logging
import time

import msgspec

from pyextender.api.gpu import GpuTopology
from pyextender.api.names import GPU_GROUP_SIZE_ANNOTATIONS, GPU_TOPOLOGY_ANNOTATION
from pyextender.api.objects import NodeInfo, pod_from_dict
from pyextender.api.resources import PYEXTENDER_GPU_MILLI, gpu_resources
from pyextender.api.task_classes import TaskClass, select_classes
from pyextender.cache.state import ClusterState
from pyextender.framework.interfaces import PodContext
from pyextender.framework.runtime import Profile
from pyextender.plugins.gpu_share import choose_gpus
from pyextender.server.extender_wire import RowRecords

log = logging.getLogger(__name__)

WARMUP_NODES = ("warmup-0", "warmup-1")


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
    for name in WARMUP_NODES:
        state.set_node(
            NodeInfo(
                name=name,
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
    # the filter and prioritize requests' node names, mapped from their bytes
    RowRecords.build(state).names.rows(msgspec.json.encode(list(WARMUP_NODES)))
    for placed in (False, True):
        if placed:  # on the second node, so every pod still fits the first one
            pod = pod_from_dict(_pod("placed", 1, {PYEXTENDER_GPU_MILLI: "500"}))
            state.add_pod(pod, WARMUP_NODES[1])
            # a class model as placed pods make it, fixed: the warm-up state's own
            # learned model has seen one pod, and the kernels want a few classes
            state.gpu.fixed_classes = select_classes(
                {TaskClass(1000, 500, 1): 2, TaskClass(1000, 1000, 4): 1}
            )
        for raw in pods:
            pod = pod_from_dict(raw)
            ctx = PodContext(pod=pod, state=state, request=state.vector(pod.requests))
            profile.filter(ctx, rows)
            profile.score(ctx, rows)
            choose_gpus(ctx, int(rows[0]))
    seconds = time.perf_counter() - start
    log.info("kernels ready in %.2fs", seconds)
    return seconds
