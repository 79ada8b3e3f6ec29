"""The chart's framework mode with its default two scheduler Pods, split leadership.

Each scheduler Pod holds a kube-scheduler built with our plugin and a sidecar; the
two kube-schedulers elect a leader by their Lease, the two sidecars by theirs, and
nothing ties the two elections to one Pod. So in production the kube-scheduler
that schedules often talks to a sidecar that does not lead: that sidecar answers
Filter, Score, Reserve and Permit from its own cache, while the other Pod's sidecar
admits gangs and writes their release. This module forces that split (it stops the
kube-scheduler in the Pod whose sidecar leads) and checks that gangs still go
through whole, with each side doing its part.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from devcluster.installed import Release, installed_release
from devcluster.localpods import LocalPod
from pyextender.api.names import BARRIER_ANNOTATION, GPU_INDEX_ANNOTATION
from tests.e2e.conftest import create
from tests.e2e.kube import bound_of, metrics, pod, podgroup, wait_for
from tests.e2e.test_installed import _adopted_namespace, _argv, _member, api, core
from tests.e2e.waits import Sampler

pytestmark = pytest.mark.e2e

__all__ = ["api", "core"]

VALUES: dict[str, Any] = {
    "logLevel": "info",
    "scheduler": {"replicas": 2, "framework": {"enabled": True}},
    "controllers": {"replicas": 1},
    "webhook": {"replicas": 1},
}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Release]:
    root = tmp_path_factory.mktemp("framework-ha")
    with installed_release(root, f"fwha-{os.getpid()}", VALUES) as release:
        yield release


def _metrics(pod: LocalPod) -> dict[str, float]:
    return metrics(f"http://{pod.ip}:8080")


def _sum(seen: dict[str, float], prefix: str, *labels: str) -> float:
    return sum(v for k, v in seen.items() if k.startswith(prefix) and all(x in k for x in labels))


def test_gangs_bind_whole_when_the_scheduling_pods_sidecar_does_not_lead(
    installed: Release, core: client.CoreV1Api, api: client.ApiClient
) -> None:
    pods = installed.pods[installed.deployment("scheduler")["metadata"]["name"]]
    assert len(pods) == 2
    leaders = wait_for(
        "one sidecar leading",
        lambda: [p for p in pods if _metrics(p).get("pyextender_leader") == 1.0] or None,
        timeout=60,
    )
    (leading,) = leaders
    (other,) = [p for p in pods if p is not leading]
    # the only kube-scheduler left is in the Pod whose sidecar does not lead
    installed.cluster.stop_role(f"{leading.name}.kube-scheduler")
    before = {p.name: _metrics(p) for p in pods}

    ns = _adopted_namespace(core, "split")
    podgroup(api, ns, "trio", 3, "default", None)
    for i in range(3):
        core.create_namespaced_pod(ns, _member(ns, "trio", i, gpus=2))
    names = ["trio-0", "trio-1", "trio-2"]
    # a kube-scheduler stopped while leading gives its Lease up; otherwise it expires
    wait_for("the gang bound", lambda: bound_of(core, ns, names) == 3, timeout=90)
    for name in names:
        got = core.read_namespaced_pod(name, ns)
        assert got.metadata.annotations.get(BARRIER_ANNOTATION), name  # held, then released
        assert len(got.metadata.annotations.get(GPU_INDEX_ANNOTATION, "").split(",")) == 2

    after = {p.name: _metrics(p) for p in pods}
    assert after[leading.name].get("pyextender_leader") == 1.0
    assert after[other.name].get("pyextender_leader") == 0.0

    def grew(pod: LocalPod, prefix: str, *labels: str) -> float:
        return _sum(after[pod.name], prefix, *labels) - _sum(before[pod.name], prefix, *labels)

    # the leader admitted the gang and released it by a PodGroup write (the chart's
    # PodGroup CRD has no status subresource: the admission's own, when one cycle did both)
    assert grew(leading, "pyextender_api_writes_total{", 'op="admit"', 'result="ok"') >= 1
    released = [
        grew(leading, "pyextender_api_writes_total{", 'op="release"', f'result="{r}"')
        for r in ("ok", "with_admission")
    ]
    assert sum(released) >= 1, released
    # ... which the other sidecar never wrote: it served the plugin's calls instead
    assert grew(other, "pyextender_api_writes_total{", 'result="ok"') == 0
    assert grew(other, "pyextender_verb_requests_total{", 'verb="grpc_reserve"') >= 3
    assert grew(leading, "pyextender_verb_requests_total{", 'verb="grpc_reserve"') == 0
    core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)  # the next test's GPUs
    wait_for("the gang gone", lambda: not core.list_namespaced_pod(ns).items)


def test_helm_upgrade_to_the_extender_keeps_a_waiting_gang_whole(
    installed: Release, core: client.CoreV1Api, api: client.ApiClient
) -> None:
    """Switching a live install from framework mode back to the stock kube-scheduler:
    a gang held at the barrier (it does not fit) stays held through the rolling update,
    and binds whole once it fits, now through the extender."""
    _switch_with_a_waiting_gang(
        installed, core, api, {**VALUES, "scheduler": {"replicas": 2}}, "kube-scheduler"
    )


def test_helm_upgrade_to_framework_mode_keeps_a_gated_gang_whole(
    installed: Release, core: client.CoreV1Api, api: client.ApiClient
) -> None:
    """And back again (the release is in extender mode after the test above): a gang
    the webhook gated stays gated through the update, and the framework-mode sidecar
    lifts its gates once it fits."""
    assert installed.values["scheduler"] == {"replicas": 2}
    _switch_with_a_waiting_gang(installed, core, api, VALUES, "kube-scheduler-pyextender")


def _switch_with_a_waiting_gang(
    installed: Release,
    core: client.CoreV1Api,
    api: client.ApiClient,
    values: dict[str, Any],
    scheduler_binary: str,
) -> None:
    ns = _adopted_namespace(core, "switch")
    try:
        create(core, pod("blocker", ns, gpus=8, scheduler="default-scheduler"))
        wait_for("the blocker bound", lambda: bound_of(core, ns, ["blocker"]) == 1)
        podgroup(api, ns, "wide", 3, "default", None)
        for i in range(3):  # 12 GPUs: not while the blocker holds 8 of the 16
            core.create_namespaced_pod(ns, _member(ns, "wide", i, gpus=4))
        names = ["wide-0", "wide-1", "wide-2"]
        held = core.read_namespaced_pod("wide-0", ns)
        barrier = bool(held.metadata.annotations.get(BARRIER_ANNOTATION))
        assert barrier != bool(held.spec.scheduling_gates)  # held one way or the other

        old = installed.pods[installed.deployment("scheduler")["metadata"]["name"]]
        installed.upgrade(values)
        st = installed.cluster.state
        assert st is not None
        # the replaced sidecars stopped cleanly on SIGTERM: the leader gave its Lease up
        # (a standby takes over at once instead of a lease duration later). Old Pods stop
        # one after the other, so the second old sidecar may lead in between and release
        # it again: one or two, never none (before, SIGTERM killed them first)
        released = [
            p.name
            for p in old
            if "released lease" in (Path(st.logs) / f"{p.name}.sidecar.log").read_text()
        ]
        assert 1 <= len(released) <= 2, released
        for p in installed.pods[installed.deployment("scheduler")["metadata"]["name"]]:
            argv = _argv(installed, f"{p.name}.kube-scheduler")
            assert argv[0].endswith(f"/{scheduler_binary}"), argv
        sampler = Sampler(lambda: bound_of(core, ns, names))
        time.sleep(3.0)  # both kube-schedulers and sidecars up: still none may bind
        assert bound_of(core, ns, names) == 0
        start = time.monotonic()
        core.delete_namespaced_pod("blocker", ns, grace_period_seconds=0)
        wait_for("the gang bound", lambda: bound_of(core, ns, names) == 3, timeout=90)
        print(f"\nswitched to {scheduler_binary}: the gang bound {time.monotonic() - start:.1f}s "
              f"after it fit ({'barrier' if barrier else 'gate'})")  # fmt: skip
        seen = sampler.close()
        assert sampler.partial_runs(3) == 0, seen
    finally:  # the next test needs the GPUs, whatever happened here
        core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
        wait_for("the gang gone", lambda: not core.list_namespaced_pod(ns).items)
