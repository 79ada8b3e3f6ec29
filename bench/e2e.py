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
bound p50/p99, and gang pods/s as a ratio of the baseline (issue 12: >= 1.0,
Volcano's level; plain pods through our verbs >= 0.9).

--mode framework runs the same phases on a framework-mode cluster: the volcano
profile is kube-scheduler-pyextender (the gRPC shim); every volcano pod goes
through the sidecar over gRPC (Filter with scores and the sidecar's pick, Reserve,
the shim's Bind), and gang members also wait in Permit. There the gang pods wait
at the shim's barrier (annotation pyextender.io/gang-barrier, released by one
PodGroup write per gang) unless --framework-barrier gate.

--shapes [single medium large huge] runs instead the scenario shapes of public
batch-scheduler comparisons (SHAPES: 5000 x 1, 500 x 20, 20 x 500, 1 x 10000 pods,
scaled by --scale, default 0.1), each as plain pods through the stock
kube-scheduler and then as gangs through pyextender on the same cluster (single
also as plain pods through our verbs), reporting pods/s and per-job
time-to-all-bound p50/p99; last line {"bench": "e2e-shapes", ...}.

Usage: python bench/e2e.py [--nodes 500] [--pods 400] [--mode extender|framework|both]
                           [--shapes [NAME ...]] [--scale 0.1]
--mode both measures each mode on its own fresh cluster, stock baseline included,
and prints one table. --stages adds, for the gang phase, when each gang was
created, admitted, let in and bound (bench/gang_stages.py).
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
from kubernetes.client.exceptions import ApiException

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gang_stages import GangStages
from gang_stages import report as report_stages
from phase_cost import PhaseCost

from devcluster.cluster import APISERVER_PROFILING_ENV, MODES, Cluster
from devcluster.nodes import NodeShape

HOLD = ["gate"]
"""How gang pods are held until admitted in the running phase: "gate" (the scheduling
gate, lifted pod by pod) or "scheduler" (the framework shim's barrier annotation)."""

HELD_BY = {"gate": "the scheduling gate", "scheduler": "the shim's barrier (annotation)"}

STAGES = [False]
"""--stages: watch each gang's stages in the gang phase (bench/gang_stages.py)."""

COST: list[PhaseCost] = []
"""The running cluster's cost recorder (one at a time): each phase snapshots it
around its pods, from the first create to the last bind."""


def _cost_start(label: str) -> None:
    if COST:
        COST[0].start(label)


def _cost_stop(pods: int) -> dict[str, Any]:
    return {"cost": COST[0].stop(pods)} if COST else {}


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


def pod(name: str, ns: str, scheduler: str, group: str = "", node: str = "") -> dict[str, Any]:
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
    if node:
        # required node affinity on metadata.name: kube-scheduler's NodeAffinity
        # PreFilter narrows the cycle to this node (what narrowing at gate lift would do)
        term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        required = {"nodeSelectorTerms": [term]}
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}
        }
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
        if HOLD[0] == "scheduler":  # as the webhook does with --gang-barrier=scheduler
            meta["annotations"]["pyextender.io/gang-barrier"] = "true"
        else:
            spec["schedulingGates"] = [{"name": "pyextender.io/gang"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def run_plain(
    api: client.ApiClient, pods: int, timeout: float, scheduler: str, ns: str, narrow: int = 0
) -> dict[str, float]:
    """``pods`` single pods (no gang) for ``scheduler``, timed from first create to last bind.
    ``narrow`` > 0: pod i may only go to node i mod ``narrow`` (required node affinity)."""
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": ns}})
    watch = BindWatch(api, ns)
    time.sleep(0.5)
    created: dict[str, float] = {}
    _cost_start(ns)
    start = time.monotonic()

    def make(i: int) -> None:
        name = f"plain-{i}"
        created[name] = time.monotonic()
        node = f"kwok-node-{i % narrow}" if narrow else ""
        body = pod(name, ns, scheduler, node=node)
        core.create_namespaced_pod(ns, body, _preload_content=False)

    with ThreadPoolExecutor(8) as ex:
        list(ex.map(make, range(pods)))
    ok = watch.wait(pods, timeout)
    watch.close()
    if not ok:
        raise SystemExit(f"{ns}: only {len(watch.bound)}/{pods} pods bound in {timeout:.0f}s")
    cost = _cost_stop(pods)
    last = max(watch.bound.values())
    lat = [watch.bound[n] - created[n] for n in created]
    core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    return {
        "pods": pods,
        "pods_per_s": pods / (last - start),
        "pod_latency_p50_s": pct(lat, 50),
        "pod_latency_p99_s": pct(lat, 99),
        **cost,
    }


def run_jobs(
    api: client.ApiClient,
    ns: str,
    jobs: int,
    size: int,
    timeout: float,
    scheduler: str = "volcano",
    gang: bool = True,
) -> dict[str, float]:
    """``jobs`` jobs of ``size`` pods (1 GPU each) in a fresh namespace ``ns``.

    gang: each job is a PodGroup (minMember = size) whose pods are gated as the
    webhook does, for pyextender. Otherwise the same pods without PodGroup or
    gate, for ``scheduler`` (the stock baseline): the same shape, no gang.
    Timed from the first create to the last bind; per job from its first create
    (its PodGroup's, for a gang) to its last member bound. The pods are deleted
    at the end and the namespace waited empty, so the next phase has the whole
    cluster."""
    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    core.create_namespace({"metadata": {"name": ns}})
    watch = BindWatch(api, ns)
    stages = GangStages(api, ns, size) if gang and STAGES[0] else None
    time.sleep(0.5)
    created: dict[str, float] = {}
    job_created: dict[str, float] = {}
    _cost_start(ns)
    start = time.monotonic()

    def make(j: int) -> None:
        group = f"job-{j}"
        job_created[group] = time.monotonic()
        if gang:
            custom.create_namespaced_custom_object(
                "scheduling.volcano.sh", "v1beta1", ns, "podgroups",
                {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                 "metadata": {"name": group}, "spec": {"minMember": size}},
            )  # fmt: skip
        for i in range(size):
            name = f"{group}-{i}"
            created[name] = time.monotonic()
            body = pod(name, ns, scheduler, group if gang else "")
            core.create_namespaced_pod(ns, body, _preload_content=False)

    def make_member(job_and_index: tuple[int, int]) -> None:
        """One pod of a huge job: a lone job's members are created in parallel too."""
        j, i = job_and_index
        name = f"job-{j}-{i}"
        created[name] = time.monotonic()
        body = pod(name, ns, scheduler, f"job-{j}" if gang else "")
        core.create_namespaced_pod(ns, body, _preload_content=False)

    with ThreadPoolExecutor(8) as ex:
        if jobs >= 8:
            list(ex.map(make, range(jobs)))
        else:  # few big jobs: their PodGroups first, then every member in parallel
            for j in range(jobs):
                job_created[f"job-{j}"] = time.monotonic()
                if gang:
                    custom.create_namespaced_custom_object(
                        "scheduling.volcano.sh", "v1beta1", ns, "podgroups",
                        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                         "metadata": {"name": f"job-{j}"}, "spec": {"minMember": size}},
                    )  # fmt: skip
            list(ex.map(make_member, [(j, i) for j in range(jobs) for i in range(size)]))
    total = jobs * size
    ok = watch.wait(total, timeout)
    watch.close()
    stage_times = {"stages": stages.close()} if stages is not None else {}
    if not ok:
        raise SystemExit(f"{ns}: only {len(watch.bound)}/{total} pods bound in {timeout:.0f}s")
    cost = _cost_stop(total)
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
    _empty(core, ns, timeout)
    return {
        "jobs": jobs,
        "pods": total,
        "pods_per_s": total / (last - start),
        "pod_latency_p50_s": pct(lat, 50),
        "pod_latency_p99_s": pct(lat, 99),
        "job_all_bound_p50_s": pct(job_lat, 50),
        "job_all_bound_p99_s": pct(job_lat, 99),
        "gang_bind_spread_p99_s": pct(spread, 99),
        **cost,
        **stage_times,
    }


def _empty(core: client.CoreV1Api, ns: str, timeout: float) -> None:
    """Delete every pod of ``ns`` and wait until none is left (kwok pods go at once).
    A loaded API server may time out (504) a collection delete that goes on
    server-side: ask again until the namespace is empty."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
            if not core.list_namespaced_pod(ns, limit=1).items:
                return
        except ApiException as exc:
            say(f"{ns}: deleting pods: {exc.status} {exc.reason}; asking again")
        time.sleep(1.0)
    raise SystemExit(f"{ns}: pods still there {timeout:.0f}s after deleting them")


def run_gangs(api: client.ApiClient, jobs: int, size: int, timeout: float) -> dict[str, float]:
    return run_jobs(api, "bench-gangs", jobs, size, timeout)


SHAPES: dict[str, tuple[int, int]] = {
    "single": (5000, 1),
    "medium": (500, 20),
    "large": (20, 500),
    "huge": (1, 10000),
}
"""Scenario shapes of public batch-scheduler comparisons (jobs x pods per job), at
full size: many single-pod jobs, 500 jobs of 20, 20 jobs of 500, one huge gang.
``--scale`` shrinks them to the machine (0.1: 500 x 1, 50 x 20, 2 x 500, 1 x 1000;
jobs shrink before pods per job, so a gang keeps its size while more than one
job remains)."""


def scaled(shape: tuple[int, int], scale: float) -> tuple[int, int]:
    """Fewer jobs first (a gang's size is what makes it hard), down to two; then
    smaller jobs. A single job stays one job."""
    jobs, size = shape
    total = max(1, round(jobs * size * scale))
    if jobs == 1:
        return 1, total
    n = max(2, min(jobs, total // size)) if total >= 2 * size else 2
    return n, max(1, total // n)


def measure_shapes(api: client.ApiClient, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Each shape: the same jobs as plain pods through the stock kube-scheduler, then
    as gangs through pyextender (single-pod jobs also as plain pods through our
    verbs, no PodGroup: the non-gang figure), one after the other on one cluster."""
    out: list[dict[str, Any]] = []
    for name in args.shapes:
        jobs, size = scaled(SHAPES[name], args.scale)
        try:
            out.append(_shape(api, args, name, jobs, size))
        except SystemExit as exc:  # a phase did not finish: say so, go on with the next
            say(f"shape {name}: {exc}")
            out.append({"shape": name, "jobs": jobs, "size": size, "error": str(exc)})
        say(f"shape {name}: {json.dumps(out[-1])}")
    return out


def _shape(
    api: client.ApiClient, args: argparse.Namespace, name: str, jobs: int, size: int
) -> dict[str, Any]:
    say(f"shape {name}: {jobs} jobs x {size} pods, stock kube-scheduler (plain pods)")
    base = run_jobs(api, f"stock-{name}", jobs, size, args.timeout, "default-scheduler", gang=False)
    row: dict[str, Any] = {"shape": name, "jobs": jobs, "size": size, "baseline": base}
    if size == 1:
        say(f"shape {name}: the same plain pods through kube-scheduler + pyextender")
        plain = run_jobs(api, f"plain-{name}", jobs, size, args.timeout, gang=False)
        row["extender_no_gang"] = plain
        row["extender_vs_stock_pods_per_s_ratio"] = plain["pods_per_s"] / base["pods_per_s"]
    say(f"shape {name}: {jobs} PodGroups x {size} pods through pyextender")
    gangs = run_jobs(api, f"gangs-{name}", jobs, size, args.timeout)
    row["gangs"] = gangs
    row["gang_vs_stock_pods_per_s_ratio"] = gangs["pods_per_s"] / base["pods_per_s"]
    return row


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
        # no Lease renewal burst (a PUT per node in one second, every lease/4) inside
        # a measured phase: it landed in some phases and not others, ~1 write per pod
        node_lease_s=3600,
    )
    HOLD[0] = args.framework_barrier if mode == "framework" else "gate"
    try:
        cluster.start_sidecar(["--log-level=warning"])
        cluster.wait_sidecar_ready(timeout=120)
        cfg = client.Configuration()
        config.load_kube_config(config_file=st.kubeconfig, client_configuration=cfg)
        cfg.connection_pool_maxsize = 16
        api = client.ApiClient(cfg)
        profiles = Path(args.profile_dir) / mode if args.profile_dir else None
        COST[:] = [PhaseCost(api, str(cluster.dir), profiles, args.profile_seconds)]
        if args.shapes:
            return {"mode": mode, "gang_hold": HOLD[0], "shapes": measure_shapes(api, args)}
        say(f"{mode}: baseline, {args.pods} plain pods through the stock kube-scheduler")
        base = run_plain(api, args.pods, args.timeout, "default-scheduler", "bench-baseline")
        say(f"{mode}: {args.pods} plain pods through kube-scheduler + pyextender (no gangs)")
        plain = run_plain(api, args.pods, args.timeout, "volcano", "bench-extender")
        narrowed: dict[str, Any] = {}
        if args.narrowed:
            say(f"{mode}: {args.pods} plain pods, each narrowed to one node, stock and ours")
            for key, scheduler in (("stock", "default-scheduler"), ("extender", "volcano")):
                narrowed[key] = run_plain(
                    api, args.pods, args.timeout, scheduler, f"narrow-{key}", args.nodes
                )
        jobs = args.pods // args.gang_size
        say(f"{mode}: {jobs} PodGroups x {args.gang_size} pods through pyextender")
        gangs = run_gangs(api, jobs, args.gang_size, args.timeout)
    finally:
        COST.clear()
        cluster.down(quiet=True)
    return {
        "mode": mode,
        "gang_hold": HOLD[0],
        "baseline": base,
        "extender_no_gang": plain,
        "gangs": gangs,
        "gang_vs_stock_pods_per_s_ratio": gangs["pods_per_s"] / base["pods_per_s"],
        "extender_vs_stock_pods_per_s_ratio": plain["pods_per_s"] / base["pods_per_s"],
        **({"narrowed": narrowed} if narrowed else {}),
    }


def report_shapes(results: list[dict[str, Any]], nodes: int) -> None:
    row = "{:<10} {:<7} {:>10} {:<6} {:>8} {:>10} {:>10} {:>9}"
    print(row.format("mode", "shape", "jobs x pods", "phase", "pods/s", "job p50 s", "job p99 s",
                     "vs stock"))  # fmt: skip
    for res in results:
        for sh in res["shapes"]:
            if "error" in sh:
                print(
                    f"{res['mode']:<10} {sh['shape']:<7} {sh['jobs']}x{sh['size']}: {sh['error']}"
                )
                continue
            base_rate = sh["baseline"]["pods_per_s"]
            for name in ("baseline", "extender_no_gang", "gangs"):
                if name not in sh:
                    continue
                r = sh[name]
                print(
                    row.format(
                        res["mode"],
                        sh["shape"],
                        f"{sh['jobs']}x{sh['size']}",
                        {"baseline": "stock", "extender_no_gang": "plain"}.get(name, name),
                        f"{r['pods_per_s']:.1f}",
                        f"{r['job_all_bound_p50_s']:.2f}",
                        f"{r['job_all_bound_p99_s']:.2f}",
                        f"{r['pods_per_s'] / base_rate:.2f}",
                    )
                )
    for res in results:
        worst = min(sh.get("gang_vs_stock_pods_per_s_ratio", 0.0) for sh in res["shapes"])
        print(
            f"{res['mode']}: worst gang pods/s vs stock over the shapes {worst:.2f} (goal >= 1.0)"
        )
    print(json.dumps({"bench": "e2e-shapes", "nodes": nodes, "runs": results}))


def report_costs(phases: list[tuple[str, str, dict[str, Any]]]) -> None:
    """Per phase: CPU ms per pod by process, and the API writes and reads per pod."""
    progs = ["kube-apiserver", "etcd", "kube-scheduler", "sidecar", "kwok", "bench (client)"]
    row = "{:<10} {:<6} " + " ".join("{:>9}" for _ in progs) + " {:>7} {:>7}"
    short = ["apiserver", "etcd", "kube-sch", "sidecar", "kwok", "client"]
    print("CPU ms per pod, by process (2 cores shared; the rest in 'other'):")
    print(row.format("mode", "phase", *short, "other", "total"))
    for mode, name, r in phases:
        ms = (r.get("cost") or {}).get("cpu_ms_per_pod") or {}
        if not ms:
            continue
        known = [ms.get(p, 0.0) for p in progs]
        other = ms["total"] - sum(known)
        print(row.format(mode, name, *(f"{v:.2f}" for v in known), f"{other:.2f}",
                         f"{ms['total']:.2f}"))  # fmt: skip
    print("API writes per pod:")
    for mode, name, r in phases:
        writes = (r.get("cost") or {}).get("writes_per_pod") or {}
        listed = ", ".join(f"{k} {v:.2f}" for k, v in writes.items())
        print(f"{mode:<10} {name:<6} {sum(writes.values()):5.2f}  {listed}")
    print("API reads per pod (GET, LIST, WATCH):")
    for mode, name, r in phases:
        reads = (r.get("cost") or {}).get("reads_per_pod") or {}
        listed = ", ".join(f"{k} {v:.2f}" for k, v in reads.items())
        print(f"{mode:<10} {name:<6} {sum(reads.values()):5.2f}  {listed}")
    profiles = [
        (mode, name, p)
        for mode, name, r in phases
        if (p := (r.get("cost") or {}).get("apiserver_profile"))
    ]
    if profiles:
        print("kube-apiserver CPU profiles (go tool pprof -top FILE):")
        for mode, name, p in profiles:
            print(f"{mode:<10} {name:<6} {p.get('path') or 'not taken: ' + p.get('error', '')}")


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
        phases = [("stock", "baseline"), ("plain", "extender_no_gang"), ("gangs", "gangs")]
        short = {"stock": "stock-1n", "extender": "plain-1n"}  # narrowed to one node
        for name, key in phases + [(short[k], k) for k in res.get("narrowed", {})]:
            r = res["narrowed"][key] if name.endswith("-1n") else res[key]
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
    report_costs(
        [
            (res["mode"], name, res[key])
            for res in results
            for name, key in (
                ("stock", "baseline"),
                ("plain", "extender_no_gang"),
                ("gangs", "gangs"),
            )
        ]
    )
    for res in results:
        print(
            f"{res['mode']}: gang pods/s vs stock kube-scheduler "
            f"{res['gang_vs_stock_pods_per_s_ratio']:.2f} "
            f"(goal >= 1.0, Volcano's level); members of one gang bound within "
            f"{res['gangs']['gang_bind_spread_p99_s']:.2f}s of each other (p99); "
            f"gang pods held by {HELD_BY[res['gang_hold']]}"
        )
        if "stages" in res["gangs"]:
            report_stages(res["mode"], res["gangs"]["stages"])
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
    ap.add_argument(
        "--narrowed",
        action="store_true",
        help="also time plain pods each narrowed to one node by required node affinity "
        "(stock and through our verbs): the most narrowing gang members at gate lift could save",
    )
    ap.add_argument(
        "--shapes",
        nargs="*",
        choices=list(SHAPES),
        help="run these scenario shapes instead of the default phases; "
        "--shapes alone runs all (single medium large huge)",
    )
    ap.add_argument(
        "--framework-barrier",
        choices=["scheduler", "gate"],
        default="scheduler",
        help="framework mode: gang pods wait at the shim's barrier (scheduler: annotation, "
        "released by one PodGroup write per gang) or behind the scheduling gate (gate, lifted "
        "pod by pod, as in extender mode). Default %(default)s",
    )
    ap.add_argument(
        "--profile-dir",
        default="",
        help="take a kube-apiserver CPU profile in every phase into DIR/<mode>/<namespace>"
        "-apiserver.pb (read with: go tool pprof -top FILE); the devcluster's API server "
        "then serves /debug/pprof",
    )
    ap.add_argument(
        "--profile-seconds",
        type=int,
        default=5,
        help="length of each profile from the phase's start (default %(default)s; a phase "
        "of the default 400 pods lasts 3-7 s)",
    )
    ap.add_argument(
        "--stages",
        action="store_true",
        help="in the gang phase, watch when each gang is created, admitted, let in and "
        "bound, and print p50/p90 per stage (two more watches: not for throughput figures)",
    )
    ap.add_argument(
        "--scale",
        type=float,
        default=0.1,
        help="fraction of the published shapes' pod counts (default %(default)s)",
    )
    args = ap.parse_args()
    STAGES[0] = args.stages
    if args.profile_dir:
        os.environ[APISERVER_PROFILING_ENV] = "1"  # read as each devcluster starts
    if args.shapes is not None and not args.shapes:
        args.shapes = list(SHAPES)
    modes = list(MODES) if args.mode == "both" else [args.mode]
    results = [measure(m, args) for m in modes]
    if args.shapes:
        report_shapes(results, args.nodes)
    else:
        report(results, args.nodes)


if __name__ == "__main__":
    main()
