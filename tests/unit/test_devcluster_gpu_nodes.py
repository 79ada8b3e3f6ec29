"""devcluster's kwok nodes advertise the GPU resource they are given."""

from __future__ import annotations

import subprocess
import sys

from devcluster.nodes import NodeShape, node_manifest
from pyextender.api.gpu import parse_gpu_topology


def test_nodes_advertise_the_chosen_gpu_resource() -> None:
    node = node_manifest("n0", NodeShape(gpus=8, gpu_resource="amd.com/gpu"), "s1")
    status = node["status"]
    assert status["capacity"]["amd.com/gpu"] == "8"
    assert status["allocatable"]["amd.com/gpu"] == "8"
    assert "nvidia.com/gpu" not in status["capacity"]
    topo = parse_gpu_topology(node["metadata"]["annotations"]["pyextender.io/gpu-topology"])
    assert topo.count == 8  # the annotation agrees with the allocatable, whatever the name
    default = node_manifest("n1", NodeShape(gpus=4), None)
    assert default["status"]["capacity"]["nvidia.com/gpu"] == "4"
    cpu_only = node_manifest("n2", NodeShape(gpus=0, gpu_resource="amd.com/gpu"), None)
    assert "amd.com/gpu" not in cpu_only["status"]["capacity"]


def test_up_takes_gpu_resource() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "devcluster", "up", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "--gpu-resource NAME" in out
