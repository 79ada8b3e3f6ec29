"""Volcano Job lifecycle actions and what tools watching a Job see of them, on a real
cluster (kwok's run-time stages make pods fail; devcluster/kwok_stages.py):

- ``RestartPod`` restarts only the pod that raised the event and counts a retry;
  ``RestartPartition`` restarts nothing when the job has no partitions (partitionPolicy
  is refused at admission), as Volcano's killPods skips a pod without a partition.
  Volcano: pkg/controllers/job/state/running.go, restarting.go (KillTarget with a
  Restarting / retryCount+1 update), pkg/controllers/job/job_controller_actions.go
  (killTarget / killPods: no retained phases, no version bump, "has not partition
  group ... skip"), pkg/controllers/job/job_controller_util.go (GetStateAction: the
  target is the request's task and pod).
- every action a policy fires is recorded with reason ``ExecuteAction`` and message
  ``Start to execute action <Action> `` (``Execute action <Action> after <d>`` when a
  timeout delays it). Volcano: pkg/controllers/job/job_controller.go processNextReq,
  job_controller_handler.go recordJobEvent (type Normal).
- ``TaskFailed`` is raised once the container restarts of a task's Pending/Running
  pods add up to more than its ``maxRetry``. Volcano: job_controller_handler.go
  updatePod, pkg/controllers/cache/cache.go TaskFailed. kwok never restarts a
  container, so the test writes the restart counts a kubelet would report (status
  subresource).

Jobs use default-scheduler; the test lifts the gang gate itself (``ungating``).
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client, watch

from tests.e2e.kube import wait_for
from tests.e2e.test_controllers import (
    JOBS,
    command,
    create_job,
    get_job,
    job_body,
    job_phases,
    live_pods,
)
from tests.e2e.test_job_lifecycle import tasks_job, template, ungating

pytestmark = pytest.mark.e2e


def job_events(core: client.CoreV1Api, ns: str, name: str) -> list[Any]:
    evs = core.list_namespaced_event(ns, field_selector=f"involvedObject.name={name}")
    return list(evs.items)


def messages(core: client.CoreV1Api, ns: str, name: str, reason: str) -> list[str]:
    return [e.message for e in job_events(core, ns, name) if e.reason == reason]


def uids(core: client.CoreV1Api, ns: str) -> dict[str, str]:
    return {p.metadata.name: p.metadata.uid for p in live_pods(core, ns)}


def running(core: client.CoreV1Api, ns: str, count: int) -> dict[str, str] | None:
    pods = live_pods(core, ns)
    if len(pods) == count and all(p.status.phase == "Running" for p in pods):
        return {p.metadata.name: p.metadata.uid for p in pods}
    return None


def status_of(co: client.CustomObjectsApi, ns: str, name: str) -> dict[str, Any]:
    return dict((get_job(co, ns, name) or {}).get("status") or {})


def test_restart_pod_restarts_only_the_pod_that_failed(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    """The worker fails 3 s after it starts; its RestartPod policy deletes that pod
    alone (the ps pod keeps its uid), the job goes Restarting with one more retry and
    then recreates the worker. The job's version stays (a pod restart is no whole-job
    kill), and our own deletion is no PodEvicted (else the job-level PodEvicted policy
    would abort it). After maxRetry (2) restarts the job is Failed."""
    body = tasks_job(
        "rp",
        [
            {"name": "ps", "replicas": 1, "template": template(None)},
            {
                "name": "worker",
                "replicas": 1,
                "template": template("3s", exit_code="1"),
                "policies": [{"event": "PodFailed", "action": "RestartPod"}],
            },
        ],
        policies=[{"event": "PodEvicted", "action": "AbortJob"}],
        maxRetry=2,
    )
    create_job(co, ns, body)
    first = wait_for("both pods Running", ungating(core, ns, lambda: running(core, ns, 2)), 60)
    second = wait_for(
        "a new worker pod Running",
        ungating(
            core,
            ns,
            lambda: (
                (now := running(core, ns, 2)) and now["rp-worker-0"] != first["rp-worker-0"] and now
            ),
        ),
        timeout=60,
    )
    assert second["rp-ps-0"] == first["rp-ps-0"], "RestartPod must leave the ps pod alone"
    status = status_of(co, ns, "rp")
    assert status["retryCount"] >= 1
    assert status.get("version", 0) == 0, status
    assert "Restarting" in job_phases(co, ns, "rp")
    wait_for(
        "job Failed", ungating(core, ns, lambda: job_phases(co, ns, "rp")[-1:] == ["Failed"]), 60
    )
    phases = job_phases(co, ns, "rp")
    assert phases.count("Restarting") == 2 and "Aborting" not in phases, phases
    assert status_of(co, ns, "rp")["retryCount"] == 2
    executed = messages(core, ns, "rp", "ExecuteAction")
    assert executed == ["Start to execute action RestartPod "], executed
    # one Event, its count bumped per restart (sent after the action: poll)
    wait_for(
        "2 restarts recorded",
        lambda: (
            [(e.count, e.type) for e in job_events(core, ns, "rp") if e.reason == "ExecuteAction"]
            == [(2, "Normal")]
        ),
    )


def test_restart_partition_without_partitions_restarts_nothing(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    """No pod has a partition, so RestartPartition is recorded and does nothing: the
    failed worker is neither deleted nor recreated, the job keeps its phase, retry
    count and version (Volcano's killPods returns before touching pods or status)."""
    body = tasks_job(
        "part",
        [
            {"name": "ps", "replicas": 1, "template": template(None)},
            {
                "name": "worker",
                "replicas": 1,
                "template": template("2s", exit_code="1"),
                "policies": [{"event": "PodFailed", "action": "RestartPartition"}],
            },
        ],
    )
    create_job(co, ns, body)
    before = wait_for("both pods Running", ungating(core, ns, lambda: running(core, ns, 2)), 60)
    wait_for(
        "the action recorded",
        lambda: (
            messages(core, ns, "part", "ExecuteAction")
            == ["Start to execute action RestartPartition "]
        ),
        timeout=60,
    )
    # the same reconcile writes the counts after the action: once failed is 1, it is done
    status = wait_for(
        "the failed pod counted", lambda: (s := status_of(co, ns, "part")).get("failed") == 1 and s
    )
    assert uids(core, ns) == before, "no pod may be restarted"
    assert status["state"]["phase"] == "Running", status
    assert status.get("retryCount", 0) == 0 and status.get("version", 0) == 0, status
    assert "Restarting" not in job_phases(co, ns, "part")


def test_task_failed_terminates_the_job_once_restarts_exceed_max_retry(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    """Task maxRetry 2: worker-0 restarting twice is within it, worker-1's first
    restart makes the task's sum 3 > 2 and raises TaskFailed, whose job policy
    terminates the job. The ExecuteAction event carries Volcano's message; ours
    (reason TerminateJob) names the pod whose update raised it."""
    body = tasks_job(
        "tf",
        [{"name": "worker", "replicas": 2, "maxRetry": 2, "template": template(None)}],
        policies=[{"event": "TaskFailed", "action": "TerminateJob"}],
    )
    create_job(co, ns, body)
    wait_for("both pods Running", ungating(core, ns, lambda: running(core, ns, 2)), 60)

    def restarted(pod: str, count: int) -> None:
        # what a kubelet reports for a container in CrashLoopBackOff
        status = {
            "containerStatuses": [
                {
                    "name": "c",
                    "image": "busybox",
                    "imageID": "",
                    "ready": False,
                    "restartCount": count,
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                }
            ]
        }
        core.patch_namespaced_pod_status(pod, ns, {"status": status})

    restarted("tf-worker-0", 2)
    restarted("tf-worker-1", 1)
    wait_for("job Terminated", lambda: job_phases(co, ns, "tf")[-1:] == ["Terminated"], 60)
    assert messages(core, ns, "tf", "ExecuteAction") == ["Start to execute action TerminateJob "]
    why = messages(core, ns, "tf", "TerminateJob")
    assert why and all("pod tf-worker-1 TaskFailed" in m for m in why), why
    assert "Restarting" not in job_phases(co, ns, "tf")


def test_a_delayed_action_is_announced_as_volcano_does(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    """PodFailed -> AbortJob after 2 s: first ``Execute action AbortJob after 2s``,
    then, when it is taken, ``Start to execute action AbortJob ``."""
    body = tasks_job(
        "later",
        [
            {"name": "bad", "replicas": 1, "template": template("1s", exit_code="3")},
            {"name": "good", "replicas": 1, "template": template(None)},
        ],
        policies=[{"event": "PodFailed", "action": "AbortJob", "timeout": "2s"}],
    )
    create_job(co, ns, body)
    wait_for(
        "job Aborted",
        ungating(core, ns, lambda: job_phases(co, ns, "later")[-1:] == ["Aborted"]),
        60,
    )
    executed = sorted(messages(core, ns, "later", "ExecuteAction"))
    assert executed == ["Execute action AbortJob after 2s", "Start to execute action AbortJob "]


def test_task_failed_as_volcanos_own_e2e_raises_it(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    """Volcano's test/e2e/jobseq/job_error_handling.go ("job level LifecyclePolicy,
    Event: TaskFailed; Action: TerminateJob"): the status of one pod of the task with
    maxRetry 3 is replaced by a single container status with restartCount 4 (no name,
    as that test writes it); the job goes Terminating with pods terminating, then
    Terminated, and an ExecuteAction event names TerminateJob."""
    never = template(None)
    never["spec"]["restartPolicy"] = "Never"
    body = tasks_job(
        "task-failed-terminate-job",
        [
            {"name": "success", "replicas": 2, "minAvailable": 2, "template": template(None)},
            {
                "name": "failed",
                "replicas": 2,
                "minAvailable": 2,
                "maxRetry": 3,
                "template": never,
            },
        ],
        policies=[{"event": "TaskFailed", "action": "TerminateJob"}],
    )
    name = "task-failed-terminate-job"
    create_job(co, ns, body)
    wait_for(
        "job Running", ungating(core, ns, lambda: job_phases(co, ns, name)[-1:] == ["Running"]), 60
    )
    pod = core.read_namespaced_pod(f"{name}-failed-0", ns)
    pod.status.container_statuses = [
        client.V1ContainerStatus(name="", image="", image_id="", ready=False, restart_count=4)
    ]
    since = co.list_namespaced_custom_object(*JOBS[:2], ns, JOBS[2])["metadata"]["resourceVersion"]
    core.replace_namespaced_pod_status(pod.metadata.name, ns, pod)
    # what Volcano's WaitJobPhases watches for: Terminating with pods terminating, then
    # Terminated
    seen: list[tuple[str, int]] = []
    for ev in watch.Watch().stream(
        co.list_namespaced_custom_object,
        *JOBS[:2],
        ns,
        JOBS[2],
        resource_version=since,
        timeout_seconds=60,
    ):
        status = ev["object"].get("status") or {}
        seen.append((status.get("state", {}).get("phase"), status.get("terminating", 0)))
        if seen[-1][0] == "Terminated":
            break
    assert any(phase == "Terminating" and terminating > 0 for phase, terminating in seen), seen
    assert seen[-1][0] == "Terminated", seen
    assert any("TerminateJob" in m for m in messages(core, ns, name, "ExecuteAction"))


def test_a_command_is_announced_as_volcano_does(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    """An AbortJob Command: ``CommandIssued`` with Volcano's message, then the action's
    ``ExecuteAction`` (Volcano: job_controller_handler.go processNextCommand, then
    job_controller.go processNextReq)."""
    create_job(co, ns, job_body("cmd", replicas=1, runnable=False))
    wait_for("the pod", lambda: len(live_pods(core, ns)) == 1)
    command(co, ns, "AbortJob", "Job", "cmd")
    wait_for("job Aborted", lambda: job_phases(co, ns, "cmd")[-1:] == ["Aborted"])
    assert messages(core, ns, "cmd", "CommandIssued") == [
        "Start to execute command AbortJob, and clean it up to make sure executed not more "
        "than once."
    ]
    assert messages(core, ns, "cmd", "ExecuteAction") == ["Start to execute action AbortJob "]


def test_task_failed_after_max_retry_is_lowered(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    """Volcano raises TaskFailed on any update of a task's Pending/Running pod while its
    restarts are over maxRetry, not only when a restart count rises: 3 restarts are
    within maxRetry 5; after maxRetry is lowered to 2 (an allowed Job update), the next
    update of a pod (a label here) terminates the job."""
    body = tasks_job(
        "low",
        [{"name": "worker", "replicas": 2, "maxRetry": 5, "template": template(None)}],
        policies=[{"event": "TaskFailed", "action": "TerminateJob"}],
    )
    create_job(co, ns, body)
    wait_for("both pods Running", ungating(core, ns, lambda: running(core, ns, 2)), 60)
    status = {
        "containerStatuses": [
            {
                "name": "c",
                "image": "busybox",
                "imageID": "",
                "ready": True,
                "restartCount": 3,
                "state": {"running": {}},
            }
        ]
    }
    core.patch_namespaced_pod_status("low-worker-0", ns, {"status": status})
    job = get_job(co, ns, "low") or {}
    tasks = job["spec"]["tasks"]
    tasks[0]["maxRetry"] = 2
    co.patch_namespaced_custom_object(*JOBS[:2], ns, JOBS[2], "low", {"spec": {"tasks": tasks}})
    wait_for(
        "the lower maxRetry stored",
        lambda: (get_job(co, ns, "low") or {})["spec"]["tasks"][0]["maxRetry"] == 2,
    )
    core.patch_namespaced_pod("low-worker-1", ns, {"metadata": {"labels": {"touched": "yes"}}})
    wait_for("job Terminated", lambda: job_phases(co, ns, "low")[-1:] == ["Terminated"], 60)
    assert messages(core, ns, "low", "ExecuteAction") == ["Start to execute action TerminateJob "]
