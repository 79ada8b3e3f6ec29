"""vcctl against the real API server: queues, jobs, and explain."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from kubernetes import client

from devcluster.cluster import Cluster, ClusterState
from devcluster.controllers import enable_controllers
from tests.e2e.kube import bound_of, condition, gang, read_podgroup, wait_for

pytestmark = pytest.mark.e2e


def vcctl(state: ClusterState, *args: str, after: bool = False) -> subprocess.CompletedProcess[str]:
    """Run vcctl with the cluster's kubeconfig before the command, or (``after``) at the
    end, where Volcano's vcctl takes it."""
    flag = f"--kubeconfig={state.kubeconfig}"
    argv = [*args, flag] if after else [flag, *args]
    return subprocess.run(
        [sys.executable, "-m", "pyextender.vcctl", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
    )


def rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.strip()]


def _queue_state(state: ClusterState, name: str) -> str:
    got = rows(vcctl(state, "queue", "get", "-n", name).stdout)
    return got[1][2] if len(got) > 1 and len(got[1]) == len(QUEUE_HEAD) else ""


QUEUE_HEAD = ["Name", "Weight", "State", "Inqueue", "Pending", "Running", "Unknown"]


def test_queue_commands(state: ClusterState, namespace: str, controllers: str) -> None:
    """Volcano's ``vcctl queue create|list|get|operate|delete`` (``cmd/cli/queue.go``,
    ``pkg/cli/queue/*.go``): ``-n`` is the queue's name, the list and get columns are
    Volcano's, the global flags go after the command as in Volcano."""
    name = f"vc{namespace.replace('-', '')}"
    made = vcctl(state, "queue", "create", "-n", name, "-w", "3", after=True)
    assert made.returncode == 0 and "successfully" in made.stdout, made.stderr
    listed = vcctl(state, "queue", "list", after=True)
    assert listed.returncode == 0
    table = rows(listed.stdout)
    assert table[0] == QUEUE_HEAD, listed.stdout
    row = next(r for r in table if r[0] == name)
    assert row[1] == "3"
    wait_for("the queue controller opens it", lambda: _queue_state(state, name) == "Open")
    closed = vcctl(state, "queue", "operate", "-n", name, "-a", "close", after=True)
    assert closed.returncode == 0, closed.stderr
    wait_for("closed", lambda: _queue_state(state, name) == "Closed")
    assert vcctl(state, "queue", "operate", "-n", name, "-a", "open").returncode == 0
    wait_for("reopened", lambda: _queue_state(state, name) == "Open")
    updated = vcctl(state, "queue", "operate", "-n", name, "-a", "update", "-w", "5", after=True)
    assert updated.returncode == 0, updated.stderr
    got = rows(vcctl(state, "queue", "get", "-n", name, after=True).stdout)
    assert got[0] == QUEUE_HEAD and got[1][:2] == [name, "5"], got
    missing = vcctl(state, "queue", "get", "-n", "no-such-queue", after=True)
    assert missing.returncode == 1 and "Failed to queue get" in missing.stderr
    assert "not found" in missing.stderr
    assert vcctl(state, "queue", "delete", "-n", name, after=True).returncode == 0


def test_explain_says_why_a_gang_waits(
    state: ClusterState,
    core: client.CoreV1Api,
    api: client.ApiClient,
    namespace: str,
    sidecar: str,
) -> None:
    gang(core, api, namespace, "huge", 3, gpus=8)  # 24 GPUs of 16
    wait_for(
        "the reason on the PodGroup",
        lambda: (
            "tasks in gang unschedulable"
            in vcctl(state, "explain", "podgroup", "huge", "-n", namespace).stdout
        ),
        timeout=30,
    )

    # explain shows the PodGroup's phase and the scheduler's reason as the API has them
    def shown() -> str | None:
        out = vcctl(state, "explain", "pod", "huge-0", "-n", namespace).stdout
        pg = read_podgroup(api, namespace, "huge")
        phase = (pg.get("status") or {}).get("phase", "Pending")
        reason = condition(api, namespace, "huge", "Unschedulable")
        expected = (f"podgroup {namespace}/huge: phase {phase}", f"Unschedulable=True: {reason}")
        return out if reason and all(e in out for e in expected) else None

    out = wait_for("explain shows the PodGroup's phase and reason", shown, timeout=30)
    assert "gates ['pyextender.io/gang']" in out
    assert "tasks in gang unschedulable" in out and "nvidia.com/gpu" in out, out


def test_version_names_the_server_and_the_volcano_apis(state: ClusterState) -> None:
    out = vcctl(state, "version")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("vcctl (pyextender) 0.1.0, Python 3.")
    assert lines[1] == "server: Kubernetes v1.36.3"
    assert lines[2].startswith("Volcano APIs served: ")
    for api in ("batch.volcano.sh/v1alpha1", "scheduling.volcano.sh/v1beta1"):
        assert api in lines[2], lines[2]


def test_explain_queue_and_job(
    state: ClusterState,
    core: client.CoreV1Api,
    api: client.ApiClient,
    namespace: str,
    sidecar: str,
) -> None:
    """A queue capped at 8 GPUs runs a 4-GPU gang that declares 10 minutes; "big" (2 x 8
    GPUs) and then "mid" (8 GPUs) wait in it, big first (older, same priority)."""
    custom = client.CustomObjectsApi(api)
    queue = f"q{namespace.replace('-', '')}"
    custom.create_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": queue},
        "spec": {"weight": 2, "reclaimable": True, "capability": {"nvidia.com/gpu": "8"}},
    })  # fmt: skip
    try:
        small = gang(core, api, namespace, "small", 1, gpus=4, queue_name=queue,
                     pod_annotations={"pyextender.io/running-estimate": "10m"})  # fmt: skip
        wait_for("small running", lambda: bound_of(core, namespace, small) == 1, timeout=60)
        gang(core, api, namespace, "big", 2, gpus=8, queue_name=queue,
             annotations={"sla-waiting-time": "1h"})  # fmt: skip
        gang(core, api, namespace, "mid", 1, gpus=8, queue_name=queue)
        for name in ("big", "mid"):
            wait_for(
                f"{name}'s reason",
                lambda name=name: condition(api, namespace, name, "Unschedulable"),  # type: ignore[misc]
                timeout=30,
            )
        out = vcctl(state, "explain", "queue", queue)
        assert out.returncode == 0, out.stderr
        print(out.stdout)  # shown by pytest -s (and with a failure)
        lines = out.stdout.splitlines()
        assert lines[0] == f"queue {queue}: Open, weight 2, parent root, reclaimable", out.stdout
        gpu = next(line.split() for line in lines if line.split()[:1] == ["nvidia.com/gpu"])
        # allocated 4, capability 8, asked 4 + 16 + 8
        assert (gpu[1], gpu[3], gpu[5]) == ("4", "8", "28"), out.stdout
        waiting = [line.strip() for line in lines if line.strip()[1:3] == ". "]
        assert len(waiting) == 2, out.stdout  # small is bound: it no longer waits
        assert waiting[0].startswith(f"1. {namespace}/big  Pending  minMember 2"), out.stdout
        mid_phase = (read_podgroup(api, namespace, "mid").get("status") or {}).get("phase")
        assert waiting[1].startswith(f"2. {namespace}/mid  {mid_phase}  minMember 1"), out.stdout
        assert "capability exceeded" in waiting[0], out.stdout

        out = vcctl(state, "explain", "job", "mid", "-n", namespace)
        assert out.returncode == 0, out.stderr
        print(out.stdout)
        text = out.stdout
        assert f"position: 2 of 2 waiting in queue {queue}" in text, text
        assert f"capability: queue {queue} would exceed it (nvidia.com/gpu 12/8)" in text, text
        assert "scheduler: " in text and "capability exceeded" in text, text
        # small's 4 GPUs come back within its declared 10 minutes: then mid fits
        start = next(line for line in text.splitlines() if line.startswith("  start: "))
        assert start.startswith("  start: at the earliest in "), text
        minutes = start.split("in ", 1)[1].split(" ", 1)[0]
        assert minutes.endswith("s") and ("m" in minutes and int(minutes.split("m")[0]) <= 9), text

        big = vcctl(state, "explain", "job", "big", "-n", namespace).stdout
        assert f"position: 1 of 2 waiting in queue {queue}" in big, big
        assert "gang: 2 pods must fit at once (minMember 2)" in big, big
        assert "reservation: sla-waiting-time 1h" in big, big
        assert "start: no estimate" in big, big  # 16 GPUs never fit under a cap of 8
    finally:
        custom.delete_collection_namespaced_custom_object(
            "scheduling.volcano.sh", "v1beta1", namespace, "podgroups"
        )
        core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        wait_for("pods gone", lambda: not core.list_namespaced_pod(namespace).items)
        custom.delete_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", queue)


def test_explain_a_volcano_job(
    cluster: Cluster, state: ClusterState, api: client.ApiClient, namespace: str, sidecar: str
) -> None:
    """A Volcano Job, through the controllers: explain finds the PodGroup they made for it
    (<job>-<uid>) and says the queue's capability is what it waits for."""
    enable_controllers(cluster)
    custom = client.CustomObjectsApi(api)
    queue = f"j{namespace.replace('-', '')}"
    custom.create_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": queue},
        "spec": {"weight": 1, "capability": {"nvidia.com/gpu": "8"}},
    })  # fmt: skip
    container = {"name": "main", "image": "busybox",
                 "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "8"},
                               "limits": {"nvidia.com/gpu": "8"}}}  # fmt: skip
    custom.create_namespaced_custom_object("batch.volcano.sh", "v1alpha1", namespace, "jobs", {
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": "train"},
        "spec": {"minAvailable": 2, "schedulerName": "volcano", "queue": queue,
                 "tasks": [{"name": "worker", "replicas": 2,
                            "template": {"spec": {"containers": [container],
                                                  "restartPolicy": "Never"}}}]},
    })  # fmt: skip
    try:
        uid = custom.get_namespaced_custom_object(
            "batch.volcano.sh", "v1alpha1", namespace, "jobs", "train"
        )["metadata"]["uid"]

        def reason() -> str | None:
            try:  # the controllers create the PodGroup a moment after the Job
                return condition(api, namespace, f"train-{uid}", "Unschedulable")
            except client.ApiException as exc:
                if exc.status == 404:
                    return None
                raise

        wait_for("the PodGroup's reason", reason, timeout=60)
        out = vcctl(state, "explain", "job", "train", "-n", namespace)
        assert out.returncode == 0, out.stderr
        print(out.stdout)
        lines = out.stdout.splitlines()
        assert lines[0] == f"job {namespace}/train: Pending, minAvailable 2 of 2 replicas, " \
            f"queue {queue}", out.stdout  # fmt: skip
        assert lines[1].startswith(f"  podgroup {namespace}/train-{uid}: Pending, minMember 2, "
                                   "2 pods (0 bound"), out.stdout  # fmt: skip
        assert f"position: 1 of 1 waiting in queue {queue}" in out.stdout
        assert f"capability: queue {queue} would exceed it (nvidia.com/gpu 16/8)" in out.stdout
        assert "start: no estimate" in out.stdout
    finally:
        custom.delete_namespaced_custom_object(
            "batch.volcano.sh", "v1alpha1", namespace, "jobs", "train"
        )
        custom.delete_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", queue)


JOB_HEAD = ["Name", "Creation", "Phase", "JobType", "Replicas", "Min", "Pending", "Running",
            "Succeeded", "Failed", "Unknown", "RetryCount"]  # fmt: skip


def _phase(api: client.ApiClient, namespace: str, job: str) -> str:
    """The Job's phase from the API ("" once it is gone); vcctl's own list is checked apart."""
    try:
        got = client.CustomObjectsApi(api).get_namespaced_custom_object(
            "batch.volcano.sh", "v1alpha1", namespace, "jobs", job
        )
    except client.ApiException as exc:
        if exc.status == 404:
            return ""
        raise
    return str(((got.get("status") or {}).get("state") or {}).get("phase") or "")


def test_job_commands_as_volcanos(
    cluster: Cluster,
    state: ClusterState,
    core: client.CoreV1Api,
    api: client.ApiClient,
    namespace: str,
    sidecar: str,
) -> None:
    """Volcano's ``vcctl job run|list|view|suspend|resume|delete`` and ``vcctl pod list``
    (``cmd/cli/job.go``, ``cmd/cli/pod.go``, ``pkg/cli/job/*.go``, ``pkg/cli/pod/pod.go``):
    its flags, with ``--kubeconfig`` after the command as Volcano takes it or before it;
    list, view and pod columns as Volcano prints them; suspend and resume through
    bus.volcano.sh Commands the controllers carry out."""
    enable_controllers(cluster)
    out = vcctl(state, "job", "run", "-N", "hello", "-n", namespace, "-r", "2", "-m", "2",
                "-R", "cpu=100m,memory=10Mi", "-L", "cpu=100m,memory=10Mi", after=True)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "run job hello successfully"
    pods = wait_for(
        "the job's 2 pods",
        lambda: (p := core.list_namespaced_pod(namespace).items) and len(p) == 2 and p,
    )
    assert sorted(p.metadata.name for p in pods) == ["hello-default0-0", "hello-default0-1"]
    assert all(p.spec.scheduler_name == "volcano" for p in pods)
    wait_for("hello Running", lambda: _phase(api, namespace, "hello") == "Running", timeout=60)
    listed = vcctl(state, "job", "list", "-n", namespace, after=True)
    table = rows(listed.stdout)
    assert table[0] == JOB_HEAD, listed.stdout
    hello = next(r for r in table[1:] if r[0] == "hello")
    # Creation is a date; Batch without a job-type label; 2 replicas, min 2, 2 running
    assert hello[3:6] == ["Batch", "2", "2"] and hello[7] == "2", listed.stdout
    everywhere = rows(vcctl(state, "job", "list", "--all-namespaces").stdout)
    assert everywhere[0] == ["Namespace", *JOB_HEAD]
    assert [namespace, "hello"] in [r[:2] for r in everywhere[1:]]
    assert rows(vcctl(state, "-n", namespace, "job", "list", "-q", "nope").stdout) == [
        ["No", "resources", "found"]
    ]

    view = vcctl(state, "job", "view", "-N", "hello", "-n", namespace, after=True)
    assert view.returncode == 0, view.stderr
    lines = view.stdout.splitlines()
    assert lines[0].split() == ["Name:", "hello"] and lines[1].split() == ["Namespace:", namespace]
    assert "    Phase:  Running" in lines and "  - Name:      default0" in lines, view.stdout
    assert any(line.startswith("Events:") for line in lines), view.stdout

    podlist = vcctl(state, "pod", "list", "-j", "hello", "-n", namespace, after=True)
    table = rows(podlist.stdout)
    assert table[0] == ["Name", "Ready", "Status", "Restart", "Age"], podlist.stdout
    assert sorted(r[0] for r in table[1:]) == ["hello-default0-0", "hello-default0-1"]
    assert all(r[2] == "Running" and r[3] == "0" for r in table[1:]), podlist.stdout
    by_queue = rows(vcctl(state, "-n", namespace, "pod", "list", "-q", "default").stdout)
    assert sorted(r[0] for r in by_queue[1:]) == ["hello-default0-0", "hello-default0-1"]
    mismatch = vcctl(state, "-n", namespace, "pod", "list", "-j", "hello", "-q", "other")
    assert mismatch.returncode == 2 and "does not match the queue other" in mismatch.stderr

    assert vcctl(state, "job", "suspend", "-N", "hello", "-n", namespace).returncode == 0
    wait_for("hello Aborted", lambda: _phase(api, namespace, "hello") == "Aborted", timeout=60)
    assert vcctl(state, "-n", namespace, "job", "resume", "-N", "hello").returncode == 0
    wait_for("hello Running again", lambda: _phase(api, namespace, "hello") == "Running",
             timeout=60)  # fmt: skip
    deleted = vcctl(state, "job", "delete", "-N", "hello", "-n", namespace, after=True)
    assert deleted.returncode == 0 and "delete job" in deleted.stdout, deleted.stderr
    wait_for("hello gone", lambda: _phase(api, namespace, "hello") == "")


def test_help_jobflow_and_flags_anywhere(state: ClusterState) -> None:
    """Volcano's command tree (``cmd/cli/vcctl.go``): help lists every command; jobflow and
    jobtemplate answer "not supported" with their own exit code (3) and what to use."""
    top = vcctl(state, "--help")
    assert top.returncode == 0
    assert "{job,queue,pod,jobflow,jobtemplate,explain,version}" in top.stdout
    for group in ("jobflow", "jobtemplate"):
        out = vcctl(state, group, "create", "-f", "flow.yaml", after=True)
        assert out.returncode == 3, (out.returncode, out.stderr)
        assert "not supported" in out.stderr and "vcctl job run" in out.stderr
    # the same command with the global flags before or after it
    before = vcctl(state, "-n", "kube-system", "queue", "list")
    after = vcctl(state, "queue", "list", "--namespace", "kube-system", after=True)
    assert before.returncode == after.returncode == 0 and before.stdout == after.stdout
    # Volcano's --master/-s: the API server's address instead of the kubeconfig's
    same = vcctl(state, "queue", "list", "-s", state.server, after=True)
    assert same.returncode == 0 and same.stdout == before.stdout, same.stderr
    nowhere = vcctl(state, "queue", "list", "--master", "https://127.0.0.1:9", after=True)
    assert nowhere.returncode == 2 and "cannot reach the API server" in nowhere.stderr, (
        nowhere.stderr
    )
    assert vcctl(state, "version", after=True).returncode == 0
