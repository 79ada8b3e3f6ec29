"""RestartPod / RestartPartition in the Job life cycle, the task maxRetry that never
raises TaskFailed (-1) and the duration form of Volcano's delayed-action event.
Volcano: pkg/controllers/job/state/{pending,running,restarting}.go,
pkg/controllers/job/job_controller_actions.go (killTarget / killPods),
pkg/controllers/cache/cache.go (TaskFailed)."""

from __future__ import annotations

import pytest

from controllers import job_state
from controllers.job import go_duration
from controllers.job_state import Request
from pyextender.api.volcano import FieldError, Job
from tests.unit.test_controllers_job_lifecycle import TEMPLATE, make_job, pod


@pytest.mark.parametrize("phase", ["Pending", "Running"])
def test_restart_pod_kills_its_pod_and_counts_a_retry(phase: str) -> None:
    pl = job_state.plan(phase, "RestartPod")
    assert (pl.kill, pl.rule, pl.drop_podgroup) == ("pod", "restart", False)
    assert job_state.next_phase(pl.rule, make_job(), job_state.Counts()) == ("Restarting", 1)


@pytest.mark.parametrize("phase", ["Pending", "Running"])
def test_restart_partition_without_partitions_changes_nothing(phase: str) -> None:
    pl = job_state.plan(phase, "RestartPartition")
    assert pl.kill == "none"
    c = job_state.count([pod("worker", "Failed"), pod("worker")])
    assert job_state.next_phase(pl.rule, make_job(), c) == (None, 0)
    # while Restarting it kills nothing either: the phase's own rule goes on
    assert job_state.plan("Restarting", "RestartPartition").kill == "none"


@pytest.mark.parametrize(("action", "kill"), [("RestartPod", "pod"), ("RestartTask", "task")])
def test_a_target_restart_while_restarting_kills_its_target(action: str, kill: str) -> None:
    pl = job_state.plan("Restarting", action)
    assert (pl.kill, pl.rule) == (kill, "restarting")
    assert job_state.plan("Restarting", "RestartJob").kill == "none"


def test_a_target_restart_keeps_nothing_even_on_the_last_retry() -> None:
    job = Job.from_dict(
        {
            **make_job().to_dict(),
            "status": {"retryCount": 2, "state": {"phase": "Running"}},
        }
    )
    assert job.spec.max_retry == 3
    assert job_state.retained(job, job_state.plan("Running", "RestartPod")) == frozenset()
    assert job_state.retained(job, job_state.plan("Running", "RestartJob")) == {
        "Succeeded",
        "Failed",
    }


def test_policies_name_the_new_actions() -> None:
    job = make_job(
        [
            {
                "name": "worker",
                "replicas": 2,
                "template": TEMPLATE,
                "policies": [{"event": "PodFailed", "action": "RestartPod"}],
            }
        ],
        policies=[{"event": "PodEvicted", "action": "RestartPartition"}],
    )
    assert job_state.decide(job, Request("PodFailed", task="worker", pod="p")) == "RestartPod"
    assert job_state.decide(job, Request("PodEvicted", task="worker")) == "RestartPartition"
    with pytest.raises(FieldError, match="RestartPods"):
        make_job(policies=[{"event": "PodFailed", "action": "RestartPods"}])


def test_task_max_retry_minus_one_never_raises_task_failed() -> None:
    job = make_job([{"name": "w", "replicas": 1, "maxRetry": -1, "template": TEMPLATE}])
    assert not job_state.task_restarts_exceeded(job, "w", [pod("w", restarts=100)])
    with pytest.raises(FieldError, match="maxRetry"):
        make_job([{"name": "w", "replicas": 1, "maxRetry": -2, "template": TEMPLATE}])


@pytest.mark.parametrize(
    ("seconds", "text"), [(6, "6s"), (90, "1m30s"), (0.5, "500ms"), (3600, "1h0m0s")]
)
def test_delays_print_as_go_durations(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text


def test_pods_being_deleted_do_not_count_toward_task_failed() -> None:
    job = make_job([{"name": "w", "replicas": 2, "maxRetry": 2, "template": TEMPLATE}])
    old_run = pod("w", restarts=3, deleting=True)
    assert not job_state.task_restarts_exceeded(job, "w", [old_run, pod("w")])
    assert job_state.task_restarts_exceeded(job, "w", [pod("w", restarts=3), pod("w")])
