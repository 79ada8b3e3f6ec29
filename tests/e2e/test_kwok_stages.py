"""Run time on kwok's fake nodes (devcluster/kwok_stages.py): pods of a Job kind other
than batch/v1's run until deleted, a batch/v1 Job's pods finish at once, and the
simulated-duration / simulated-exit-code annotations end a pod Succeeded or Failed
after that time.

The owners here are made up (``OTHER_JOB``): a pod that names a Volcano Job that
does not exist would be deleted by the controllers running in the shared cluster.
Real Volcano Jobs are in test_controllers.py."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes import client

from devcluster.kwok_stages import DURATION_ANNOTATION, EXIT_CODE_ANNOTATION
from tests.e2e.kube import pod, wait_for

pytestmark = pytest.mark.e2e

OTHER_JOB = "e2e.pyextender.io/v1"
"""apiVersion of a kind "Job" that is not batch/v1's (as Volcano's is not)."""


def owned_pod(
    name: str, ns: str, api_version: str | None, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    """A pod for default-scheduler, owned (on paper: no garbage collector runs) by a
    kind "Job" of ``api_version``."""
    body = pod(name, ns, cpu="100m", scheduler="default-scheduler")
    body["metadata"]["annotations"] = annotations or {}
    if api_version:
        body["metadata"]["ownerReferences"] = [
            {
                "apiVersion": api_version,
                "kind": "Job",
                "name": "owner",
                "uid": "00000000-0000-0000-0000-000000000001",
                "controller": True,
            }
        ]
    return body


def phase(core: client.CoreV1Api, ns: str, name: str) -> str:
    return str(core.read_namespaced_pod(name, ns).status.phase)


def test_other_job_pods_run_until_deleted_batch_job_pods_finish(
    core: client.CoreV1Api, namespace: str
) -> None:
    ns = namespace
    core.create_namespaced_pod(ns, owned_pod("vc", ns, OTHER_JOB))
    core.create_namespaced_pod(ns, owned_pod("bare", ns, None))
    core.create_namespaced_pod(ns, owned_pod("k8s", ns, "batch/v1"))
    wait_for("the batch/v1 Job pod Succeeded", lambda: phase(core, ns, "k8s") == "Succeeded")
    wait_for("the other Job's pod Running", lambda: phase(core, ns, "vc") == "Running")
    time.sleep(3)  # kwok acts within milliseconds; nothing more comes
    assert phase(core, ns, "vc") == "Running"
    assert phase(core, ns, "bare") == "Running"
    k8s = core.read_namespaced_pod("k8s", ns)
    assert k8s.status.container_statuses[0].state.terminated.exit_code == 0
    core.delete_namespaced_pod("vc", ns)
    wait_for("the deleted pod gone", lambda: "vc" not in _names(core, ns))


def _names(core: client.CoreV1Api, ns: str) -> set[str]:
    return {p.metadata.name for p in core.list_namespaced_pod(ns).items}


def test_simulated_duration_ends_pods_succeeded_or_failed_after_that_time(
    core: client.CoreV1Api, namespace: str
) -> None:
    ns = namespace
    volcano = OTHER_JOB
    core.create_namespaced_pod(ns, owned_pod("ok", ns, volcano, {DURATION_ANNOTATION: "4s"}))
    core.create_namespaced_pod(
        ns,
        owned_pod("fails", ns, volcano, {DURATION_ANNOTATION: "4s", EXIT_CODE_ANNOTATION: "3"}),
    )
    # a batch/v1 Job pod with a run time runs for it too
    core.create_namespaced_pod(ns, owned_pod("k8s", ns, "batch/v1", {DURATION_ANNOTATION: "4s"}))
    core.create_namespaced_pod(ns, owned_pod("long", ns, volcano, {DURATION_ANNOTATION: "1h"}))
    wait_for(
        "all four Running",
        lambda: all(phase(core, ns, n) == "Running" for n in ("ok", "fails", "k8s", "long")),
    )
    started = time.monotonic()
    time.sleep(2)
    assert {phase(core, ns, n) for n in ("ok", "fails", "k8s")} == {"Running"}
    wait_for("ok Succeeded", lambda: phase(core, ns, "ok") == "Succeeded", timeout=20)
    wait_for("fails Failed", lambda: phase(core, ns, "fails") == "Failed", timeout=20)
    wait_for("k8s Succeeded", lambda: phase(core, ns, "k8s") == "Succeeded", timeout=20)
    assert time.monotonic() - started >= 2
    ok = core.read_namespaced_pod("ok", ns).status
    assert ok.container_statuses[0].state.terminated.exit_code == 0
    failed = core.read_namespaced_pod("fails", ns).status
    term = failed.container_statuses[0].state.terminated
    assert term.exit_code == 3
    assert term.reason == "Error"
    # the run time counts from the pod's start
    ran = (term.finished_at - failed.start_time).total_seconds()
    assert 3 <= ran <= 10, ran
    assert phase(core, ns, "long") == "Running"


def test_nodes_are_ready_with_the_capacity_devcluster_gave_them(core: client.CoreV1Api) -> None:
    """Our node stages (kwok's default heartbeat is replaced): Ready, addresses, phase
    Running, and the status devcluster created the node with left as it was."""
    nodes = [n for n in core.list_node().items if n.metadata.name.startswith("kwok-node-")]
    assert nodes
    for node in nodes:
        conditions = {c.type: c for c in node.status.conditions}
        assert conditions["Ready"].status == "True", node.metadata.name
        assert conditions["Ready"].reason == "KubeletReady"
        assert all(conditions[t].status == "False" for t in ("MemoryPressure", "DiskPressure"))
        addresses = {a.type: a.address for a in node.status.addresses}
        assert addresses == {"InternalIP": "127.0.0.1", "Hostname": node.metadata.name}
        assert node.status.phase == "Running"
        assert node.status.allocatable == node.status.capacity and "cpu" in node.status.capacity
        assert node.status.node_info.kubelet_version == "fake"
