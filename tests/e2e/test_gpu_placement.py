"""GPU placement through the real kube-scheduler (issue 4): NVLink domains,
supernode packing, and a hard network-topology limit that cannot be met.

Runs its own cluster: 8 kwok nodes x 8 GPUs (NVLink domains of 4 GPUs) in two
supernodes of 4 nodes, described both by node labels and by HyperNodes. Every
scenario runs twice: with NVIDIA's resource name, and with another vendor's
(issue 13), the nodes advertising it and the sidecar told so (--gpu-resource).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from devcluster.cluster import Cluster
from devcluster.nodes import NodeShape
from tests.e2e.kube import (
    bound,
    bound_of,
    condition,
    create_member,
    gang,
    metrics,
    pod,
    wait_for,
)

pytestmark = pytest.mark.e2e

HYPER = ("topology.volcano.sh", "v1alpha1")


@pytest.fixture(scope="module", params=["nvidia.com/gpu", "metax-tech.com/gpu"])
def gpu_resource(request: pytest.FixtureRequest) -> str:
    """The extended resource the cluster's GPUs are advertised as."""
    name: str = request.param
    return name


@pytest.fixture(scope="module")
def gpu_cluster(
    tmp_path_factory: pytest.TempPathFactory, gpu_resource: str
) -> Iterator[tuple[Cluster, client.ApiClient]]:
    root: Path = tmp_path_factory.mktemp("gpucluster")
    c = Cluster(f"gpu-{os.getpid()}", root=root)
    shape = NodeShape(cpu="64", memory="512Gi", gpus=8, gpu_resource=gpu_resource)
    st = c.up(nodes=8, shape=shape, supernodes=2)
    try:
        cfg = client.Configuration()
        config.load_kube_config(config_file=st.kubeconfig, client_configuration=cfg)
        api = client.ApiClient(cfg)
        custom = client.CustomObjectsApi(api)
        for name, members in (("rack-a", range(0, 4)), ("rack-b", range(4, 8))):
            custom.create_cluster_custom_object(*HYPER, "hypernodes", {
                "apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
                "metadata": {"name": name},
                "spec": {"tier": 1, "members": [
                    {"type": "Node", "selector": {"exactMatch": {"name": f"kwok-node-{i}"}}}
                    for i in members
                ]},
            })  # fmt: skip
        custom.create_cluster_custom_object(*HYPER, "hypernodes", {
            "apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
            "metadata": {"name": "spine"},
            "spec": {"tier": 2, "members": [
                {"type": "HyperNode", "selector": {"regexMatch": {"pattern": "^rack-"}}}
            ]},
        })  # fmt: skip
        c.start_sidecar(extra_args=["--gpu-resource", gpu_resource])
        c.wait_sidecar_ready()
        yield c, api
    finally:
        c.down(quiet=True)


@pytest.fixture
def ns(
    gpu_cluster: tuple[Cluster, client.ApiClient], request: pytest.FixtureRequest
) -> Iterator[str]:
    """A namespace per test; its pods and PodGroups go when the test ends."""
    _, api = gpu_cluster
    core = client.CoreV1Api(api)
    # originalname: without the [gpu resource] of the parametrised cluster
    name = request.node.originalname.removeprefix("test_").replace("_", "-")[:40]
    core.create_namespace({"metadata": {"name": name}})
    yield name
    client.CustomObjectsApi(api).delete_collection_namespaced_custom_object(
        "scheduling.volcano.sh", "v1beta1", name, "podgroups"
    )
    core.delete_collection_namespaced_pod(name, grace_period_seconds=0)
    wait_for("pods gone", lambda: not core.list_namespaced_pod(name).items)


def _on(name: str, ns: str, node: str, gpus: str, resource: str) -> dict[str, object]:
    """A pod placed by hand, holding the given GPU indices."""
    m = pod(
        name, ns, gpus=len(gpus.split(",")), scheduler="default-scheduler", gpu_resource=resource
    )
    m["metadata"]["annotations"] = {"pyextender.io/gpu-index": gpus}  # type: ignore[index]
    m["spec"]["nodeName"] = node  # type: ignore[index]
    return m


def test_4gpu_pod_lands_in_one_nvlink_domain(
    gpu_cluster: tuple[Cluster, client.ApiClient], ns: str, gpu_resource: str
) -> None:
    cluster, api = gpu_cluster
    core = client.CoreV1Api(api)
    # node 0: GPUs 0 and 4 busy -> no NVLink domain has 4 free (but it is the fuller node);
    # node 1: GPU 0 busy -> domain {4,5,6,7} is free. Nodes 2..7 are taken whole.
    core.create_namespaced_pod(ns, _on("a", ns, "kwok-node-0", "0", gpu_resource))
    core.create_namespaced_pod(ns, _on("b", ns, "kwok-node-0", "4", gpu_resource))
    core.create_namespaced_pod(ns, _on("c", ns, "kwok-node-1", "0", gpu_resource))
    for i in range(2, 8):
        core.create_namespaced_pod(
            ns, _on(f"full-{i}", ns, f"kwok-node-{i}", "0,1,2,3,4,5,6,7", gpu_resource)
        )
    wait_for("hand-placed pods running", lambda: len(bound(core, ns)) == 9)
    core.create_namespaced_pod(ns, pod("four", ns, gpus=4, gpu_resource=gpu_resource))
    node = wait_for("4-GPU pod bound", lambda: bound(core, ns).get("four"), timeout=60)
    assert node == "kwok-node-1"
    got = core.read_namespaced_pod("four", ns).metadata.annotations["pyextender.io/gpu-index"]
    assert got == "4,5,6,7", got  # one NVLink domain, leaving domain 0's three GPUs together
    # the sidecar counts this vendor's GPUs: 8 nodes x 8, of which 3 + 6 x 8 + 4 are held
    url = str(cluster.status()["extender_url"])
    gauge = 'pyextender_cache_gpus{{resource="{}",state="{}"}}'
    wait_for(
        "GPU gauges",
        lambda: metrics(url).get(gauge.format(gpu_resource, "allocated")) == 55.0,
        timeout=10,
    )
    assert metrics(url)[gauge.format(gpu_resource, "allocatable")] == 64.0
    # the workload model gpu-share scored the 4-GPU pod with: learned from the pods the
    # cache saw (the 1-, 8- and 4-GPU shapes at least), built by that scoring
    seen = metrics(url)['pyextender_task_classes{state="seen"}']
    kept = metrics(url)['pyextender_task_classes{state="kept"}']
    assert seen >= 3 and 1 <= kept <= seen, (seen, kept)


def test_gang_with_group_size_32_lands_in_one_supernode(
    gpu_cluster: tuple[Cluster, client.ApiClient], ns: str, gpu_resource: str
) -> None:
    _, api = gpu_cluster
    core = client.CoreV1Api(api)
    # rack-a loses one node; the 4 x 8-GPU unit only fits whole in rack-b
    core.create_namespaced_pod(ns, _on("busy", ns, "kwok-node-0", "0,1,2,3,4,5,6,7", gpu_resource))
    wait_for("busy pod running", lambda: len(bound(core, ns)) == 1)
    names = gang(core, api, ns, "train", 4, gpus=8, gpu_resource=gpu_resource,
                 pod_annotations={"pyextender.io/gpu-group-size": "32"})  # fmt: skip
    wait_for("gang bound", lambda: bound_of(core, ns, names) == 4, timeout=90)
    nodes = {bound(core, ns)[n] for n in names}
    assert nodes == {f"kwok-node-{i}" for i in range(4, 8)}, nodes


def test_hard_topology_limit_that_cannot_be_met_stays_pending(
    gpu_cluster: tuple[Cluster, client.ApiClient], ns: str, gpu_resource: str
) -> None:
    _, api = gpu_cluster
    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    custom.create_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", ns, "podgroups", {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "wide"},
        "spec": {"minMember": 5, "networkTopology": {"mode": "hard", "highestTierAllowed": 1}},
    })  # fmt: skip
    names = []
    for i in range(5):
        create_member(core, ns, "wide", i, gpus=8, gpu_resource=gpu_resource)
        names.append(f"wide-{i}")
    why = wait_for("the reason", lambda: condition(api, ns, "wide", "Unschedulable"), timeout=30)
    assert "tier-1" in why and "hard" in why, why
    pg = custom.get_namespaced_custom_object(
        "scheduling.volcano.sh", "v1beta1", ns, "podgroups", "wide"
    )
    # Volcano's enqueue looks at the queue, not the topology: the PodGroup may be
    # Inqueue, but no member's gate comes off (allocate asks the plan, gang's JobValid)
    assert (pg.get("status") or {}).get("phase", "Pending") in ("Pending", "Inqueue"), pg
    gated = [
        p.metadata.name
        for p in core.list_namespaced_pod(ns).items
        if p.metadata.name in names and p.spec.scheduling_gates
    ]
    assert sorted(gated) == sorted(names), json.dumps(pg)
    assert bound_of(core, ns, names) == 0


def test_bad_gpu_annotation_makes_gpus_unusable_with_an_event(
    gpu_cluster: tuple[Cluster, client.ApiClient], ns: str, gpu_resource: str
) -> None:
    _, api = gpu_cluster
    core = client.CoreV1Api(api)
    bad = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "bad-gpu-node",
            "labels": {"kubernetes.io/hostname": "bad-gpu-node", "type": "kwok"},
            "annotations": {
                "kwok.x-k8s.io/node": "fake",
                "pyextender.io/gpu-topology": json.dumps(
                    {"version": 1, "count": "eight", "model": "A100", "memoryMiB": 81920}
                ),
            },
        },
        "status": {
            "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110", gpu_resource: "8"},
            "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", gpu_resource: "8"},
        },
    }
    core.create_node(bad)
    try:
        evs = wait_for(
            "an InvalidGPUTopology event",
            lambda: (
                core.list_namespaced_event(
                    "default", field_selector="involvedObject.name=bad-gpu-node"
                ).items
            ),
            timeout=30,
        )
        assert any(e.reason == "InvalidGPUTopology" and "count" in e.message for e in evs), [
            (e.reason, e.message) for e in evs
        ]
        m = pod("pinned", ns, gpus=1, gpu_resource=gpu_resource)
        m["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "bad-gpu-node"}  # type: ignore[index]
        core.create_namespaced_pod(ns, m)
        reasons = wait_for(
            "a FailedScheduling event",
            lambda: [
                e.message
                for e in core.list_namespaced_event(
                    ns, field_selector="involvedObject.name=pinned"
                ).items
                if e.reason == "FailedScheduling"
            ],
            timeout=30,
        )
        assert "pinned" not in bound(core, ns)
        assert any("GPU" in r for r in reasons), reasons
    finally:
        core.delete_node("bad-gpu-node")
