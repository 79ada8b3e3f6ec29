"""A Queue's status.allocated counts its whole subtree, as Volcano's scheduler writes it
(pkg/scheduler/framework/session.go, updateQueueStatus: each allocated task is added to
its queue and to every queue above it, up to root); its PodGroup counts stay its own
(pkg/controllers/queue/queue_controller_action.go, syncQueue)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.kube import bound_of, gang, queue, wait_for

pytestmark = pytest.mark.e2e

QUEUES = ("scheduling.volcano.sh", "v1beta1", "queues")


def test_a_parents_allocated_counts_its_subtree(
    core: client.CoreV1Api,
    api: client.ApiClient,
    co: client.CustomObjectsApi,
    namespace: str,
    controllers: str,
    sidecar: str,
) -> None:
    """team > a > a1: a gang of 3 x 2 GPUs runs in a1. a1, a and team each show 6 GPUs
    allocated (root at least 6); only a1 counts the PodGroup as running. When the pods
    are gone, team's allocated drops the GPUs. team, created without spec.parent, gets
    parent root written (queue_controller_action.go, updateQueueParent)."""
    suffix = uuid.uuid4().hex[:6]
    team, a, a1 = (f"{n}{suffix}" for n in ("team", "a", "aa"))
    queue(api, team)
    queue(api, a, parent=team)
    queue(api, a1, parent=a)

    def status(name: str) -> dict[str, Any]:
        st: dict[str, Any] = co.get_cluster_custom_object(*QUEUES, name).get("status") or {}
        return st

    def gpus(name: str) -> int:
        return int((status(name).get("allocated") or {}).get("nvidia.com/gpu") or 0)

    try:
        pods = gang(core, api, namespace, "g", 3, gpus=2, queue_name=a1)
        wait_for("gang bound", lambda: bound_of(core, namespace, pods) == 3, timeout=60)
        wait_for("allocated up the tree", lambda: [gpus(n) for n in (a1, a, team)] == [6] * 3)
        assert gpus("root") >= 6
        wait_for("a1 counts its PodGroup running", lambda: status(a1).get("running") == 1)
        assert not status(a).get("running") and not status(team).get("running")
        core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        wait_for("team's allocated drops", lambda: gpus(team) == 0)
        # created without a parent: written root, as Volcano's queue controller does
        assert co.get_cluster_custom_object(*QUEUES, team)["spec"]["parent"] == "root"
    finally:
        co.delete_collection_namespaced_custom_object(
            "scheduling.volcano.sh", "v1beta1", namespace, "podgroups"
        )
        core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        wait_for("pods gone", lambda: not core.list_namespaced_pod(namespace).items)
        for name in (a1, a, team):
            co.delete_cluster_custom_object(*QUEUES, name)


def test_childrens_guarantees_beyond_the_parents_are_reported(
    core: client.CoreV1Api, co: client.CustomObjectsApi, api: client.ApiClient,
    controllers: str,
) -> None:  # fmt: skip
    """team guarantees 4 GPUs, its children a and b 3 each: a Warning event on team
    (GuaranteeExceeded) names the children and the amounts. Volcano's capacity plugin
    logs this check (pkg/scheduler/plugins/capacity/capacity.go, checkHierarchicalQueue)."""
    suffix = uuid.uuid4().hex[:6]
    team, a, b = (f"{n}{suffix}" for n in ("team", "a", "b"))

    def gpus(n: str) -> dict[str, Any]:
        amount = {"nvidia.com/gpu": n}
        return {"guarantee": {"resource": amount}, "deserved": amount}

    queue(api, team, **gpus("4"))
    queue(api, a, parent=team, **gpus("3"))
    queue(api, b, parent=team, **gpus("3"))
    try:
        why = wait_for(
            "GuaranteeExceeded on team",
            lambda: next(
                (
                    e.message
                    for e in core.list_event_for_all_namespaces(
                        field_selector=f"involvedObject.name={team}"
                    ).items
                    if e.reason == "GuaranteeExceeded" and e.type == "Warning"
                ),
                None,
            ),
        )
        assert why == (
            f"the guarantees of child queues ({a}, {b}) exceed this queue's: nvidia.com/gpu 6 > 4"
        ), why
    finally:
        for name in (a, b, team):
            co.delete_cluster_custom_object(*QUEUES, name)
