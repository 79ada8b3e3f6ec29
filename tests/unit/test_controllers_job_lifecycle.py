"""Volcano Job lifecycle rules beyond phases: policy timeouts, dependsOn, a task's
maxRetry (TaskFailed), networkTopology on the PodGroup, PVCs of spec.volumes."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from controllers import job_pods, job_state, job_volumes
from controllers.job_state import Request
from pyextender.api import names
from pyextender.api.volcano import Job

TEMPLATE = {"spec": {"containers": [{"name": "c", "image": "x"}]}}


def make_job(tasks: list[dict[str, Any]] | None = None, **spec: Any) -> Job:
    return Job.from_dict(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "train", "namespace": "ns", "uid": "u-1"},
            "spec": {
                "tasks": tasks
                or [
                    {"name": "master", "replicas": 1, "template": TEMPLATE},
                    {"name": "worker", "replicas": 2, "template": TEMPLATE},
                ],
                **spec,
            },
        }
    )


def pod(
    task: str,
    phase: str = "Running",
    ready: bool = True,
    restarts: int = 0,
    deleting: bool = False,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"annotations": {names.VOLCANO_TASK_SPEC: task}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "metadata": meta,
        "status": {
            "phase": phase,
            "containerStatuses": [{"name": "c", "ready": ready, "restartCount": restarts}],
        },
    }


# -- policy timeout -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("policies", "req", "want"),
    [
        ([{"event": "PodFailed", "action": "RestartJob"}], Request("PodFailed"), ("RestartJob", 0)),
        (
            [{"event": "PodFailed", "action": "RestartJob", "timeout": "1m30s"}],
            Request("PodFailed"),
            ("RestartJob", 90),
        ),
        (
            [{"exitCode": 3, "action": "AbortJob", "timeout": "2s"}],
            Request("PodFailed", exit_code=3),
            ("AbortJob", 2),
        ),
        # a Command is never delayed
        (
            [{"event": "*", "action": "RestartJob", "timeout": "1h"}],
            Request("CommandIssued", action="AbortJob"),
            ("AbortJob", 0),
        ),
        (
            [{"event": "PodFailed", "action": "RestartJob", "timeout": "5s"}],
            Request(),
            ("SyncJob", 0),
        ),
    ],
)
def test_policy_timeout_delays_the_action(
    policies: list[dict[str, Any]], req: Request, want: tuple[str, float]
) -> None:
    assert job_state.decide_with_delay(make_job(policies=policies), req) == want


@pytest.mark.parametrize(
    ("policies", "want"),
    [
        ([{"event": "PodPending", "action": "AbortJob", "timeout": "1m"}], ("AbortJob", 60)),
        # PodPending acts only after a timeout: without one the policy is passed over
        ([{"event": "*", "action": "RestartJob"}], ("SyncJob", 0)),
        (
            [{"event": "*", "action": "RestartJob", "timeout": "5s"}],
            ("RestartJob", 5),
        ),
    ],
)
def test_pod_pending_needs_a_timeout(
    policies: list[dict[str, Any]], want: tuple[str, float]
) -> None:
    job = make_job(policies=policies)
    assert job_state.decide_with_delay(job, Request("PodPending", pod="p")) == want


def test_task_policy_timeout_wins_over_the_jobs() -> None:
    tasks = [
        {
            "name": "worker",
            "replicas": 1,
            "template": TEMPLATE,
            "policies": [{"event": "PodEvicted", "action": "RestartTask", "timeout": "10s"}],
        }
    ]
    job = make_job(tasks, policies=[{"event": "PodEvicted", "action": "RestartJob"}])
    assert job_state.decide_with_delay(job, Request("PodEvicted", task="worker")) == (
        "RestartTask",
        10,
    )


# -- dependsOn ------------------------------------------------------------------------
def dep_job(iteration: str | None = None, names_: tuple[str, ...] = ("master",)) -> Job:
    depends: dict[str, Any] = {"name": list(names_)}
    if iteration:
        depends["iteration"] = iteration
    return make_job(
        [
            {"name": "master", "replicas": 1, "template": TEMPLATE},
            {"name": "ps", "replicas": 2, "minAvailable": 1, "template": TEMPLATE},
            {"name": "worker", "replicas": 2, "template": TEMPLATE, "dependsOn": depends},
        ]
    )


@pytest.mark.parametrize(
    ("pods", "ready"),
    [
        ([], False),
        ([pod("master", "Pending")], False),
        ([pod("master", ready=False)], False),
        ([pod("master", deleting=True)], False),
        ([pod("master")], True),
        ([pod("master", "Succeeded", ready=False)], False),
        ([pod("master", "Succeeded")], True),
    ],
)
def test_depends_on_waits_for_ready_pods(pods: list[dict[str, Any]], ready: bool) -> None:
    job = dep_job()
    assert job_state.dependencies_ready(job, job.spec.tasks[2], pods) is ready


def test_depends_on_counts_the_tasks_min_available() -> None:
    job = dep_job(names_=("ps",))
    worker = job.spec.tasks[2]
    assert not job_state.dependencies_ready(job, worker, [pod("ps", "Pending")])
    assert job_state.dependencies_ready(job, worker, [pod("ps"), pod("ps", "Pending")])


@pytest.mark.parametrize(
    ("iteration", "pods", "ready"),
    [
        (None, [pod("master")], False),
        ("all", [pod("master")], False),
        ("any", [pod("master")], True),
        ("any", [pod("ps")], True),
        ("any", [], False),
        ("all", [pod("master"), pod("ps")], True),
    ],
)
def test_depends_on_iteration(
    iteration: str | None, pods: list[dict[str, Any]], ready: bool
) -> None:
    job = dep_job(iteration, ("master", "ps"))
    assert job_state.dependencies_ready(job, job.spec.tasks[2], pods) is ready


def test_a_task_without_dependencies_is_always_ready() -> None:
    job = dep_job()
    assert job_state.dependencies_ready(job, job.spec.tasks[0], [])


# -- task maxRetry ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("max_retry", "restarts", "failed"),
    [
        (0, [3], False),  # 0 means Volcano's default, 3
        (0, [2, 2], True),
        (2, [2], False),
        (2, [3], True),
        (2, [1, 1, 1], True),
    ],
)
def test_task_max_retry_counts_container_restarts(
    max_retry: int, restarts: list[int], failed: bool
) -> None:
    job = make_job([{"name": "w", "replicas": 3, "maxRetry": max_retry, "template": TEMPLATE}])
    pods = [pod("w", restarts=r) for r in restarts]
    assert job_state.task_restarts_exceeded(job, "w", pods) is failed


def test_task_max_retry_ignores_finished_pods_and_other_tasks() -> None:
    job = make_job([{"name": "w", "replicas": 3, "maxRetry": 1, "template": TEMPLATE}])
    assert not job_state.task_restarts_exceeded(
        job, "w", [pod("w", "Failed", restarts=5), pod("x", restarts=5)]
    )


def test_task_failed_policy_fires() -> None:
    job = make_job(policies=[{"event": "TaskFailed", "action": "AbortJob"}])
    assert job_state.decide(job, Request("TaskFailed", task="worker")) == "AbortJob"


# -- networkTopology -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("topology", "want"),
    [
        (None, None),
        ({"mode": "hard", "highestTierAllowed": 2}, {"mode": "hard", "highestTierAllowed": 2}),
        (
            {"mode": "soft", "highestTierName": "spine"},
            {"mode": "soft", "highestTierName": "spine"},
        ),
        ({}, {"mode": "hard"}),
    ],
)
def test_network_topology_reaches_the_podgroup(
    topology: dict[str, Any] | None, want: dict[str, Any] | None
) -> None:
    spec: dict[str, Any] = {} if topology is None else {"networkTopology": topology}
    pg = job_pods.build_podgroup(make_job(**spec))
    assert pg["spec"].get("networkTopology") == want


# -- PVCs of spec.volumes ----------------------------------------------------------------
def test_claims_to_create_and_their_names() -> None:
    job = make_job(
        volumes=[
            {"mountPath": "/data", "volumeClaim": {"accessModes": ["ReadWriteOnce"]}},
            {"mountPath": "/ckpt", "volumeClaimName": "mine"},
        ]
    )
    assert job_volumes.unnamed_claims(job) == [0]
    name = job_volumes.claim_name("train")
    assert re.fullmatch(r"train-volume-[a-z0-9]{12}", name)
    body = job_volumes.pvc_body(job, name, {"accessModes": ["ReadWriteOnce"]})
    assert body["metadata"]["ownerReferences"][0]["kind"] == "Job"
    assert body["spec"] == {"accessModes": ["ReadWriteOnce"]}
    assert job_volumes.controlled(job) == {"volume-pvc-mine": "mine"}


def test_our_claim_names_are_no_user_edit() -> None:
    claim = {"mountPath": "/d", "volumeClaim": {"accessModes": ["ReadWriteOnce"]}}
    named = {**claim, "volumeClaimName": "train-volume-abc"}
    mine = {"mountPath": "/e", "volumeClaimName": "mine"}
    strip = job_volumes.without_generated_names
    assert strip({"volumes": [claim, mine]}) == strip({"volumes": [named, mine]})
    assert strip({"volumes": [mine]}) != strip({"volumes": [{**mine, "volumeClaimName": "x"}]})


# -- a delayed action whose cancelling pod event came first ----------------------------
def _job_controller() -> Any:
    from controllers.job import JobController
    from controllers.runtime import Context

    return JobController(Context.empty(None, "test", "volcano"))  # type: ignore[arg-type]


def named_pod(name: str, phase: str, deleting: bool = False) -> dict[str, Any]:
    body = pod("worker", phase=phase, deleting=deleting)
    body["metadata"].update(name=name, namespace="ns", uid=f"uid-{name}-{phase}")
    return body


@pytest.mark.parametrize(
    ("event", "pods", "delayed"),
    [
        # the evicted pod is gone and its replacement already runs: nothing to wait for
        ("PodEvicted", [named_pod("train-worker-1", "Running")], False),
        ("PodEvicted", [named_pod("train-worker-1", "Pending")], True),
        ("PodEvicted", [], True),
        ("PodEvicted", [named_pod("train-worker-1", "Running", deleting=True)], True),
        ("PodFailed", [named_pod("train-worker-1", "Failed")], True),
        ("PodFailed", [named_pod("train-worker-1", "Running")], False),
        # a pod that left Pending (or went) before its PodPending request was handled
        ("PodPending", [named_pod("train-worker-1", "Pending")], True),
        ("PodPending", [named_pod("train-worker-1", "Running")], False),
        ("PodPending", [], False),
        # another pod running changes nothing
        ("PodEvicted", [named_pod("train-worker-0", "Running")], True),
    ],
)
def test_a_delayed_action_is_not_armed_once_its_pod_moved_on(
    event: str, pods: list[dict[str, Any]], delayed: bool
) -> None:
    async def scenario() -> bool:
        ctl = _job_controller()
        ctl.ctx.pods.replace(pods)
        ctl._delay("ns/train", Request(event, task="worker", pod="train-worker-1"), "RestartJob", 8)
        return "train-worker-1" in ctl._delayed.get("ns/train", {})

    assert asyncio.run(scenario()) is delayed
