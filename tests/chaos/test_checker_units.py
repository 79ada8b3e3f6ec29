"""The chaos suite's own machinery can fail: the invariant checks on made-up
snapshots, and the proxy's stall and delay on a local echo server."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import pytest

from tests.chaos.invariants import Snapshot, gang_counts, job_problems, overcommitted
from tests.chaos.proxy import TcpProxy


def _node(name: str, gpus: int = 8, cpu: str = "16") -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "nvidia.com/gpu": str(gpus)}},
    }


def _pod(
    name: str, node: str | None, group: str = "", gpus: int = 1, **meta: Any
) -> dict[str, Any]:
    ann = {"scheduling.k8s.io/group-name": group} if group else {}
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "annotations": {**ann, **meta.pop("ann", {})},
            **meta,
        },
        "spec": {
            "nodeName": node,
            "containers": [{"resources": {"requests": {"cpu": "1", "nvidia.com/gpu": str(gpus)}}}],
        },
        "status": {"phase": "Running" if node else "Pending"},
    }


def _pg(name: str, min_member: int, **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", **meta},
        "spec": {"minMember": min_member},
    }


def test_a_partial_gang_is_seen() -> None:
    snap = Snapshot(
        nodes=[_node("n")],
        pods=[_pod("g-0", "n", "g"), _pod("g-1", None, "g"), _pod("h-0", "n", "h")],
        podgroups=[_pg("g", 2), _pg("h", 1)],
        jobs=[],
    )
    assert gang_counts(snap) == {"ns/g": (1, 2), "ns/h": (1, 1)}
    # a gang being torn down is not judged
    snap.pods[0]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert "ns/g" not in gang_counts(snap)


def test_overcommit_is_seen_and_finished_pods_do_not_count() -> None:
    pods = [_pod(f"p{i}", "n", gpus=3) for i in range(3)]
    snap = Snapshot(nodes=[_node("n")], pods=pods, podgroups=[], jobs=[])
    assert overcommitted(snap) == ["node n: nvidia.com/gpu requests 9 > 8"]
    pods[0]["status"]["phase"] = "Succeeded"
    assert overcommitted(snap) == []


def test_lost_and_duplicated_jobs_are_seen() -> None:
    job: dict[str, Any] = {"metadata": {"name": "j", "namespace": "ns", "uid": "u1"}, "status": {}}
    owner = [{"kind": "Job", "uid": "u1"}]
    twin = {"volcano.sh/task-spec": "w", "volcano.sh/task-index": "0"}
    pods = [
        _pod("j-w-0", None, ann=twin, ownerReferences=owner),
        _pod("j-w-0b", None, ann=twin, ownerReferences=owner),
    ]
    snap = Snapshot(nodes=[], pods=pods, podgroups=[], jobs=[job])
    seen: dict[str, float] = {}
    assert job_problems(snap, seen, now=0.0) == ["job ns/j: 2 live pods for task w index 0"]
    lost = job_problems(snap, seen, now=61.0)
    assert "job ns/j: no PodGroup after 60s" in lost
    snap.podgroups = [_pg("j-u1", 2, ownerReferences=owner), _pg("j-u1b", 2, ownerReferences=owner)]
    assert "job ns/j: 2 PodGroups" in job_problems(snap, seen, now=61.0)
    # a finished Job may have lost its PodGroup
    snap.podgroups, snap.pods = [], []
    job["status"] = {"state": {"phase": "Completed"}}
    assert job_problems(snap, seen, now=61.0) == []


@pytest.fixture
def echo() -> Any:
    srv = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=_echo, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    yield srv.getsockname()
    srv.close()


def _echo(conn: socket.socket) -> None:
    with conn:
        while data := conn.recv(1024):
            conn.sendall(data)


def _roundtrip(port: int, timeout: float) -> tuple[bytes, float]:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        start = time.monotonic()
        s.sendall(b"ping")
        try:
            return s.recv(1024), time.monotonic() - start
        except TimeoutError:
            return b"", time.monotonic() - start


def test_proxy_forwards_stalls_and_delays(echo: tuple[str, int]) -> None:
    with TcpProxy(echo) as proxy:
        assert _roundtrip(proxy.port, 2)[0] == b"ping"
        proxy.stall()
        assert _roundtrip(proxy.port, 0.5)[0] == b"", "a stalled proxy forwarded data"
        proxy.resume()
        assert _roundtrip(proxy.port, 2)[0] == b"ping"
        proxy.delay = 0.2
        data, took = _roundtrip(proxy.port, 5)
        assert data == b"ping" and took >= 0.4, took  # 0.2 s each way
