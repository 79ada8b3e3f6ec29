"""vcctl explain job|queue over a fixed snapshot: shares, order, reasons, start estimate."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from pyextender.vcctl import build_parser
from pyextender.vcctl_explain import Snapshot, explain_job, explain_queue, job_podgroup

NOW = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.UTC)
GPU = "nvidia.com/gpu"


def _ts(minutes_ago: float) -> str:
    return (NOW - dt.timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _node(name: str) -> dict[str, Any]:
    alloc = {"cpu": "64", "memory": "256Gi", "pods": "110", GPU: "8"}
    return {
        "metadata": {"name": name},
        "spec": {},
        "status": {"allocatable": alloc, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def _pod(
    ns: str, name: str, group: str, gpus: int, node: str = "", started: float | None = None,
    estimate: str = "",
) -> dict[str, Any]:  # fmt: skip
    ann = {"scheduling.k8s.io/group-name": group}
    if estimate:
        ann["pyextender.io/running-estimate"] = estimate
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", GPU: str(gpus)}}}]
    }
    status: dict[str, Any] = {"phase": "Running" if node else "Pending"}
    if node:
        spec["nodeName"] = node
    else:
        spec["schedulingGates"] = [{"name": "pyextender.io/gang"}]
    if started is not None:
        status["startTime"] = _ts(started)
    return {
        "metadata": {"namespace": ns, "name": name, "annotations": ann},
        "spec": spec,
        "status": status,
    }


def _pg(
    ns: str, name: str, queue: str, min_member: int, phase: str, created: float, **spec: Any
) -> dict[str, Any]:
    ann = spec.pop("annotations", {})
    conditions = spec.pop("conditions", [])
    return {
        "metadata": {
            "namespace": ns, "name": name, "uid": f"uid-{name}",
            "creationTimestamp": _ts(created), "annotations": ann,
        },
        "spec": {"queue": queue, "minMember": min_member, **spec},
        "status": {"phase": phase, "conditions": conditions},
    }  # fmt: skip


def _queue(name: str, weight: int, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"weight": weight, **spec},
            "status": {"state": "Open"}}  # fmt: skip


WHY = "2/2 tasks in gang unschedulable: Insufficient nvidia.com/gpu"


@pytest.fixture
def snap() -> Snapshot:
    """Two 8-GPU nodes. research (weight 3, capability 16 GPUs) runs a (8 GPUs, ends in
    20 min) and has b (2 x 8 GPUs) and c (4 GPUs, high priority) waiting; default runs d
    (4 GPUs, ends in 60 min)."""
    return Snapshot(
        nodes=[_node("n0"), _node("n1")],
        pods=[
            _pod("ml", "a-0", "a", 8, node="n0", started=10, estimate="30m"),
            _pod("ml", "b-0", "b", 8),
            _pod("ml", "b-1", "b", 8),
            _pod("ml", "c-0", "c", 4),
            _pod("ops", "d-0", "d", 4, node="n1", started=0, estimate="1h"),
        ],
        podgroups=[
            _pg("ml", "a", "research", 1, "Running", 30),
            _pg(
                "ml",
                "b",
                "research",
                2,
                "Pending",
                20,
                annotations={"sla-waiting-time": "30m"},
                networkTopology={"mode": "hard", "highestTierAllowed": 1},
                conditions=[{"type": "Unschedulable", "status": "True", "message": WHY}],
            ),
            _pg("ml", "c", "research", 1, "Pending", 5, priorityClassName="high"),
            _pg("ops", "d", "default", 1, "Running", 1),
        ],
        queues=[
            _queue("root", 1),
            _queue("default", 1),
            _queue("research", 3, capability={GPU: "16"}, parent="root"),
        ],
        priority_classes={"high": 1000},
        now=NOW,
    )


def test_deserved_splits_by_weight_within_demand_and_capability(snap: Snapshot) -> None:
    deserved = snap.deserved()
    assert set(deserved) == {"default", "research"}
    # 16 GPUs: research wants 28 capped at 16, default wants 4; weights 3:1
    assert deserved["research"][GPU] == pytest.approx(12.0)
    assert deserved["default"][GPU] == pytest.approx(4.0)


def test_waiting_order_is_priority_then_age(snap: Snapshot) -> None:
    assert [g.name for g in snap.waiting_in("research")] == ["c", "b"]


def test_explain_queue(snap: Snapshot) -> None:
    out = explain_queue(snap, "research").splitlines()
    assert out[0] == "queue research: Open, weight 3, parent root, reclaimable"
    table = {line.split()[0]: line.split()[1:] for line in out[1:4]}
    assert table["resource"] == ["allocated", "deserved", "capability", "guarantee", "asked"]
    assert table[GPU] == ["8", "12", "16", "-", "28"]
    assert table["cpu"][0] == "1" and table["cpu"][2] == "-"
    assert out[4].startswith("  share 0.67 (largest allocated / deserved")
    assert out[5] == "  podgroups: 2 pending, 1 running"
    assert out[6].startswith("  waiting (2, in the order")
    assert out[7] == f"    1. ml/c  Pending  minMember 1  asks cpu 1, {GPU} 4"
    assert out[8] == f"    2. ml/b  Pending  minMember 2  asks cpu 2, {GPU} 16  ({WHY})"
    assert explain_queue(snap, "default").splitlines()[-1] == "  nobody waits"
    assert explain_queue(snap, "nope") == "queue nope: not found"


def test_explain_waiting_podgroup(snap: Snapshot) -> None:
    g = snap.groups["ml/b"]
    out = explain_job(snap, None, g, "ml/b").splitlines()
    assert out == [
        "  podgroup ml/b: Pending, minMember 2, 2 pods (0 bound, 2 gated)",
        "  queue research: Open, share 0.67; allocated/deserved/capability: "
        f"cpu 1/4/-, {GPU} 8/12/16",
        "  position: 2 of 2 waiting in queue research (priority, then age)",
        "  waits for:",
        "    - gang: 2 pods must fit at once (minMember 2); 0 bound; not admitted yet: "
        "enqueue (Pending -> Inqueue) waits until its minResources fit its queue and the cluster",
        f"    - capability: queue research would exceed it ({GPU} 24/16)",
        "    - reservation: sla-waiting-time 30m, waiting 20m; nodes are reserved for it in 10m",
        "    - topology: hard network topology, highest tier allowed 1",
        f"    - scheduler: {WHY}",
        # a ends in 20 min (frees the queue's capability), d in 60 (frees the 16th GPU)
        "  start: at the earliest in 1h (2026-11-23T13:00:00Z), when running pods with "
        "pyextender.io/running-estimate have ended",
    ]


def test_explain_volcano_job_finds_its_podgroup(snap: Snapshot) -> None:
    snap.podgroups.append(_pg("ml", "train-uid-7", "research", 1, "Pending", 1))
    snap.__post_init__()
    job = {
        "metadata": {"namespace": "ml", "name": "train", "uid": "uid-7"},
        "spec": {"minAvailable": 1, "queue": "research", "tasks": [{"replicas": 1}]},
        "status": {"state": {"phase": "Pending"}},
    }
    g = job_podgroup(snap, job)
    assert g is not None and g.name == "train-uid-7"
    out = explain_job(snap, job, g, "ml/train").splitlines()
    assert out[0] == "job ml/train: Pending, minAvailable 1 of 1 replicas, queue research"
    assert "    - members: only 0 of 1 pods exist yet" in out
    assert out[-1] == "  start: no estimate: the gang asks for no resources"


def test_no_estimate_without_declared_run_times(snap: Snapshot) -> None:
    for pod in snap.pods:
        pod["metadata"]["annotations"].pop("pyextender.io/running-estimate", None)
    out = explain_job(snap, None, snap.groups["ml/b"], "ml/b").splitlines()
    assert out[-1] == (
        "  start: no estimate: no running pod declares pyextender.io/running-estimate"
    )


def test_running_group_is_not_waiting(snap: Snapshot) -> None:
    out = explain_job(snap, None, snap.groups["ml/a"], "ml/a").splitlines()
    assert out[-1] == "  not waiting: the PodGroup is Running, 1 of 1 bound"
    # admitted with every member bound: not waiting either (the controllers mark it Running)
    snap.podgroups[0]["status"]["phase"] = "Inqueue"
    snap.__post_init__()
    assert [g.name for g in snap.waiting_in("research")] == ["c", "b"]
    out = explain_job(snap, None, snap.groups["ml/a"], "ml/a").splitlines()
    assert out[-1] == "  not waiting: the PodGroup is Inqueue, 1 of 1 bound"


def test_parser_takes_job_queue_and_version() -> None:
    p = build_parser()
    assert p.parse_args(["explain", "job", "train", "-n", "ml"]).kind == "job"
    assert p.parse_args(["explain", "queue", "research"]).kind == "queue"
    assert p.parse_args(["version"]).group == "version"


def test_version_without_a_cluster(
    tmp_path: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyextender.vcctl import main

    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.setenv("HOME", str(tmp_path))
    assert main(["version"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("vcctl (pyextender) 0.1.0, Python 3.")
    assert out[1].startswith("server: not reachable")


def test_past_sla_waiting_time_says_nodes_are_reserved(snap: Snapshot) -> None:
    snap.podgroups[1]["metadata"]["creationTimestamp"] = _ts(45)
    snap.__post_init__()
    out = explain_job(snap, None, snap.groups["ml/b"], "ml/b")
    assert (
        "reservation: sla-waiting-time 30m, waiting 45m; past it: nodes are reserved for it "
        "until it fits" in out
    )


def test_admitted_gang_waits_with_its_gates_on(snap: Snapshot) -> None:
    # Inqueue (its minResources fit the queue) but not all members fit now: the gates stay on
    b = next(pg for pg in snap.podgroups if pg["metadata"]["name"] == "b")
    b["status"]["phase"] = "Inqueue"
    snap.__post_init__()
    out = explain_job(snap, None, snap.groups["ml/b"], "ml/b").splitlines()
    assert out[4] == (
        "    - gang: 2 pods must fit at once (minMember 2); admitted (Inqueue), 0 bound, "
        "2 gated: the gates lift together once they all fit, and they bind together"
    )
