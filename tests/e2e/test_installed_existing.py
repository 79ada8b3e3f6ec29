"""pyextender plugged into the cluster's EXISTING kube-scheduler (chart mode=existing).

The devcluster's only kube-scheduler runs the default profile plus the extender
entry shipped in manifests/extender/ (managedResources pyextender.io/batch with
ignoredByScheduler, ignorable). The chart installs the webhook (which marks
adopted gang pods), the controllers and the sidecar Deployment, each run as the
chart defines it under its own ServiceAccount.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config

from devcluster.installed import Release, installed_release
from pyextender.api.names import (
    BATCH_RESOURCE,
    ENABLED_LABEL,
    GANG_GATE,
    GROUP_NAME_ANNOTATION,
    OWN_PODGROUP_ANNOTATION,
)
from tests.e2e.kube import bound, bound_of, metrics, pod, podgroup, read_podgroup, wait_for
from tests.e2e.test_installed import (
    _lifting_the_hold_by_hand_is_refused,
    test_components_run_as_the_charts_non_root_user,
)

__all__ = ["test_components_run_as_the_charts_non_root_user"]

pytestmark = pytest.mark.e2e

VALUES: dict[str, Any] = {
    "mode": "existing",
    "scheduler": {"replicas": 1},
    "controllers": {"replicas": 1},
    "webhook": {"replicas": 1},
}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Release]:
    root = tmp_path_factory.mktemp("existing")
    with installed_release(root, f"exist-{os.getpid()}", VALUES, mode="existing") as release:
        release.cluster.start_cluster_scheduler(f"http://{release.pod('scheduler').ip}:8888")
        yield release


@pytest.fixture(scope="module")
def core(installed: Release) -> client.CoreV1Api:
    st = installed.cluster.state
    assert st is not None
    cfg = client.Configuration()
    config.load_kube_config(config_file=st.kubeconfig, client_configuration=cfg)
    return client.CoreV1Api(client.ApiClient(cfg))


@pytest.fixture(scope="module")
def api(core: client.CoreV1Api) -> client.ApiClient:
    out: client.ApiClient = core.api_client
    return out


def verb_calls(release: Release) -> float:
    """Every extender verb request the sidecar has answered (any verb, any code)."""
    url = f"http://{release.pod('scheduler').ip}:8080"
    return sum(v for k, v in metrics(url).items() if k.startswith("pyextender_verb_requests_total"))


def member(namespace: str, group: str, i: int, gpus: int) -> dict[str, Any]:
    m = pod(f"{group}-{i}", namespace, gpus=gpus, scheduler="default-scheduler")
    m["metadata"]["annotations"] = {GROUP_NAME_ANNOTATION: group}
    return m


def test_default_pods_never_reach_the_extender(installed: Release, core: client.CoreV1Api) -> None:
    before = verb_calls(installed)
    for i in range(3):
        core.create_namespaced_pod("default", pod(f"plain-{i}", "default", gpus=1, scheduler=""))
    wait_for("plain pods bound", lambda: len(bound(core, "default")) == 3, timeout=60)
    time.sleep(2)
    assert verb_calls(installed) == before
    core.delete_collection_namespaced_pod("default", grace_period_seconds=0)
    wait_for("plain pods gone", lambda: not core.list_namespaced_pod("default").items)


def test_adopted_gang_is_marked_and_scheduled_all_or_nothing(
    installed: Release, core: client.CoreV1Api, api: client.ApiClient
) -> None:
    ns = "adopted-existing"
    core.create_namespace({"metadata": {"name": ns, "labels": {ENABLED_LABEL: "true"}}})
    core.create_namespaced_pod(ns, pod("blocker", ns, gpus=2, scheduler="default-scheduler"))
    wait_for("blocker bound", lambda: "blocker" in bound(core, ns), timeout=60)
    before = verb_calls(installed)
    podgroup(api, ns, "g", 2, "default", None)
    names = ["g-0", "g-1"]
    for i in range(2):  # 2 x 8 GPUs: fits only once the blocker is gone
        core.create_namespaced_pod(ns, member(ns, "g", i, gpus=8))
    p = core.read_namespaced_pod("g-0", ns)
    assert p.spec.scheduler_name == "default-scheduler"
    assert [g.name for g in p.spec.scheduling_gates] == [GANG_GATE]
    res = p.spec.containers[0].resources
    assert res.requests[BATCH_RESOURCE] == "1" and res.limits[BATCH_RESOURCE] == "1"
    seen = []
    deadline = time.monotonic() + 6
    while time.monotonic() < deadline:
        seen.append(bound_of(core, ns, names))
        time.sleep(0.2)
    assert max(seen) == 0, "a gang member bound while the gang could not fit"
    core.delete_namespaced_pod("blocker", ns, grace_period_seconds=0)
    wait_for("the whole gang bound", lambda: bound_of(core, ns, names) == 2, timeout=120)
    assert verb_calls(installed) > before  # the cluster's scheduler called us for them


def test_a_bare_pod_naming_volcano_is_adopted_and_runs(
    installed: Release, core: client.CoreV1Api, api: client.ApiClient
) -> None:
    """Existing mode has no scheduler named volcano: such a pod used to stay Pending for
    ever. The webhook adopts it as it does a gang member (the cluster's scheduler, the
    marker, the gate), the PodGroup controller gives it a PodGroup, and it runs once
    that is admitted, through our extender."""
    ns = "adopted-bare"  # a CPU pod: the gang above holds every GPU
    core.create_namespace({"metadata": {"name": ns, "labels": {ENABLED_LABEL: "true"}}})
    before = verb_calls(installed)
    core.create_namespaced_pod(ns, pod("bare", ns, scheduler="volcano"))
    p = core.read_namespaced_pod("bare", ns)
    assert p.spec.scheduler_name == "default-scheduler"
    assert [g.name for g in p.spec.scheduling_gates] == [GANG_GATE]
    assert p.spec.containers[0].resources.requests[BATCH_RESOURCE] == "1"
    wait_for("the bare pod bound", lambda: "bare" in bound(core, ns), timeout=60)
    # its own PodGroup, named by the webhook in its creation (before it had a uid)
    assert p.metadata.annotations[OWN_PODGROUP_ANNOTATION] == "true"
    group = p.metadata.annotations[GROUP_NAME_ANNOTATION]
    assert group.startswith("podgroup-") and group != f"podgroup-{p.metadata.uid}"
    owners = read_podgroup(api, ns, group)["metadata"]["ownerReferences"]
    assert [(o["kind"], o["uid"]) for o in owners] == [("Pod", p.metadata.uid)]
    assert verb_calls(installed) > before


def test_a_held_gang_member_cannot_be_started_by_hand(
    installed: Release, core: client.CoreV1Api, api: client.ApiClient
) -> None:
    """The gate holds a gang until its queue admits it and it fits; a namespace user
    who may update the pod is refused when removing it, in existing mode as in the
    others (the cluster's own kube-scheduler would take the pod next)."""
    ns = "adopted-hold"
    core.create_namespace({"metadata": {"name": ns, "labels": {ENABLED_LABEL: "true"}}})
    podgroup(api, ns, "half", 2, "default", None)
    core.create_namespaced_pod(ns, member(ns, "half", 0, gpus=0))
    _lifting_the_hold_by_hand_is_refused(
        api, ns, "half-0", [{"op": "remove", "path": "/spec/schedulingGates/0"}]
    )
    time.sleep(2)
    p = core.read_namespaced_pod("half-0", ns)
    assert [g.name for g in p.spec.scheduling_gates] == [GANG_GATE]
    assert not p.spec.node_name
