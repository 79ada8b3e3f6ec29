"""The gang barrier in framework mode (--gang-barrier=scheduler), as a user runs it: the
webhook and the Job controller hold gang pods with the pyextender.io/gang-barrier
annotation instead of a scheduling gate; the shim's PreEnqueue keeps them out of
kube-scheduler's cycle until the sidecar releases the gang, over gRPC WatchReleased,
with one write to the PodGroup (pyextender.io/released-pods) and none to the pods.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from devcluster.cluster import Cluster
from devcluster.controllers import enable_controllers
from devcluster.webhook import disable_webhook, enable_webhook
from pyextender.api.names import (
    BARRIER_ANNOTATION,
    ENABLED_LABEL,
    GROUP_NAME_ANNOTATION,
    RELEASED_ANNOTATION,
)
from tests.e2e.conftest import VOLCANO_JOBS, _api
from tests.e2e.kube import metrics, pod, podgroup, read_podgroup, wait_for

pytestmark = pytest.mark.e2e

BARRIER = ["--gang-barrier=scheduler"]


@pytest.fixture(scope="module")
def fw(framework_cluster: Cluster) -> Iterator[Cluster]:
    """The framework cluster with the webhook and the controllers in barrier mode; both
    back to their defaults afterwards (other modules share the cluster)."""
    c = framework_cluster
    st = c.state
    assert st is not None
    if "sidecar" not in st.pids:
        c.start_sidecar()
    c.wait_sidecar_ready()
    enable_webhook(c, extra=BARRIER)
    enable_controllers(c, extra=BARRIER)
    try:
        yield c
    finally:
        disable_webhook(c)
        enable_controllers(c, extra=[])


@pytest.fixture
def api(fw: Cluster) -> client.ApiClient:
    st = fw.state
    assert st is not None
    return _api(st)


@pytest.fixture
def ns(fw: Cluster, api: client.ApiClient) -> Iterator[str]:
    """An adopted namespace (the webhook mutates its gang pods)."""
    core = client.CoreV1Api(api)
    name = f"barrier-{int(time.time() * 1000) % 10**8}"
    core.create_namespace({"metadata": {"name": name, "labels": {ENABLED_LABEL: "true"}}})
    yield name
    co = client.CustomObjectsApi(api)
    group, version, plural = VOLCANO_JOBS
    for job in co.list_namespaced_custom_object(group, version, name, plural)["items"]:
        co.delete_namespaced_custom_object(group, version, name, plural, job["metadata"]["name"])
    co.delete_collection_namespaced_custom_object(
        "scheduling.volcano.sh", "v1beta1", name, "podgroups"
    )
    core.delete_collection_namespaced_pod(name, grace_period_seconds=0)


def _sidecar(fw: Cluster) -> str:
    st = fw.state
    assert st is not None
    return st.extender_url


def _writes(fw: Cluster, op: str, result: str = "ok") -> float:
    key = f'pyextender_api_writes_total{{op="{op}",result="{result}"}}'
    return metrics(_sidecar(fw)).get(key, 0.0)


def _member(ns: str, group: str, i: int, gpus: int) -> dict[str, Any]:
    body = pod(f"{group}-{i}", ns, gpus=gpus, scheduler="default-scheduler")
    body["metadata"]["annotations"] = {GROUP_NAME_ANNOTATION: group}
    return body


def _pods(api: client.ApiClient, ns: str) -> list[Any]:
    return list(client.CoreV1Api(api).list_namespaced_pod(ns).items)


def test_a_gang_passes_the_barrier_with_one_podgroup_write_and_no_gate(
    fw: Cluster, api: client.ApiClient, ns: str
) -> None:
    """Its members first, then its PodGroup (no minResources: admitted once they exist),
    so one cycle admits and releases the gang: with our CRDs, whose PodGroup status is
    written through the object, that is one write carrying both."""
    core = client.CoreV1Api(api)
    lifts, releases = _writes(fw, "lift"), _writes(fw, "release")
    admits, carried = _writes(fw, "admit"), _writes(fw, "release", "with_admission")
    for i in range(3):
        core.create_namespaced_pod(ns, _member(ns, "g", i, gpus=2))
    time.sleep(0.5)  # the sidecar's watch shows all three before their PodGroup
    podgroup(api, ns, "g", 3)
    for p in _pods(api, ns):  # as the webhook left them: ours, annotated, not gated
        assert p.spec.scheduler_name == "volcano"
        assert p.metadata.annotations.get(BARRIER_ANNOTATION) == "true"
        assert not p.spec.scheduling_gates
    wait_for("the gang bound", lambda: all(p.spec.node_name for p in _pods(api, ns)), 60)
    assert _writes(fw, "admit") == admits + 1
    assert _writes(fw, "release", "with_admission") == carried + 1, "released by the admission"
    assert _writes(fw, "release") == releases, "no release write of its own"
    assert _writes(fw, "lift") == lifts, "no gate lifted, no pod written"
    group = read_podgroup(api, ns, "g")
    listed = group["metadata"]["annotations"][RELEASED_ANNOTATION]
    assert sorted(listed.split(",")) == sorted(p.metadata.uid for p in _pods(api, ns))
    assert group["status"]["phase"] in ("Inqueue", "Running")


def test_a_gang_that_does_not_fit_waits_at_the_barrier_then_goes_when_room_appears(
    fw: Cluster, api: client.ApiClient, ns: str
) -> None:
    """3 x 8 GPUs on 2 nodes of 8: never admitted, so never released; kube-scheduler
    never tries the pods (no FailedScheduling events). Deleting the PodGroup's extra
    member's demand (a smaller gang of 2) lets it through."""
    core = client.CoreV1Api(api)
    podgroup(api, ns, "big", 3)
    for i in range(3):
        core.create_namespaced_pod(ns, _member(ns, "big", i, gpus=8))
    time.sleep(4.0)  # several scheduling cycles of the sidecar
    assert not any(p.spec.node_name for p in _pods(api, ns))
    group = read_podgroup(api, ns, "big")
    assert RELEASED_ANNOTATION not in (group["metadata"].get("annotations") or {})
    events = core.list_namespaced_event(ns).items
    tried = [e for e in events if e.reason == "FailedScheduling"]
    assert not tried, f"kube-scheduler tried held pods: {[e.message for e in tried]}"
    # room for a gang of 2: minMember down, one member gone
    client.CustomObjectsApi(api).patch_namespaced_custom_object(
        "scheduling.volcano.sh", "v1beta1", ns, "podgroups", "big", {"spec": {"minMember": 2}}
    )
    core.delete_namespaced_pod("big-2", ns, grace_period_seconds=0)
    wait_for(
        "the smaller gang bound",
        lambda: (
            sorted(p.metadata.name for p in _pods(api, ns) if p.spec.node_name)
            == ["big-0", "big-1"]
        ),
        60,
    )


def test_a_gang_created_while_the_sidecar_is_down_goes_once_it_is_back(
    fw: Cluster, api: client.ApiClient, ns: str
) -> None:
    """The shim keeps its stream open across a sidecar restart (reconnects) and gets the
    full list of released pods again; held pods wait meanwhile."""
    core = client.CoreV1Api(api)
    fw.stop_role("sidecar", signal.SIGTERM)
    try:
        podgroup(api, ns, "late", 2)
        for i in range(2):
            core.create_namespaced_pod(ns, _member(ns, "late", i, gpus=1))
        time.sleep(2.0)
        assert not any(p.spec.node_name for p in _pods(api, ns))
    finally:
        fw.start_sidecar()
        fw.wait_sidecar_ready()
    wait_for("the gang bound", lambda: all(p.spec.node_name for p in _pods(api, ns)), 60)


def test_members_parked_for_a_podgroup_made_while_the_sidecar_was_down_go_once_it_is_back(
    fw: Cluster, api: client.ApiClient
) -> None:
    """Members without the barrier annotation (a namespace the webhook does not adopt)
    that name a missing PodGroup are refused at PreFilter as unresolvable, which parks
    them in kube-scheduler until an event it watches. The PodGroup is created while the
    sidecar is down, so nobody hears of it then; the restarted sidecar's first
    WatchReleased message lists them and the shim moves them back to the active queue:
    bound within a minute, not at kube-scheduler's five-minute flush."""
    core = client.CoreV1Api(api)
    ns = f"parked-{int(time.time() * 1000) % 10**8}"
    core.create_namespace({"metadata": {"name": ns}})
    names = ["later-0", "later-1"]
    for name in names:
        m = pod(name, ns, gpus=1)
        m["metadata"]["annotations"] = {GROUP_NAME_ANNOTATION: "later"}
        core.create_namespaced_pod(ns, m)
    want = f"PodGroup {ns}/later does not exist"

    def said() -> bool:
        events = core.list_namespaced_event(ns, field_selector="reason=FailedScheduling")
        return any(want in (e.message or "") for e in events.items)

    try:
        wait_for("a FailedScheduling event naming the PodGroup", said, timeout=30)
        fw.stop_role("sidecar", signal.SIGTERM)
        try:
            podgroup(api, ns, "later", 2)
            time.sleep(1.0)
        finally:
            fw.start_sidecar()
            fw.wait_sidecar_ready()
        wait_for(
            "both bound",
            lambda: all(p.spec.node_name for p in core.list_namespaced_pod(ns).items),
            60,
        )
    finally:
        core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)


def test_a_volcano_job_runs_through_the_barrier(
    fw: Cluster, api: client.ApiClient, ns: str
) -> None:
    """The Job controller creates the gang's pods with the annotation (no gate)."""
    group, version, plural = VOLCANO_JOBS
    task = {
        "replicas": 2,
        "name": "worker",
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox",
                        "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"},
                                      "limits": {"nvidia.com/gpu": "1"}},
                    }
                ],
            }
        },
    }  # fmt: skip
    job = {
        "apiVersion": f"{group}/{version}",
        "kind": "Job",
        "metadata": {"name": "train"},
        "spec": {"minAvailable": 2, "schedulerName": "volcano", "tasks": [task]},
    }
    client.CustomObjectsApi(api).create_namespaced_custom_object(group, version, ns, plural, job)
    pods = wait_for(
        "the Job's pods bound",
        lambda: (
            (ps := _pods(api, ns)) and len(ps) == 2 and all(p.spec.node_name for p in ps) and ps
        ),
        60,
    )
    for p in pods:
        assert p.metadata.annotations.get(BARRIER_ANNOTATION) == "true"
        assert not p.spec.scheduling_gates
