"""kube-scheduler (real) calls our extender; GPU pods land only where they fit."""

from __future__ import annotations

import signal

import pytest
from kubernetes import client

from devcluster.cluster import Cluster
from tests.e2e.conftest import GPU_NODES, create
from tests.e2e.kube import (
    bound,
    decisions,
    events_for,
    gpus_per_node,
    metrics,
    pod,
    verb_count,
    wait_for,
)

pytestmark = pytest.mark.e2e


def test_8gpu_pods_bind_only_to_nodes_with_8_free_gpus(
    core: client.CoreV1Api, namespace: str, sidecar: str
) -> None:
    binds_before = metrics(sidecar).get('pyextender_binds_total{result="bound"}', 0.0)
    for i in range(GPU_NODES + 1):
        create(core, pod(f"gpu8-{i}", namespace, gpus=8))
    placed = wait_for(
        "two 8-GPU pods bound", lambda: (b := bound(core, namespace)) and len(b) == 2 and b
    )
    assert sorted(placed.values()) == sorted(set(placed.values())), "two pods share a node"
    # the third stays pending, and says why: kube-scheduler tried it and gave up
    (pending,) = {f"gpu8-{i}" for i in range(3)} - set(placed)
    reasons = wait_for(
        "a FailedScheduling event",
        lambda: [e for e in events_for(core, namespace, pending) if "FailedScheduling" in e],
    )
    assert any("nvidia.com/gpu" in r for r in reasons), reasons
    assert len(bound(core, namespace)) == 2
    assert all(v <= 8 for v in gpus_per_node(core).values())
    # bound by our bind verb, not kube-scheduler's default binder
    binds_after = metrics(sidecar).get('pyextender_binds_total{result="bound"}', 0.0)
    assert binds_after - binds_before == 2


def test_default_scheduler_pods_are_never_sent_to_us(
    core: client.CoreV1Api, namespace: str, sidecar: str
) -> None:
    # Counters of the whole sidecar can move for other tests' leftovers (a pod being
    # deleted gets a last bind call); the sidecar's decision log is per pod.
    for i in range(3):
        create(core, pod(f"plain-{i}", namespace, cpu="100m", scheduler="default-scheduler"))
    wait_for("default-scheduler pods bound", lambda: len(bound(core, namespace)) == 3)
    # positive control: a volcano pod created after them does reach the extender,
    # so by the time it has, any call about the plain pods would have been logged
    create(core, pod("ours", namespace, cpu="100m"))
    wait_for("the volcano pod bound", lambda: "ours" in bound(core, namespace))
    seen = {d["pod"] for d in decisions(sidecar) if d["pod"].startswith(f"{namespace}/")}
    assert seen == {f"{namespace}/ours"}, f"default-scheduler pods reached us: {seen}"


def test_kube_scheduler_calls_every_verb(
    core: client.CoreV1Api, namespace: str, sidecar: str, api: client.ApiClient
) -> None:
    sched = client.SchedulingV1Api(api)
    for name, value in (("e2e-low", 10), ("e2e-high", 1000)):
        try:
            sched.create_priority_class({"metadata": {"name": name}, "value": value})
        except client.ApiException as exc:
            if exc.status != 409:
                raise
    before = {v: verb_count(sidecar, v) for v in ("filter", "prioritize", "bind", "preempt")}
    for i in range(GPU_NODES):
        create(core, pod(f"low-{i}", namespace, gpus=8, priority_class="e2e-low"))
    wait_for("low-priority pods bound", lambda: len(bound(core, namespace)) == GPU_NODES)
    create(core, pod("high", namespace, gpus=8, priority_class="e2e-high"))
    wait_for(
        "high-priority pod bound after preemption",
        lambda: "high" in bound(core, namespace),
        timeout=60,
    )
    # a verb is counted when its answer is sent: the bind's answer follows the
    # Binding write that the API server already shows
    wait_for(
        "filter, bind and preempt counted",
        lambda: all(verb_count(sidecar, v) > before[v] for v in ("filter", "bind", "preempt")),
    )
    after = {v: verb_count(sidecar, v) for v in before}
    # filter picks the node (--filter-picks-node, the default): with one node left,
    # kube-scheduler neither scores nor calls prioritize (called in the next test)
    assert after["prioritize"] == before["prioritize"], (before, after)
    assert all(v <= 8 for v in gpus_per_node(core).values())


@pytest.mark.parametrize("picks", [False, True])
def test_the_node_filter_picks_is_where_kube_scheduler_binds(
    cluster: Cluster, core: client.CoreV1Api, namespace: str, sidecar: str, picks: bool
) -> None:
    """--filter-picks-node: filter leaves one node, the one our scores rank first,
    and the pod is bound there without prioritize. --no-filter-picks-node: every
    feasible node, and kube-scheduler asks prioritize to score them."""
    if not picks:
        cluster.stop_role("sidecar", signal.SIGTERM)
        cluster.start_sidecar(extra_args=["--no-filter-picks-node"])
        cluster.wait_sidecar_ready()
    try:
        before = verb_count(sidecar, "prioritize")
        create(core, pod("one", namespace, cpu="100m"))
        node = wait_for("bound", lambda: bound(core, namespace).get("one"))
        mine = [d for d in decisions(sidecar) if d["pod"] == f"{namespace}/one"]
        filtered = [d for d in mine if d["verb"] == "filter"]
        assert filtered and filtered[-1]["feasible"] > 1, mine
        picked = [d for d in mine if d["verb"] == "pick"]
        if picks:
            assert picked and picked[-1]["best"] == node, mine
            assert verb_count(sidecar, "prioritize") == before
        else:
            assert picked == [], picked
            assert verb_count(sidecar, "prioritize") > before
    finally:
        if not picks:
            cluster.stop_role("sidecar", signal.SIGTERM)
            cluster.start_sidecar()
            cluster.wait_sidecar_ready()


def test_sidecar_killed_then_restarted(
    cluster: Cluster, core: client.CoreV1Api, namespace: str, sidecar: str
) -> None:
    cluster.stop_role("sidecar", signal.SIGKILL)
    for i in range(4):
        create(core, pod(f"half-{i}", namespace, gpus=4))

    # kube-scheduler tried them and could not reach the extender (it says so on the
    # pod: PodScheduled=False, reason SchedulerError); after that nothing may bind them
    def scheduler_error() -> str:
        status = core.read_namespaced_pod("half-0", namespace).status
        for c in status.conditions or []:
            if c.type == "PodScheduled" and c.status == "False" and "/filter" in (c.message or ""):
                return f"{c.reason}: {c.message}"
        return ""

    why = wait_for("PodScheduled=False naming the extender call", scheduler_error, timeout=60)
    assert "connection refused" in why or "connection reset" in why, why
    assert bound(core, namespace) == {}, "pods bound while the extender was down"
    cluster.start_sidecar()
    cluster.wait_sidecar_ready()
    placed = wait_for(
        "all pods bound after restart",
        lambda: (b := bound(core, namespace)) and len(b) == 4 and b,
        timeout=60,
    )
    # every pod bound once, and no node over its 8 GPUs
    assert all(v <= 8 for v in gpus_per_node(core).values())
    assert bound(core, namespace) == placed
