"""The controllers process on a real cluster: default queues, Volcano Jobs, PodGroup and
Queue status, policies, Commands, ttl, bare pods, and leader election.

Pods are scheduled by the cluster's default-scheduler once a test lifts the gang
gate itself (the sidecar running in the shared cluster may lift it first; the
tests allow for that). kwok runs bound pods until they are deleted; the pods of
jobs made by ``job_body`` carry ``pyextender.io/simulated-duration: 0s``
(devcluster/kwok_stages.py), so they succeed as soon as they run and a Job's
Running phase is read from its phase history.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from devcluster.cluster import Cluster
from devcluster.controllers import (
    ROLE,
    enable_controllers,
    is_leader,
    start_controllers,
    wait_ready,
)
from devcluster.kwok_stages import DURATION_ANNOTATION, EXIT_CODE_ANNOTATION
from pyextender.api import names
from tests.e2e.kube import metrics, pod, wait_for

pytestmark = pytest.mark.e2e

JOBS = ("batch.volcano.sh", "v1alpha1", "jobs")
PGS = ("scheduling.volcano.sh", "v1beta1", "podgroups")
QUEUES = ("scheduling.volcano.sh", "v1beta1", "queues")
COMMANDS = ("bus.volcano.sh", "v1alpha1", "commands")
MERGE = "application/merge-patch+json"


@pytest.fixture
def full_queue(co: client.CustomObjectsApi, ns: str) -> Iterator[str]:
    """A queue with no room (capability 1m CPU): the sidecar never admits its gangs,
    so their pods keep our gate, whatever the timing."""
    name = f"full-{ns}"
    co.create_cluster_custom_object(
        *QUEUES,
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": name},
            "spec": {"weight": 1, "capability": {"cpu": "1m"}},
        },
    )
    yield name
    co.delete_cluster_custom_object(*QUEUES, name)


def job_body(
    name: str,
    replicas: int = 3,
    policies: list[dict[str, Any]] | None = None,
    runnable: bool = True,
    run_for: str | None = "0s",
    **spec: Any,
) -> dict[str, Any]:
    """A one-task Job whose pods run for ``run_for`` on kwok (None: until deleted);
    ``runnable=False`` pods fit no node, so they stay Pending even when the sidecar
    admits them."""
    template: dict[str, Any] = {
        "metadata": {"annotations": {DURATION_ANNOTATION: run_for} if run_for else {}},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}
            ],
        },
    }
    if not runnable:
        template["spec"]["nodeSelector"] = {"pyextender.io/e2e-no-such-node": "true"}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "minAvailable": replicas,
            "schedulerName": "default-scheduler",
            "policies": policies or [],
            "tasks": [{"name": "worker", "replicas": replicas, "template": template}],
            **spec,
        },
    }


def create_job(co: client.CustomObjectsApi, ns: str, body: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = co.create_namespaced_custom_object(*JOBS[:2], ns, JOBS[2], body)
    return out


def _or_none(get: Callable[..., dict[str, Any]], *args: str) -> dict[str, Any] | None:
    """``get(*args)``, or None while the object does not exist (404)."""
    try:
        return get(*args)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def get_job(co: client.CustomObjectsApi, ns: str, name: str) -> dict[str, Any] | None:
    return _or_none(co.get_namespaced_custom_object, *JOBS[:2], ns, JOBS[2], name)


def job_phases(co: client.CustomObjectsApi, ns: str, name: str) -> list[str]:
    job = get_job(co, ns, name) or {}
    return [c["status"] for c in (job.get("status") or {}).get("conditions") or []]


def get_pg(co: client.CustomObjectsApi, ns: str, name: str) -> dict[str, Any] | None:
    return _or_none(co.get_namespaced_custom_object, *PGS[:2], ns, PGS[2], name)


def live_pods(core: client.CoreV1Api, ns: str) -> list[Any]:
    return [p for p in core.list_namespaced_pod(ns).items if not p.metadata.deletion_timestamp]


def ungate(core: client.CoreV1Api, ns: str) -> None:
    for p in live_pods(core, ns):
        if p.spec.scheduling_gates:
            core.patch_namespaced_pod(
                p.metadata.name, ns, {"spec": {"schedulingGates": None}}, _content_type=MERGE
            )


def events(core: client.CoreV1Api, ns: str, name: str) -> list[str]:
    evs = core.list_namespaced_event(ns, field_selector=f"involvedObject.name={name}")
    return [f"{e.reason}: {e.message}" for e in evs.items]


def gated_unless_admitted(co: client.CustomObjectsApi, ns: str, pods: list[Any]) -> bool:
    """Every pod carries the gang gate, unless the sidecar (running in the shared
    cluster) already admitted its PodGroup and lifted the gate."""
    for p in pods:
        gates = [g.name for g in p.spec.scheduling_gates or []]
        if gates == [names.GANG_GATE]:
            continue
        pg = get_pg(co, ns, p.metadata.annotations[names.GROUP_NAME_ANNOTATION]) or {}
        if (pg.get("status") or {}).get("phase") in (None, "Pending"):
            return False
    return True


def command(co: client.CustomObjectsApi, ns: str, action: str, kind: str, target: str) -> str:
    name = f"{action.lower()}-{target}"[:60]
    body = {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {"name": name, "namespace": ns},
        "action": action,
        "target": {"apiVersion": "x", "kind": kind, "name": target, "uid": "0"},
    }
    co.create_namespaced_custom_object(*COMMANDS[:2], ns, COMMANDS[2], body)
    return name


def test_default_queues_exist(co: client.CustomObjectsApi, controllers: str) -> None:
    # the controllers make the default queues once they lead, which may be just after
    # they report ready: a 404 meanwhile is "not yet" (it failed CI once, 2026-11-30)
    for name in ("root", "default"):
        q = wait_for(
            f"queue {name} Open",
            lambda n=name: (
                (q := _or_none(co.get_cluster_custom_object, *QUEUES, n))
                and (q.get("status") or {}).get("state") == "Open"
                and q
            ),
        )
        assert q["metadata"]["name"] == name


def test_vcjob_creates_podgroup_and_gated_pods(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    job = create_job(co, ns, job_body("train", runnable=False))
    pg_name = f"train-{job['metadata']['uid']}"
    pg = wait_for("the job's PodGroup", lambda: get_pg(co, ns, pg_name))
    assert pg["spec"]["minMember"] == 3
    assert pg["spec"]["minTaskMember"] == {"worker": 3}
    assert pg["spec"]["queue"] == "default"
    assert pg["spec"]["minResources"]["cpu"] == "300m"
    assert pg["metadata"]["ownerReferences"][0]["name"] == "train"
    pods = wait_for("3 pods", lambda: (p := live_pods(core, ns)) and len(p) == 3 and p)
    assert sorted(p.metadata.name for p in pods) == [
        "train-worker-0",
        "train-worker-1",
        "train-worker-2",
    ]
    for p in pods:
        ann = p.metadata.annotations
        assert ann[names.GROUP_NAME_ANNOTATION] == pg_name
        assert ann[names.VOLCANO_JOB_NAME] == "train"
        assert ann[names.VOLCANO_TASK_SPEC] == "worker"
        assert ann[names.VOLCANO_JOB_VERSION] == "0"
        assert ann[names.VOLCANO_TASK_INDEX] == p.metadata.name.rsplit("-", 1)[1]
        assert p.metadata.labels[names.VOLCANO_JOB_NAME] == "train"
        assert p.spec.scheduler_name == "default-scheduler"
        assert p.metadata.owner_references[0].kind == "Job"
    assert gated_unless_admitted(co, ns, pods)
    status = wait_for(
        "job Pending with 3 pending pods",
        lambda: (
            (s := (get_job(co, ns, "train") or {}).get("status")) and s.get("pending") == 3 and s
        ),
    )
    assert status["state"]["phase"] == "Pending"
    assert status["minAvailable"] == 3


def test_job_runs_then_completes_when_the_gate_is_lifted(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    job = create_job(co, ns, job_body("run"))
    wait_for("3 pods", lambda: len(live_pods(core, ns)) == 3)
    ungate(core, ns)
    wait_for("job Completed", lambda: "Completed" in job_phases(co, ns, "run"), timeout=60)
    assert job_phases(co, ns, "run") == ["Pending", "Running", "Completed"]
    status = (get_job(co, ns, "run") or {})["status"]
    assert status["succeeded"] == 3
    assert status["taskStatusCount"]["worker"]["phase"] == {"Succeeded": 3}
    pg_name = f"run-{job['metadata']['uid']}"
    reasons = [e.split(":")[0] for e in events(core, ns, pg_name)]
    # the pods succeed as soon as they run: the gang may be seen Running or already Completed
    assert {"GangRunning", "GangCompleted"} & set(reasons), reasons


def test_job_pods_run_until_deleted_or_for_their_simulated_duration(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    create_job(co, ns, job_body("forever", replicas=2, run_for=None))
    create_job(co, ns, job_body("short", replicas=2, run_for="4s"))
    wait_for("4 pods", lambda: len(live_pods(core, ns)) == 4)
    ungate(core, ns)
    wait_for(
        "both jobs Running",
        lambda: all(job_phases(co, ns, j)[-1:] == ["Running"] for j in ("forever", "short")),
        timeout=60,
    )
    started = time.monotonic()
    wait_for(
        "short Completed", lambda: job_phases(co, ns, "short")[-1:] == ["Completed"], timeout=60
    )
    assert time.monotonic() - started >= 2, "pods with a 4 s run time ended too soon"
    assert (get_job(co, ns, "short") or {})["status"]["succeeded"] == 2
    time.sleep(2)
    status = (get_job(co, ns, "forever") or {})["status"]
    assert status["state"]["phase"] == "Running"
    assert status["running"] == 2


def test_simulated_exit_code_drives_an_exit_code_policy(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    body = job_body(
        "ec", replicas=1, run_for="2s", policies=[{"exitCode": 3, "action": "AbortJob"}]
    )
    body["spec"]["tasks"][0]["template"]["metadata"]["annotations"][EXIT_CODE_ANNOTATION] = "3"
    create_job(co, ns, body)
    wait_for("a pod", lambda: len(live_pods(core, ns)) == 1)
    ungate(core, ns)
    wait_for("job Aborted", lambda: job_phases(co, ns, "ec")[-1:] == ["Aborted"], timeout=60)
    assert "Running" in job_phases(co, ns, "ec")
    assert any("(exit code 3)" in e and e.startswith("AbortJob:") for e in events(core, ns, "ec"))


def test_podgroup_and_queue_status_follow_running_pods(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    queue = f"q-{ns}"
    co.create_cluster_custom_object(
        *QUEUES,
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": queue},
            "spec": {"weight": 1},
        },
    )
    co.create_namespaced_custom_object(
        *PGS[:2],
        ns,
        PGS[2],
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "gang"},
            "spec": {"minMember": 2, "queue": queue},
        },
    )
    for i in range(2):
        body = pod(f"m-{i}", ns, cpu="500m", scheduler="default-scheduler")
        body["metadata"]["annotations"] = {names.GROUP_NAME_ANNOTATION: "gang"}
        core.create_namespaced_pod(ns, body)
    pg = wait_for(
        "PodGroup Running with 2 running",
        lambda: (
            (g := get_pg(co, ns, "gang"))
            and (g.get("status") or {}).get("phase") == "Running"
            and g["status"].get("running") == 2
            and g
        ),
        timeout=60,
    )
    scheduled = [c for c in pg["status"]["conditions"] if c["type"] == "Scheduled"]
    assert scheduled and scheduled[0]["status"] == "True"
    q = wait_for(
        "queue counts and allocated",
        lambda: (
            (q := co.get_cluster_custom_object(*QUEUES, queue))
            and (q.get("status") or {}).get("running") == 1
            and q["status"].get("allocated", {}).get("cpu") == "1"
            and q
        ),
    )
    assert q["status"]["allocated"]["memory"] == "2Gi"
    assert q["status"]["state"] == "Open"
    # one member fails: the gang is below minMember
    core.patch_namespaced_pod_status("m-1", ns, {"status": {"phase": "Failed"}})
    wait_for(
        "PodGroup Unknown",
        lambda: ((get_pg(co, ns, "gang") or {}).get("status") or {}).get("phase") == "Unknown",
    )
    wait_for(
        "queue allocated drops",
        lambda: (
            (co.get_cluster_custom_object(*QUEUES, queue).get("status") or {})
            .get("allocated", {})
            .get("cpu")
            == "500m"
        ),
    )
    # CloseQueue while a PodGroup still uses it: Closing; Closed once it is gone
    command(co, ns, "CloseQueue", "Queue", queue)
    wait_for(
        "queue Closing",
        lambda: co.get_cluster_custom_object(*QUEUES, queue)["status"]["state"] == "Closing",
    )
    co.delete_namespaced_custom_object(*PGS[:2], ns, PGS[2], "gang")
    wait_for(
        "queue Closed",
        lambda: co.get_cluster_custom_object(*QUEUES, queue)["status"]["state"] == "Closed",
    )
    command(co, ns, "OpenQueue", "Queue", queue)
    wait_for(
        "queue Open",
        lambda: co.get_cluster_custom_object(*QUEUES, queue)["status"]["state"] == "Open",
    )
    co.delete_cluster_custom_object(*QUEUES, queue)


def test_pod_failed_policy_restarts_the_job(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str, full_queue: str
) -> None:
    job = create_job(
        co,
        ns,
        job_body(
            "rs",
            policies=[{"event": "PodFailed", "action": "RestartJob"}],
            runnable=False,
            queue=full_queue,
        ),
    )
    old_pg = f"rs-{job['metadata']['uid']}"
    wait_for("3 pods", lambda: len(live_pods(core, ns)) == 3)
    wait_for("PodGroup", lambda: get_pg(co, ns, old_pg))
    core.patch_namespaced_pod_status("rs-worker-1", ns, {"status": {"phase": "Failed"}})
    wait_for(
        "job restarted and Pending again",
        lambda: job_phases(co, ns, "rs")[-2:] == ["Restarting", "Pending"],
    )
    pods = wait_for(
        "3 new pods of version 1",
        lambda: (
            (p := live_pods(core, ns))
            and len(p) == 3
            and all(x.metadata.annotations[names.VOLCANO_JOB_VERSION] == "1" for x in p)
            and p
        ),
    )
    assert all(
        [g.name for g in p.spec.scheduling_gates or []] == [names.GANG_GATE] for p in pods
    ), "the new run's pods must wait for admission again"
    status = (get_job(co, ns, "rs") or {})["status"]
    assert status["retryCount"] == 1
    assert status["version"] == 1
    assert any(e.startswith("RestartJob:") for e in events(core, ns, "rs"))
    # the PodGroup was replaced by a fresh one (phase reset for the next admission)
    assert get_pg(co, ns, old_pg) is not None


def test_abort_command_aborts_the_job(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    create_job(co, ns, job_body("ab", runnable=False))
    wait_for("3 pods", lambda: len(live_pods(core, ns)) == 3)
    name = command(co, ns, "AbortJob", "Job", "ab")
    wait_for("job Aborted", lambda: job_phases(co, ns, "ab")[-1:] == ["Aborted"])
    assert job_phases(co, ns, "ab")[-2:] == ["Aborting", "Aborted"]
    wait_for("pods gone", lambda: live_pods(core, ns) == [])
    cmds = co.list_namespaced_custom_object(*COMMANDS[:2], ns, COMMANDS[2])["items"]
    assert name not in [c["metadata"]["name"] for c in cmds], "a Command runs once and is deleted"
    # ResumeJob brings it back
    command(co, ns, "ResumeJob", "Job", "ab")
    wait_for("job Pending again", lambda: job_phases(co, ns, "ab")[-1:] == ["Pending"])
    wait_for("pods again", lambda: len(live_pods(core, ns)) == 3)


def test_ttl_deletes_finished_job(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    create_job(co, ns, job_body("ttl", replicas=1, ttlSecondsAfterFinished=1))
    wait_for("a pod", lambda: len(live_pods(core, ns)) == 1)
    ungate(core, ns)  # minAvailable 1: no gate, nothing to lift
    wait_for("job deleted after it completed", lambda: get_job(co, ns, "ttl") is None, timeout=60)


def test_bare_volcano_pod_gets_its_own_podgroup(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    core.patch_namespace(ns, {"metadata": {"labels": {names.ENABLED_LABEL: "true"}}})
    core.create_namespaced_pod(ns, pod("bare", ns, cpu="100m", scheduler="volcano"))
    uid = core.read_namespaced_pod("bare", ns).metadata.uid
    pg = wait_for("podgroup-<uid>", lambda: get_pg(co, ns, f"podgroup-{uid}"))
    assert pg["spec"]["minMember"] == 1
    assert pg["spec"]["minResources"]["cpu"] == "100m"
    assert pg["metadata"]["ownerReferences"][0]["kind"] == "Pod"
    wait_for(
        "pod annotated",
        lambda: (
            (core.read_namespaced_pod("bare", ns).metadata.annotations or {}).get(
                names.GROUP_NAME_ANNOTATION
            )
            == f"podgroup-{uid}"
        ),
    )


def test_leader_election_only_one_acts(
    cluster: Cluster, co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str, controllers: str
) -> None:
    standby = start_controllers(cluster, role="controllers-b")
    try:
        wait_ready(cluster, standby, "controllers-b", leader=False, timeout=60)
        time.sleep(2)
        assert is_leader(controllers) and not is_leader(standby)
        create_job(co, ns, job_body("le1", replicas=2, runnable=False))
        wait_for("pods", lambda: len(live_pods(core, ns)) == 2)
        writes = [k for k in metrics(standby) if k.startswith("pyextender_controllers_writes")]
        assert writes == [], f"the standby wrote: {writes}"
        # the leader steps down cleanly (releases the Lease): the standby takes over
        cluster.stop_role(ROLE)
        wait_for("standby became leader", lambda: is_leader(standby), timeout=30)
        create_job(co, ns, job_body("le2", replicas=2, runnable=False))
        wait_for("the new leader acts", lambda: len(live_pods(core, ns)) == 4)
    finally:
        cluster.stop_role("controllers-b")
        enable_controllers(cluster)
