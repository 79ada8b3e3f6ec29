"""PodGroups and pods made the way other operators make them when told to use Volcano:
the Kubeflow training operator (PyTorchJob), the Spark operator (SparkApplication) and
KubeRay (RayCluster). The operators are not installed; each test writes exactly what
the operator writes (names, owner references, spec fields, pod annotations and labels,
and the operator's own order: the training operator creates pods only once the
PodGroup has left Pending) and checks they are gang scheduled, queued behind a queue's
capability, and explained by ``vcctl explain job``, like our own Jobs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from devcluster.cluster import Cluster, ClusterState
from devcluster.controllers import enable_controllers
from devcluster.webhook import enable_webhook
from pyextender.api import names
from tests.e2e.kube import bound_of, condition, read_podgroup, wait_for

pytestmark = pytest.mark.e2e

PG = ("scheduling.volcano.sh", "v1beta1")


@pytest.fixture
def adopted(
    cluster: Cluster, core: client.CoreV1Api, api: client.ApiClient, namespace: str, sidecar: str
) -> Iterator[str]:
    """The test's namespace, labelled for our webhook, with controllers and webhook up."""
    enable_controllers(cluster)
    enable_webhook(cluster)
    core.patch_namespace(namespace, {"metadata": {"labels": {names.ENABLED_LABEL: "true"}}})
    probe = _pod(namespace, "probe", "probe", {}, {}, cpu="1")
    wait_for(
        "the webhook gating pods in the namespace",
        lambda: core.create_namespaced_pod(namespace, probe, dry_run="All").spec.scheduling_gates,
        timeout=30,
    )
    yield namespace


@pytest.fixture
def queue_of(api: client.ApiClient) -> Iterator[Any]:
    custom = client.CustomObjectsApi(api)
    made: list[str] = []

    def make(capability: dict[str, str]) -> str:
        name = f"op{uuid.uuid4().hex[:8]}"
        custom.create_cluster_custom_object(*PG, "queues", {
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": name}, "spec": {"weight": 1, "capability": capability},
        })  # fmt: skip
        made.append(name)
        return name

    yield make
    for name in made:
        custom.delete_cluster_custom_object(*PG, "queues", name)


def _owner(api_version: str, kind: str, name: str) -> list[dict[str, Any]]:
    """metav1.NewControllerRef, as every one of these operators sets it."""
    return [{"apiVersion": api_version, "kind": kind, "name": name, "uid": str(uuid.uuid4()),
             "controller": True, "blockOwnerDeletion": True}]  # fmt: skip


def _pod(
    ns: str, name: str, group: str, annotations: dict[str, str], labels: dict[str, str],
    cpu: str = "1", gpus: int = 0, owner: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:  # fmt: skip
    res = {"cpu": cpu, "memory": "1Gi"} | ({"nvidia.com/gpu": str(gpus)} if gpus else {})
    limits = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels,
                     "ownerReferences": owner or [],
                     "annotations": {names.GROUP_NAME_ANNOTATION: group, **annotations}},
        "spec": {"schedulerName": "volcano", "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "main", "image": "busybox",
                                 "resources": {"requests": res, "limits": limits}}]},
    }  # fmt: skip


def _podgroup(
    api: client.ApiClient, ns: str, name: str, owner: list[dict[str, Any]], spec: dict[str, Any],
    status: dict[str, Any] | None = None,
) -> None:  # fmt: skip
    body: dict[str, Any] = {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns, "ownerReferences": owner}, "spec": spec,
    }  # fmt: skip
    if status:
        body["status"] = status
    client.CustomObjectsApi(api).create_namespaced_custom_object(*PG, ns, "podgroups", body)


def _phase(api: client.ApiClient, ns: str, name: str) -> str:
    return str((read_podgroup(api, ns, name).get("status") or {}).get("phase") or "")


def _explain(state: ClusterState, ns: str, name: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "pyextender.vcctl", f"--kubeconfig={state.kubeconfig}",
         "explain", "job", name, "-n", ns],
        capture_output=True, text=True, timeout=60, env=dict(os.environ),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    print(out.stdout)
    return out.stdout


# -- Kubeflow training operator ---------------------------------------------------------


def _pytorchjob(api: client.ApiClient, core: client.CoreV1Api, ns: str, job: str, queue: str,
                create_pods: bool) -> list[str]:  # fmt: skip
    """A PyTorchJob (1 master + 2 workers, 2 GPUs each) as the training operator runs it
    with gang scheduler volcano: PodGroup <job> (the job's annotations, minMember = all
    replicas, schedulingPolicy.queue, minResources = the replicas' requests); pods only
    once the PodGroup's phase is neither empty nor Pending."""
    owner = _owner("kubeflow.org/v1", "PyTorchJob", job)
    _podgroup(api, ns, job, owner, {
        "minMember": 3, "queue": queue,
        "minResources": {"cpu": "3", "memory": "3Gi", "nvidia.com/gpu": "6"},
    })  # fmt: skip
    if not create_pods:
        return []
    wait_for("the PodGroup Inqueue", lambda: _phase(api, ns, job) not in ("", "Pending"),
             timeout=60)  # fmt: skip
    pods = []
    for rtype, index in (("master", 0), ("worker", 0), ("worker", 1)):
        name = f"{job}-{rtype}-{index}"
        labels = {"training.kubeflow.org/operator-name": "pytorchjob-controller",
                  "training.kubeflow.org/job-name": job,
                  "training.kubeflow.org/replica-type": rtype,
                  "training.kubeflow.org/replica-index": str(index)}  # fmt: skip
        if rtype == "master":
            labels["training.kubeflow.org/job-role"] = "master"
        annotations = {names.VOLCANO_TASK_SPEC: rtype}
        core.create_namespaced_pod(ns, _pod(ns, name, job, annotations, labels, gpus=2,
                                            owner=owner))  # fmt: skip
        pods.append(name)
    return pods


def test_kubeflow_pytorchjob(
    state: ClusterState, api: client.ApiClient, core: client.CoreV1Api, adopted: str,
    queue_of: Any,
) -> None:  # fmt: skip
    ns = adopted
    queue = queue_of({"nvidia.com/gpu": "8"})
    pods = _pytorchjob(api, core, ns, "pt", queue, create_pods=True)
    wait_for("the PyTorchJob's 3 pods bound", lambda: bound_of(core, ns, pods) == 3, timeout=90)
    wait_for("its PodGroup Running", lambda: _phase(api, ns, "pt") == "Running", timeout=60)
    # a second one would take the queue to 12 GPUs of 8: queued, never given its pods
    _pytorchjob(api, core, ns, "pt2", queue, create_pods=False)
    why = wait_for("pt2's reason", lambda: condition(api, ns, "pt2", "Unschedulable"),
                   timeout=60)  # fmt: skip
    assert "capability exceeded" in why, why
    assert _phase(api, ns, "pt2") in ("", "Pending")  # the operator writes no status
    text = _explain(state, ns, "pt2")
    assert f"podgroup {ns}/pt2: Pending, minMember 3, 0 pods" in text, text
    assert f"position: 1 of 1 waiting in queue {queue}" in text, text
    assert f"capability: queue {queue} would exceed it (nvidia.com/gpu 12/8)" in text, text
    running = _explain(state, ns, "pt")
    assert f"podgroup {ns}/pt: Running, minMember 3, 3 pods (3 bound, 0 gated)" in running


# -- Spark operator -------------------------------------------------------------------------


def _spark_app(api: client.ApiClient, core: client.CoreV1Api, ns: str, app: str,
               queue: str) -> str:  # fmt: skip
    """A SparkApplication in cluster mode: PodGroup spark-<app>-pg, minMember 1 (the
    driver first), minResources = driver + initial executors, batchSchedulerOptions.queue;
    the driver pod (spark-submit makes it) carries the group annotation."""
    group = f"spark-{app}-pg"
    owner = _owner("sparkoperator.k8s.io/v1beta2", "SparkApplication", app)
    _podgroup(api, ns, group, owner, {
        "minMember": 1, "queue": queue, "minResources": {"cpu": "3", "memory": "3Gi"},
    }, status={"phase": "Pending"})  # fmt: skip
    labels = {"spark-role": "driver", "spark-app-name": app,
              "sparkoperator.k8s.io/app-name": app,
              "sparkoperator.k8s.io/launched-by-spark-operator": "true",
              "spark-app-selector": f"spark-{uuid.uuid4().hex}"}  # fmt: skip
    core.create_namespaced_pod(ns, _pod(ns, f"{app}-driver", group, {}, labels))
    return group


def test_spark_application(
    state: ClusterState, api: client.ApiClient, core: client.CoreV1Api, adopted: str,
    queue_of: Any,
) -> None:  # fmt: skip
    ns = adopted
    queue = queue_of({"cpu": "4"})
    group = _spark_app(api, core, ns, "pi", queue)
    wait_for("the driver bound", lambda: bound_of(core, ns, ["pi-driver"]) == 1, timeout=90)
    # the driver then makes its executors, in the same PodGroup
    execs = [f"pi-exec-{i}" for i in (1, 2)]
    for name in execs:
        labels = {"spark-role": "executor", "spark-app-name": "pi", "spark-exec-id": name[-1]}
        core.create_namespaced_pod(ns, _pod(ns, name, group, {}, labels))
    wait_for("the executors bound", lambda: bound_of(core, ns, execs) == 2, timeout=90)
    # the second app's driver alone fits the queue, its minResources do not (3 + 3 > 4)
    group2 = _spark_app(api, core, ns, "pi2", queue)
    why = wait_for("pi2's reason", lambda: condition(api, ns, group2, "Unschedulable"),
                   timeout=60)  # fmt: skip
    assert "capability exceeded" in why, why
    assert bound_of(core, ns, ["pi2-driver"]) == 0
    pod = core.read_namespaced_pod("pi2-driver", ns)
    assert [g.name for g in pod.spec.scheduling_gates or []] == ["pyextender.io/gang"]
    text = _explain(state, ns, "pi2")  # the app's name finds spark-pi2-pg
    assert f"podgroup {ns}/{group2}: Pending, minMember 1, 1 pod (0 bound, 1 gated)" in text
    assert f"capability: queue {queue} would exceed it (cpu 6/4)" in text, text


# -- KubeRay ----------------------------------------------------------------------------------


def _ray_cluster(api: client.ApiClient, core: client.CoreV1Api, ns: str, name: str,
                 queue: str) -> list[str]:  # fmt: skip
    """A RayCluster labelled ray.io/scheduler-name: volcano and volcano.sh/queue-name:
    PodGroup ray-<name>-pg (minMember = head + workers, minResources = all of them, queue
    from the label); pods annotated with the group and volcano.sh/task-spec = the group
    name (headgroup for the head), labelled with the queue, created at once."""
    group = f"ray-{name}-pg"
    owner = _owner("ray.io/v1", "RayCluster", name)
    _podgroup(api, ns, group, owner, {
        "minMember": 3, "queue": queue,
        "minResources": {"cpu": "3", "memory": "3Gi", "nvidia.com/gpu": "8"},
    }, status={"phase": "Pending"})  # fmt: skip
    pods = []
    for node_type, ray_group, suffix, gpus in (
        ("head", "headgroup", "head-" + uuid.uuid4().hex[:5], 0),
        ("worker", "gpu", "gpu-worker-" + uuid.uuid4().hex[:5], 4),
        ("worker", "gpu", "gpu-worker-" + uuid.uuid4().hex[:5], 4),
    ):
        pod_name = f"{name}-{suffix}"
        labels = {"ray.io/cluster": name, "ray.io/node-type": node_type,
                  "ray.io/group": ray_group, "app.kubernetes.io/created-by": "kuberay-operator",
                  names.VOLCANO_QUEUE_NAME: queue}  # fmt: skip
        annotations = {names.VOLCANO_TASK_SPEC: ray_group}
        core.create_namespaced_pod(ns, _pod(ns, pod_name, group, annotations, labels,
                                            gpus=gpus, owner=owner))  # fmt: skip
        pods.append(pod_name)
    return pods


def test_kuberay_raycluster(
    state: ClusterState, api: client.ApiClient, core: client.CoreV1Api, adopted: str,
    queue_of: Any,
) -> None:  # fmt: skip
    ns = adopted
    queue = queue_of({"nvidia.com/gpu": "8"})
    pods = _ray_cluster(api, core, ns, "rc", queue)
    wait_for("the RayCluster's 3 pods bound", lambda: bound_of(core, ns, pods) == 3, timeout=90)
    wait_for("its PodGroup Running", lambda: _phase(api, ns, "ray-rc-pg") == "Running",
             timeout=60)  # fmt: skip
    waiting = _ray_cluster(api, core, ns, "rc2", queue)
    why = wait_for("rc2's reason", lambda: condition(api, ns, "ray-rc2-pg", "Unschedulable"),
                   timeout=60)  # fmt: skip
    assert "capability exceeded" in why, why
    assert bound_of(core, ns, waiting) == 0  # none of the gang runs, not even the head
    text = _explain(state, ns, "rc2")  # the cluster's name finds ray-rc2-pg
    assert f"podgroup {ns}/ray-rc2-pg: Pending, minMember 3, 3 pods (0 bound, 3 gated)" in text
    assert f"position: 1 of 1 waiting in queue {queue}" in text, text
    assert f"capability: queue {queue} would exceed it (nvidia.com/gpu 16/8)" in text, text
