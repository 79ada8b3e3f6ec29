"""Volcano Jobs through the whole system, as a user runs them: ``kubectl apply`` of
Volcano YAML; the webhook validates (and refuses what we do not implement, naming
the field); the controllers make PodGroups, gated pods and plugin objects; the
sidecar admits gangs by queue and capability; the stock kube-scheduler (profile
``volcano``) filters, scores and binds through the extender, whose bind barrier
binds a gang together; kwok runs the pods for their simulated duration; the
controllers take every Job to Completed.

Nothing is lifted or bound by the test: no gate is touched.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from devcluster.build import binary_path
from devcluster.cluster import Cluster, ClusterState
from devcluster.controllers import controllers_url, enable_controllers
from devcluster.kwok_stages import DURATION_ANNOTATION
from devcluster.webhook import disable_webhook, enable_webhook
from pyextender.api import names
from tests.e2e.kube import metrics, wait_for
from tests.e2e.test_job_plugins import env, files, fqdn, task_of

pytestmark = pytest.mark.e2e

JOBS = ("batch.volcano.sh", "v1alpha1", "jobs")
PGS = ("scheduling.volcano.sh", "v1beta1", "podgroups")
QUEUES = ("scheduling.volcano.sh", "v1beta1", "queues")


@pytest.fixture(scope="module")
def co(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


@pytest.fixture(scope="module")
def system(cluster: Cluster) -> Iterator[str]:
    """Controllers and webhook running and registered next to the sidecar; yields the
    sidecar's URL."""
    enable_controllers(cluster)
    controllers_url(cluster)
    already = cluster.status()["processes"].get("webhook") == "running"
    enable_webhook(cluster)
    st = cluster.state
    assert st is not None
    if "sidecar" not in st.pids:
        cluster.start_sidecar()
    cluster.wait_sidecar_ready()
    try:
        yield st.extender_url
    finally:
        if not already:
            disable_webhook(cluster)


def kubectl(state: ClusterState, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(binary_path("kubectl")), f"--kubeconfig={state.kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def container(cpu: str) -> str:
    return f"""\
          containers:
          - name: main
            image: busybox
            command: ["sh", "-c", "sleep infinity"]
            resources: {{requests: {{cpu: {cpu}}}}}
          restartPolicy: Never"""


def gang_job(name: str, queue: str, run_for: str) -> str:
    return f"""\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: {name}
  annotations: {{{DURATION_ANNOTATION}: {run_for}}}
spec:
  schedulerName: volcano
  queue: {queue}
  minAvailable: 2
  tasks:
  - name: w
    replicas: 2
    template:
        spec:
{container("800m")}
"""


MPI_JOB = f"""\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: lm-mpi
spec:
  schedulerName: volcano
  minAvailable: 3
  plugins:
    ssh: []
    svc: []
    mpi: ["--master=mpimaster", "--worker=mpiworker"]
  tasks:
  - name: mpimaster
    replicas: 1
    policies:
    - {{event: TaskCompleted, action: CompleteJob}}
    template:
        metadata:
          annotations: {{{DURATION_ANNOTATION}: 8s}}
        spec:
{container("100m")}
  - name: mpiworker
    replicas: 2
    template:
        spec:
{container("100m")}
"""

PYTORCH_JOB = f"""\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: pt
  annotations: {{{DURATION_ANNOTATION}: 6s}}
spec:
  schedulerName: volcano
  minAvailable: 3
  plugins:
    pytorch: ["--master=master", "--worker=worker", "--port=23456"]
  tasks:
  - name: master
    replicas: 1
    template:
        spec:
{container("100m")}
  - name: worker
    replicas: 2
    template:
        spec:
{container("100m")}
"""

UNSUPPORTED_JOB = f"""\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: parted
spec:
  tasks:
  - name: w
    replicas: 2
    partitionPolicy: {{totalPartitions: 2, partitionSize: 1}}
    template:
        spec:
{container("100m")}
"""


def job_pods(core: client.CoreV1Api, ns: str, job: str) -> list[Any]:
    pods = core.list_namespaced_pod(ns, label_selector=f"{names.VOLCANO_JOB_NAME}={job}").items
    return sorted(
        (p for p in pods if not p.metadata.deletion_timestamp), key=lambda p: p.metadata.name
    )


def phase(co: client.CustomObjectsApi, ns: str, job: str) -> str:
    doc = co.get_namespaced_custom_object(*JOBS[:2], ns, JOBS[2], job)
    return str(((doc.get("status") or {}).get("state") or {}).get("phase") or "")


def binds_ok(sidecar: str) -> float:
    return metrics(sidecar).get('pyextender_binds_total{result="bound"}', 0.0)


def test_volcano_jobs_from_apply_to_completed(
    system: str,
    state: ClusterState,
    core: client.CoreV1Api,
    co: client.CustomObjectsApi,
    namespace: str,
    tmp_path: Path,
) -> None:
    ns = namespace
    core.patch_namespace(ns, {"metadata": {"labels": {names.ENABLED_LABEL: "true"}}})
    queue = f"sys-{ns}"
    binds_before = binds_ok(system)

    # a queue of 2 CPUs: room for one 2 x 800m gang at a time
    out = kubectl(
        state,
        "apply",
        "-f",
        "-",
        stdin=f"""\
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {{name: {queue}}}
spec: {{weight: 1, capability: {{cpu: "2"}}}}
""",
    )
    assert out.returncode == 0, out.stderr
    try:
        wait_for(
            "queue Open",
            lambda: (
                (co.get_cluster_custom_object(*QUEUES, queue).get("status") or {}).get("state")
                == "Open"
            ),
        )
        # what we do not implement is refused at admission, naming the field
        out = kubectl(state, "apply", "-n", ns, "-f", "-", stdin=UNSUPPORTED_JOB)
        assert out.returncode != 0
        assert "spec.tasks[0].partitionPolicy: not supported" in out.stderr, out.stderr

        manifest = tmp_path / "jobs.yaml"
        manifest.write_text(
            "---\n".join(
                [
                    gang_job("first", queue, "10s"),
                    gang_job("second", queue, "3s"),
                    MPI_JOB,
                    PYTORCH_JOB,
                ]
            )
        )
        out = kubectl(state, "apply", "-n", ns, "-f", str(manifest))
        assert out.returncode == 0, out.stderr
        started = time.monotonic()

        # the MPI job's pods find each other: every pod mounts the per-task host files
        mpi = wait_for(
            "MPI pods running",
            lambda: (
                (p := job_pods(core, ns, "lm-mpi"))
                and len(p) == 3
                and all(x.status.phase == "Running" for x in p)
                and p
            ),
            timeout=120,
        )
        workers = [p for p in mpi if task_of(p) == "mpiworker"]
        (master,) = [p for p in mpi if task_of(p) == "mpimaster"]
        for p in mpi:
            assert p.spec.scheduler_name == "volcano" and p.spec.node_name
            hosts = files(core, p, "/etc/volcano")
            assert hosts["mpiworker.host"].split("\n") == [fqdn(w) for w in workers]
            assert hosts["mpimaster.host"] == fqdn(master)
            assert set(files(core, p, "/root/.ssh")) >= {"id_rsa", "authorized_keys"}
        assert env(core, master)["MPI_HOST"] == ",".join(fqdn(w) for w in workers)
        assert core.read_namespaced_service("lm-mpi", ns).spec.cluster_ip == "None"

        # the PyTorch job's env
        pt = wait_for(
            "PyTorch pods bound",
            lambda: (p := job_pods(core, ns, "pt")) and len(p) == 3 and p,
            timeout=120,
        )
        ranks = {}
        for p in pt:
            e = env(core, p)
            assert e["MASTER_ADDR"] == "pt-master-0.pt"
            assert e["MASTER_PORT"] == "23456" and e["WORLD_SIZE"] == "3"
            ranks[p.metadata.name] = e["RANK"]
        assert ranks == {"pt-master-0": "0", "pt-worker-0": "1", "pt-worker-1": "2"}

        # one gang at a time in the 2-CPU queue: "second" waits for "first" to finish
        wait_for("first Running", lambda: phase(co, ns, "first") == "Running", timeout=120)
        held = 0  # samples in which second's two pods were seen held while first ran
        while True:
            # second's pods read *before* first's: if first's pods still all run after
            # the read of second's, they held the queue's capability during it too
            second = job_pods(core, ns, "second")
            running = [p for p in job_pods(core, ns, "first") if p.status.phase == "Running"]
            if len(running) < 2:
                break
            for p in second:
                assert not p.spec.node_name, "second bound while first held the capability"
                gates = [g.name for g in p.spec.scheduling_gates or []]
                assert gates == [names.GANG_GATE], (p.metadata.name, gates)
            held += len(second) == 2
            assert time.monotonic() - started < 120
            time.sleep(0.5)
        assert held, "second's pods were never seen waiting at the gang gate"

        for job in ("first", "second", "lm-mpi", "pt"):
            wait_for(f"{job} Completed", lambda j=job: phase(co, ns, j) == "Completed", timeout=120)
        first_end = max(
            p.status.container_statuses[0].state.terminated.finished_at
            for p in job_pods(core, ns, "first")
        )
        for p in job_pods(core, ns, "second"):
            scheduled = next(
                c.last_transition_time for c in p.status.conditions if c.type == "PodScheduled"
            )
            assert scheduled >= first_end.replace(microsecond=0), (p.metadata.name, scheduled)
        # the MPI job completed through its master's TaskCompleted policy
        doc = co.get_namespaced_custom_object(*JOBS[:2], ns, JOBS[2], "lm-mpi")
        assert [c["status"] for c in doc["status"]["conditions"]][-2:] == [
            "Completing",
            "Completed",
        ]
        # every pod was bound by the extender's bind verb (the gang barrier)
        assert binds_ok(system) - binds_before >= 2 + 2 + 3 + 3
    finally:
        for job in ("first", "second", "lm-mpi", "pt"):
            kubectl(state, "delete", "-n", ns, "vcjob", job, "--ignore-not-found")
        co.delete_cluster_custom_object(*QUEUES, queue)
