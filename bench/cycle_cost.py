"""What one scheduling cycle costs the event loop and the decide thread.

The cache of bench/verbs.py (N nodes with 8 GPUs, ~0.9 N running pods) takes the
churn of its churn scenario (per tick one pod finishes, one binds and a gang pod
arrives) and, every --ticks ticks, the actions loop's work is timed part by part:

  snapshot      cache.snapshot() on the loop (what every verb may wait for)
  snapshot_full the same cache copied whole, every field (how snapshots were taken
                before: the baseline, measured in the same run)
  decide        session build + actions on the decide thread, Tasks kept between
                cycles (TaskMemo)
  decide_fresh  the same with every Task built afresh (no memo: the baseline)

A second table measures how a cycle grows with the gangs already running, the
shape of bench/e2e.py's gang phase: --gang-nodes nodes with 8 GPUs, G running
PodGroups of 8 one-GPU pods and 8 waiting gated gangs of the same shape, for each G
of --gangs. The waiting gangs are decided again every cycle (nothing is written);
once the cluster is full (G >= nodes) they starve, and preempt and reclaim look
for victims among every running pod each cycle. Each row is measured twice: as
shipped, and with every action's virtual placement done one task at a time
(bench/placement_reference.py, how it worked before a gang's equal requests were
placed per node): the "1-by-1" columns, and their ratio to the shipped p50.
"share" is the part of one core the decide thread takes while changes keep coming:
the p50 cycle's CPU over itself plus the gap the loop then waits (DECIDE_SHARE, at
most HEARTBEAT_S). Above ~110 ms a cycle the 1 s cap wins and the share passes 10 %;
e.g. --gang-nodes 10000 --gangs 6000 (48,000 pods).

Usage: python bench/cycle_cost.py [--nodes 5000] [--cycles 200] [--ticks 10]
       [--gangs 150,450,1000] [--gang-nodes 500] [--gang-cycles 60]
Last line: one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import gc
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from placement_reference import one_by_one
from verbs import NoWrites, build_extender, node_doc, pod_doc

from pyextender.cache.cluster import ClusterCache
from pyextender.cache.reading_copy import _fields, copy_value
from pyextender.plugins.defaults import load
from pyextender.server.metrics import Metrics
from pyextender.server.scheduler_loop import SchedulerLoop


def full_copy(obj: Any, deep: tuple[str, ...] = ()) -> Any:
    """Every field copied (arrays and containers), nothing left out or shared."""
    new = copy.copy(obj)
    for name in _fields(obj):
        value = getattr(obj, name)
        setattr(new, name, full_copy(value) if name in deep else copy_value(value))
    return new


def snapshot_full(cache: ClusterCache) -> ClusterCache:
    snap = full_copy(cache)
    snap.state = full_copy(cache.state)
    snap.state.gpu = full_copy(cache.state.gpu, deep=("learned",))
    snap.state.gpu.fgd_memo = {}
    snap.state.gpu.fgd_base = {}
    return snap  # type: ignore[no-any-return]


class Churn:
    """The churn of bench/verbs.py, applied synchronously."""

    def __init__(self, cache: ClusterCache, nodes: int) -> None:
        self.cache, self.nodes = cache, nodes
        self.rng = np.random.default_rng(7)
        self.running = list(cache.state.pods)
        self.pending: list[dict[str, Any]] = []
        self.tick = 0

    def step(self) -> None:
        self.tick += 1
        cache, rng, t = self.cache, self.rng, self.tick
        uid = self.running.pop(int(rng.integers(0, len(self.running))))
        rec = cache.state.pods.get(uid)
        if rec is not None:
            cache.pod_event("DELETED", pod_doc(rec.pod.name, 1, None))
        name = f"churn-{t}"
        node = f"node-{int(rng.integers(0, self.nodes)):05d}"
        cache.pod_event("ADDED", pod_doc(name, int(rng.integers(1, 3)), node))
        self.running.append(f"uid-{name}")
        doc = pod_doc(f"wait-{t}", int(rng.integers(1, 9)), None)
        doc["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": f"g{t // 4}"}
        cache.pod_event("ADDED", doc)
        self.pending.append(doc)
        if len(self.pending) > 200:
            cache.pod_event("DELETED", self.pending.pop(0))


def ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000


def gang_doc(name: str, phase: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "bench",
            "uid": f"uid-pg-{name}",
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {"minMember": 8},
        "status": {"phase": phase},
    }


def member_doc(name: str, group: str, node: str | None) -> dict[str, Any]:
    doc = pod_doc(name, 1, node)
    doc["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": group}
    doc["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    if node is None:
        doc["spec"]["schedulingGates"] = [{"name": "pyextender.io/gang"}]
    return doc


PLACING_MODULES = (
    "pyextender.actions.allocate",
    "pyextender.actions.enqueue",
    "pyextender.actions.evict",
    "pyextender.actions.reservation",
)
"""The actions that call pyextender.framework.placement.place."""


@contextlib.contextmanager
def placing_one_by_one() -> Iterator[None]:
    """Every action places one task at a time (the baseline)."""
    with contextlib.ExitStack() as stack:
        for module in PLACING_MODULES:
            stack.enter_context(mock.patch(f"{module}.place", one_by_one))
        yield


def gang_scaling(nodes: int, running: int, cycles: int) -> dict[str, float]:
    """decide over ``running`` bound gangs and 8 waiting ones (module docstring)."""
    cache = ClusterCache()
    cache.replace_nodes([node_doc(i) for i in range(nodes)])
    groups, pods = [], []
    for g in range(running):
        groups.append(gang_doc(f"run-{g}", "Running"))
        node = f"node-{g % nodes:05d}"  # a node's 8 GPUs per gang; twice over past `nodes`
        pods += [member_doc(f"run-{g}-{i}", f"run-{g}", node) for i in range(8)]
    for g in range(8):
        groups.append(gang_doc(f"wait-{g}", "Pending"))
        pods += [member_doc(f"wait-{g}-{i}", f"wait-{g}", None) for i in range(8)]
    cache.replace_groups(groups)
    cache.replace_pods(pods)
    cfg = load(None)
    loop = SchedulerLoop(cache, lambda: cfg, NoWrites(), Metrics())  # type: ignore[arg-type]
    gc.collect()
    gc.freeze()
    times, cpu = [], []
    for _ in range(cycles):
        now = time.time()
        snap = cache.snapshot()
        overrides = loop._overrides(now)
        t0 = time.perf_counter()
        loop.decide(now, snap, overrides)
        times.append(ms(t0))
        cpu.append(loop.decide_cpu_s * 1000)
        del snap
    gc.unfreeze()
    p50, p99 = (float(np.percentile(times, q)) for q in (50, 99))
    cpu_p50 = float(np.percentile(cpu, 50))
    # the loop's spacing after a cycle of the median CPU cost (DECIDE_SHARE, capped at
    # HEARTBEAT_S): the share of one core the decide thread takes while events come
    loop.decide_cpu_s = cpu_p50 / 1000
    gap_ms = loop.next_gap() * 1000
    return {
        "running_gangs": running,
        "pods": len(pods),
        "decide_p50_ms": round(p50, 3),
        "decide_p99_ms": round(p99, 3),
        "decide_min_ms": round(min(times), 3),
        "decide_cpu_p50_ms": round(cpu_p50, 3),
        "next_gap_ms": round(gap_ms, 1),
        "decide_core_share": round(cpu_p50 / (cpu_p50 + gap_ms), 3),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--cycles", type=int, default=200)
    ap.add_argument("--ticks", type=int, default=10, help="churn ticks between two cycles")
    ap.add_argument(
        "--gangs",
        default="150,450,1000",
        help="running gangs of 8 per row of the gang table, comma-separated ('' skips it)",
    )
    ap.add_argument("--gang-nodes", type=int, default=500, help="nodes of the gang table")
    ap.add_argument("--gang-cycles", type=int, default=60, help="cycles per gang-table row")
    args = ap.parse_args()
    # first, in a fresh process: run after the churn part (its 5,000-node cache
    # frozen in the heap) the same cycles measured up to 2x slower and noisier
    rows = []
    if args.gangs:
        print(f"gangs of 8 running on {args.gang_nodes} nodes (8 GPUs), 8 gangs waiting:")
        cols = (
            "running", "pods", "p50 ms", "p99 ms", "min ms", "cpu p50", "share", "1-by-1 p50",
            "ratio",
        )  # fmt: skip
        print(" ".join(f"{c:>8}" if i != 1 else f"{c:>6}" for i, c in enumerate(cols)))
        for g in (int(x) for x in args.gangs.split(",")):
            r = gang_scaling(args.gang_nodes, g, args.gang_cycles)
            with placing_one_by_one():
                base = gang_scaling(args.gang_nodes, g, args.gang_cycles)
            r["one_by_one_decide_p50_ms"] = base["decide_p50_ms"]
            r["one_by_one_decide_p99_ms"] = base["decide_p99_ms"]
            r["one_by_one_vs_shipped_p50"] = round(base["decide_p50_ms"] / r["decide_p50_ms"], 2)
            rows.append(r)
            print(
                f"{g:>8} {r['pods']:>6} {r['decide_p50_ms']:>8.2f} {r['decide_p99_ms']:>8.2f}"
                f" {r['decide_min_ms']:>8.2f} {r['decide_cpu_p50_ms']:>8.2f}"
                f" {r['decide_core_share']:>8.1%} {base['decide_p50_ms']:>10.2f}"
                f" {r['one_by_one_vs_shipped_p50']:>8.2f}"
            )
    ext = build_extender(args.nodes)
    cache = ext.cache
    cfg = load(None)
    with_memo = SchedulerLoop(cache, lambda: cfg, NoWrites(), ext.metrics)  # type: ignore[arg-type]
    fresh = SchedulerLoop(cache, lambda: cfg, NoWrites(), ext.metrics)  # type: ignore[arg-type]
    churn = Churn(cache, args.nodes)
    gc.collect()
    gc.freeze()  # as the sidecar does once synced
    times: dict[str, list[float]] = {
        k: [] for k in ("snapshot", "snapshot_full", "decide", "decide_fresh")
    }
    print(f"{args.nodes} nodes, {len(cache.pods_by_uid)} pods, {args.cycles} cycles", flush=True)
    for c in range(args.cycles):
        for _ in range(args.ticks):
            churn.step()
        now = time.time()
        t0 = time.perf_counter()
        full = snapshot_full(cache)
        times["snapshot_full"].append(ms(t0))
        del full
        t0 = time.perf_counter()
        snap = cache.snapshot()
        times["snapshot"].append(ms(t0))
        overrides = with_memo._overrides(now)
        t0 = time.perf_counter()
        ssn, _ = with_memo.decide(now, snap, overrides)
        times["decide"].append(ms(t0))
        t0 = time.perf_counter()
        fresh._task_memo.width = -1  # every Task afresh
        ssn_fresh, _ = fresh.decide(now, snap, overrides)
        times["decide_fresh"].append(ms(t0))
        del ssn_fresh, ssn, snap
        if (c + 1) % 50 == 0:
            print(f"  {c + 1}/{args.cycles} cycles", flush=True)
    res: dict[str, Any] = {
        "bench": "cycle_cost",
        "nodes": args.nodes,
        "pods": len(cache.pods_by_uid),
    }
    print(f"{'part':<14} {'p50 ms':>8} {'p99 ms':>8}")
    for part, values in times.items():
        p50, p99 = (float(np.percentile(values, q)) for q in (50, 99))
        res[f"{part}_p50_ms"], res[f"{part}_p99_ms"] = round(p50, 3), round(p99, 3)
        print(f"{part:<14} {p50:>8.3f} {p99:>8.3f}")
    res["snapshot_vs_full_p50"] = round(res["snapshot_full_p50_ms"] / res["snapshot_p50_ms"], 2)
    res["decide_vs_fresh_p50"] = round(res["decide_fresh_p50_ms"] / res["decide_p50_ms"], 2)
    print(
        f"snapshot on the loop {res['snapshot_vs_full_p50']}x cheaper than a whole copy; "
        f"decide {res['decide_vs_fresh_p50']}x cheaper with Tasks kept"
    )
    res["gang_scaling"] = rows
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
