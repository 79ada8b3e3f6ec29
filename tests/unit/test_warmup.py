"""warm_up leaves no numba kernel for a live cluster's first pod to compile or load."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import gc, json
    from numba.core.registry import CPUDispatcher
    from pyextender.api.gpu import GpuTopology
    from pyextender.api.names import GPU_GROUP_SIZE_ANNOTATIONS, GPU_TOPOLOGY_ANNOTATION
    from pyextender.api.objects import pod_from_dict
    from pyextender.api.resources import PYEXTENDER_GPU_MILLI
    from pyextender.cache.cluster import ClusterCache
    from pyextender.framework.interfaces import PodContext
    from pyextender.framework.runtime import build_profile
    from pyextender.plugins.defaults import load, plugins_of
    from pyextender.plugins.gpu_share import choose_gpus
    from pyextender.server.warmup import warm_up

    def signatures():
        return {
            f"{d.py_func.__module__}.{d.py_func.__qualname__}": len(d.signatures)
            for d in gc.get_objects() if isinstance(d, CPUDispatcher)
        }

    profile = build_profile(plugins_of(load(None)), lambda *a: None)
    warm_up(profile)
    after_warm_up = signatures()

    # a cluster as the sidecar's cache holds it: 40 nodes with a GPU topology, pods
    # of 1-7 whole GPUs and GPU shares bound on them (they teach the class model)
    topo = GpuTopology(count=8, model="A100", memory_mib=81920,
                       nvlink_domain=(0, 0, 0, 0, 1, 1, 1, 1),
                       pcie_switch=(0, 0, 1, 1, 2, 2, 3, 3), numa_node=(0, 0, 0, 0, 1, 1, 1, 1))
    alloc = {"cpu": "96", "memory": "768Gi", "pods": "110", "nvidia.com/gpu": "8"}
    cache = ClusterCache()
    cache.replace_nodes([
        {"metadata": {"name": f"n{i}", "labels": {"pyextender.io/supernode": f"s{i % 4}"},
                      "annotations": {GPU_TOPOLOGY_ANNOTATION: topo.to_json()}},
         "status": {"allocatable": alloc}}
        for i in range(40)
    ])

    def pod(name, gpus=0, milli=0, annotations=None, node=None):
        requests = {"cpu": "4", "memory": "16Gi"}
        ann = dict(annotations or {})
        if milli:
            ann[PYEXTENDER_GPU_MILLI] = str(milli)
        elif gpus:
            requests["nvidia.com/gpu"] = str(gpus)
        spec = {"schedulerName": "volcano", "containers": [{"name": "c",
                "resources": {"requests": requests}}]}
        if node:
            spec["nodeName"] = node
        return {"metadata": {"name": name, "namespace": "ns", "uid": name, "annotations": ann},
                "spec": spec, "status": {"phase": "Running" if node else "Pending"}}

    cache.replace_pods(
        [pod(f"whole-{i}", gpus=1 + i % 7, node=f"n{i}") for i in range(0, 40, 2)]
        + [pod(f"share-{i}", milli=250 * (1 + i % 3), node=f"n{i}") for i in range(1, 40, 4)]
    )
    state = cache.state
    rows = state.live_rows()
    for raw in (pod("a", gpus=1), pod("b", gpus=4), pod("c", milli=300),
                pod("d", gpus=8, annotations={GPU_GROUP_SIZE_ANNOTATIONS[0]: "8"})):
        p = pod_from_dict(raw)
        ctx = PodContext(pod=p, state=state, request=state.vector(p.requests))
        profile.filter(ctx, rows)
        profile.score(ctx, rows)
        choose_gpus(ctx, int(rows[0]))
    print(json.dumps({"classes": int(state.gpu.classes().size), "warm": after_warm_up,
                      "live": signatures()}))
    """
)


def test_a_live_clusters_first_pods_need_no_kernel_after_warm_up() -> None:
    """The first pod scored on a cluster with placed pods used to compile gpu-share's
    FGD kernels inside kube-scheduler's cycle (2.3 s with an empty numba cache, 500
    nodes): warm-up ran on an empty class model, which skips them. A fresh interpreter,
    so nothing compiled or loaded by other tests counts; loading from numba's on-disk
    cache adds a signature too, so this holds with or without that cache."""
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["classes"] > 0, "the cluster's pods taught no class model: FGD never ran"
    warm, live = result["warm"], result["live"]
    assert warm, "warm-up compiled no kernel"
    late = {k: (warm.get(k, 0), n) for k, n in live.items() if n != warm.get(k, 0)}
    assert not late, f"kernels first compiled or loaded after warm-up: {late}"
