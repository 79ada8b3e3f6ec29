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

--mode volcano runs the gangs through Volcano's own scheduler instead (vc-scheduler
v1.10.0, built from the volcano.sh/volcano Go module into the binary cache on first
use, with the scheduler config Volcano's installer ships), on a devcluster with
Volcano's release CRDs and no pyextender process, against the same stock
baseline: "Volcano's level" measured on this machine. --mode all runs extender,
framework and volcano, one table, then each of our modes against Volcano: the gang
ratio to stock over Volcano's (each against its own cluster's stock phase) and the
job all-bound p99 (key "vs_volcano" of the last line; per shape with --shapes).
Volcano schedules in sessions, one per second by default; --vc-schedule-period S
changes that.

--shapes [single medium large huge] runs instead the scenario shapes of public
batch-scheduler comparisons (SHAPES: 5000 x 1, 500 x 20, 20 x 500, 1 x 10000 pods,
scaled by --scale, default 0.1), each as plain pods through the stock
kube-scheduler and then as gangs through pyextender on the same cluster (single
also as plain pods through our verbs), reporting pods/s and per-job
time-to-all-bound p50/p99; last line {"bench": "e2e-shapes", ...}.

Usage: python bench/e2e.py [--nodes 500] [--pods 400]
                           [--mode extender|framework|volcano|both|all] [--rounds N]
                           [--shapes [NAME ...]] [--scale 0.1]
--mode both measures each mode on its own fresh cluster, stock baseline included,
and prints one table. --stages adds, for the gang phase, when each gang was
created, admitted, let in and bound (bench/gang_stages.py).
--rounds N repeats the default phases N times on the same cluster (stock, plain,
gangs, then again), each ratio against its own round's stock phase, and reports
the median ratio with every round's: the machine's noise (a busy minute moved one
phase by 0.1-0.3 before) then shows as spread instead of deciding the figure. It
also gives the rounds' mean with its 95 % interval (Student's t) and calls a goal
met or not met only when that interval clears it ("cannot tell" otherwise). With
--shapes it repeats each shape's phases N times, with the same summary per shape.
Last line: one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

sys.path.insert(0, str(Path(__file__).resolve().parent))
from api_writes import hold_policy, policy_in_force
from gang_stages import GangStages
from gang_stages import report as report_stages
from phase_cost import MUTATING, PhaseCost, api_requests

from devcluster import build
from devcluster.cluster import APISERVER_PROFILING_ENV, MODES, Cluster, free_port
from devcluster.nodes import NodeShape
from pyextender.api.names import ENABLED_LABEL
from pyextender.simulate.runs import interval95, samples_to_tell

HOLD = ["gate"]
"""How gang pods are held until admitted in the running phase: "gate" (the scheduling
gate, lifted pod by pod) or "scheduler" (the framework shim's barrier annotation)."""

HELD_BY = {
    "gate": "the scheduling gate",
    "scheduler": "the shim's barrier (annotation)",
    "volcano": "Volcano's own scheduler (vc-scheduler), no gate",
}

STAGES = [False]
"""--stages: watch each gang's stages in the gang phase (bench/gang_stages.py)."""
ADOPTED: dict[str, str] = {}
"""Labels of the gang phases' namespaces: the adoption label with --hold-policy, whose
binding selects adopted namespaces."""

COST: list[PhaseCost] = []
"""The running cluster's cost recorder (one at a time): each phase snapshots it
around its pods, from the first create to the last bind."""


SETTLE_QUIET_S = 1.0
"""A phase starts once the API server has taken no write (leases aside) for this long."""
SETTLE_MAX_S = 60.0
"""...or after this long at most (a cluster that never goes quiet is reported, not waited
on). Volcano's scheduler went on writing for 22 s after its 400-pod gang phase (~1,100 event
PATCHes, ~40-80 PodGroup updates) and 36 s after 500 single-pod jobs: a 10 s cap let those
writes land in the next round's stock phase, in Volcano's favour."""


def settle(api: client.ApiClient) -> None:
    """Wait until the writes a phase set off have landed before the next phase starts.
    A gang's Running status and its events come after its last member is bound (where
    the phase's clock stops): without the wait, a round's stock phase paid for the
    previous round's PodGroup writes (0.05 per pod), in favour of the gangs' ratio."""
    start = time.monotonic()

    def writes() -> Counter[str]:
        counts = api_requests(api)
        return Counter(
            {k: n for k, n in counts.items() if k.split()[0] in MUTATING and "leases" not in k}
        )

    first = last = writes()

    def late() -> str:
        return ", ".join(f"{k} {n}" for k, n in (last - first).most_common(4))

    quiet_since = time.monotonic()
    while time.monotonic() - start < SETTLE_MAX_S:
        time.sleep(0.25)
        now = writes()
        if now != last:
            last, quiet_since = now, time.monotonic()
        elif time.monotonic() - quiet_since >= SETTLE_QUIET_S:
            if quiet_since - start > 5.0:
                say(f"writes went on for {quiet_since - start:.0f}s after the phase ({late()})")
            return
    say(
        f"the API server still took writes {SETTLE_MAX_S:.0f}s after the phase ({late()}); going on"
    )


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
                if name:
                    self.note(name, obj, time.monotonic())
                if self.stop.is_set():
                    break

    def note(self, name: str, obj: dict[str, Any], now: float) -> None:
        """Record what one watch event shows of pod ``name``: here, when first bound."""
        if (obj.get("spec") or {}).get("nodeName") and name not in self.bound:
            self.bound[name] = now

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
        elif HOLD[0] == "gate":
            spec["schedulingGates"] = [{"name": "pyextender.io/gang"}]
        # "volcano": Volcano's scheduler holds a gang itself; the pod only names its group
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


def create_group(custom: client.CustomObjectsApi, ns: str, name: str, size: int) -> None:
    """A PodGroup of minMember ``size`` (in queue "default" for Volcano's scheduler: its
    admission webhook would set that, and none runs here)."""
    spec: dict[str, Any] = {"minMember": size}
    if HOLD[0] == VOLCANO:
        spec["queue"] = "default"
    body = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name}, "spec": spec}  # fmt: skip
    custom.create_namespaced_custom_object(
        "scheduling.volcano.sh", "v1beta1", ns, "podgroups", body
    )


def gang_scheduler() -> tuple[str, str]:
    """(who schedules the gangs, their schedulerName) in the running mode."""
    if HOLD[0] == VOLCANO:
        return "Volcano's scheduler", VC_SCHEDULER_NAME
    return "pyextender", "volcano"


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
    core.create_namespace({"metadata": {"name": ns, "labels": ADOPTED if gang else {}}})
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
            create_group(custom, ns, group, size)
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
                    create_group(custom, ns, f"job-{j}", size)
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
    if gang:
        _delete_groups(custom, ns)
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


def _delete_groups(custom: client.CustomObjectsApi, ns: str) -> None:
    """Delete the phase's PodGroups before its pods, as a finished job's owner would.
    Left behind, each group whose pods were deleted drew a condition write and a
    Warning event ("0/8 tasks exist") from the sidecar ~3 s later (Volcano's scheduler
    writes events for them too): past the settle step's quiet second, so they landed in
    the next phase, often the next round's stock one (0.12 writes per pod), in favour
    of the gangs' ratio."""
    try:
        custom.delete_collection_namespaced_custom_object(
            "scheduling.volcano.sh", "v1beta1", ns, "podgroups"
        )
    except ApiException as exc:
        say(f"{ns}: deleting PodGroups: {exc.status} {exc.reason}; left for the namespace")


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
    verbs, no PodGroup: the non-gang figure), one after the other on one cluster;
    with --rounds N, N times per shape (shape_rounds)."""
    out: list[dict[str, Any]] = []
    for name in args.shapes:
        jobs, size = scaled(SHAPES[name], args.scale)
        rows: list[dict[str, Any]] = []
        try:
            for r in range(args.rounds):
                tag = f"-r{r + 1}" if args.rounds > 1 else ""
                label = f"shape {name}" + (f" round {r + 1}/{args.rounds}" if tag else "")
                rows.append(_shape(api, args, name, jobs, size, tag, label))
            out.append(shape_rounds(rows))
        except SystemExit as exc:  # a phase did not finish: say so, go on with the next
            say(f"shape {name}: {exc}")
            out.append({"shape": name, "jobs": jobs, "size": size, "error": str(exc)})
        say(f"shape {name}: {json.dumps(out[-1])}")
    return out


def shape_rounds(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One shape's figures: its one round as it is, or over several rounds the median
    of each ratio with every round's, their mean and 95 % interval (as --rounds gives
    the default phases), and the rounds themselves under "rounds"."""
    if len(rows) == 1:
        return rows[0]
    out: dict[str, Any] = {k: rows[0][k] for k in ("shape", "jobs", "size")}
    out["rounds"] = rows
    out.update(over_rounds(rows))
    return out


def over_rounds(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Each ratio of RATIOS the rounds have: its median, every round's, and their mean
    with its 95 % interval (each round's ratio is against its own stock phase: a
    paired sample)."""
    out: dict[str, Any] = {}
    for key in RATIOS:
        if key in rounds[0]:
            ratios = [rnd[key] for rnd in rounds]
            out[key] = float(np.median(ratios))
            out[key + "_by_round"] = ratios
            out[key + "_mean"], out[key + "_ci95"] = interval95(ratios)
    return out


def _shape(
    api: client.ApiClient,
    args: argparse.Namespace,
    name: str,
    jobs: int,
    size: int,
    tag: str = "",
    label: str = "",
) -> dict[str, Any]:
    label = label or f"shape {name}"
    settle(api)
    say(f"{label}: {jobs} jobs x {size} pods, stock kube-scheduler (plain pods)")
    base = run_jobs(
        api, f"stock-{name}{tag}", jobs, size, args.timeout, "default-scheduler", gang=False
    )
    row: dict[str, Any] = {"shape": name, "jobs": jobs, "size": size, "baseline": base}
    volcano = HOLD[0] == VOLCANO
    if size == 1 and not volcano:
        settle(api)
        say(f"{label}: the same plain pods through kube-scheduler + pyextender")
        plain = run_jobs(api, f"plain-{name}{tag}", jobs, size, args.timeout, gang=False)
        row["extender_no_gang"] = plain
        row["extender_vs_stock_pods_per_s_ratio"] = plain["pods_per_s"] / base["pods_per_s"]
    settle(api)
    who, scheduler = gang_scheduler()
    say(f"{label}: {jobs} PodGroups x {size} pods through {who}")
    gangs = run_jobs(api, f"gangs-{name}{tag}", jobs, size, args.timeout, scheduler)
    row["gangs"] = gangs
    row["gang_vs_stock_pods_per_s_ratio"] = gangs["pods_per_s"] / base["pods_per_s"]
    return row


def cluster_up(args: argparse.Namespace, name: str, mode: str, crds: str) -> tuple[Cluster, Any]:
    """A fresh devcluster of ``args.nodes`` kwok nodes (8 GPUs each) in a new folder."""
    root = Path(tempfile.mkdtemp(prefix="bench-e2e-"))
    cluster = Cluster(f"bench-{os.getpid()}-{name}", root=root)
    say(f"starting a {mode}-mode devcluster ({crds} CRDs) with {args.nodes} nodes in {root}")
    st = cluster.up(
        nodes=args.nodes,
        shape=NodeShape(cpu="64", memory="512Gi", gpus=8),
        timeout=600,
        mode=mode,
        # no Lease renewal burst (a PUT per node in one second, every lease/4) inside
        # a measured phase: it landed in some phases and not others, ~1 write per pod
        node_lease_s=3600,
        crds=crds,
    )
    return cluster, st


def bench_client(kubeconfig: str) -> client.ApiClient:
    """The bench's own API client (creates pods, watches binds)."""
    cfg = client.Configuration()
    config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    cfg.connection_pool_maxsize = 16
    return client.ApiClient(cfg)


def measure(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    """Baseline, plain extender pods and gangs on one fresh cluster of ``mode``."""
    if mode == VOLCANO:
        return measure_volcano(args)
    cluster, st = cluster_up(args, mode, mode, "ours")
    HOLD[0] = args.framework_barrier if mode == "framework" else "gate"
    try:
        cluster.start_sidecar(["--log-level=warning"])
        cluster.wait_sidecar_ready(timeout=120)
        api = bench_client(st.kubeconfig)
        if not args.hold_policy:
            return measure_on(cluster, api, args, mode)
        say("the chart's hold policy in force, gang namespaces adopted")
        ADOPTED[ENABLED_LABEL] = "true"
        with policy_in_force(api, hold_policy()):
            return measure_on(cluster, api, args, mode)
    finally:
        ADOPTED.clear()
        COST.clear()
        cluster.down(quiet=True)


def measure_on(
    cluster: Cluster, api: client.ApiClient, args: argparse.Namespace, mode: str
) -> dict[str, Any]:
    """The shapes, or the rounds of the default phases, on a cluster that is up."""
    if args.stock_client_qps:
        throttle_stock(cluster, args.stock_client_qps)
    profiles = Path(args.profile_dir) / mode if args.profile_dir else None
    COST[:] = [PhaseCost(api, str(cluster.dir), profiles, args.profile_seconds)]
    if args.shapes:
        return {"mode": mode, "gang_hold": HOLD[0], "shapes": measure_shapes(api, args)}
    return summarise(mode, measure_rounds(api, args, mode))


def measure_rounds(api: client.ApiClient, args: argparse.Namespace, mode: str) -> list[Any]:
    rounds = []
    for r in range(args.rounds):
        label = f"{mode} round {r + 1}/{args.rounds}" if args.rounds > 1 else mode
        rounds.append(measure_round(api, args, label, f"-r{r + 1}" if args.rounds > 1 else ""))
    return rounds


def summarise(mode: str, rounds: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"mode": mode, "gang_hold": HOLD[0], "rounds": rounds}
    if len(rounds) == 1:
        out.update(rounds[0])  # one round: its figures at the top level, as before --rounds
    else:
        out.update(over_rounds(rounds))
    return out


STOCK_QPS = 500.0
"""The stock kube-scheduler's client QPS in the devcluster (devcluster/config.py)."""

VOLCANO = "volcano"
"""--mode volcano: Volcano's own scheduler (vc-scheduler, built from the volcano.sh/volcano
Go module) schedules the gangs on its own devcluster, against the same stock baseline:
the issue's "Volcano's level", measured on this machine instead of quoted."""
VC_SCHEDULER_NAME = "vc-scheduler"
"""schedulerName of the gangs Volcano's scheduler takes (not "volcano": the devcluster's
second kube-scheduler answers to that one; it is stopped in this mode anyway)."""
VC_CONF = """actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""
"""The actions and plugins of the scheduler ConfigMap Volcano's installer ships."""


def measure_volcano(args: argparse.Namespace) -> dict[str, Any]:
    """Stock baseline and gangs through Volcano's own scheduler, on a devcluster with
    Volcano's release CRDs (its scheduler writes PodGroup status with a plain update,
    which a PodGroup status subresource would drop; ours has none either now, but the
    release's files are what a Volcano cluster runs). No pyextender process runs."""
    vc = build.ensure_binaries(only=["vc-scheduler"])["vc-scheduler"]
    cluster, st = cluster_up(args, VOLCANO, "extender", "volcano-release")
    HOLD[0] = VOLCANO
    try:
        cluster.stop_role("kube-scheduler-volcano")  # ours (extender config): idle here
        api = bench_client(st.kubeconfig)
        _default_queue(api)
        conf = cluster.dir / "vc-scheduler.conf"
        conf.write_text(VC_CONF)
        healthz = free_port()
        cluster.start_process(
            "vc-scheduler",
            [
                str(vc),
                f"--kubeconfig={st.kubeconfig}",
                f"--scheduler-conf={conf}",
                f"--scheduler-name={VC_SCHEDULER_NAME}",
                "--leader-elect=false",
                "--enable-healthz=true",
                f"--healthz-address=127.0.0.1:{healthz}",
                f"--listen-address=127.0.0.1:{free_port()}",
                "--cache-dumper=false",
                # its informer on numatopologies would never sync: the devcluster installs
                # the release's other CRDs, not that one (devcluster/upstream_crds.py)
                "--feature-gates=ResourceTopology=false",
                f"--schedule-period={args.vc_schedule_period:g}s",
            ],
        )
        cluster.wait_ready("vc-scheduler", f"http://127.0.0.1:{healthz}/healthz", 120.0)
        return measure_on(cluster, api, args, VOLCANO)
    finally:
        COST.clear()
        cluster.down(quiet=True)


def _default_queue(api: client.ApiClient) -> None:
    """Volcano's scheduler puts a PodGroup without a queue in "default", which Volcano's
    controllers would create; none of them runs here."""
    body = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "default"},
        "spec": {"weight": 1, "reclaimable": True},
    }
    try:
        client.CustomObjectsApi(api).create_cluster_custom_object(
            "scheduling.volcano.sh", "v1beta1", "queues", body
        )
    except ApiException as exc:
        if exc.status != 409:  # already there
            raise


def throttle_stock(cluster: Cluster, qps: float) -> None:
    """Restart the stock kube-scheduler with client QPS ``qps`` (burst twice that) instead
    of the devcluster's 500 / 1,000. kube-scheduler's own default is 50 / 100: each bind
    and each event is a request, so a stock baseline left at that default is capped
    near 50 pods/s, however fast the cluster."""
    st = cluster.state
    assert st is not None
    path = cluster.dir / "kube-scheduler-default.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["clientConnection"].update(qps=qps, burst=int(2 * qps))
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    cluster.restart_role("kube-scheduler-default", signal.SIGTERM)
    port = st.ports["sched_default"]
    cluster.wait_ready("kube-scheduler-default", f"https://127.0.0.1:{port}/healthz", 60.0)
    say(f"stock kube-scheduler restarted with client qps {qps:g}, burst {int(2 * qps)}")


GANG_RATIO = "gang_vs_stock_pods_per_s_ratio"
RATIOS = (GANG_RATIO, "extender_vs_stock_pods_per_s_ratio")
"""The ratios to the stock baseline of the same round; with --rounds N their median."""


def measure_round(
    api: client.ApiClient, args: argparse.Namespace, label: str, tag: str
) -> dict[str, Any]:
    """Stock baseline, plain pods through our verbs, then gangs: one round, each phase
    in its own namespace (``tag`` tells rounds apart). Each ratio is to this round's
    own stock phase, measured a few seconds before on the same cluster."""
    settle(api)
    say(f"{label}: baseline, {args.pods} plain pods through the stock kube-scheduler")
    base = run_plain(api, args.pods, args.timeout, "default-scheduler", "bench-baseline" + tag)
    volcano = HOLD[0] == VOLCANO
    plain: dict[str, Any] = {}
    if not volcano:
        settle(api)
        say(f"{label}: {args.pods} plain pods through kube-scheduler + pyextender (no gangs)")
        plain = run_plain(api, args.pods, args.timeout, "volcano", "bench-extender" + tag)
    narrowed: dict[str, Any] = {}
    if args.narrowed and not volcano:
        say(f"{label}: {args.pods} plain pods, each narrowed to one node, stock and ours")
        for key, scheduler in (("stock", "default-scheduler"), ("extender", "volcano")):
            settle(api)
            narrowed[key] = run_plain(
                api, args.pods, args.timeout, scheduler, f"narrow-{key}{tag}", args.nodes
            )
    jobs = args.pods // args.gang_size
    settle(api)
    who, scheduler = gang_scheduler()
    say(f"{label}: {jobs} PodGroups x {args.gang_size} pods through {who}")
    gangs = run_jobs(api, "bench-gangs" + tag, jobs, args.gang_size, args.timeout, scheduler)
    out: dict[str, Any] = {"baseline": base}
    if plain:
        out["extender_no_gang"] = plain
        out["extender_vs_stock_pods_per_s_ratio"] = plain["pods_per_s"] / base["pods_per_s"]
    out["gangs"] = gangs
    out["gang_vs_stock_pods_per_s_ratio"] = gangs["pods_per_s"] / base["pods_per_s"]
    if narrowed:
        out["narrowed"] = narrowed
    return out


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
            rounds = sh.get("rounds") or [sh]
            for i, rnd in enumerate(rounds, 1):
                base_rate = rnd["baseline"]["pods_per_s"]
                for name in ("baseline", "extender_no_gang", "gangs"):
                    if name not in rnd:
                        continue
                    r = rnd[name]
                    print(
                        row.format(
                            res["mode"],
                            sh["shape"] if len(rounds) == 1 else f"{sh['shape']}/{i}",
                            f"{sh['jobs']}x{sh['size']}",
                            {"baseline": "stock", "extender_no_gang": "plain"}.get(name, name),
                            f"{r['pods_per_s']:.1f}",
                            f"{r['job_all_bound_p50_s']:.2f}",
                            f"{r['job_all_bound_p99_s']:.2f}",
                            f"{r['pods_per_s'] / base_rate:.2f}",
                        )
                    )
    for res in results:
        goal = None if res["mode"] == VOLCANO else 1.0
        for sh in res["shapes"]:
            if "rounds" in sh:
                plain = ""
                if "extender_no_gang" in sh["rounds"][0]:
                    ratio = _ratio(sh, "extender_vs_stock_pods_per_s_ratio", 0.9)
                    plain = f"; plain pods through our verbs {ratio}"
                print(
                    f"{res['mode']} {sh['shape']}: gang pods/s vs stock "
                    f"{_ratio(sh, GANG_RATIO, goal)}{plain}"
                )
        worst = min(sh.get(GANG_RATIO, 0.0) for sh in res["shapes"])
        said = "" if goal is None else f" (goal >= {goal:g})"
        print(f"{res['mode']}: worst gang pods/s vs stock over the shapes {worst:.2f}{said}")
    vs = against_volcano(results)
    for mode, shapes in vs.items():
        for shape, c in shapes.items():
            print(_said_vs_volcano(mode, c, f" {shape}"))
    print(json.dumps({"bench": "e2e-shapes", "nodes": nodes, "runs": results, "vs_volcano": vs}))


def report_costs(phases: list[tuple[str, str, dict[str, Any]]]) -> None:
    """Per phase: CPU ms per pod by process, and the API writes and reads per pod."""
    progs = ["kube-apiserver", "etcd", "kube-scheduler", "sidecar", "kwok", "bench (client)"]
    if any(
        "vc-scheduler" in ((r.get("cost") or {}).get("cpu_ms_per_pod") or {}) for *_, r in phases
    ):
        progs.append("vc-scheduler")
    row = "{:<10} {:<6} " + " ".join("{:>9}" for _ in progs) + " {:>7} {:>7}"
    short = ["apiserver", "etcd", "kube-sch", "sidecar", "kwok", "client", "vc-sched"][: len(progs)]
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
    print("sidecar CPU ms per pod, by thread (event loop: HTTP verbs, cache events; kube-api:")
    print("the API writes' pool; informer-*: watches):")
    for mode, name, r in phases:
        threads = (r.get("cost") or {}).get("sidecar_threads_ms_per_pod") or {}
        listed = ", ".join(f"{k} {v:.2f}" for k, v in threads.items())
        print(f"{mode:<10} {name:<6} {sum(threads.values()):5.2f}  {listed}")
    print("context switches per pod (voluntary: a thread waited, e.g. for a message;")
    print("involuntary: preempted), by process, and the sidecar's by thread:")
    for mode, name, r in phases:
        cost = r.get("cost") or {}
        for key, what in (("switches_per_pod", ""), ("sidecar_thread_switches_per_pod", "sidecar")):
            counts = dict(cost.get(key) or {})
            total = counts.pop("total", 0.0)
            listed = ", ".join(f"{k} {v:.1f}" for k, v in list(counts.items())[:8])
            print(f"{mode:<10} {name:<6} {what:<8}{total:6.1f}  {listed}")
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
    row = "{:<10} {:<6} {:<10} {:>5} {:>8} {:>10} {:>10} {:>10} {:>10} {:>9}"
    print(
        row.format(
            "mode",
            "round",
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
    phases = [("stock", "baseline"), ("plain", "extender_no_gang"), ("gangs", "gangs")]
    short = {"stock": "stock-1n", "extender": "plain-1n"}  # narrowed to one node
    for res in results:
        for i, rnd in enumerate(res["rounds"], 1):
            base_rate = rnd["baseline"]["pods_per_s"]
            for name, key in [p for p in phases if p[1] in rnd] + [
                (short[k], k) for k in rnd.get("narrowed", {})
            ]:
                r = rnd["narrowed"][key] if name.endswith("-1n") else rnd[key]
                print(
                    row.format(
                        res["mode"],
                        str(i),
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
            (res["mode"], name if len(res["rounds"]) == 1 else f"{name}{i}", rnd[key])
            for res in results
            for i, rnd in enumerate(res["rounds"], 1)
            for name, key in phases
            if key in rnd
        ]
    )
    for res in results:
        rounds = res["rounds"]
        spread = max(rnd["gangs"]["gang_bind_spread_p99_s"] for rnd in rounds)
        plain = ""
        if "extender_no_gang" in rounds[0]:
            ratio = _ratio(res, "extender_vs_stock_pods_per_s_ratio", 0.9)
            plain = f"plain pods through our verbs {ratio}; "
        goal = None if res["mode"] == VOLCANO else 1.0  # Volcano's level
        print(
            f"{res['mode']}: gang pods/s vs stock kube-scheduler "
            f"{_ratio(res, 'gang_vs_stock_pods_per_s_ratio', goal)}; {plain}"
            f"members of one gang bound within {spread:.2f}s of each other "
            f"(p99); gang pods held by {HELD_BY[res['gang_hold']]}"
        )
        for i, rnd in enumerate(rounds, 1):
            if "stages" in rnd["gangs"]:
                report_stages(res["mode"] if len(rounds) == 1 else f"{res['mode']} round {i}",
                              rnd["gangs"]["stages"])  # fmt: skip
    vs = against_volcano(results)
    for mode, c in vs.items():
        print(_said_vs_volcano(mode, c))
    qps = {res["stock_client_qps"] for res in results}
    print(f"stock kube-scheduler client qps: {', '.join(f'{q:g}' for q in sorted(qps))}")
    print(json.dumps({"bench": "e2e", "nodes": nodes, "runs": results, "vs_volcano": vs}))


def against_volcano(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each of our modes against Volcano's own scheduler, when the run measured it
    (--mode all): the gang pods/s ratio to stock over Volcano's, each ratio against the
    stock phase of its own cluster (so a cluster that happened to run faster cancels
    out), and the per-job time to all bound, p99 (median over rounds). For --shapes,
    the same per shape. {} without a Volcano run."""
    vc = next((r for r in results if r["mode"] == VOLCANO), None)
    if vc is None:
        return {}

    def job_p99(res: dict[str, Any]) -> float:
        """A shape's, or the median over a run's rounds."""
        rounds = res.get("rounds") or [res]
        return float(np.median([rnd["gangs"]["job_all_bound_p99_s"] for rnd in rounds]))

    def compare(ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, float]:
        return {
            "gang_ratio": ours[GANG_RATIO],
            "volcano_gang_ratio": theirs[GANG_RATIO],
            "gang_ratio_vs_volcano": ours[GANG_RATIO] / theirs[GANG_RATIO],
            "job_all_bound_p99_s": job_p99(ours),
            "volcano_job_all_bound_p99_s": job_p99(theirs),
        }

    out: dict[str, dict[str, Any]] = {}
    for res in results:
        if res is vc:
            continue
        if "shapes" in res:
            theirs = {sh["shape"]: sh for sh in vc.get("shapes", []) if "error" not in sh}
            out[res["mode"]] = {
                sh["shape"]: compare(sh, theirs[sh["shape"]])
                for sh in res["shapes"]
                if "error" not in sh and sh["shape"] in theirs
            }
        else:
            out[res["mode"]] = compare(res, vc)
    return out


def _said_vs_volcano(mode: str, c: dict[str, float], what: str = "") -> str:
    return (
        f"{mode}{what} vs Volcano's scheduler: gang pods/s {c['gang_ratio_vs_volcano']:.2f}x "
        f"(ratio to stock {c['gang_ratio']:.2f} against {c['volcano_gang_ratio']:.2f}), job "
        f"all-bound p99 {c['job_all_bound_p99_s']:.2f}s against "
        f"{c['volcano_job_all_bound_p99_s']:.2f}s"
    )


def _ratio(res: dict[str, Any], key: str, goal: float | None = None) -> str:
    """One round's ratio, or the median over the rounds with each round's in brackets,
    then the rounds' mean with its 95 % interval and what that says of ``goal``."""
    if len(res["rounds"]) == 1:
        return f"{res[key]:.2f}"
    n = len(res["rounds"])
    each = " / ".join(f"{r:.2f}" for r in res[key + "_by_round"])
    mean, half = res[key + "_mean"], res[key + "_ci95"]
    said = f"; mean {mean:.2f} ± {half:.2f} (95 %)"
    if goal is not None:
        said += f", goal >= {goal:g}: {goal_verdict(mean, half, goal, n)}"
    return f"{res[key]:.2f} median of {n} rounds ({each}){said}"


def goal_verdict(mean: float, half: float, goal: float, rounds: int) -> str:
    """Whether rounds whose ratios have this mean and 95 % half-width meet ``goal``:
    only when the whole interval is on one side does the machine's noise not decide."""
    if mean - half >= goal:
        return "met"
    if mean + half < goal:
        return "not met"
    more = samples_to_tell(mean - goal, half, rounds, TELL_LIMIT)
    if more is not None and more >= TELL_LIMIT:
        hint = f" (the mean is within {abs(mean - goal):.3f} of the goal: rounds will not tell)"
    else:
        hint = f" (~{more} would tell {mean:.2f} from {goal:g})" if more else ""
    return f"cannot tell from {rounds} rounds{hint}"


TELL_LIMIT = 1000
"""More rounds than this to tell a mean from a goal: say the two are level instead."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=500, help="kwok nodes (default %(default)s)")
    ap.add_argument("--pods", type=int, default=400, help="pods per phase (default %(default)s)")
    ap.add_argument("--gang-size", type=int, default=8, help="pods per gang job (default 8)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per phase")
    ap.add_argument(
        "--mode",
        choices=[*MODES, VOLCANO, "both", "all"],
        default="extender",
        help="devcluster mode; 'both' runs extender then framework, one table; 'volcano' runs "
        "the gangs through Volcano's own scheduler instead (vc-scheduler, built from the "
        "volcano.sh/volcano Go module on first use, ~2 min) against the same stock baseline; "
        "'all' runs the three, then sets each of ours against Volcano's (default extender)",
    )
    ap.add_argument(
        "--hold-policy",
        action="store_true",
        help="apply the chart's hold policy (only holders of the verb release may lift our "
        "gate) and adopt the gang phases' namespaces, so every gate lift pays its CEL "
        "evaluation as on an installed cluster (the sidecar runs as admin here: its "
        "authorization check is the cheapest case)",
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
        "--rounds",
        type=int,
        default=1,
        help="repeat the default phases (stock, plain, gangs), or with --shapes each shape's, "
        "this many times on the same cluster, each ratio against its own round's stock "
        "phase, and report the median ratio with every round's and their mean with its 95 %% "
        "interval: one quiet or busy minute then moves one round, not the figure "
        "(default %(default)s)",
    )
    ap.add_argument(
        "--stock-client-qps",
        type=float,
        default=0.0,
        help="run the stock kube-scheduler (the baseline) with this client QPS, burst twice "
        "that, instead of the devcluster's 500 / 1,000; 50 is kube-scheduler's own default, "
        "which caps the baseline near 50 pods/s (default: leave the devcluster's)",
    )
    ap.add_argument(
        "--vc-schedule-period",
        type=float,
        default=1.0,
        help="--mode volcano: seconds between Volcano's scheduling sessions (default "
        "%(default)s, Volcano's own); a shorter period lets a gang that arrives just after "
        "a session start sooner, at the cost of more sessions",
    )
    ap.add_argument(
        "--scale",
        type=float,
        default=0.1,
        help="fraction of the published shapes' pod counts (default %(default)s)",
    )
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error(f"--rounds must be at least 1, not {args.rounds}")
    STAGES[0] = args.stages
    if args.profile_dir:
        os.environ[APISERVER_PROFILING_ENV] = "1"  # read as each devcluster starts
    if args.shapes is not None and not args.shapes:
        args.shapes = list(SHAPES)
    modes = {"both": list(MODES), "all": [*MODES, VOLCANO]}.get(args.mode, [args.mode])
    results = [measure(m, args) for m in modes]
    for res in results:
        # the baseline's client rate decides what "vs stock" means (see --stock-client-qps)
        res["stock_client_qps"] = args.stock_client_qps or STOCK_QPS
        if res["mode"] == VOLCANO:
            res["vc_schedule_period_s"] = args.vc_schedule_period
    if args.shapes:
        report_shapes(results, args.nodes)
    else:
        report(results, args.nodes)


if __name__ == "__main__":
    main()
