"""The trace replay through a real devcluster: the placement a user's cluster gets.

``pyextender simulate`` drives the plugins in one process. This runs the same
protocol (../shared/traces/REPLAY.md: pods one at a time in the seed's arrival
order, no departures, an unplaceable pod dropped but counted as arrived) through
kube-apiserver, kube-scheduler and the sidecar, on kwok nodes made from the trace's
node list (flat GPUs, the model as the node's nvidia.com/gpu.product label, as the
replay has them), and sets beside it the in-process replay of the same nodes and
arrivals: what the replay claims and what the deployed system does.

What differs on purpose: the sidecar rebuilds its learned task classes on 1 %
growth of the pods it has bound or after 10 s (the replay: on growth alone), and
ties between equally scored nodes go to the sidecar's own order (a hash of each
node name; the replay: the protocol's node permutation of the seed). A third
replay uses the sidecar's order: when no rebuild came from the 10 s timer, the
cluster should place exactly what it does, and the last column says whether it did.

The cluster is a sample of the node list (--scale of its nodes, drawn with the
seed, so the GPU-model mix stays), and the arrivals are tuned to 130 % of that
sample's GPUs, as the protocol tunes the full list. A sharing pod asks for its
share with the pyextender.io/gpu-milli annotation, a whole-GPU pod for
nvidia.com/gpu, a pod with a gpu_spec for its models by required node affinity.

Usage: python bench/cluster_replay.py [--mode extender|framework|both]
           [--scale 0.1] [--seeds 42] [--pods ../shared/traces/openb_pod_list_default.csv]
Last line: one JSON object, {"bench": "cluster-replay", ...}.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
from kubernetes import client, config, watch

from devcluster.cluster import MODES, Cluster
from devcluster.nodes import NodeShape, node_manifest
from pyextender.api import names
from pyextender.api.resources import PYEXTENDER_GPU_MILLI
from pyextender.framework.interfaces import IntArray
from pyextender.simulate.cli import parse_seeds
from pyextender.simulate.policies import POLICIES
from pyextender.simulate.protocol import arrival_sequence, bucket
from pyextender.simulate.replay import Policy, replay, sidecar_order
from pyextender.simulate.trace import NodeRow, PodRow, default_traces, load_nodes, load_pods

POD_TIMEOUT_S = 60.0
"""A pod neither bound nor marked unschedulable by then counts as not placed (and
is reported: it should not happen)."""

REPLAY_POLICIES = ("pyextender", "fgd")
"""In-process replays of the same arrivals set beside the cluster's result."""


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def sample_nodes(nodes: list[NodeRow], scale: float, seed: int) -> list[NodeRow]:
    """``scale`` of the node list, drawn with the seed, in the list's order."""
    if scale >= 1.0:
        return list(nodes)
    rng = np.random.default_rng(seed + 7_000_001)
    k = max(1, round(scale * len(nodes)))
    keep = np.sort(rng.choice(len(nodes), size=k, replace=False))
    return [nodes[int(i)] for i in keep]


def node_body(row: NodeRow) -> dict[str, Any]:
    shape = NodeShape(
        cpu=f"{row.cpu_milli}m",
        memory=f"{row.memory_mib}Mi",
        pods=1000,  # the trace has no pod-count limit
        gpus=row.gpus,
        gpu_model=row.model or "unknown",
    )
    body = node_manifest(row.name, shape, None)
    # flat GPUs, as the replay has them: the count from allocatable, the model label
    body["metadata"]["annotations"].pop(names.GPU_TOPOLOGY_ANNOTATION, None)
    if not row.model:
        body["metadata"]["labels"].pop(names.GPU_MODEL_LABEL, None)
    return body


def pod_body(row: PodRow, ns: str, index: int) -> dict[str, Any]:
    requests: dict[str, str] = {"cpu": f"{row.cpu_milli}m", "memory": f"{row.memory_mib}Mi"}
    annotations: dict[str, str] = {}
    if row.num_gpu > 0 and row.gpu_milli >= 1000:
        requests["nvidia.com/gpu"] = str(row.num_gpu)
    elif row.num_gpu > 0 and row.gpu_milli > 0:
        annotations[PYEXTENDER_GPU_MILLI] = str(row.gpu_milli)
    limits = {k: v for k, v in requests.items() if k == "nvidia.com/gpu"}
    spec: dict[str, Any] = {
        "schedulerName": names.SCHEDULER_NAME,
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "resources": {"requests": requests, "limits": limits},
            }
        ],
    }
    if row.gpu_spec:
        term = {"key": names.GPU_MODEL_LABEL, "operator": "In", "values": list(row.gpu_spec)}
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [term]}]
                }
            }
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"p{index:05d}", "namespace": ns, "annotations": annotations},
        "spec": spec,
    }


class Outcomes:
    """Each pod's fate as a namespace watch sees it: its node, or "" when kube-scheduler
    marks it unschedulable."""

    def __init__(self, core: client.CoreV1Api, ns: str) -> None:
        self.core, self.ns = core, ns
        self.seen: dict[str, str] = {}
        self.cond = threading.Condition()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            w = watch.Watch()
            try:
                for ev in w.stream(self.core.list_namespaced_pod, self.ns, timeout_seconds=30):
                    pod = ev["object"]
                    name = pod.metadata.name
                    fate: str | None = None
                    if pod.spec.node_name:
                        fate = pod.spec.node_name
                    elif any(
                        c.type == "PodScheduled"
                        and c.status == "False"
                        and c.reason == "Unschedulable"
                        for c in (pod.status.conditions or [])
                    ):
                        fate = ""
                    if fate is not None:
                        with self.cond:
                            self.seen.setdefault(name, fate)
                            self.cond.notify_all()
                    if self.stop.is_set():
                        break
            except Exception as exc:  # a dropped watch: start another
                say(f"watch: {exc}; again")
                time.sleep(0.2)

    def wait(self, name: str, timeout: float) -> str | None:
        with self.cond:
            self.cond.wait_for(lambda: name in self.seen, timeout=timeout)
            return self.seen.get(name)


def run_cluster(
    core: client.CoreV1Api, rows: list[PodRow], ns: str, total_milli: float
) -> dict[str, Any]:
    """Every arrival in turn: create, wait for bound or unschedulable, drop the latter."""
    core.create_namespace({"metadata": {"name": ns}})
    outcomes = Outcomes(core, ns)
    arrived = np.empty(len(rows))
    allocated = np.empty(len(rows))
    a = u = placed = timeouts = 0
    nodes_used: set[str] = set()
    at_half = 0  # nodes in use once half the GPUs' worth of pods had arrived
    start = time.monotonic()
    try:
        for i, row in enumerate(rows):
            body = pod_body(row, ns, i)
            core.create_namespaced_pod(ns, body, _preload_content=False)
            fate = outcomes.wait(body["metadata"]["name"], POD_TIMEOUT_S)
            a += row.demand
            if fate:
                u += row.demand
                placed += 1
                nodes_used.add(fate)
            else:
                timeouts += fate is None
                core.delete_namespaced_pod(
                    body["metadata"]["name"], ns, grace_period_seconds=0, _preload_content=False
                )
            arrived[i], allocated[i] = a, u
            if not at_half and a >= total_milli / 2:
                at_half = len(nodes_used)
            if (i + 1) % 250 == 0:
                say(
                    f"  {i + 1}/{len(rows)} pods, {placed} placed, "
                    f"{100.0 * u / total_milli:.2f} % of GPUs allocated"
                )
    finally:
        outcomes.stop.set()
    seconds = time.monotonic() - start
    zeros = np.zeros(len(rows))
    curves = bucket(100.0 * arrived / total_milli, 100.0 * allocated / total_milli, zeros, zeros)
    return {
        "alloc_at_100": round(float(curves.alloc[100]), 3),
        "alloc_at_130": round(float(curves.alloc[130]), 3),
        "pods": len(rows),
        "placed": placed,
        "timeouts": timeouts,
        "nodes_used_at_half": at_half,
        "pods_per_s": round(len(rows) / seconds, 1),
    }


SIDECAR_ORDER = "pyextender, sidecar's order"
"""The shipped policy replayed with the sidecar's own order of equally scored nodes
(a hash of each name) instead of the seed's permutation: what the cluster should do
pod by pod, so its allocation should equal the cluster's exactly."""


def run_replays(
    nodes: list[NodeRow], pods: list[PodRow], rows: list[PodRow], seed: int
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    runs: list[tuple[str, Policy, IntArray | None]] = [
        (name, POLICIES[name], None) for name in REPLAY_POLICIES
    ]
    runs.append((SIDECAR_ORDER, POLICIES["pyextender"], sidecar_order(nodes)))
    for name, policy, rank in runs:
        res = replay(nodes, pods, rows, policy, seed, time.perf_counter, rank)
        out[name] = {
            "alloc_at_100": round(float(res.curves.alloc[100]), 3),
            "alloc_at_130": round(float(res.curves.alloc[130]), 3),
            "placed": res.placed,
        }
    return out


def measure(mode: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    all_nodes = load_nodes(args.nodes)
    pods = load_pods(args.pods)
    results: list[dict[str, Any]] = []
    for seed in args.seeds:
        nodes = sample_nodes(all_nodes, args.scale, seed)
        gpus = sum(n.gpus for n in nodes)
        rows = arrival_sequence(pods, gpus, seed)
        root = Path(tempfile.mkdtemp(prefix="bench-replay-"))
        cluster = Cluster(f"replay-{os.getpid()}-{mode}-{seed}", root=root)
        say(
            f"{mode} seed {seed}: a devcluster of {len(nodes)} trace nodes ({gpus} GPUs), "
            f"{len(rows)} arrivals"
        )
        st = cluster.up(nodes=0, timeout=600, mode=mode, node_lease_s=3600)
        try:
            api = client.ApiClient(_config(st.kubeconfig))
            core = client.CoreV1Api(api)
            for node in nodes:
                core.create_node(node_body(node), _preload_content=False)
            _wait_ready(core, len(nodes))
            cluster.start_sidecar(["--log-level=warning"])
            cluster.wait_sidecar_ready(timeout=120)
            real = run_cluster(core, rows, f"replay-{seed}", 1000.0 * gpus)
        finally:
            cluster.down(quiet=True)
        replays = run_replays(nodes, pods, rows, seed)
        row = {
            "mode": mode,
            "seed": seed,
            "nodes": len(nodes),
            "gpus": gpus,
            "cluster": real,
            "replay": replays,
        }
        say(json.dumps(row))
        results.append(row)
    return results


def _config(kubeconfig: str) -> client.Configuration:
    cfg = client.Configuration()
    config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    return cfg


def _wait_ready(core: client.CoreV1Api, n: int, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready = sum(
            any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or []))
            for node in core.list_node().items
        )
        if ready >= n:
            return
        time.sleep(0.5)
    raise TimeoutError(f"fewer than {n} nodes Ready after {timeout:.0f}s")


def _same(row: dict[str, Any]) -> str:
    """Whether the cluster placed exactly what the replay in the sidecar's order does."""
    c, ours = row["cluster"], row["replay"].get(SIDECAR_ORDER)
    if ours is None:
        return "-"
    keys = ("placed", "alloc_at_100", "alloc_at_130")
    if all(c[k] == ours[k] for k in keys):
        return "yes"
    alloc = f"{ours['alloc_at_100']:.2f} / {ours['alloc_at_130']:.2f}"
    return f"no (replay: {ours['placed']} placed, {alloc})"


def report(results: list[dict[str, Any]]) -> None:
    print(
        f"{'mode':10s} {'seed':>4s} {'nodes':>5s}  {'cluster @100/@130':>19s}  "
        + "  ".join(f"{p + ' replay @100/@130':>26s}" for p in REPLAY_POLICIES)
        + "  placed (cluster/replay)  nodes used at 50 %  pods/s  cluster = replay"
        + " in the sidecar's order"
    )
    for r in results:
        c = r["cluster"]
        reps = "  ".join(
            f"{r['replay'][p]['alloc_at_100']:>12.2f} / {r['replay'][p]['alloc_at_130']:<11.2f}"
            for p in REPLAY_POLICIES
        )
        print(
            f"{r['mode']:10s} {r['seed']:>4d} {r['nodes']:>5d}  "
            f"{c['alloc_at_100']:>8.2f} / {c['alloc_at_130']:<8.2f}  {reps}  "
            f"{c['placed']:>6d} / {r['replay']['pyextender']['placed']:<6d}          "
            f"{c['nodes_used_at_half']:>13d}  {c['pods_per_s']:>10.1f}  {_same(r)}"
        )
        if c["timeouts"]:
            print(
                f"  ({c['timeouts']} pods neither bound nor unschedulable "
                f"within {POD_TIMEOUT_S:.0f}s)"
            )


def main(argv: list[str] | None = None) -> int:
    traces = default_traces()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--mode", choices=[*MODES, "both"], default="extender")
    p.add_argument("--nodes", type=Path, default=traces / "openb_node_list_gpu_node.csv")
    p.add_argument("--pods", type=Path, default=traces / "openb_pod_list_default.csv")
    p.add_argument(
        "--scale", type=float, default=0.1, help="fraction of the node list (default 0.1)"
    )
    p.add_argument("--seeds", type=parse_seeds, default=[42], help="e.g. 42 or 42-44")
    args = p.parse_args(argv)
    modes = list(MODES) if args.mode == "both" else [args.mode]
    results = [r for mode in modes for r in measure(mode, args)]
    report(results)
    print(
        json.dumps(
            {
                "bench": "cluster-replay",
                "workload": args.pods.stem,
                "scale": args.scale,
                "runs": results,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
