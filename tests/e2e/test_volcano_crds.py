"""Every process on a cluster that has Volcano's CRDs, and the migration from a running
Volcano: once with the CRD files of a Volcano release (``up --crds volcano-release``,
devcluster/upstream_crds.py), once with our generated stand-ins (``--crds volcano``).

Volcano's PodGroup CRD has no status subresource: the sidecar's and the controllers'
PodGroup status writes must go to the object itself. Its Queue CRD requires
``status.allocated``. The migration test first lays down what a running Volcano leaves
behind (a Queue with status, a Running Job with its ``<job>-<uid>`` PodGroup and bound
pods, a Running PodGroup of another operator), only then starts the sidecar, the
controllers and the webhook, and checks that all of it is picked up as it is: no pod
deleted, evicted or moved, no PodGroup replaced, the Job still Running, and the
migrated pods counted (a new gang that needs their GPUs waits, one that fits binds).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from devcluster.cluster import Cluster
from devcluster.controllers import enable_controllers
from devcluster.nodes import NodeShape
from devcluster.webhook import enable_webhook
from pyextender.api import names
from pyextender.api.status_route import StatusRoute
from tests.e2e.kube import bound, bound_of, condition, gang, read_podgroup, wait_for
from tests.e2e.waits import cycles_pass

pytestmark = pytest.mark.e2e

PG = ("scheduling.volcano.sh", "v1beta1")
JOB = ("batch.volcano.sh", "v1alpha1")


@pytest.fixture(scope="module", params=["volcano-release", "volcano"])
def vcluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """Two 8-GPU kwok nodes, Volcano's CRDs, none of our processes yet: the files of a
    Volcano release (from the Go module proxy), then our generated stand-ins."""
    crds: str = request.param
    c = Cluster(f"e2e-vc-{os.getpid()}", root=tmp_path_factory.mktemp("devcluster-vc"))
    c.up(nodes=2, shape=NodeShape(cpu="32", memory="256Gi", gpus=8), crds=crds)
    try:
        yield c
    finally:
        c.down(quiet=True)


@pytest.fixture(scope="module")
def vapi(vcluster: Cluster) -> client.ApiClient:
    st = vcluster.state
    assert st is not None
    cfg = client.Configuration()
    config.load_kube_config(config_file=st.kubeconfig, client_configuration=cfg)
    return client.ApiClient(cfg)


def _start_ours(c: Cluster) -> None:
    """Sidecar, controllers and webhook, each once."""
    st = c.state
    assert st is not None
    if "sidecar" not in st.pids:
        c.start_sidecar()
    c.wait_sidecar_ready()
    enable_controllers(c)
    enable_webhook(c)


_count = iter(range(1000))


def _namespace(api: client.ApiClient) -> str:
    ns = f"vc{os.getpid()}-{next(_count)}"
    client.CoreV1Api(api).create_namespace(
        {"metadata": {"name": ns, "labels": {names.ENABLED_LABEL: "true"}}}
    )
    return ns


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _container(gpus: int) -> dict[str, Any]:
    res = {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)}
    return {"name": "main", "image": "busybox",
            "resources": {"requests": res, "limits": {"nvidia.com/gpu": str(gpus)}}}  # fmt: skip


def _volcano_pod(
    ns: str, name: str, node: str, group: str, queue: str, extra: dict[str, str],
    owner: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """A pod as Volcano leaves it: bound by its scheduler (nodeName set), never gated."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "ownerReferences": owner or [],
                     "annotations": {names.GROUP_NAME_ANNOTATION: group,
                                     names.VOLCANO_QUEUE_NAME: queue, **extra},
                     "labels": {names.VOLCANO_QUEUE_NAME: queue}},
        "spec": {"schedulerName": "volcano", "nodeName": node, "restartPolicy": "Never",
                 "terminationGracePeriodSeconds": 0, "containers": [_container(4)]},
    }  # fmt: skip


def _vcctl(c: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    st = c.state
    assert st is not None
    return subprocess.run(
        [sys.executable, "-m", "pyextender.vcctl", f"--kubeconfig={st.kubeconfig}", *args],
        capture_output=True, text=True, timeout=60, env=dict(os.environ),
    )  # fmt: skip


def test_discovery_shows_volcanos_podgroup_crd(vapi: client.ApiClient) -> None:
    route = StatusRoute(vapi)
    assert not route.has_status(*PG, "podgroups")
    assert route.has_status(*PG, "queues")
    assert route.has_status(*JOB, "jobs")
    crd = client.ApiextensionsV1Api(vapi).read_custom_resource_definition(
        "podgroups.scheduling.volcano.sh"
    )
    assert not crd.spec.versions[0].subresources or not crd.spec.versions[0].subresources.status


def test_migration_from_a_running_volcano(vcluster: Cluster, vapi: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(vapi)
    core = client.CoreV1Api(vapi)
    ns = _namespace(vapi)
    queue = f"mig{ns.replace('-', '')}"
    # -- what Volcano left behind ------------------------------------------------
    custom.create_cluster_custom_object(*PG, "queues", {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": queue}, "spec": {"weight": 1, "reclaimable": True},
    })  # fmt: skip
    custom.patch_cluster_custom_object_status(*PG, "queues", queue, {"status": {
        "state": "Open", "running": 2, "allocated": {"nvidia.com/gpu": "12"}}})  # fmt: skip
    job = custom.create_namespaced_custom_object(*JOB, ns, "jobs", {
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": "train"},
        "spec": {"minAvailable": 2, "schedulerName": "volcano", "queue": queue,
                 "tasks": [{"name": "worker", "replicas": 2,
                            "template": {"spec": {"containers": [_container(4)],
                                                  "restartPolicy": "Never"}}}]},
    })  # fmt: skip
    uid = job["metadata"]["uid"]
    # Volcano's JobStatus omits zero counts (omitempty)
    custom.patch_namespaced_custom_object_status(*JOB, ns, "jobs", "train", {"status": {
        "state": {"phase": "Running", "lastTransitionTime": _now()},
        "minAvailable": 2, "running": 2,
        "taskStatusCount": {"worker": {"phase": {"Running": 2}}},
        "conditions": [{"status": "Pending", "lastTransitionTime": _now()},
                       {"status": "Running", "lastTransitionTime": _now()}]}})  # fmt: skip
    owner = [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "train",
              "uid": uid, "controller": True, "blockOwnerDeletion": True}]  # fmt: skip
    group = f"train-{uid}"
    scheduled = {"type": "Scheduled", "status": "True", "transitionID": "volcano",
                 "lastTransitionTime": _now(),
                 "reason": "tasks in gang are ready to be scheduled"}  # fmt: skip
    # no status subresource: Volcano's scheduler writes status with the object
    custom.create_namespaced_custom_object(*PG, ns, "podgroups", {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": group, "ownerReferences": owner},
        "spec": {"minMember": 2, "minTaskMember": {"worker": 2}, "queue": queue,
                 "minResources": {"cpu": "2", "memory": "2Gi", "nvidia.com/gpu": "8"}},
        "status": {"phase": "Running", "running": 2, "conditions": [scheduled]},
    })  # fmt: skip
    for i in range(2):
        extra = {names.VOLCANO_JOB_NAME: "train", names.VOLCANO_TASK_SPEC: "worker",
                 names.VOLCANO_TASK_INDEX: str(i), names.VOLCANO_JOB_VERSION: "0",
                 names.VOLCANO_TEMPLATE_UID: "train-worker",
                 names.VOLCANO_JOB_RETRY_COUNT: "0"}  # fmt: skip
        p = _volcano_pod(ns, f"train-worker-{i}", "kwok-node-0", group, queue, extra, owner)
        p["metadata"]["labels"].update({names.VOLCANO_JOB_NAME: "train",
                                        names.VOLCANO_JOB_NAMESPACE: ns,
                                        names.VOLCANO_TASK_SPEC: "worker",
                                        names.VOLCANO_TASK_INDEX: str(i)})  # fmt: skip
        core.create_namespaced_pod(ns, p)
    custom.create_namespaced_custom_object(*PG, ns, "podgroups", {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "solo"}, "spec": {"minMember": 1, "queue": queue},
        "status": {"phase": "Running", "running": 1, "conditions": [scheduled]},
    })  # fmt: skip
    core.create_namespaced_pod(ns, _volcano_pod(ns, "solo-0", "kwok-node-1", "solo", queue, {}))
    # a gang Volcano had not placed yet: PodGroup Pending, pods never gated (Volcano
    # does not gate), schedulerName volcano, no node
    custom.create_namespaced_custom_object(*PG, ns, "podgroups", {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "late"}, "spec": {"minMember": 2, "queue": queue},
        "status": {"phase": "Pending"},
    })  # fmt: skip
    late = ["late-0", "late-1"]
    for name in late:
        p = _volcano_pod(ns, name, "", "late", queue, {})
        del p["spec"]["nodeName"]
        p["spec"]["containers"] = [{"name": "main", "image": "busybox",
                                    "resources": {"requests": {"cpu": "1"}}}]  # fmt: skip
        core.create_namespaced_pod(ns, p)
    wait_for(
        "kwok runs the bound pods",
        lambda: all(
            p.status.phase == "Running"
            for p in core.list_namespaced_pod(ns).items
            if p.metadata.name not in late
        ),
        timeout=60,
    )
    before = {p.metadata.name: (p.metadata.uid, p.spec.node_name)
              for p in core.list_namespaced_pod(ns).items
              if p.metadata.name not in late}  # fmt: skip
    assert len(before) == 3

    # -- our processes start -----------------------------------------------------
    _start_ours(vcluster)
    st = vcluster.state
    assert st is not None

    def job_status() -> dict[str, Any]:
        doc = custom.get_namespaced_custom_object(*JOB, ns, "jobs", "train")
        return dict(doc.get("status") or {})

    # our Job controller writes the counts Volcano left out: it has read the Job
    wait_for("the Job reconciled", lambda: "terminating" in job_status(), timeout=90)
    # the gang Volcano left Pending is placed as a whole by us
    wait_for("late's two pods bound", lambda: bound_of(core, ns, late) == 2, timeout=90)
    # the Queue controller counts the migrated pods (cpu too, not only what Volcano wrote):
    # train 2 + solo 1 + late 2
    wait_for(
        "the Queue's allocated recounted",
        lambda: custom.get_cluster_custom_object(*PG, "queues", queue)
        .get("status", {}).get("allocated", {}).get("cpu") == "5",
        timeout=90,
    )  # fmt: skip
    cycles_pass(st.extender_url, n=3, timeout=90)

    # a gang that needs the migrated pods' GPUs waits, and says so on its PodGroup
    gang(core, vapi, ns, "wide", 2, gpus=8, queue_name=queue)
    wait_for(
        "wide's Unschedulable condition (written without /status)",
        lambda: condition(vapi, ns, "wide", "Unschedulable"),
        timeout=60,
    )
    # one that fits the 4 GPUs left is admitted and bound, next to them
    fits = gang(core, vapi, ns, "fits", 1, gpus=4, queue_name=queue)
    wait_for("fits bound", lambda: bound_of(core, ns, fits) == 1, timeout=60)
    assert bound(core, ns)["fits-0"] == "kwok-node-1"
    assert read_podgroup(vapi, ns, "fits")["status"]["phase"] in ("Inqueue", "Running")

    after = {p.metadata.name: (p.metadata.uid, p.spec.node_name)
             for p in core.list_namespaced_pod(ns).items if p.metadata.name in before}  # fmt: skip
    assert after == before, "a migrated pod was deleted, replaced or moved"
    for p in core.list_namespaced_pod(ns).items:
        if p.metadata.name in before:
            assert p.metadata.deletion_timestamp is None and p.status.phase == "Running"
    groups = {g["metadata"]["name"] for g in custom.list_namespaced_custom_object(
        *PG, ns, "podgroups")["items"]}  # fmt: skip
    assert groups == {group, "solo", "late", "wide", "fits"}, groups
    assert read_podgroup(vapi, ns, group)["status"]["phase"] == "Running"
    assert read_podgroup(vapi, ns, "solo")["status"]["phase"] == "Running"
    status = job_status()
    assert status["state"]["phase"] == "Running" and status["running"] == 2, status
    assert status.get("version", 0) == 0 and status.get("retryCount", 0) == 0, status

    out = _vcctl(vcluster, "explain", "job", "train", "-n", ns)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == (
        f"job {ns}/train: Running, minAvailable 2 of 2 replicas, queue {queue}"
    ), out.stdout
    assert f"podgroup {ns}/{group}: Running, minMember 2" in out.stdout, out.stdout
    waiting = _vcctl(vcluster, "explain", "queue", queue).stdout
    assert f"1. {ns}/wide  Pending  minMember 2" in waiting, waiting
    for name in ("wide", "fits"):
        custom.delete_namespaced_custom_object(*PG, ns, "podgroups", name)
    core.delete_collection_namespaced_pod(
        ns, label_selector=None, field_selector="metadata.name=wide-0", grace_period_seconds=0
    )


def test_gang_and_volcano_job_with_volcanos_crds(vcluster: Cluster, vapi: client.ApiClient) -> None:
    """A gang admitted and bound by the sidecar, and a Volcano Job through the
    controllers to Running, with the PodGroup status written on the object."""
    _start_ours(vcluster)
    custom = client.CustomObjectsApi(vapi)
    core = client.CoreV1Api(vapi)
    ns = _namespace(vapi)
    names_ = gang(core, vapi, ns, "pair", 2, gpus=0)
    wait_for("pair bound", lambda: bound_of(core, ns, names_) == 2, timeout=60)
    wait_for(
        "pair's PodGroup Running (the controllers' status write)",
        lambda: read_podgroup(vapi, ns, "pair").get("status", {}).get("phase") == "Running",
        timeout=60,
    )
    container = {"name": "main", "image": "busybox",
                 "resources": {"requests": {"cpu": "1"}}}  # fmt: skip
    job = custom.create_namespaced_custom_object(*JOB, ns, "jobs", {
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": "run"},
        "spec": {"minAvailable": 3, "schedulerName": "volcano",
                 "tasks": [{"name": "worker", "replicas": 3,
                            "template": {"spec": {"containers": [container],
                                                  "restartPolicy": "Never"}}}]},
    })  # fmt: skip
    uid = job["metadata"]["uid"]

    def phase() -> str:
        doc = custom.get_namespaced_custom_object(*JOB, ns, "jobs", "run")
        return str((doc.get("status") or {}).get("state", {}).get("phase", ""))

    wait_for("the Job Running", lambda: phase() == "Running", timeout=90)
    pg = read_podgroup(vapi, ns, f"run-{uid}")
    assert pg["spec"]["queue"] == "default"
    wait_for(
        "its PodGroup Running",
        lambda: read_podgroup(vapi, ns, f"run-{uid}").get("status", {}).get("phase")
        == "Running",
        timeout=60,
    )  # fmt: skip
    assert len([n for n in bound(core, ns) if n.startswith("run-worker-")]) == 3
    default = custom.get_cluster_custom_object(*PG, "queues", "default")
    assert "allocated" in default["status"], default
    log = Path(vcluster.state.logs if vcluster.state else "") / "sidecar.log"
    failed = [line for line in log.read_text().splitlines() if "admitting" in line]
    assert not failed, failed
