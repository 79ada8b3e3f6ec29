"""devcluster: a second cluster runs beside the session one; down leaves nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from kubernetes import client, config

from devcluster.cluster import Cluster, _alive
from devcluster.nodes import NodeShape

pytestmark = pytest.mark.e2e


def test_side_by_side_then_down_leaves_no_process(cluster: Cluster, tmp_path: Path) -> None:
    other = Cluster(f"side-{os.getpid()}", root=tmp_path)
    st = other.up(nodes=3, shape=NodeShape(gpus=4), supernodes=3)
    try:
        first = cluster.state
        assert first is not None
        ours = set(st.ports.values()) | {st.extender_port}
        theirs = set(first.ports.values()) | {first.extender_port}
        assert not ours & theirs, "port clash between clusters"
        cfg = client.Configuration()
        config.load_kube_config(config_file=st.kubeconfig, client_configuration=cfg)
        nodes = client.CoreV1Api(client.ApiClient(cfg)).list_node().items
        assert len(nodes) == 3
        n = nodes[0]
        assert n.status.allocatable["nvidia.com/gpu"] == "4"
        assert n.metadata.labels["pyextender.io/supernode"].startswith("supernode-")
        topo = json.loads(n.metadata.annotations["pyextender.io/gpu-topology"])
        assert topo["version"] == 1 and topo["count"] == 4
        assert other.status()["running"] is True
        pids = list(st.pids.values())
    finally:
        other.down(quiet=True)
    assert not [p for p in pids if _alive(p)], "processes left after down"
    assert other.status()["running"] is False
    # the session cluster is unaffected
    assert cluster.status()["running"] is True
