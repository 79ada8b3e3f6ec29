"""Chaos suite: a real devcluster per module (small: 2-4 kwok nodes), with the parts
each module needs started on it. Processes are killed, cut off and fed garbage here,
so no cluster is shared with another module."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kubernetes import client, config

from devcluster.cluster import Cluster, ClusterState
from devcluster.nodes import NodeShape

SHAPE = NodeShape(cpu="16", memory="128Gi", gpus=8)
"""Every node of a chaos cluster: 8 GPUs, 16 CPUs."""


def start_cluster(tmp: pytest.TempPathFactory, name: str, nodes: int = 2) -> Cluster:
    root: Path = tmp.mktemp(f"chaos-{name}")
    c = Cluster(f"chaos-{name}-{os.getpid()}", root=root)
    c.up(nodes=nodes, shape=SHAPE)
    return c


def api_client(st: ClusterState) -> client.ApiClient:
    cfg = client.Configuration()
    config.load_kube_config(config_file=st.kubeconfig, client_configuration=cfg)
    return client.ApiClient(cfg)
