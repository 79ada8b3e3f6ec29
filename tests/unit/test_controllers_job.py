"""Volcano Job logic: naming, the pods and PodGroup it becomes, policies, phases."""

from __future__ import annotations

from typing import Any

import pytest

from controllers import job_plugins, job_pods, job_state, job_status
from controllers.job_state import Request
from pyextender.api import names
from pyextender.api.volcano import Job


def make_job(**spec: Any) -> Job:
    template = {
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "x",
                    "resources": {"requests": {"cpu": "2", "memory": "1Gi"}},
                }
            ]
        }
    }
    body: dict[str, Any] = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "ns", "uid": "u-1"},
        "spec": {
            "minAvailable": 3,
            "queue": "q",
            "tasks": [
                {"name": "ps", "replicas": 1, "template": template},
                {"name": "worker", "replicas": 2, "template": template},
            ],
            **spec,
        },
    }
    return Job.from_dict(body)


def test_names_follow_volcano() -> None:
    assert job_pods.podgroup_name("train", "u-1") == "train-u-1"
    assert job_pods.pod_name("train", "worker", 1) == "train-worker-1"


def test_pod_has_volcano_annotations_labels_and_gate() -> None:
    job = make_job(schedulerName="volcano", priorityClassName="high")
    pod = job_pods.build_pod(job, job.spec.tasks[1], 1, gated=True)
    meta, spec = pod["metadata"], pod["spec"]
    assert meta["name"] == "train-worker-1"
    ann = meta["annotations"]
    assert ann[names.GROUP_NAME_ANNOTATION] == "train-u-1"
    assert ann[names.VOLCANO_TASK_SPEC] == "worker"
    assert ann[names.VOLCANO_TASK_INDEX] == "1"
    assert ann[names.VOLCANO_JOB_NAME] == "train"
    assert ann[names.VOLCANO_JOB_VERSION] == "0"
    assert ann[names.VOLCANO_QUEUE_NAME] == "q"
    assert meta["labels"][names.VOLCANO_JOB_NAMESPACE] == "ns"
    assert meta["ownerReferences"][0]["kind"] == "Job"
    assert meta["ownerReferences"][0]["controller"] is True
    assert spec["schedulerName"] == "volcano"
    assert spec["priorityClassName"] == "high"
    assert spec["schedulingGates"] == [{"name": names.GANG_GATE}]
    assert "schedulingGates" not in job_pods.build_pod(job, job.spec.tasks[0], 0, False)["spec"]


def test_env_and_svc_plugins() -> None:
    job = make_job(plugins={"env": [], "svc": []})
    spec = job_pods.build_pod(job, job.spec.tasks[1], 1, gated=False)["spec"]
    env = {e["name"]: e for e in spec["containers"][0]["env"]}
    assert env["VC_TASK_INDEX"]["value"] == "1"
    assert env["VK_TASK_INDEX"]["value"] == "1"
    assert env["VC_WORKER_HOSTS"]["valueFrom"]["configMapKeyRef"]["name"] == "train-svc"
    assert spec["hostname"] == "train-worker-1"
    assert spec["subdomain"] == "train"
    hosts = job_plugins.svc_hosts(job)
    assert hosts["VC_WORKER_HOSTS"] == "train-worker-0.train,train-worker-1.train"
    assert hosts["VC_PS_NUM"] == "1"


@pytest.mark.parametrize(
    ("min_available", "task_min", "want_cpu"),
    [
        (3, (None, None), "6"),  # every replica
        (2, (None, None), "4"),  # the first two pods in task order
        (2, (1, 1), "4"),  # tasks' minAvailable first
        (3, (1, 1), "6"),  # then one more replica
    ],
)
def test_min_resources(min_available: int, task_min: tuple[int | None, ...], want_cpu: str) -> None:
    job = make_job(minAvailable=min_available)
    for task, n in zip(job.spec.tasks, task_min, strict=True):
        task.min_available = n
    assert job_pods.min_resources(job)["cpu"] == want_cpu


def test_podgroup_spec() -> None:
    spec = job_pods.podgroup_spec(make_job(priorityClassName="high"))
    assert spec["minMember"] == 3
    assert spec["minTaskMember"] == {"ps": 1, "worker": 2}
    assert spec["queue"] == "q"
    assert spec["priorityClassName"] == "high"
    assert spec["minResources"] == {
        "count/pods": "3",
        "pods": "3",
        "cpu": "6",
        "requests.cpu": "6",
        "memory": "3Gi",
        "requests.memory": "3Gi",
    }


POLICIES = [{"event": "PodFailed", "action": "RestartJob"}, {"exitCode": 3, "action": "AbortJob"}]
TASK_POLICIES = [{"event": "PodEvicted", "action": "RestartTask"}]


@pytest.mark.parametrize(
    ("req", "version", "want"),
    [
        (Request(), 0, "SyncJob"),
        (Request(event="PodFailed", task="worker", version=0), 0, "RestartJob"),
        (Request(event="PodFailed", task="worker", version=0), 1, "SyncJob"),  # stale pod
        (Request(event="PodEvicted", task="worker", version=0), 0, "RestartTask"),
        (Request(event="PodEvicted", task="ps", version=0), 0, "SyncJob"),
        (Request(event="TaskCompleted", task="ps", version=0), 0, "SyncJob"),
        (Request(event="Unknown"), 0, "SyncJob"),
        (Request(event="PodFailed", exit_code=3, task="ps", version=0), 0, "RestartJob"),
        (Request(event="X", exit_code=3, task="ps", version=0), 0, "AbortJob"),
        (Request(event="CommandIssued", action="AbortJob"), 5, "AbortJob"),
    ],
)
def test_decide(req: Request, version: int, want: str) -> None:
    job = make_job(policies=POLICIES)
    job.spec.tasks[1].policies = (
        type(job.spec.tasks[1]).from_dict({"name": "worker", "policies": TASK_POLICIES}).policies
    )
    job.status.version = version
    assert job_state.decide(job, req) == want


@pytest.mark.parametrize(
    ("phase", "action", "kill", "rule"),
    [
        ("Pending", "SyncJob", "", "pending"),
        ("Running", "SyncJob", "", "running"),
        ("Running", "RestartJob", "job", "restart"),
        ("Running", "RestartTask", "task", "restart"),
        ("Running", "RestartPod", "pod", "restart"),
        ("Running", "AbortJob", "job", "to:Aborting"),
        ("Pending", "TerminateJob", "job", "to:Terminating"),
        ("Running", "CompleteJob", "job", "to:Completing"),
        ("Restarting", "SyncJob", "none", "restarting"),
        ("Aborting", "SyncJob", "job", "aborting"),
        ("Aborted", "ResumeJob", "job", "restart"),
        ("Aborted", "SyncJob", "job", "keep"),
        ("Completed", "RestartJob", "job", "keep"),
    ],
)
def test_plan(phase: str, action: str, kill: str, rule: str) -> None:
    p = job_state.plan(phase, action)
    assert (p.kill, p.rule) == (kill, rule)


def counts(**kw: int) -> job_state.Counts:
    return job_state.Counts(**kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("rule", "c", "retry", "want"),
    [
        ("pending", counts(running=2), 0, None),
        ("pending", counts(running=2, failed=1), 0, "Running"),
        ("running", counts(running=3), 0, None),
        ("running", counts(succeeded=3), 0, "Completed"),
        ("running", counts(succeeded=2, failed=1), 0, "Failed"),
        ("restarting", counts(terminating=3), 0, None),
        ("restarting", counts(), 1, "Pending"),
        ("restarting", counts(), 3, "Failed"),  # maxRetry 3 reached
        ("aborting", counts(running=1), 0, None),
        ("aborting", counts(failed=1), 0, "Aborted"),
        ("completing", counts(), 0, "Completed"),
        ("terminating", counts(terminating=1), 0, None),
        ("restart", counts(), 0, "Restarting"),
        ("to:Aborting", counts(), 0, "Aborting"),
        ("keep", counts(), 0, None),
    ],
)
def test_next_phase(rule: str, c: job_state.Counts, retry: int, want: str | None) -> None:
    job = make_job()
    job.status.retry_count = retry
    assert job_state.next_phase(rule, job, c)[0] == want


def test_last_retry_keeps_finished_pods() -> None:
    job = make_job(maxRetry=3)
    restart = job_state.plan("Running", "RestartJob")
    assert job_state.retained(job, restart) == job_state.RETAIN_NONE
    job.status.retry_count = 2
    assert job_state.retained(job, restart) == job_state.RETAIN_SOFT


def test_status_helpers() -> None:
    assert job_status.replace_with_nulls(
        {"a": {"Running": 3}, "b": {"x": 1}}, {"a": {"Succeeded": 3}}
    ) == {"a": {"Running": None, "Succeeded": 3}, "b": None}
    assert job_status.go_duration(3723.5) == "1h2m3.5s"
    assert job_status.go_duration(2) == "2s"
    assert job_status.parse_time("2024-01-01T00:00:00Z") == 1704067200.0


def test_running_estimate_reaches_the_podgroup_for_backfill() -> None:
    from controllers.job_pods import build_podgroup
    from pyextender.api.volcano import Job

    job = Job.from_dict(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "short", "namespace": "ml", "uid": "u1"},
            "spec": {
                "minAvailable": 1,
                "runningEstimate": "90s",
                "tasks": [{"name": "t", "replicas": 1, "template": {"spec": {"containers": []}}}],
            },
        }
    )
    pg = build_podgroup(job)
    assert pg["metadata"]["annotations"]["pyextender.io/running-estimate"] == "90s"


def test_simulated_run_time_on_the_job_reaches_pods_unless_the_template_sets_one() -> None:
    job = make_job()
    job.metadata.annotations["pyextender.io/simulated-duration"] = "10m"
    job.metadata.annotations["pyextender.io/simulated-exit-code"] = "1"
    job.spec.tasks[0].template["metadata"] = {
        "annotations": {"pyextender.io/simulated-duration": "1m"}
    }
    ps = job_pods.build_pod(job, job.spec.tasks[0], 0, False)["metadata"]["annotations"]
    worker = job_pods.build_pod(job, job.spec.tasks[1], 0, False)["metadata"]["annotations"]
    assert ps["pyextender.io/simulated-duration"] == "1m"
    assert worker["pyextender.io/simulated-duration"] == "10m"
    assert ps["pyextender.io/simulated-exit-code"] == worker["pyextender.io/simulated-exit-code"]
