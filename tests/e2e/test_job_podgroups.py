"""PodGroups the controllers make, read back from a real API server: a Volcano Job's
minResources with Volcano's quota-style keys (and the sidecar still admitting the
gang), and the ``podgroup-<owner uid>`` of a ReplicaSet's or StatefulSet's pods
deleted when the owner is scaled to zero.

devcluster runs no kube-controller-manager, so no ReplicaSet or StatefulSet
controller creates or deletes pods: the tests create the owner objects and the
owned pods themselves, and scale ``spec.replicas`` by hand (the trigger Volcano
watches is the owner's spec, which they set).
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from pyextender.api import names
from tests.e2e.kube import pod, priority_class, wait_for
from tests.e2e.test_controllers import create_job, get_pg, job_phases

pytestmark = pytest.mark.e2e


def _container(requests: dict[str, str], limits: dict[str, str]) -> dict[str, Any]:
    return {
        "name": "c",
        "image": "busybox",
        "resources": {"requests": requests, "limits": limits},
    }


def test_job_podgroup_min_resources_has_volcanos_quota_keys(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    """Volcano: pkg/controllers/job/job_controller_actions.go (calcPGMinResources),
    pkg/controllers/job/job_controller_util.go (CalcPGMinResources: tasks'
    minAvailable first, then further replicas), pkg/controllers/util
    (GetPodQuotaUsage: Kubernetes' pod quota usage, extended resources added back
    without ``requests.``), pkg/scheduler/api/resource_info.go (NewResource skips
    ``count/*`` and ``requests.*``/``limits.*``).

    master 1 x (1 CPU, 1Gi, limit 2 CPU, 1 GPU), worker 3 x (500m, 1 GPU), worker
    minAvailable 1, job minAvailable 3: the master, one worker (its minAvailable),
    then one more worker. The sidecar admits and binds the gang all the same."""

    def template(container: dict[str, Any]) -> dict[str, Any]:
        return {"spec": {"terminationGracePeriodSeconds": 0, "containers": [container]}}

    gpu = {"nvidia.com/gpu": "1"}
    master = _container({"cpu": "1", "memory": "1Gi", **gpu}, {"cpu": "2", **gpu})
    worker = _container({"cpu": "500m", **gpu}, gpu)
    job = create_job(
        co,
        ns,
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "quota"},
            "spec": {
                "minAvailable": 3,
                "schedulerName": "volcano",
                "tasks": [
                    {"name": "master", "replicas": 1, "template": template(master)},
                    {
                        "name": "worker",
                        "replicas": 3,
                        "minAvailable": 1,
                        "template": template(worker),
                    },
                ],
            },
        },
    )
    pg_name = f"quota-{job['metadata']['uid']}"
    pg = wait_for("the job's PodGroup", lambda: get_pg(co, ns, pg_name))
    assert pg["spec"]["minResources"] == {
        "count/pods": "3",
        "pods": "3",
        "cpu": "2",
        "requests.cpu": "2",
        "limits.cpu": "2",
        "memory": "1Gi",
        "requests.memory": "1Gi",
        "nvidia.com/gpu": "3",
        "requests.nvidia.com/gpu": "3",
    }
    wait_for(
        "the gang admitted and running",
        lambda: job_phases(co, ns, "quota")[-1:] == ["Running"],
        timeout=60,
    )
    phase = (get_pg(co, ns, pg_name) or {}).get("status", {}).get("phase")
    assert phase in ("Inqueue", "Running"), phase
    bound = [p for p in core.list_namespaced_pod(ns).items if p.spec.node_name]
    assert len(bound) >= 3


def test_job_min_resources_take_high_priority_tasks_first(
    co: client.CustomObjectsApi, api: client.ApiClient, ns: str
) -> None:
    """Volcano: pkg/controllers/job/job_controller_actions.go (calcPGMinResources
    orders the tasks by their template's PriorityClass value) and
    pkg/controllers/job/job_controller_util.go (CalcFirstCountResources).

    minAvailable 2 of a (3 x 100m, no class) then b (2 x 1 CPU, a class of value
    1000): b's two pods count, not the first two written."""
    pc = f"high-{ns}"
    priority_class(api, pc, 1000)
    try:

        def template(cpu: str, klass: str = "") -> dict[str, Any]:
            spec: dict[str, Any] = {"containers": [_container({"cpu": cpu}, {})]}
            if klass:
                spec["priorityClassName"] = klass
            return {"spec": spec}

        tasks = [
            {"name": "a", "replicas": 3, "template": template("100m")},
            {"name": "b", "replicas": 2, "template": template("1", pc)},
        ]
        job = create_job(
            co,
            ns,
            {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "metadata": {"name": "prio"},
                "spec": {"minAvailable": 2, "schedulerName": "default-scheduler", "tasks": tasks},
            },
        )
        pg = wait_for(
            "the job's PodGroup", lambda: get_pg(co, ns, f"prio-{job['metadata']['uid']}")
        )
        assert pg["spec"]["minResources"]["cpu"] == "2"
        assert pg["spec"]["minResources"]["pods"] == "2"
    finally:
        client.SchedulingV1Api(api).delete_priority_class(pc)


def _owner_ref(kind: str, obj: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "name": obj.metadata.name,
        "uid": obj.metadata.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _template(app: str) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": app}},
        "spec": {
            "schedulerName": "volcano",
            "containers": [{"name": "c", "image": "busybox"}],
        },
    }


def _owned_pod(core: client.CoreV1Api, ns: str, name: str, app: str, owner: dict[str, Any]) -> None:
    body = pod(name, ns, cpu="100m")
    body["metadata"]["labels"] = {"app": app}
    body["metadata"]["ownerReferences"] = [owner]
    core.create_namespaced_pod(ns, body)


def _scale(apps: client.AppsV1Api, kind: str, ns: str, name: str, replicas: int) -> None:
    patch = {"spec": {"replicas": replicas}}
    if kind == "ReplicaSet":
        apps.patch_namespaced_replica_set(name, ns, patch)
    else:
        apps.patch_namespaced_stateful_set(name, ns, patch)


def test_owner_scaled_to_zero_loses_its_podgroup(
    co: client.CustomObjectsApi, core: client.CoreV1Api, api: client.ApiClient, ns: str
) -> None:
    """Volcano: pkg/controllers/podgroup/pg_controller_handler.go (addReplicaSet /
    addStatefulSet, also called on update: spec.replicas 0 deletes
    ``podgroup-<owner uid>``; above 0, the first pod gets its PodGroup again) and
    pkg/controllers/podgroup/pg_controller.go (the owner informers).

    An old ReplicaSet after a rollout and a StatefulSet scaled to zero lose their
    PodGroups; a ReplicaSet still at one replica keeps its own; scaled back up, the
    ReplicaSet's surviving pod has its PodGroup again. The owner's
    ``scheduling.volcano.sh/group-min-member`` sets minMember, and minResources is that
    many pods' worth (buildPodGroupFromPod, getMinMemberFromUpperRes)."""
    core.patch_namespace(ns, {"metadata": {"labels": {names.ENABLED_LABEL: "true"}}})
    apps = client.AppsV1Api(api)
    owners: dict[str, tuple[str, Any]] = {}
    for name, kind in (("old", "ReplicaSet"), ("new", "ReplicaSet"), ("db", "StatefulSet")):
        spec = {"replicas": 1, "selector": {"matchLabels": {"app": name}}}
        spec["template"] = _template(name)
        body: dict[str, Any] = {"metadata": {"name": name}, "spec": spec}
        if name == "new":
            # from its Deployment: the gang size of the pods' PodGroup
            body["metadata"]["annotations"] = {"scheduling.volcano.sh/group-min-member": "2"}
        if kind == "ReplicaSet":
            owner = apps.create_namespaced_replica_set(ns, body)
        else:
            owner = apps.create_namespaced_stateful_set(
                ns, {**body, "spec": {**spec, "serviceName": name}}
            )
        owners[name] = (kind, owner)
        _owned_pod(core, ns, f"{name}-0", name, _owner_ref(kind, owner))
    pg_of = {name: f"podgroup-{o.metadata.uid}" for name, (_, o) in owners.items()}
    for name, pg_name in pg_of.items():
        pg = wait_for(f"{name}'s PodGroup", lambda n=pg_name: get_pg(co, ns, n))
        assert pg["metadata"]["ownerReferences"][0]["name"] == name
        want = 2 if name == "new" else 1
        assert pg["spec"]["minMember"] == want
        assert pg["spec"]["minResources"]["cpu"] == f"{100 * want}m"
        assert pg["spec"]["minResources"]["count/pods"] == str(want)

    for name in ("old", "db"):
        _scale(apps, owners[name][0], ns, name, 0)
    for name in ("old", "db"):
        wait_for(f"{name}'s PodGroup deleted", lambda n=pg_of[name]: get_pg(co, ns, n) is None)
    assert get_pg(co, ns, pg_of["new"]) is not None

    # a rollback: the old ReplicaSet scaled up again; its pod (still there: no
    # controller-manager deletes it) is in a PodGroup again
    _scale(apps, "ReplicaSet", ns, "old", 1)
    pg = wait_for("old's PodGroup again", lambda: get_pg(co, ns, pg_of["old"]))
    assert pg["spec"]["minMember"] == 1
