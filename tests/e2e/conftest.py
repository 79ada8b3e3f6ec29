"""A real local cluster (etcd, kube-apiserver, two kube-schedulers, kwok) and our sidecar.

One cluster per test session, in a temporary folder; each test gets its own
namespace and its pods are force-deleted afterwards (no controller-manager
runs, so namespaces are never deleted).

A second, framework-mode cluster (kube-scheduler built with the gRPC shim) is
started on first use by the ``env`` fixture, which runs a test once per mode.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from devcluster.cluster import MODES, Cluster, ClusterState
from devcluster.controllers import controllers_url, enable_controllers
from devcluster.nodes import NodeShape
from devcluster.webhook import disable_webhook, enable_webhook

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
def framework_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The same cluster shape in framework mode: kube-scheduler-pyextender (the shim)
    calls the sidecar over gRPC; gang members wait in Permit."""
    root: Path = tmp_path_factory.mktemp("devcluster-fw")
    c = Cluster(f"e2e-fw-{os.getpid()}", root=root)
    c.up(nodes=GPU_NODES, shape=NodeShape(cpu="32", memory="256Gi", gpus=8), mode="framework")
    try:
        c.start_sidecar()
        c.wait_sidecar_ready()
        yield c
    finally:
        c.down(quiet=True)


def _api(st: ClusterState) -> client.ApiClient:
    cfg = client.Configuration()
    config.load_kube_config(config_file=st.kubeconfig, client_configuration=cfg)
    return client.ApiClient(cfg)


@dataclass(frozen=True)
class Env:
    """One mode's cluster, its clients, a fresh namespace and the sidecar's URL."""

    mode: str
    cluster: Cluster
    api: client.ApiClient
    core: client.CoreV1Api
    namespace: str
    sidecar: str


_apis: dict[str, client.ApiClient] = {}


@pytest.fixture(params=MODES)
def env(request: pytest.FixtureRequest) -> Iterator[Env]:
    """Runs the test once per mode (extender, framework), with the same assertions."""
    mode: str = request.param
    cluster: Cluster = request.getfixturevalue(
        "cluster" if mode == "extender" else "framework_cluster"
    )
    st = cluster.state
    assert st is not None
    if st.name not in _apis:
        _apis[st.name] = _api(st)
    api = _apis[st.name]
    core = client.CoreV1Api(api)
    if "sidecar" not in st.pids:
        cluster.start_sidecar()
    cluster.wait_sidecar_ready()
    with _fresh_namespace(core, api) as ns:
        yield Env(mode, cluster, api, core, ns, st.extender_url)


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


@contextlib.contextmanager
def _fresh_namespace(core: client.CoreV1Api, api: client.ApiClient) -> Iterator[str]:
    name = f"t{os.getpid()}-{next(_ns_counter)}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    client.CustomObjectsApi(api).delete_collection_namespaced_custom_object(
        "scheduling.volcano.sh", "v1beta1", name, "podgroups"
    )
    core.delete_collection_namespaced_pod(name, grace_period_seconds=0)


@pytest.fixture
def namespace(core: client.CoreV1Api, api: client.ApiClient) -> Iterator[str]:
    with _fresh_namespace(core, api) as name:
        yield name


VOLCANO_JOBS = ("batch.volcano.sh", "v1alpha1", "jobs")


@pytest.fixture(scope="module")
def webhook(cluster: Cluster) -> Iterator[None]:
    """The admission webhook for this module (left running if it already was)."""
    already = cluster.status()["processes"].get("webhook") == "running"
    enable_webhook(cluster)
    try:
        yield
    finally:
        if not already:
            disable_webhook(cluster)


@pytest.fixture(scope="module")
def controllers(cluster: Cluster) -> str:
    """The controllers running on the module's cluster; their URL."""
    enable_controllers(cluster)
    return controllers_url(cluster)


@pytest.fixture(scope="module")
def co(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


@pytest.fixture
def ns(namespace: str, co: client.CustomObjectsApi, controllers: str) -> Iterator[str]:
    """A test namespace with the controllers running; its Volcano Jobs go first at the
    end, so no controller recreates their pods."""
    yield namespace
    group, version, plural = VOLCANO_JOBS
    for job in co.list_namespaced_custom_object(group, version, namespace, plural)["items"]:
        co.delete_namespaced_custom_object(
            group, version, namespace, plural, job["metadata"]["name"]
        )
    time.sleep(0.5)


def create(core: client.CoreV1Api, manifest: dict[str, Any]) -> None:
    core.create_namespaced_pod(manifest["metadata"]["namespace"], manifest)
