"""vcctl against the real API server: queues, jobs, and explain."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from kubernetes import client

from devcluster.cluster import ClusterState
from tests.e2e.kube import gang, wait_for

pytestmark = pytest.mark.e2e


def vcctl(state: ClusterState, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pyextender.vcctl", f"--kubeconfig={state.kubeconfig}", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
    )


def test_queue_commands(state: ClusterState, namespace: str) -> None:
    name = f"vc{namespace.replace('-', '')}"
    made = vcctl(state, "queue", "create", "-n", name, "-w", "3")
    assert made.returncode == 0 and "successfully" in made.stdout, made.stderr
    listed = vcctl(state, "queue", "list")
    assert listed.returncode == 0
    row = next(line for line in listed.stdout.splitlines() if line.startswith(name))
    assert row.split()[1] == "3"
    updated = vcctl(state, "queue", "operate", "-n", name, "-a", "update", "-w", "5")
    assert updated.returncode == 0
    assert '"weight": 5' in vcctl(state, "queue", "get", "-n", name).stdout
    missing = vcctl(state, "queue", "get", "-n", "no-such-queue")
    assert missing.returncode == 1 and "not found" in missing.stderr
    assert vcctl(state, "queue", "delete", "-n", name).returncode == 0


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
    out = vcctl(state, "explain", "pod", "huge-0", "-n", namespace).stdout
    assert "gates ['pyextender.io/gang']" in out
    assert "Unschedulable=True" in out and "Insufficient nvidia.com/gpu" in out, out
