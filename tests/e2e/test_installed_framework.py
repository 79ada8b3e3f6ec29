"""The chart with ``scheduler.framework.enabled``: kube-scheduler built with our plugin.

As test_installed.py, on a devcluster of its own: ``helm install``, then each
Deployment's Pod template run as local processes under its own ServiceAccount. The
scheduler Pod's kube-scheduler container runs ``kube-scheduler-pyextender`` (the
shim devcluster builds, as the chart's framework image would hold it) with the
chart's KubeSchedulerConfiguration, calling the sidecar over the Unix socket in the
Pod's shared emptyDir. The webhook and the Job controller hold gang members with the
barrier annotation, so no member is ever gated.

The core gang scenarios of test_gangs.py run here as framework mode (their own pods
are gated, the other hold the plugin serves), next to what only the chart's
framework mode does: adopted pods held at the barrier, a Volcano Job through it, and
an uninstall that leaves no pod held.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from devcluster.installed import Release, installed_release
from pyextender.api.names import (
    BARRIER_ANNOTATION,
    GPU_INDEX_ANNOTATION,
    GROUP_NAME_ANNOTATION,
)
from tests.e2e.conftest import Env
from tests.e2e.kube import (
    bound,
    bound_of,
    metrics,
    podgroup,
    wait_for,
)
from tests.e2e.test_gangs import (  # the core scenarios, framework mode, installed
    test_gang_all_or_nothing,
    test_two_gangs_that_fit_alone_but_not_together,
)
from tests.e2e.test_installed import (  # the same checks and fixtures as the extender install
    _adopted_namespace,
    _argv,
    _bare_pod_in_a_capped_queue,
    _lifting_the_hold_by_hand_is_refused,
    _member,
    _raise_the_cap_and_see_it_bound,
    api,
    core,
    namespace,
    sidecar,
    test_components_run_as_the_charts_non_root_user,
    test_no_component_was_refused_by_rbac,
    test_volcano_job_from_submit_to_completion,
)

pytestmark = pytest.mark.e2e

__all__ = [
    "api",
    "core",
    "namespace",
    "sidecar",
    "test_components_run_as_the_charts_non_root_user",
    "test_gang_all_or_nothing",
    "test_no_component_was_refused_by_rbac",
    "test_two_gangs_that_fit_alone_but_not_together",
    "test_volcano_job_from_submit_to_completion",
]

VALUES: dict[str, Any] = {
    "logLevel": "info",
    "scheduler": {"replicas": 1, "framework": {"enabled": True}},
    "controllers": {"replicas": 1},
    "webhook": {"replicas": 1},
}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Release]:
    root = tmp_path_factory.mktemp("framework")
    with installed_release(root, f"fw-{os.getpid()}", VALUES) as release:
        yield release


# -- fixtures the imported scenarios use (test_installed's, on this module's install) ------


@pytest.fixture
def env(
    installed: Release, api: client.ApiClient, core: client.CoreV1Api, namespace: str, sidecar: str
) -> Env:
    """Framework mode's assertions (Permit holds the members) on the installed system."""
    return Env("framework", installed.cluster, api, core, namespace, sidecar)


# -- the framework install itself ---------------------------------------------------------


def test_kube_scheduler_is_the_plugin_build_on_the_pod_socket(installed: Release) -> None:
    sched = installed.pod("scheduler")
    argv = _argv(installed, next(r for r in sched.roles if r.endswith(".kube-scheduler")))
    assert argv[0].endswith("/kube-scheduler-pyextender"), argv
    config = next(a.split("=", 1)[1] for a in argv if a.startswith("--config="))
    (profile,) = yaml.safe_load(Path(config).read_text())["profiles"]
    doc = yaml.safe_load(Path(config).read_text())
    assert "extenders" not in doc
    (plugin,) = profile["pluginConfig"]
    target = plugin["args"]["target"]
    sidecar = _argv(installed, next(r for r in sched.roles if r.endswith(".sidecar")))
    sock = next(a.split("=", 1)[1] for a in sidecar if a.startswith("--grpc-socket="))
    # both containers name the same file of the Pod's shared emptyDir, and it is there
    assert target == f"unix://{sock}", (target, sock)
    assert Path(sock).is_socket()
    # and so for the cycle socket (Filter and Reserve), beside it
    cycle = next(a.split("=", 1)[1] for a in sidecar if a.startswith("--cycle-socket="))
    assert plugin["args"]["cycleSocket"] == cycle, (plugin["args"], cycle)
    assert Path(cycle).is_socket() and Path(cycle).parent == Path(sock).parent


def test_adopted_gang_waits_at_the_barrier_then_binds_whole(
    installed: Release, core: client.CoreV1Api, api: client.ApiClient
) -> None:
    """A gang as a user writes it: the webhook holds each member with the barrier
    annotation (no gate), none binds while the gang is short, all bind together once
    it is whole, each with the GPU indices the sidecar chose on its Binding."""
    url = f"http://{installed.pod('scheduler').ip}:8080"
    lifted, released = _writes(url, "lift"), _released(url)
    ns = _adopted_namespace(core, "barrier")
    podgroup(api, ns, "trio", 3, "default", None)
    for i in range(2):
        core.create_namespaced_pod(ns, _member(ns, "trio", i, gpus=2))
    p = core.read_namespaced_pod("trio-0", ns)
    assert p.spec.scheduler_name == "volcano"
    assert not p.spec.scheduling_gates, p.spec.scheduling_gates
    assert p.metadata.annotations.get(BARRIER_ANNOTATION), p.metadata.annotations
    time.sleep(3.0)  # kube-scheduler has had its chances: PreEnqueue keeps them out
    assert not bound(core, ns)
    core.create_namespaced_pod(ns, _member(ns, "trio", 2, gpus=2))
    names = ["trio-0", "trio-1", "trio-2"]
    wait_for("the gang bound", lambda: bound_of(core, ns, names) == 3, timeout=60)
    for name in names:
        got = core.read_namespaced_pod(name, ns)
        gpus = got.metadata.annotations.get(GPU_INDEX_ANNOTATION, "")
        assert len(gpus.split(",")) == 2, (name, got.metadata.annotations)
    # released by a write to the PodGroup, never by a PATCH per member
    assert _writes(url, "lift") == lifted
    assert _released(url) > released


def test_a_bare_pod_waits_at_the_barrier_for_its_queue(
    installed: Release, core: client.CoreV1Api, api: client.ApiClient
) -> None:
    """test_installed's bare pod in a capped queue, framework mode: held by the barrier
    annotation (never gated), kept out while its queue is full, released by its
    PodGroup's admission once the cap is raised."""
    url = f"http://{installed.pod('scheduler').ip}:8080"
    lifted = _writes(url, "lift")
    ns = _adopted_namespace(core, "barebarrier")
    created = _bare_pod_in_a_capped_queue(core, api, ns)
    assert not created.spec.scheduling_gates, created.spec.scheduling_gates
    assert created.metadata.annotations.get(BARRIER_ANNOTATION), created.metadata.annotations
    assert "big" not in bound(core, ns)
    # removing the annotation would let the shim's PreEnqueue pass the pod: refused
    key = BARRIER_ANNOTATION.replace("/", "~1")  # JSON pointer escape
    _lifting_the_hold_by_hand_is_refused(
        api, ns, "big", [{"op": "remove", "path": f"/metadata/annotations/{key}"}]
    )
    assert core.read_namespaced_pod("big", ns).metadata.annotations.get(BARRIER_ANNOTATION)
    _raise_the_cap_and_see_it_bound(core, api, ns)
    assert _writes(url, "lift") == lifted


def _released(metrics_url: str) -> float:
    """Gangs the sidecar released: by a write of their own, or on their admission's
    (the chart's PodGroup CRD, as Volcano's, has no status subresource)."""
    return _writes(metrics_url, "release") + _writes(metrics_url, "release", "with_admission")


def _writes(metrics_url: str, op: str, result: str = "ok") -> float:
    """The sidecar's API writes of one kind and result (metric pyextender_api_writes_total)."""
    return sum(
        v
        for k, v in metrics(metrics_url).items()
        if k.startswith("pyextender_api_writes_total{")
        and f'op="{op}"' in k
        and f'result="{result}"' in k
    )


def test_helm_uninstall_leaves_no_pod_held(
    installed: Release, core: client.CoreV1Api, api: client.ApiClient
) -> None:
    ns = _adopted_namespace(core, "uninstall")
    podgroup(api, ns, "waiting", 10, "default", None)
    for i in range(3):
        core.create_namespaced_pod(ns, _member(ns, "waiting", i, gpus=8))
    held = [
        p
        for p in core.list_namespaced_pod(ns).items
        if (p.metadata.annotations or {}).get(BARRIER_ANNOTATION)
    ]
    assert len(held) == 3
    installed.uninstall()
    left = [
        f"{p.metadata.namespace}/{p.metadata.name}"
        for p in core.list_pod_for_all_namespaces().items
        if not p.spec.node_name
        and (
            (p.metadata.annotations or {}).get(BARRIER_ANNOTATION)
            or p.spec.scheduler_name == "volcano"
        )
    ]
    assert not left, left
    waiting = core.read_namespaced_pod("waiting-0", ns)
    assert waiting.spec.scheduler_name == "default-scheduler"
    assert GROUP_NAME_ANNOTATION in waiting.metadata.annotations
