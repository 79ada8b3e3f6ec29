"""The queue tree (spec.parent) on a real cluster: a parent's capability bounds its
children at admission, for elastic members and for preemptors; deserved shares are split
down the tree."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest
from kubernetes import client

from devcluster.cluster import ClusterState
from tests.e2e.kube import (
    bound_of,
    condition,
    gang,
    priority_class,
    queue,
    reasons_for,
    wait_for,
)
from tests.e2e.waits import cycles_pass

pytestmark = pytest.mark.e2e


def test_parent_capability_bounds_its_children(
    core: client.CoreV1Api, api: client.ApiClient, namespace: str, sidecar: str
) -> None:
    """team (8 GPUs) has children a and b, each allowed 8 on its own. a runs 6 GPUs; b's
    2 x 2-GPU gang would take team to 10 and waits, saying why; b's 1 x 2-GPU gang runs."""
    suffix = uuid.uuid4().hex[:6]
    team, a, b = f"team{suffix}", f"a{suffix}", f"b{suffix}"
    queue(api, team, capability={"nvidia.com/gpu": "8"})
    queue(api, a, parent=team, capability={"nvidia.com/gpu": "8"})
    queue(api, b, parent=team, capability={"nvidia.com/gpu": "8"})
    custom = client.CustomObjectsApi(api)
    try:
        run = gang(core, api, namespace, "run", 3, gpus=2, queue_name=a)
        wait_for("a's gang bound", lambda: bound_of(core, namespace, run) == 3, timeout=60)
        big = gang(core, api, namespace, "big", 2, gpus=2, queue_name=b)
        why = wait_for(
            "big's reason", lambda: condition(api, namespace, "big", "Unschedulable"), timeout=60
        )
        assert f'queue "{b}": parent queue "{team}" capability exceeded: nvidia.com/gpu 10/8' in (
            why
        ), why
        small = gang(core, api, namespace, "small", 1, gpus=2, queue_name=b)
        wait_for("small bound", lambda: bound_of(core, namespace, small) == 1, timeout=60)
        assert bound_of(core, namespace, big) == 0
    finally:
        custom.delete_collection_namespaced_custom_object(
            "scheduling.volcano.sh", "v1beta1", namespace, "podgroups"
        )
        core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        wait_for("pods gone", lambda: not core.list_namespaced_pod(namespace).items)
        for name in (a, b, team):
            custom.delete_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", name)


def test_elastic_members_stop_at_a_parent_queues_capability(
    core: client.CoreV1Api, api: client.ApiClient, namespace: str, sidecar: str
) -> None:
    """team (6 GPUs) > a: a gang of 4 x 2 GPUs with minMember 1 gets 3 members running;
    the 4th stays gated cycle after cycle, though the nodes have room for it."""
    suffix = uuid.uuid4().hex[:6]
    team, a = f"team{suffix}", f"a{suffix}"
    queue(api, team, capability={"nvidia.com/gpu": "6"})
    queue(api, a, parent=team)
    custom = client.CustomObjectsApi(api)
    try:
        pods = gang(core, api, namespace, "el", 4, gpus=2, min_member=1, queue_name=a)
        wait_for("3 members bound", lambda: bound_of(core, namespace, pods) == 3, timeout=60)
        cycles_pass(sidecar, n=5)
        assert bound_of(core, namespace, pods) == 3
        left = [p for p in core.list_namespaced_pod(namespace).items if not p.spec.node_name]
        assert len(left) == 1 and left[0].spec.scheduling_gates, left
    finally:
        custom.delete_collection_namespaced_custom_object(
            "scheduling.volcano.sh", "v1beta1", namespace, "podgroups"
        )
        core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        wait_for("pods gone", lambda: not core.list_namespaced_pod(namespace).items)
        for name in (a, team):
            custom.delete_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", name)


def test_deserved_shares_follow_the_queue_tree(
    state: ClusterState, core: client.CoreV1Api, api: client.ApiClient, namespace: str,
    sidecar: str,
) -> None:  # fmt: skip
    """16 GPUs, three queues asking 18 each: x and team deserve 8 each; team's 8 go to its
    children a and b by their weights 3:1. vcctl explain queue shows 8, 6 and 2."""
    suffix = uuid.uuid4().hex[:6]
    x, team, a, b = (f"{n}{suffix}" for n in ("x", "team", "a", "b"))
    queue(api, x)
    queue(api, team)
    queue(api, a, weight=3, parent=team)
    queue(api, b, weight=1, parent=team)
    custom = client.CustomObjectsApi(api)
    try:
        for q in (x, a, b):
            gang(core, api, namespace, f"g{q}", 9, gpus=2, queue_name=q)  # 18 GPUs: never fits
        wait_for("9 pods per gang", lambda: len(core.list_namespaced_pod(namespace).items) == 27)
        for q, want in ((x, "8"), (a, "6"), (b, "2")):
            out = subprocess.run(
                [sys.executable, "-m", "pyextender.vcctl", f"--kubeconfig={state.kubeconfig}",
                 "explain", "queue", q],
                capture_output=True, text=True, timeout=60, env=dict(os.environ),
            )  # fmt: skip
            assert out.returncode == 0, out.stderr
            gpu = next(
                line.split()
                for line in out.stdout.splitlines()
                if line.split()[:1] == ["nvidia.com/gpu"]
            )
            assert gpu[2] == want, out.stdout  # allocated, deserved, ...
    finally:
        custom.delete_collection_namespaced_custom_object(
            "scheduling.volcano.sh", "v1beta1", namespace, "podgroups"
        )
        core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        wait_for("pods gone", lambda: not core.list_namespaced_pod(namespace).items)
        for name in (a, b, team, x):
            custom.delete_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", name)


def test_reclaim_follows_the_queue_tree(
    core: client.CoreV1Api, api: client.ApiClient, namespace: str, sidecar: str
) -> None:
    """x (8 GPUs deserved) and b (under team, 2 deserved of team's 8 by weight 1:3 against
    a) run 8 GPUs each; a's 3 x 2-GPU gang reclaims 3 pods of b, none of x."""
    suffix = uuid.uuid4().hex[:6]
    x, team, a, b = (f"{n}{suffix}" for n in ("x", "team", "a", "b"))
    queue(api, x, reclaimable=True)
    queue(api, team)
    queue(api, a, weight=3, parent=team)
    queue(api, b, weight=1, parent=team, reclaimable=True)
    custom = client.CustomObjectsApi(api)
    try:
        xs = gang(core, api, namespace, "xs", 4, gpus=2, min_member=1, queue_name=x)
        bs = gang(core, api, namespace, "bs", 4, gpus=2, min_member=1, queue_name=b)
        wait_for("x and b hold all 16 GPUs", lambda: bound_of(core, namespace, xs + bs) == 8,
                 timeout=90)  # fmt: skip
        mine = gang(core, api, namespace, "as", 3, gpus=2, queue_name=a)
        wait_for("a's gang bound", lambda: bound_of(core, namespace, mine) == 3, timeout=120)
        left = {p.metadata.name for p in core.list_namespaced_pod(namespace).items}
        assert set(xs) <= left, left  # x is at its deserved share: untouched
        assert len(set(bs) & left) == 1, left  # b keeps its deserved 2 GPUs
    finally:
        custom.delete_collection_namespaced_custom_object(
            "scheduling.volcano.sh", "v1beta1", namespace, "podgroups"
        )
        core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        wait_for("pods gone", lambda: not core.list_namespaced_pod(namespace).items)
        for name in (a, b, team, x):
            custom.delete_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", name)


def test_preempt_stays_within_the_parents_capability(
    core: client.CoreV1Api, api: client.ApiClient, namespace: str, sidecar: str
) -> None:
    """team (8 GPUs) > a, b; half the cluster is free. b runs 4 GPUs, a 4 one-GPU pods of
    low priority. A high-priority 4-GPU gang in a is over team's 8 only: preempt evicts
    a's 4 pods (its own queue), never b's, and the gang runs. As Volcano's preempt
    (pkg/scheduler/actions/preempt/preempt.go) pipelines a preemptor only while
    ssn.Allocatable holds for its queue, which capacity checks up the queue's ancestors
    (pkg/scheduler/plugins/capacity/capacity.go)."""
    suffix = uuid.uuid4().hex[:6]
    team, a, b = f"team{suffix}", f"a{suffix}", f"b{suffix}"
    queue(api, team, capability={"nvidia.com/gpu": "8"})
    queue(api, a, parent=team)
    queue(api, b, parent=team)
    priority_class(api, "e2e-tree-low", 10)
    priority_class(api, "e2e-tree-high", 1000)
    custom = client.CustomObjectsApi(api)
    try:
        bs = gang(core, api, namespace, "bs", 1, gpus=4, queue_name=b)
        lo = gang(core, api, namespace, "lo", 4, gpus=1, min_member=1, queue_name=a,
                  priority_class="e2e-tree-low")  # fmt: skip
        wait_for("b and a's low pods bound", lambda: bound_of(core, namespace, bs + lo) == 5,
                 timeout=60)  # fmt: skip
        hp = gang(core, api, namespace, "hp", 1, gpus=4, queue_name=a,
                  priority_class="e2e-tree-high")  # fmt: skip
        wait_for("hp bound", lambda: bound_of(core, namespace, hp) == 1, timeout=90)
        live = {
            p.metadata.name
            for p in core.list_namespaced_pod(namespace).items
            if not p.metadata.deletion_timestamp
        }
        assert not set(lo) & live, live  # all four went: 4 + 4 + 4 would be 12 > 8
        assert set(bs) <= live, live
        assert reasons_for(core, namespace, "Preempted", set(lo)) == set(lo)
    finally:
        custom.delete_collection_namespaced_custom_object(
            "scheduling.volcano.sh", "v1beta1", namespace, "podgroups"
        )
        core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        wait_for("pods gone", lambda: not core.list_namespaced_pod(namespace).items)
        for name in (a, b, team):
            custom.delete_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", name)


def test_a_parents_guarantee_holds_its_childrens(
    core: client.CoreV1Api, api: client.ApiClient, namespace: str, sidecar: str
) -> None:
    """16 GPUs. team guarantees 8, and its child a 8 of those (inside team's, not on
    top of them). x, outside team, may grow to 8 GPUs and no further, even with the
    rest idle; a's 8-GPU gang then runs at once. As Volcano's capacity plugin
    (pkg/scheduler/plugins/capacity/capacity.go, checkHierarchicalQueue: a child's
    realCapability is its parent's less the children's guarantees plus its own)."""
    suffix = uuid.uuid4().hex[:6]
    team, a, x = f"team{suffix}", f"a{suffix}", f"x{suffix}"
    eight = {"nvidia.com/gpu": "8"}
    queue(api, team, guarantee={"resource": eight}, deserved=eight)
    queue(api, a, parent=team, guarantee={"resource": eight}, deserved=eight)
    queue(api, x)
    custom = client.CustomObjectsApi(api)
    try:
        xs = gang(core, api, namespace, "xs", 4, gpus=4, min_member=1, queue_name=x)
        wait_for("x holds 8 GPUs", lambda: bound_of(core, namespace, xs) == 2, timeout=60)
        cycles_pass(sidecar, n=5)
        assert bound_of(core, namespace, xs) == 2  # the other 8 stay team's
        why = condition(api, namespace, "xs", "Unschedulable")
        mine = gang(core, api, namespace, "as", 2, gpus=4, queue_name=a)
        wait_for("a's gang bound", lambda: bound_of(core, namespace, mine) == 2, timeout=60)
        assert bound_of(core, namespace, xs) == 2, why
    finally:
        custom.delete_collection_namespaced_custom_object(
            "scheduling.volcano.sh", "v1beta1", namespace, "podgroups"
        )
        core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        wait_for("pods gone", lambda: not core.list_namespaced_pod(namespace).items)
        for name in (a, team, x):
            custom.delete_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", name)
