"""Latency of the filter and prioritize verbs over HTTP, names only.

The sidecar's real ASGI app runs under uvicorn in a child process pinned to
one core, with a cache holding N nodes (8 GPUs each, a few pods on most).
This process, pinned to the other core, sends the requests kube-scheduler
would (nodeCacheCapable: the Pod plus all node names), one at a time on a
keep-alive connection. Baselines from the same run: the /healthz round trip
(HTTP cost with no work) and the verb's time in-process (work with no HTTP).

Usage: python bench/verbs.py [--nodes 1000,5000] [--requests 2000]
Last line: one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from typing import Any

import msgspec
import numpy as np

from pyextender.api.extender import ExtenderArgs
from pyextender.cache.cluster import ClusterCache
from pyextender.framework.runtime import build_profile
from pyextender.plugins.defaults import load, plugins_of
from pyextender.server.metrics import Metrics
from pyextender.server.verbs import Extender


def node_doc(i: int) -> dict[str, Any]:
    alloc = {"cpu": "96", "memory": "768Gi", "pods": "110", "nvidia.com/gpu": "8"}
    return {"metadata": {"name": f"node-{i:05d}"}, "status": {"allocatable": alloc}}


def pod_doc(name: str, gpus: int, node: str | None) -> dict[str, Any]:
    req = {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": str(gpus)}
    return {
        "metadata": {
            "name": name,
            "namespace": "bench",
            "uid": f"uid-{name}",
            "labels": {"app": "trainer", "job": "j1"},
            "annotations": {"scheduling.k8s.io/group-name": "j1"},
        },
        "spec": {
            "schedulerName": "volcano",
            "nodeName": node,
            "containers": [
                {
                    "name": "main",
                    "image": "pytorch/pytorch:latest",
                    "command": ["torchrun", "--nproc_per_node=8", "train.py"],
                    "env": [{"name": f"VAR_{k}", "value": "x" * 20} for k in range(10)],
                    "resources": {"requests": req, "limits": {"nvidia.com/gpu": str(gpus)}},
                }
            ],
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
            ],
        },
        "status": {"phase": "Running" if node else "Pending"},
    }


def build_extender(nodes: int) -> Extender:
    cache = ClusterCache()
    cache.replace_nodes([node_doc(i) for i in range(nodes)])
    rng = np.random.default_rng(1)
    pods = []
    for i in range(nodes):
        # 0..7 GPUs busy per node, so some nodes fail the 4-GPU request
        busy = int(rng.integers(0, 8))
        if busy:
            pods.append(pod_doc(f"run-{i}", busy, f"node-{i:05d}"))
    cache.replace_pods(pods)
    metrics = Metrics()
    return Extender(
        cache, build_profile(plugins_of(load(None)), metrics.observe_plugin), None, metrics
    )  # type: ignore[arg-type]


def serve(nodes: int, port: int) -> None:
    os.sched_setaffinity(0, {0})
    import uvicorn

    from pyextender.server.app import freeze_heap, tune_gc
    from pyextender.server.http import ExtenderApp

    ext = build_extender(nodes)
    if os.environ.get("BENCH_DEFAULT_GC") != "1":
        tune_gc()
        freeze_heap()
    app = ExtenderApp(ext, lambda: (True, "ok"))
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=port,
        log_level="error",
        access_log=False,
        http="httptools",
        loop="uvloop",
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def measure(
    conn: http.client.HTTPConnection, method: str, path: str, body: bytes | None, n: int
) -> list[float]:
    out: list[float] = []
    headers = {"Content-Type": "application/json"}
    for _ in range(n):
        t0 = time.perf_counter()
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        resp.read()
        out.append((time.perf_counter() - t0) * 1000)
        if resp.status != 200:
            raise SystemExit(f"{path}: HTTP {resp.status}")
    return out


def in_process(ext: Extender, body: bytes, verb: str, n: int) -> list[float]:
    dec = msgspec.json.Decoder(ExtenderArgs)
    enc = msgspec.json.Encoder()
    out: list[float] = []
    for _ in range(n):
        t0 = time.perf_counter()
        args = dec.decode(body)
        enc.encode(ext.filter(args) if verb == "filter" else ext.prioritize(args))
        out.append((time.perf_counter() - t0) * 1000)
    return out


def run(nodes: int, requests: int) -> dict[str, Any]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, __file__, "--serve", str(nodes), "--port", str(port)])
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", "/healthz")
                c.getresponse().read()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit("bench server did not start") from None
                time.sleep(0.1)
        os.sched_setaffinity(0, {1 % (os.cpu_count() or 1)})
        names = [f"node-{i:05d}" for i in range(nodes)]
        body = json.dumps({"Pod": pod_doc("incoming", 4, None), "NodeNames": names}).encode()
        res: dict[str, Any] = {"nodes": nodes, "request_bytes": len(body)}
        warm = max(requests // 10, 50)
        health = measure(c, "GET", "/healthz", None, warm)
        health = measure(c, "GET", "/healthz", None, requests)
        res["healthz_p50_ms"] = pct(health, 50)
        res["healthz_p99_ms"] = pct(health, 99)
        ext = build_extender(nodes)
        for verb in ("filter", "prioritize"):
            measure(c, "POST", f"/{verb}", body, warm)
            t0 = time.perf_counter()
            lat = measure(c, "POST", f"/{verb}", body, requests)
            wall = time.perf_counter() - t0
            local = in_process(ext, body, verb, max(requests // 4, 100))
            res[f"{verb}_p50_ms"] = pct(lat, 50)
            res[f"{verb}_p99_ms"] = pct(lat, 99)
            res[f"{verb}_mean_ms"] = statistics.fmean(lat)
            res[f"{verb}_requests_per_s"] = requests / wall
            res[f"{verb}_inprocess_p50_ms"] = pct(local, 50)
            res[f"{verb}_http_overhead_p50_ms"] = pct(lat, 50) - pct(local, 50)
            res[f"{verb}_p99_vs_budget_2ms"] = pct(lat, 99) / 2.0
        c.close()
        return res
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", default="1000,5000", help="comma-separated cache sizes")
    ap.add_argument("--requests", type=int, default=2000, help="measured requests per verb")
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve is not None:
        serve(args.serve, args.port)
        return
    results = []
    for n in (int(x) for x in args.nodes.split(",")):
        print(
            f"bench/verbs: {n} nodes, {args.requests} requests per verb...",
            file=sys.stderr,
            flush=True,
        )
        results.append(run(n, args.requests))
    head = ("nodes", "verb", "p50 ms", "p99 ms", "req/s", "in-proc p50", "healthz p50")
    print("{:>6} {:<11} {:>8} {:>8} {:>8} {:>12} {:>12}".format(*head))
    for r in results:
        for verb in ("filter", "prioritize"):
            cells = (
                r["nodes"],
                verb,
                r[f"{verb}_p50_ms"],
                r[f"{verb}_p99_ms"],
                r[f"{verb}_requests_per_s"],
                r[f"{verb}_inprocess_p50_ms"],
                r["healthz_p50_ms"],
            )
            print("{:>6} {:<11} {:>8.3f} {:>8.3f} {:>8.0f} {:>12.3f} {:>12.3f}".format(*cells))
    print("budget (DESIGN.md §5): filter/prioritize p99 <= 2 ms at 5,000 nodes on one core")
    print(json.dumps({"bench": "verbs", "results": results}))


if __name__ == "__main__":
    main()
