"""A real local cluster (etcd, kube-apiserver, two kube-schedulers, kwok) and our sidecar.

One cluster per test session, in a temporary folder; each test gets its own
namespace and its pods are force-deleted afterwards (no controller-manager
runs, so namespaces are never deleted).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from devcluster.cluster import Cluster, ClusterState
from devcluster.nodes import NodeShape

GPU_NODES = 2
"""8-GPU kwok nodes in the e2e cluster."""

_ns_counter = itertools.count()


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root: Path = tmp_path_factory.mktemp("devcluster")
    c = Cluster(f"e2e-{os.getpid()}", root=root)
    c.up(nodes=GPU_NODES, shape=NodeShape(cpu="32", memory="256Gi", gpus=8))
    try:
        c.start_sidecar()
        c.wait_sidecar_ready()
        yield c
    finally:
        c.down(quiet=True)


@pytest.fixture(scope="session")
def state(cluster: Cluster) -> ClusterState:
    st = cluster.state
    assert st is not None
    return st


@pytest.fixture(scope="session")
def api(state: ClusterState) -> client.ApiClient:
    cfg = client.Configuration()
    config.load_kube_config(config_file=state.kubeconfig, client_configuration=cfg)
    return client.ApiClient(cfg)


@pytest.fixture(scope="session")
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture
def sidecar(cluster: Cluster) -> Iterator[str]:
    """The extender URL, with the sidecar running and ready."""
    st = cluster.state
    assert st is not None
    if "sidecar" not in st.pids:
        cluster.start_sidecar()
    cluster.wait_sidecar_ready()
    yield st.extender_url


@pytest.fixture
def namespace(core: client.CoreV1Api, api: client.ApiClient) -> Iterator[str]:
    name = f"t{os.getpid()}-{next(_ns_counter)}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    client.CustomObjectsApi(api).delete_collection_namespaced_custom_object(
        "scheduling.volcano.sh", "v1beta1", name, "podgroups"
    )
    core.delete_collection_namespaced_pod(name, grace_period_seconds=0)


def create(core: client.CoreV1Api, manifest: dict[str, Any]) -> None:
    core.create_namespaced_pod(manifest["metadata"]["namespace"], manifest)
