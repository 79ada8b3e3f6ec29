"""PodGroup minResources as Volcano's controllers compute them (quota usage of the
first minAvailable pods), and the scheduler reading only node resources out of them.

Volcano: pkg/controllers/job/job_controller_actions.go (calcPGMinResources),
pkg/controllers/job/job_controller_util.go (CalcFirstCountResources,
CalcPGMinResources), pkg/controllers/util (GetPodQuotaUsage),
pkg/controllers/podgroup/pg_controller_handler.go (buildPodGroupFromPod),
pkg/scheduler/api/resource_info.go (NewResource skips count quotas and
requests./limits. names).
"""

from __future__ import annotations

from typing import Any

import pytest

from controllers import job_plugins, job_pods, podgroup
from controllers import pods as P
from pyextender.api.volcano import Job
from pyextender.cache.batch import group_from_dict


def _template(requests: dict[str, str], limits: dict[str, str] | None = None) -> dict[str, Any]:
    res: dict[str, Any] = {"requests": requests}
    if limits:
        res["limits"] = limits
    return {"spec": {"containers": [{"name": "c", "image": "x", "resources": res}]}}


def _job(min_available: int, *tasks: tuple[str, int, int | None, dict[str, Any]]) -> Job:
    return Job.from_dict(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "j", "namespace": "ns", "uid": "u"},
            "spec": {
                "minAvailable": min_available,
                "tasks": [
                    {
                        "name": name,
                        "replicas": replicas,
                        **({} if task_min is None else {"minAvailable": task_min}),
                        "template": template,
                    }
                    for name, replicas, task_min, template in tasks
                ],
            },
        }
    )


def test_quota_usage_has_volcanos_keys() -> None:
    spec = _template(
        {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "1", "hugepages-2Mi": "4Mi"},
        {"cpu": "1", "memory": "2Gi", "nvidia.com/gpu": "1"},
    )["spec"]
    assert P.format_quota(P.quota_usage(spec)) == {
        "count/pods": "1",
        "pods": "1",
        "cpu": "500m",
        "requests.cpu": "500m",
        "limits.cpu": "1",
        "memory": "1Gi",
        "requests.memory": "1Gi",
        "limits.memory": "2Gi",
        "nvidia.com/gpu": "1",
        "requests.nvidia.com/gpu": "1",
        "hugepages-2Mi": "4194304",
        "requests.hugepages-2Mi": "4194304",
    }


def test_job_min_resources_sum_the_first_min_available_pods() -> None:
    master = _template({"cpu": "1", "memory": "1Gi"}, {"cpu": "2"})
    worker = _template({"cpu": "500m", "nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "1"})
    job = _job(3, ("master", 1, None, master), ("worker", 4, 2, worker))
    assert job_pods.min_resources(job) == {
        "count/pods": "3",
        "pods": "3",
        "cpu": "2",
        "requests.cpu": "2",
        "limits.cpu": "2",
        "memory": "1Gi",
        "requests.memory": "1Gi",
        "nvidia.com/gpu": "2",
        "requests.nvidia.com/gpu": "2",
    }


@pytest.mark.parametrize(
    ("min_available", "task_mins", "want_cpu"),
    [
        # below the tasks' minimums (1 + 2 = 3): the first two replicas in task order,
        # both of task a, whatever b's minAvailable says (CalcFirstCountResources)
        (2, (1, 2), "2"),
        # at or above them: each task's minAvailable first, then spare replicas
        (3, (1, 2), "21"),
        (4, (1, 2), "22"),
        # a without minAvailable counts as its 3 replicas: 3 + 2 > 4, so the first four
        # replicas in task order (a's three, one of b)
        (4, (None, 2), "13"),
    ],
)
def test_which_pods_count(
    min_available: int, task_mins: tuple[int | None, int], want_cpu: str
) -> None:
    a = _template({"cpu": "1"})
    b = _template({"cpu": "10"})
    job = _job(min_available, ("a", 3, task_mins[0], a), ("b", 2, task_mins[1], b))
    assert job_pods.min_resources(job)["cpu"] == want_cpu
    assert job_pods.min_resources(job)["pods"] == str(min_available)


def test_bare_pod_podgroup_has_the_pods_quota_usage() -> None:
    pod = {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
        "spec": _template({"cpu": "100m"}, {"cpu": "200m"})["spec"],
    }
    assert podgroup.bare_podgroup(pod)["spec"]["minResources"] == {
        "count/pods": "1",
        "pods": "1",
        "cpu": "100m",
        "requests.cpu": "100m",
        "limits.cpu": "200m",
    }


def test_scheduler_reads_only_node_resources_from_min_resources() -> None:
    group = group_from_dict(
        {
            "metadata": {"name": "g", "namespace": "ns"},
            "spec": {
                "minMember": 2,
                "minResources": {
                    "count/pods": "2",
                    "pods": "2",
                    "cpu": "1500m",
                    "requests.cpu": "1500m",
                    "limits.cpu": "3",
                    "limits.memory": "2Gi",
                    "nvidia.com/gpu": "2",
                    "requests.nvidia.com/gpu": "2",
                },
            },
        }
    )
    assert group.min_resources == {"pods": 2, "cpu": 1500, "nvidia.com/gpu": 2}


def test_a_task_scaled_to_zero_has_no_hosts() -> None:
    """Volcano's svc GenerateHosts loops over the replicas: none, no host, even for a
    template with a fixed hostname (pkg/controllers/job/plugins/svc/svc.go)."""
    fixed = {"spec": {"hostname": "db", "containers": [{"name": "c", "image": "x"}]}}
    job = _job(0, ("db", 0, None, fixed), ("w", 0, None, _template({})))
    hosts = job_plugins.svc_hosts(job)
    assert hosts["db.host"] == "" and hosts["VC_DB_NUM"] == "0"
    assert hosts["VC_W_HOSTS"] == "" and hosts["VC_W_NUM"] == "0"


def test_tasks_are_taken_by_priority_class_value_first() -> None:
    """CalcFirstCountResources sorts the tasks by their template's PriorityClass value
    (highest first; none or unknown is 0) before taking the first minAvailable pods."""
    low = _template({"cpu": "1"})
    high = _template({"cpu": "10"})
    high["spec"]["priorityClassName"] = "high"
    job = _job(2, ("a", 3, None, low), ("b", 2, None, high))
    assert job_pods.min_resources(job)["cpu"] == "2"  # as written: a's pods first
    assert job_pods.min_resources(job, {"high": 1000})["cpu"] == "20"
    assert job_pods.podgroup_spec(job, {"high": 1000})["minResources"]["cpu"] == "20"
    assert job_pods.min_resources(job, {"high": -5})["cpu"] == "2"
    assert P.priority_values([{"metadata": {"name": "high"}, "value": 1000}]) == {"high": 1000}


@pytest.mark.parametrize(
    ("annotation", "want"),
    [(None, 1), ("3", 3), ("0", 0), ("-1", 1), ("two", 1)],
)
def test_owner_group_min_member(annotation: str | None, want: int) -> None:
    """pg_controller_handler.go getMinMemberFromUpperRes: the owner's
    scheduling.volcano.sh/group-min-member, 1 when absent or not an integer >= 0;
    minResources is that many pods' quota usage."""
    owner = {} if annotation is None else {podgroup.GROUP_MIN_MEMBER_ANNOTATION: annotation}
    pod = {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
        "spec": _template({"cpu": "100m"})["spec"],
    }
    spec = podgroup.bare_podgroup(pod, owner)["spec"]
    assert spec["minMember"] == want
    assert spec["minResources"].get("pods") == (str(want) if want else None)


def _owner(replicas: int, min_member: str, policy: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"replicas": replicas}
    if policy:
        spec["podManagementPolicy"] = policy
    annotations = {podgroup.GROUP_MIN_MEMBER_ANNOTATION: min_member}
    return {"metadata": {"name": "web", "annotations": annotations}, "spec": spec}


def test_a_min_member_its_owner_can_never_reach_is_named() -> None:
    """Volcano leaves such a PodGroup Pending without a word; we say why once, when the
    PodGroup is made: fewer replicas than the min-member, or a StatefulSet that makes its
    pods one at a time (OrderedReady, the default) behind a gang of more than one."""
    why = podgroup.unreachable_min_member
    assert why("StatefulSet", _owner(3, "3"), 3).startswith(
        "StatefulSet web creates its pods one at a time"
    )
    assert "podManagementPolicy: Parallel" in why("StatefulSet", _owner(3, "3", "OrderedReady"), 3)
    assert why("StatefulSet", _owner(3, "3", "Parallel"), 3) == ""
    assert why("StatefulSet", _owner(3, "1"), 1) == ""  # one at a time is a gang of one
    assert why("ReplicaSet", _owner(3, "3"), 3) == ""  # a ReplicaSet makes them all at once
    assert why("ReplicaSet", _owner(2, "3"), 3) == (
        "ReplicaSet web has 2 replicas, fewer than its scheduling.volcano.sh/group-min-member"
        " 3: its pods' PodGroup can never gather 3 members, so its pods that wait are held"
        " for ever; scale it to 3 or more"
    )
    assert why("ReplicaSet", _owner(0, "3"), 3) == ""  # scaled to zero: its pods are leaving
