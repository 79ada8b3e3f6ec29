"""End-to-end scheduling throughput on a devcluster: gangs through pyextender
vs. plain pods through the stock kube-scheduler, in the same run.

One cluster with N kwok nodes (8 GPUs each): real etcd, kube-apiserver, two
stock kube-schedulers (default-scheduler; volcano + our extender) and the
sidecar. A watch records when each pod is first seen bound.

  baseline : P plain pods (1 GPU each) with schedulerName default-scheduler
  extender : P plain pods with schedulerName volcano (our filter/prioritize/bind,
             no gang): separates the extender's cost from the gang machinery's
  gangs    : P/8 PodGroups of 8 pods (1 GPU each), gated as the webhook does;
             the sidecar admits them, kube-scheduler places them through our
             filter/prioritize, bind holds each gang until it is whole

Reported: pods/s (from the first create to the last bind), per-pod time from
create to bound p50/p99, per-job time from creating the PodGroup to all 8
bound p50/p99, and gang pods/s as a ratio of the baseline (budget >= 0.8).

--mode framework runs the same phases on a framework-mode cluster: the volcano
profile is kube-scheduler-pyextender (the gRPC shim); plain volcano pods pass
the plugin untouched (no PodGroup), gang members go through the sidecar over
gRPC and wait in Permit, and kube-scheduler's DefaultBinder binds.

Usage: python bench/e2e.py [--nodes 500] [--pods 400] [--mode extender|framework|both]
--mode both measures each mode on its own fresh cluster, stock baseline included,
and prints one table.
Last line: one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
from kubernetes import client, config

from devcluster.cluster import MODES, Cluster
from devcluster.nodes import NodeShape


def say(msg: str) -> None:
    print(f"bench/e2e: {msg}", file=sys.stderr, flush=True)


class BindWatch:
    """Pod name -> monotonic time it was first seen with a nodeName, for one namespace."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.core = client.CoreV1Api(api)
        self.ns = namespace
        self.bound: dict[str, float] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        rv = ""
        while not self.stop.is_set():
            resp = self.core.list_namespaced_pod(
                self.ns, watch=True, resource_version=rv, timeout_seconds=5,
                allow_watch_bookmarks=True, _preload_content=False,
            )  # fmt: skip
            for line in resp:
                ev = msgspec.json.decode(line)
                obj = ev.get("object") or {}
                rv = (obj.get("metadata") or {}).get("resourceVersion", rv)
                name = (obj.get("metadata") or {}).get("name")
                if name and (obj.get("spec") or {}).get("nodeName") and name not in self.bound:
                    self.bound[name] = time.monotonic()
                if self.stop.is_set():
                    break

    def wait(self, count: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        last = -1
        while time.monotonic() < deadline:
            n = len(self.bound)
            if n >= count:
                return True
            if n != last and n:
                say(f"  {n}/{count} bound")
                last = n
            time.sleep(0.5)
        return False

    def close(self) -> None:
        self.stop.set()


def pod(name: str, ns: str, scheduler: str, group: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "resources": {
                    "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
                    "limits": {"nvidia.com/gpu": "1"},
                },
            }
        ],
    }
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
        spec["schedulingGates"] = [{"name": "pyextender.io/gang"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def run_plain(
    api: client.ApiClient, pods: int, timeout: float, scheduler: str, ns: str
) -> dict[str, float]:
    """``pods`` single pods (no gang) for ``scheduler``, timed from first create to last bind."""
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": ns}})
    watch = BindWatch(api, ns)
    time.sleep(0.5)
    created: dict[str, float] = {}
    start = time.monotonic()

    def make(i: int) -> None:
        name = f"plain-{i}"
        created[name] = time.monotonic()
        core.create_namespaced_pod(ns, pod(name, ns, scheduler), _preload_content=False)

    with ThreadPoolExecutor(8) as ex:
        list(ex.map(make, range(pods)))
    ok = watch.wait(pods, timeout)
    watch.close()
    if not ok:
        raise SystemExit(f"{ns}: only {len(watch.bound)}/{pods} pods bound in {timeout:.0f}s")
    last = max(watch.bound.values())
    lat = [watch.bound[n] - created[n] for n in created]
    core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    return {
        "pods": pods,
        "pods_per_s": pods / (last - start),
        "pod_latency_p50_s": pct(lat, 50),
        "pod_latency_p99_s": pct(lat, 99),
    }


def run_gangs(api: client.ApiClient, jobs: int, size: int, timeout: float) -> dict[str, float]:
    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    ns = "bench-gangs"
    core.create_namespace({"metadata": {"name": ns}})
    watch = BindWatch(api, ns)
    time.sleep(0.5)
    created: dict[str, float] = {}
    job_created: dict[str, float] = {}
    start = time.monotonic()

    def make(j: int) -> None:
        group = f"job-{j}"
        job_created[group] = time.monotonic()
        custom.create_namespaced_custom_object(
            "scheduling.volcano.sh", "v1beta1", ns, "podgroups",
            {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
             "metadata": {"name": group}, "spec": {"minMember": size}},
        )  # fmt: skip
        for i in range(size):
            name = f"{group}-{i}"
            created[name] = time.monotonic()
            core.create_namespaced_pod(ns, pod(name, ns, "volcano", group), _preload_content=False)

    with ThreadPoolExecutor(8) as ex:
        list(ex.map(make, range(jobs)))
    total = jobs * size
    ok = watch.wait(total, timeout)
    watch.close()
    if not ok:
        raise SystemExit(f"gangs: only {len(watch.bound)}/{total} pods bound in {timeout:.0f}s")
    last = max(watch.bound.values())
    lat = [watch.bound[n] - created[n] for n in created]
    job_lat = [
        max(watch.bound[f"{g}-{i}"] for i in range(size)) - t for g, t in job_created.items()
    ]
    spread = [
        max(watch.bound[f"{g}-{i}"] for i in range(size))
        - min(watch.bound[f"{g}-{i}"] for i in range(size))
        for g in job_created
    ]
    return {
        "jobs": jobs,
        "pods": total,
        "pods_per_s": total / (last - start),
        "pod_latency_p50_s": pct(lat, 50),
        "pod_latency_p99_s": pct(lat, 99),
        "job_all_bound_p50_s": pct(job_lat, 50),
        "job_all_bound_p99_s": pct(job_lat, 99),
        "gang_bind_spread_p99_s": pct(spread, 99),
    }


def measure(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    """Baseline, plain extender pods and gangs on one fresh cluster of ``mode``."""
    root = Path(tempfile.mkdtemp(prefix="bench-e2e-"))
    cluster = Cluster(f"bench-{os.getpid()}-{mode}", root=root)
    say(f"starting a {mode}-mode devcluster with {args.nodes} nodes in {root}")
    st = cluster.up(
        nodes=args.nodes,
        shape=NodeShape(cpu="64", memory="512Gi", gpus=8),
        timeout=600,
        mode=mode,
    )
    try:
        cluster.start_sidecar(["--log-level=warning"])
        cluster.wait_sidecar_ready(timeout=120)
        cfg = client.Configuration()
        config.load_kube_config(config_file=st.kubeconfig, client_configuration=cfg)
        cfg.connection_pool_maxsize = 16
        api = client.ApiClient(cfg)
        say(f"{mode}: baseline, {args.pods} plain pods through the stock kube-scheduler")
        base = run_plain(api, args.pods, args.timeout, "default-scheduler", "bench-baseline")
        say(f"{mode}: {args.pods} plain pods through kube-scheduler + pyextender (no gangs)")
        plain = run_plain(api, args.pods, args.timeout, "volcano", "bench-extender")
        jobs = args.pods // args.gang_size
        say(f"{mode}: {jobs} PodGroups x {args.gang_size} pods through pyextender")
        gangs = run_gangs(api, jobs, args.gang_size, args.timeout)
    finally:
        cluster.down(quiet=True)
    return {
        "mode": mode,
        "baseline": base,
        "extender_no_gang": plain,
        "gangs": gangs,
        "gang_vs_stock_pods_per_s_ratio": gangs["pods_per_s"] / base["pods_per_s"],
        "extender_vs_stock_pods_per_s_ratio": plain["pods_per_s"] / base["pods_per_s"],
    }


def report(results: list[dict[str, Any]], nodes: int) -> None:
    row = "{:<10} {:<10} {:>5} {:>8} {:>10} {:>10} {:>10} {:>10} {:>9}"
    print(
        row.format(
            "mode",
            "phase",
            "pods",
            "pods/s",
            "pod p50 s",
            "pod p99 s",
            "job p50 s",
            "job p99 s",
            "vs stock",
        )
    )
    for res in results:
        base_rate = res["baseline"]["pods_per_s"]
        for name, key in (("stock", "baseline"), ("plain", "extender_no_gang"), ("gangs", "gangs")):
            r = res[key]
            print(
                row.format(
                    res["mode"],
                    name,
                    f"{r['pods']:.0f}",
                    f"{r['pods_per_s']:.1f}",
                    f"{r['pod_latency_p50_s']:.2f}",
                    f"{r['pod_latency_p99_s']:.2f}",
                    f"{r.get('job_all_bound_p50_s', float('nan')):.2f}",
                    f"{r.get('job_all_bound_p99_s', float('nan')):.2f}",
                    f"{r['pods_per_s'] / base_rate:.2f}",
                )
            )
    for res in results:
        print(
            f"{res['mode']}: gang pods/s vs stock kube-scheduler "
            f"{res['gang_vs_stock_pods_per_s_ratio']:.2f} "
            f"(goal >= 0.90); members of one gang bound within "
            f"{res['gangs']['gang_bind_spread_p99_s']:.2f}s of each other (p99)"
        )
    print(json.dumps({"bench": "e2e", "nodes": nodes, "runs": results}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=500, help="kwok nodes (default %(default)s)")
    ap.add_argument("--pods", type=int, default=400, help="pods per phase (default %(default)s)")
    ap.add_argument("--gang-size", type=int, default=8, help="pods per gang job (default 8)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per phase")
    ap.add_argument(
        "--mode",
        choices=[*MODES, "both"],
        default="extender",
        help="devcluster mode; 'both' runs extender then framework, one table (default extender)",
    )
    args = ap.parse_args()
    modes = list(MODES) if args.mode == "both" else [args.mode]
    report([measure(m, args) for m in modes], args.nodes)


if __name__ == "__main__":
    main()
