"""Volcano Job lifecycle on a real cluster, driven by run time on kwok's fake nodes
(devcluster/kwok_stages.py): PodFailed -> RestartJob until maxRetry then Failed,
TaskCompleted -> CompleteJob, PodEvicted -> RestartJob after a real preemption by the
sidecar, a policy's timeout, dependsOn ordering, and a queue's capability held by
running jobs over time.

Jobs of the first tests use default-scheduler and the test lifts the gang gate
itself, again for every run of a restarted job (the sidecar of the shared cluster
may lift it first). The preemption and capability tests use the ``volcano``
scheduler: the sidecar admits gangs, kube-scheduler binds through the extender.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes import client

from devcluster.kwok_stages import DURATION_ANNOTATION, EXIT_CODE_ANNOTATION
from pyextender.api import names
from tests.e2e.kube import bound_of, gang, priority_class, queue, wait_for
from tests.e2e.test_controllers import (
    COMMANDS,
    create_job,
    events,
    get_job,
    job_body,
    job_phases,
    live_pods,
    ungate,
)

pytestmark = pytest.mark.e2e


def ungating(core: client.CoreV1Api, ns: str, check: Any) -> Any:
    """A wait_for check that first lifts the gates of whatever pods exist now."""

    def step() -> Any:
        ungate(core, ns)
        return check()

    return step


def template(
    run_for: str | None, cpu: str = "100m", gpus: int = 0, exit_code: str | None = None
) -> dict[str, Any]:
    annotations = {DURATION_ANNOTATION: run_for} if run_for else {}
    if exit_code:
        annotations[EXIT_CODE_ANNOTATION] = exit_code
    resources: dict[str, Any] = {"requests": {"cpu": cpu}}
    if gpus:
        resources = {
            "requests": {"cpu": cpu, "nvidia.com/gpu": str(gpus)},
            "limits": {"nvidia.com/gpu": str(gpus)},
        }
    return {
        "metadata": {"annotations": annotations},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "c", "image": "busybox", "resources": resources}],
        },
    }


def tasks_job(name: str, tasks: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"schedulerName": "default-scheduler", "tasks": tasks, **spec},
    }


def event_count(core: client.CoreV1Api, ns: str, name: str, reason: str) -> int:
    """How often ``reason`` was recorded on ``name`` (repeats are folded into a count)."""
    evs = core.list_namespaced_event(ns, field_selector=f"involvedObject.name={name}").items
    return sum(e.count or 1 for e in evs if e.reason == reason)


def pod_names(core: client.CoreV1Api, ns: str) -> set[str]:
    return {p.metadata.name for p in live_pods(core, ns)}


def test_pod_failed_restarts_the_job_until_max_retry_then_fails(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    body = job_body(
        "flaky",
        replicas=1,
        run_for="2s",
        policies=[{"event": "PodFailed", "action": "RestartJob"}],
        maxRetry=2,
    )
    body["spec"]["tasks"][0]["template"]["metadata"]["annotations"][EXIT_CODE_ANNOTATION] = "1"
    create_job(co, ns, body)
    wait_for(
        "job Failed after its retries",
        ungating(core, ns, lambda: job_phases(co, ns, "flaky")[-1:] == ["Failed"]),
        timeout=120,
        interval=0.3,
    )
    phases = job_phases(co, ns, "flaky")
    assert phases.count("Restarting") == 2, phases
    assert phases.count("Running") >= 2, phases  # every run started before it failed
    status = (get_job(co, ns, "flaky") or {})["status"]
    assert status["retryCount"] == 2
    assert status["state"]["reason"] == "JobFailed"
    assert event_count(core, ns, "flaky", "RestartJob") == 2


def test_task_completed_completes_the_job(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    """The driver ends after 3 s; its TaskCompleted policy completes the job, whose
    workers (running until deleted) are removed while the driver's pod is kept."""
    body = tasks_job(
        "drv",
        [
            {
                "name": "driver",
                "replicas": 1,
                "template": template("3s"),
                "policies": [{"event": "TaskCompleted", "action": "CompleteJob"}],
            },
            {"name": "worker", "replicas": 2, "template": template(None)},
        ],
    )
    create_job(co, ns, body)
    wait_for(
        "job Running",
        ungating(core, ns, lambda: "Running" in job_phases(co, ns, "drv")),
        timeout=60,
    )
    wait_for("job Completed", lambda: job_phases(co, ns, "drv")[-1:] == ["Completed"], timeout=60)
    assert job_phases(co, ns, "drv")[-2:] == ["Completing", "Completed"]
    wait_for("workers removed", lambda: pod_names(core, ns) == {"drv-driver-0"})
    assert core.read_namespaced_pod("drv-driver-0", ns).status.phase == "Succeeded"
    assert any(
        e.startswith("CompleteJob:") and "TaskCompleted" in e for e in events(core, ns, "drv")
    )


def test_policy_timeout_delays_the_action(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    """PodFailed -> AbortJob after 6 s: the job stays Running that long, then aborts."""
    body = tasks_job(
        "slow",
        [
            {"name": "bad", "replicas": 1, "template": template("1s", exit_code="2")},
            {"name": "good", "replicas": 1, "template": template(None)},
        ],
        policies=[{"event": "PodFailed", "action": "AbortJob", "timeout": "6s"}],
    )
    create_job(co, ns, body)
    wait_for(
        "the bad pod failed",
        ungating(
            core,
            ns,
            lambda: any(
                p.status.phase == "Failed" for p in live_pods(core, ns) if "bad" in p.metadata.name
            ),
        ),
        timeout=60,
    )
    failed_at = time.monotonic()
    wait_for(
        "the delay announced",
        lambda: any(
            e.startswith("ExecuteAction:") and "AbortJob after 6s" in e
            for e in events(core, ns, "slow")
        ),
    )
    assert "Aborting" not in job_phases(co, ns, "slow")
    wait_for("job Aborted", lambda: job_phases(co, ns, "slow")[-1:] == ["Aborted"], timeout=60)
    # 6 s after the controller saw the failure, which is after we did (minus polling)
    assert time.monotonic() - failed_at >= 4.5
    assert "Running" in job_phases(co, ns, "slow")


def test_depends_on_creates_a_task_once_its_dependency_is_ready(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    held = template(None)
    held["spec"]["schedulingGates"] = [{"name": "e2e.pyextender.io/hold"}]  # ours to lift
    body = tasks_job(
        "dag",
        [
            {"name": "master", "replicas": 1, "template": held},
            {
                "name": "worker",
                "replicas": 2,
                "template": template(None),
                "dependsOn": {"name": ["master"]},
            },
        ],
        minAvailable=1,
    )
    create_job(co, ns, body)
    wait_for("the master pod", lambda: pod_names(core, ns) == {"dag-master-0"})
    for _ in range(6):  # the master cannot run yet: no workers
        time.sleep(0.5)
        assert pod_names(core, ns) == {"dag-master-0"}
    ungate(core, ns)
    wait_for(
        "workers after the master runs",
        lambda: pod_names(core, ns) == {"dag-master-0", "dag-worker-0", "dag-worker-1"},
        timeout=60,
    )
    master = core.read_namespaced_pod("dag-master-0", ns)
    ready_at = next(c.last_transition_time for c in master.status.conditions if c.type == "Ready")
    for name in ("dag-worker-0", "dag-worker-1"):
        created = core.read_namespaced_pod(name, ns).metadata.creation_timestamp
        assert created >= ready_at.replace(microsecond=0), (name, created, ready_at)
    wait_for(
        "job Running with every pod",
        ungating(
            core,
            ns,
            lambda: ((get_job(co, ns, "dag") or {}).get("status") or {}).get("running") == 3,
        ),
        timeout=60,
    )


def test_pod_evicted_restarts_the_job_after_a_preemption(
    co: client.CustomObjectsApi, core: client.CoreV1Api, api: client.ApiClient, ns: str
) -> None:
    """A low-priority Volcano Job holds every GPU; a high-priority gang preempts it
    (the sidecar evicts the whole gang); PodEvicted -> RestartJob runs it again, and its
    new pods wait for room."""
    priority_class(api, "e2e-lifecycle-low", 10)
    priority_class(api, "e2e-lifecycle-high", 1000)
    body = tasks_job(
        "low",
        [{"name": "w", "replicas": 4, "template": template(None, gpus=4)}],
        schedulerName="volcano",
        priorityClassName="e2e-lifecycle-low",
        policies=[{"event": "PodEvicted", "action": "RestartJob"}],
    )
    create_job(co, ns, body)
    wait_for(
        "low job Running on every GPU",
        lambda: ((get_job(co, ns, "low") or {}).get("status") or {}).get("running") == 4,
        timeout=90,
    )
    high = gang(core, api, ns, "high", 2, gpus=4, priority_class="e2e-lifecycle-high")
    wait_for("high gang bound", lambda: bound_of(core, ns, high) == 2, timeout=120)
    wait_for(
        "low job restarted",
        lambda: (
            "Restarting" in job_phases(co, ns, "low")
            and job_phases(co, ns, "low")[-1] in ("Pending", "Running")
        ),
        timeout=60,
    )
    status = (get_job(co, ns, "low") or {})["status"]
    assert status["retryCount"] == 1 and status["version"] >= 1
    assert any(e.startswith("RestartJob:") and "PodEvicted" in e for e in events(core, ns, "low"))
    preempted = core.list_namespaced_event(ns, field_selector="reason=Preempted").items
    victims = {e.involved_object.name for e in preempted}
    # the sidecar evicts the whole gang; pods the RestartJob deleted first leave no event
    assert victims and victims <= {f"low-w-{i}" for i in range(4)}, victims
    wait_for(
        "the next run's pods",
        lambda: (
            (p := [x for x in live_pods(core, ns) if x.metadata.name.startswith("low-")])
            and len(p) == 4
            and all(x.metadata.annotations[names.VOLCANO_JOB_VERSION] != "0" for x in p)
        ),
    )
    # 8 GPUs are left and the job needs 16: the new run waits whole (gated, behind
    # its new PodGroup)
    time.sleep(3)
    low = [p for p in live_pods(core, ns) if p.metadata.name.startswith("low-")]
    groups = co.list_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", ns, "podgroups")
    assert not [p for p in low if p.spec.node_name], (
        [
            (
                p.metadata.name,
                p.metadata.annotations.get(names.VOLCANO_JOB_VERSION),
                p.spec.node_name,
                [g.name for g in p.spec.scheduling_gates or []],
            )
            for p in low
        ],
        [(g["metadata"]["name"], g["metadata"]["uid"]) for g in groups["items"]],
    )


def test_queue_capability_is_held_by_running_jobs(
    co: client.CustomObjectsApi, core: client.CoreV1Api, api: client.ApiClient, ns: str
) -> None:
    """A queue capped at 1 CPU: a job holding 800m for 12 s keeps a second job of
    800m waiting the whole time; the second runs once the first completed."""
    name = f"cap-{ns}"
    queue(api, name, capability={"cpu": "1"})
    try:
        for job, run_for in (("first", "12s"), ("second", "2s")):
            create_job(
                co,
                ns,
                tasks_job(
                    job,
                    [{"name": "w", "replicas": 2, "template": template(run_for, cpu="400m")}],
                    schedulerName="volcano",
                    queue=name,
                ),
            )
            if job == "first":
                wait_for(
                    "first Running",
                    lambda: job_phases(co, ns, "first")[-1:] == ["Running"],
                    timeout=60,
                )
        started = time.monotonic()
        while job_phases(co, ns, "first")[-1:] == ["Running"]:
            second = (get_job(co, ns, "second") or {}).get("status") or {}
            assert second.get("running", 0) == 0, "second ran while first held the capability"
            assert time.monotonic() - started < 60
            time.sleep(0.5)
        assert time.monotonic() - started >= 5, "first should hold the queue for ~12 s"
        assert job_phases(co, ns, "first")[-1:] == ["Completed"]
        wait_for(
            "second Completed after first",
            lambda: job_phases(co, ns, "second")[-1:] == ["Completed"],
            timeout=60,
        )
    finally:
        co.delete_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", name)


def test_restart_task_command_restarts_only_its_task(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    body = tasks_job(
        "rt",
        [
            {"name": "ps", "replicas": 1, "template": template(None)},
            {"name": "worker", "replicas": 2, "template": template(None)},
        ],
    )
    create_job(co, ns, body)
    before = wait_for(
        "3 pods running",
        ungating(
            core,
            ns,
            lambda: (
                (p := live_pods(core, ns))
                and len(p) == 3
                and all(x.status.phase == "Running" for x in p)
                and {x.metadata.name: x.metadata.uid for x in p}
            ),
        ),
        timeout=60,
    )
    co.create_namespaced_custom_object(
        *COMMANDS[:2],
        ns,
        COMMANDS[2],
        {
            "apiVersion": "bus.volcano.sh/v1alpha1",
            "kind": "Command",
            "metadata": {
                "name": "restart-workers",
                "annotations": {names.VOLCANO_TASK_SPEC: "worker"},
            },
            "action": "RestartTask",
            "target": {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "name": "rt",
                "uid": "0",
            },
        },
    )
    after = wait_for(
        "new worker pods",
        ungating(
            core,
            ns,
            lambda: (
                (p := {x.metadata.name: x.metadata.uid for x in live_pods(core, ns)})
                and len(p) == 3
                and all(p[w] != before[w] for w in ("rt-worker-0", "rt-worker-1"))
                and p
            ),
        ),
        timeout=60,
    )
    assert after["rt-ps-0"] == before["rt-ps-0"], "the ps task must keep its pod"
    assert any(e.startswith("RestartTask:") for e in events(core, ns, "rt"))
    assert "Restarting" in job_phases(co, ns, "rt")


def test_task_max_retry_raises_task_failed(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    """Container restarts of a task's pods beyond its maxRetry are Volcano's TaskFailed
    event; here its policy aborts the job. (kwok never restarts a container in place,
    so the test writes the restart count the kubelet would report.)"""
    body = job_body(
        "tf", replicas=2, runnable=False,
        policies=[{"event": "TaskFailed", "action": "AbortJob"}],
    )  # fmt: skip
    body["spec"]["tasks"][0]["maxRetry"] = 1
    create_job(co, ns, body)
    wait_for("2 pods", lambda: len(live_pods(core, ns)) == 2)

    def restarted(count: int) -> None:
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
        core.patch_namespaced_pod_status("tf-worker-0", ns, {"status": status})

    restarted(1)  # 1 restart: within maxRetry 1
    time.sleep(2)
    assert "Aborting" not in job_phases(co, ns, "tf")
    restarted(2)
    wait_for("job Aborted", lambda: job_phases(co, ns, "tf")[-1:] == ["Aborted"], timeout=60)
    assert any(e.startswith("AbortJob:") and "TaskFailed" in e for e in events(core, ns, "tf"))


def test_volume_claim_becomes_a_pvc_every_pod_mounts(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    claim = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    body = job_body(
        "io", replicas=2, runnable=False, volumes=[{"mountPath": "/data", "volumeClaim": claim}]
    )
    job = create_job(co, ns, body)
    named = wait_for(
        "the Job names its claim",
        lambda: (get_job(co, ns, "io") or {})["spec"]["volumes"][0].get("volumeClaimName"),
    )
    assert named.startswith("io-volume-") and len(named) == len("io-volume-") + 12
    pvc = core.read_namespaced_persistent_volume_claim(named, ns)
    assert pvc.spec.access_modes == ["ReadWriteOnce"]
    ref = pvc.metadata.owner_references[0]
    assert (ref.kind, ref.name, ref.uid) == ("Job", "io", job["metadata"]["uid"])
    pods = wait_for("2 pods", lambda: (p := live_pods(core, ns)) and len(p) == 2 and p)
    for p in pods:
        volume = next(v for v in p.spec.volumes if v.persistent_volume_claim)
        assert volume.persistent_volume_claim.claim_name == named
        mounts = {m.name: m.mount_path for m in p.spec.containers[0].volume_mounts}
        assert mounts[volume.name] == "/data"
    status = wait_for(
        "controlledResources",
        lambda: ((get_job(co, ns, "io") or {}).get("status") or {}).get("controlledResources"),
    )
    assert status[f"volume-pvc-{named}"] == named
    assert len(core.list_namespaced_persistent_volume_claim(ns).items) == 1


def test_min_success_completes_the_job_and_stops_the_rest(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    """minSuccess 2 of 3: two pods end after 2 s, one would run forever; the job is
    Completed at the second success and the last pod is removed."""
    body = tasks_job(
        "ms",
        [
            {"name": "quick", "replicas": 2, "template": template("2s")},
            {"name": "slow", "replicas": 1, "template": template(None)},
        ],
        minSuccess=2,
    )
    create_job(co, ns, body)
    wait_for(
        "job Completed",
        ungating(core, ns, lambda: job_phases(co, ns, "ms")[-1:] == ["Completed"]),
        timeout=60,
    )
    assert "Running" in job_phases(co, ns, "ms")
    wait_for("the slow pod removed", lambda: pod_names(core, ns) == {"ms-quick-0", "ms-quick-1"})
    assert (get_job(co, ns, "ms") or {})["status"]["succeeded"] == 2


def test_terminate_command_terminates_the_job(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    create_job(co, ns, job_body("tm", replicas=2, run_for=None))
    wait_for(
        "job Running",
        ungating(core, ns, lambda: job_phases(co, ns, "tm")[-1:] == ["Running"]),
        timeout=60,
    )
    co.create_namespaced_custom_object(
        *COMMANDS[:2],
        ns,
        COMMANDS[2],
        {
            "apiVersion": "bus.volcano.sh/v1alpha1",
            "kind": "Command",
            "metadata": {"name": "terminate-tm"},
            "action": "TerminateJob",
            "target": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "tm",
                       "uid": "0"},
        },
    )  # fmt: skip
    wait_for("job Terminated", lambda: job_phases(co, ns, "tm")[-1:] == ["Terminated"], timeout=60)
    assert job_phases(co, ns, "tm")[-2:] == ["Terminating", "Terminated"]
    wait_for("pods gone", lambda: live_pods(core, ns) == [])


def test_a_replacement_pod_that_runs_cancels_the_delayed_action(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    """PodEvicted -> RestartJob after 8 s; the controller replaces the evicted pod at
    once, and that pod reaching Running cancels the restart, as in Volcano."""
    create_job(
        co,
        ns,
        job_body(
            "keep",
            replicas=2,
            run_for=None,
            policies=[{"event": "PodEvicted", "action": "RestartJob", "timeout": "8s"}],
        ),
    )
    wait_for(
        "job Running",
        ungating(core, ns, lambda: job_phases(co, ns, "keep")[-1:] == ["Running"]),
        timeout=60,
    )
    old_uid = core.read_namespaced_pod("keep-worker-1", ns).metadata.uid
    core.delete_namespaced_pod("keep-worker-1", ns, grace_period_seconds=0)
    evicted_at = time.monotonic()
    wait_for(
        "the restart put off",
        lambda: any("RestartJob after 8s" in e for e in events(core, ns, "keep")),
    )
    wait_for(
        "a replacement pod running",
        ungating(
            core,
            ns,
            lambda: any(
                p.metadata.name == "keep-worker-1"
                and p.metadata.uid != old_uid
                and p.status.phase == "Running"
                for p in live_pods(core, ns)
            ),
        ),
        timeout=60,
    )
    time.sleep(max(0.0, evicted_at + 11 - time.monotonic()))  # past the 8 s, with margin
    assert "Restarting" not in job_phases(co, ns, "keep"), job_phases(co, ns, "keep")
    status = (get_job(co, ns, "keep") or {})["status"]
    assert status.get("retryCount", 0) == 0 and status["running"] == 2
    assert event_count(core, ns, "keep", "RestartJob") == 0


def test_pod_pending_too_long_aborts_the_job(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    """PodPending -> AbortJob after 4 s: pods that fit no node stay Pending; the job is
    aborted once they have waited that long."""
    create_job(
        co,
        ns,
        job_body(
            "stuck",
            replicas=2,
            runnable=False,
            policies=[{"event": "PodPending", "action": "AbortJob", "timeout": "4s"}],
        ),
    )
    wait_for("2 pods", lambda: len(live_pods(core, ns)) == 2)
    created = time.monotonic()
    wait_for("job Aborted", lambda: job_phases(co, ns, "stuck")[-1:] == ["Aborted"], timeout=60)
    assert time.monotonic() - created >= 3
    assert any(
        e.startswith("ExecuteAction:") and "AbortJob after 4s" in e
        for e in events(core, ns, "stuck")
    )
    assert any(e.startswith("AbortJob:") and "PodPending" in e for e in events(core, ns, "stuck"))


def test_depends_on_through_the_sidecar(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    """With the volcano scheduler: minAvailable 1 below the tasks' minimums (1 + 2), so the
    sidecar admits the gang on the master alone (Volcano's rule); the workers, created once
    the master runs, are bound too. Nothing is lifted by the test."""
    body = tasks_job(
        "vdag",
        [
            {"name": "master", "replicas": 1, "template": template(None)},
            {
                "name": "worker",
                "replicas": 2,
                "template": template(None),
                "dependsOn": {"name": ["master"]},
            },
        ],
        minAvailable=1,
        schedulerName="volcano",
    )
    create_job(co, ns, body)
    wait_for(
        "every pod running",
        lambda: ((get_job(co, ns, "vdag") or {}).get("status") or {}).get("running") == 3,
        timeout=90,
    )
    pods = {p.metadata.name: p for p in live_pods(core, ns)}
    master_ready = next(
        c.last_transition_time for c in pods["vdag-master-0"].status.conditions if c.type == "Ready"
    )
    for name in ("vdag-worker-0", "vdag-worker-1"):
        assert pods[name].spec.node_name and pods[name].spec.scheduler_name == "volcano"
        assert pods[name].metadata.creation_timestamp >= master_ready.replace(microsecond=0)


def test_network_topology_reaches_the_podgroup(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    job = create_job(
        co,
        ns,
        job_body(
            "nt", replicas=2, runnable=False,
            networkTopology={"mode": "hard", "highestTierAllowed": 2},
        ),
    )  # fmt: skip
    pg = wait_for(
        "the PodGroup",
        lambda: next(
            (
                g
                for g in co.list_namespaced_custom_object(
                    "scheduling.volcano.sh", "v1beta1", ns, "podgroups"
                )["items"]
                if g["metadata"]["name"] == f"nt-{job['metadata']['uid']}"
            ),
            None,
        ),
    )
    assert pg["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 2}
