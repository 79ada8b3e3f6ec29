"""CPU per API write: the generated kubernetes client against libcurl (RawApi), same run.

The sidecar writes once or twice per pod it schedules: the Binding (extender
mode), a gang member's gate lift, per gang its PodGroup's status, release and
an event. This bench sends the same writes both ways to a devcluster's real
kube-apiserver (TLS, client certificate), alternating blocks of --block
requests so both see the same machine, and reports per request the calling
thread's CPU time (CLOCK_THREAD_CPUTIME_ID: what the sidecar's API threads pay)
and the wall time, p50 / p99.

  generated : client.CoreV1Api(...).create_namespaced_binding /
              patch_namespaced_pod with _preload_content=False and the reply
              read as bytes (what the sidecar did before: the best use of it)
  libcurl   : pyextender.api.raw_requests.RawApi.post / .patch (what it does now)

Then what each write costs the API server and etcd (their CPU over a block of
--pods sequential requests of one kind, from /proc, per request), through
libcurl only, in --rounds alternating rounds:

  binding  : a pod's Binding (every pod; kube-scheduler's own in stock mode),
             to a node name no kwok manages, so no status write follows
  lift     : removing a gang member's scheduling gate, the JSON patch the
             actuator sends (extender mode: one per gang member)
  annotate : a merge patch of one pod annotation (the size of a small update)

These are the floor under a gang pod's cost in extender mode: stock kube-scheduler
writes a Binding per pod; a gated gang member needs the lift as well.

Usage: python bench/api_writes.py [--pods 400] [--block 50] [--rounds 2]
Last line: one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
from kubernetes import client, config

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from devcluster.cluster import Cluster
from devcluster.nodes import NodeShape
from pyextender.api.client import body_of
from pyextender.api.names import GANG_GATE
from pyextender.api.raw_requests import JSON_PATCH, MERGE_PATCH, RawApi
from pyextender.server.actuator import lift_patch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from phase_cost import HZ, cpu_ticks

NS = "default"
Write = Callable[[str, int], None]


def say(msg: str) -> None:
    print(f"bench/api_writes: {msg}", file=sys.stderr, flush=True)


SERVER = ("kube-apiserver", "etcd")
"""The processes whose CPU per request the server-side part reports."""
UNMANAGED_NODE = "no-kwok-here"
"""Bindings of the server-side part go to this node name: no node object, so kwok
writes no pod status after them and the figure is the Binding's alone."""


def _pod(name: str, gated: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": "nobody", "containers": [{"name": "c", "image": "x"}]}
    if gated:
        spec["schedulingGates"] = [{"name": GANG_GATE}]
    return {"metadata": {"name": name}, "spec": spec}


def _binding(name: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {
            "name": name,
            "namespace": NS,
            "annotations": {"pyextender.io/gpu-index": "0"},
        },
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


def writers(api: client.ApiClient, node: str) -> dict[str, dict[str, Write]]:
    core = client.CoreV1Api(api)
    raw = RawApi(api.configuration)
    binding: Any = core.create_namespaced_binding
    patch: Any = core.patch_namespaced_pod

    def gen_bind(name: str, i: int) -> None:
        body_of(binding(NS, _binding(name, node), _preload_content=False))

    def gen_patch(name: str, i: int) -> None:
        body = {"metadata": {"annotations": {"n": str(i)}}}
        body_of(patch(name, NS, body, _content_type=MERGE_PATCH, _preload_content=False))

    def raw_bind(name: str, i: int) -> None:
        raw.post(f"/api/v1/namespaces/{NS}/pods/{name}/binding", _binding(name, node))

    def raw_patch(name: str, i: int) -> None:
        raw.patch(
            f"/api/v1/namespaces/{NS}/pods/{name}", {"metadata": {"annotations": {"n": str(i)}}}
        )

    return {
        "generated": {"binding": gen_bind, "patch": gen_patch},
        "libcurl": {"binding": raw_bind, "patch": raw_patch},
    }


Server = Callable[[dict[str, Any]], None]


def raw_writers(api: client.ApiClient) -> dict[str, Server]:
    """The server-side part's writes, each given the pod as created (name, uid)."""
    raw = RawApi(api.configuration)

    def path(pod: dict[str, Any]) -> str:
        return f"/api/v1/namespaces/{NS}/pods/{pod['metadata']['name']}"

    def binding(pod: dict[str, Any]) -> None:
        raw.post(path(pod) + "/binding", _binding(pod["metadata"]["name"], UNMANAGED_NODE))

    def lift(pod: dict[str, Any]) -> None:  # the actuator's own patch
        raw.patch(path(pod), lift_patch(pod["metadata"]["uid"], 0), JSON_PATCH)

    def annotate(pod: dict[str, Any]) -> None:
        raw.patch(path(pod), {"metadata": {"annotations": {"pyextender.io/bench": "1"}}})

    return {"binding": binding, "lift": lift, "annotate": annotate}


def server_side(
    core: client.CoreV1Api, ways: dict[str, Server], pods: int, rounds: int, marker: str
) -> dict[str, dict[str, float]]:
    """CPU ms per request of the API server and etcd, per kind of write (median of the
    rounds); each round creates ``pods`` fresh pods per kind (gated for "lift")."""
    per: dict[str, dict[str, list[float]]] = {w: {p: [] for p in SERVER} for w in ways}
    for rnd in range(rounds):
        for kind, write in ways.items():
            say(f"server side, round {rnd + 1}/{rounds}: {pods} x {kind}")
            made = [
                msgspec.json.decode(body_of(core.create_namespaced_pod(
                    NS, _pod(f"s{rnd}-{kind}-{i}", gated=kind == "lift"), _preload_content=False
                )))
                for i in range(pods)
            ]  # fmt: skip
            time.sleep(1.0)  # the creates' watch events are out
            before = cpu_ticks(marker)
            for pod in made:
                write(pod)
            time.sleep(0.5)  # ... and this block's
            after = cpu_ticks(marker)
            for proc in SERVER:
                per[kind][proc].append((after[proc] - before[proc]) * 1000 / HZ / pods)
            core.delete_collection_namespaced_pod(NS, grace_period_seconds=0)
            time.sleep(1.0)
    out = {
        kind: {proc: round(float(np.median(v)), 2) for proc, v in procs.items()}
        for kind, procs in per.items()
    }
    print(f"\nAPI server and etcd CPU per request (ms; median of {rounds} rounds of {pods}):")
    for kind, procs in out.items():
        rounds_text = " / ".join(f"{x:.2f}" for x in per[kind]["kube-apiserver"])
        print(
            f"{kind:9s} kube-apiserver {procs['kube-apiserver']:.2f} ({rounds_text})  "
            f"etcd {procs['etcd']:.2f}"
        )
    return out


def timed(write: Write, name: str, i: int) -> tuple[float, float]:
    """(thread CPU µs, wall µs) of one write."""
    c0, w0 = time.thread_time_ns(), time.perf_counter_ns()
    write(name, i)
    return (time.thread_time_ns() - c0) / 1e3, (time.perf_counter_ns() - w0) / 1e3


def pct(xs: list[float]) -> dict[str, float]:
    a = np.asarray(xs)
    return {
        "p50": round(float(np.percentile(a, 50)), 1),
        "p99": round(float(np.percentile(a, 99)), 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pods", type=int, default=400, help="pods (one Binding, one PATCH each way)")
    ap.add_argument("--block", type=int, default=50, help="requests per alternating block")
    ap.add_argument(
        "--rounds", type=int, default=2, help="rounds of the server-side part (each kind once)"
    )
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-api-writes-"))
    cluster = Cluster(f"bench-writes-{os.getpid()}", root=root)
    say(f"starting a devcluster (1 node) in {root}")
    st = cluster.up(nodes=1, shape=NodeShape(cpu="64", memory="512Gi", gpus=8), timeout=600)
    try:
        cfg = client.Configuration()
        config.load_kube_config(config_file=st.kubeconfig, client_configuration=cfg)
        api = client.ApiClient(cfg)
        core = client.CoreV1Api(api)
        node = core.list_node().items[0].metadata.name
        ways = writers(api, node)
        names = {w: [f"{w[:3]}-{i}" for i in range(args.pods)] for w in ways}
        say(f"creating {2 * args.pods} pods no scheduler picks up")
        for w in ways:
            for n in names[w]:
                body_of(core.create_namespaced_pod(NS, _pod(n), _preload_content=False))
        cpu: dict[str, dict[str, list[float]]] = {w: {"binding": [], "patch": []} for w in ways}
        wall: dict[str, dict[str, list[float]]] = {w: {"binding": [], "patch": []} for w in ways}
        for w in ways:  # warm: connections open, code paths loaded
            ways[w]["patch"](names[w][0], -1)
        for op in ("patch", "binding"):
            say(f"{op}: {args.pods} per way, alternating blocks of {args.block}")
            for start in range(0, args.pods, args.block):
                for w in ways:
                    for i in range(start, min(start + args.block, args.pods)):
                        c, t = timed(ways[w][op], names[w][i], i)
                        cpu[w][op].append(c)
                        wall[w][op].append(t)
        out: dict[str, Any] = {"bench": "api-writes", "pods": args.pods, "ops": {}}
        heads = ("CPU p50", "CPU p99", "wall p50", "wall p99")
        print(f"{'op':8s} {'client':10s} " + " ".join(f"{h:>9s}" for h in heads) + "  (µs)")
        for op in ("binding", "patch"):
            out["ops"][op] = {}
            for w in ways:
                cpu_us, wall_us = pct(cpu[w][op]), pct(wall[w][op])
                out["ops"][op][w] = {"cpu_us": cpu_us, "wall_us": wall_us}
                figures = (cpu_us["p50"], cpu_us["p99"], wall_us["p50"], wall_us["p99"])
                print(f"{op:8s} {w:10s} " + " ".join(f"{x:9.1f}" for x in figures))
            gen = out["ops"][op]["generated"]["cpu_us"]["p50"]
            lib = out["ops"][op]["libcurl"]["cpu_us"]["p50"]
            out["ops"][op]["cpu_p50_ratio_generated_over_libcurl"] = round(gen / lib, 2)
            print(f"{op:8s} CPU p50 generated / libcurl = {gen / lib:.2f}")
        server = raw_writers(api)
        out["server_cpu_ms"] = server_side(core, server, args.pods, args.rounds, str(root))
        print(json.dumps(out))
    finally:
        cluster.down(quiet=True)


if __name__ == "__main__":
    main()
