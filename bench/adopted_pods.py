"""Bare pods in an adopted namespace: what holding them for their queue costs.

A pod that names ``volcano`` and no PodGroup, in a namespace labelled
pyextender.io/enabled=true, is gated by the webhook, given a PodGroup of its own by
the PodGroup controller, admitted by the sidecar to its queue, and only then
scheduled (webhook/mutate_pod.py). This bench measures that path against the same
pods elsewhere, on one devcluster running the sidecar, the controllers and the
webhook as ``make run`` does, in --rounds rounds of three phases:

  stock   : P pods (1 GPU each), schedulerName default-scheduler
  plain   : P pods naming volcano in a namespace that is not adopted (our
            filter/prioritize/bind; no PodGroup, no queue)
  adopted : P pods naming volcano in an adopted namespace (the path above), each
            standalone: a PodGroup each
  owned   : the same pods, all owned by one ReplicaSet (as a Deployment's are): one
            PodGroup for all, minMember 1, the other pods let in as they fit

Reported per phase: pods/s from the first create to the last bind, and its ratio to
the round's stock phase; per pod, create to bound p50/p99; for the adopted phases
also create to "names its PodGroup" (the annotation: the webhook's, in the pod's
creation, or the controller's, written later), to "its PodGroup exists" and to "gate
lifted", p50/p99; each program's CPU per pod and the API server's writes per pod by
verb and resource (bench/phase_cost.py), both counted from the first create until
--settle seconds after the last bind, so the work that follows a bind counts too.

Usage: python bench/adopted_pods.py [--nodes 100] [--pods 400] [--rounds 2]
Last line: one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import msgspec
from kubernetes import client, config

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from e2e import BindWatch, pct
from phase_cost import PhaseCost

from devcluster.cluster import Cluster
from devcluster.controllers import enable_controllers
from devcluster.nodes import NodeShape
from devcluster.webhook import enable_webhook
from pyextender.api.names import ENABLED_LABEL, GROUP_NAME_ANNOTATION
from pyextender.simulate.runs import interval95

PODGROUPS = ("scheduling.volcano.sh", "v1beta1", "podgroups")

PHASES = (
    ("stock", "default-scheduler", False),
    ("plain", "volcano", False),
    ("adopted", "volcano", True),
    ("owned", "volcano", True),
)


def say(msg: str) -> None:
    print(f"bench/adopted_pods: {msg}", file=sys.stderr, flush=True)


class StageWatch(BindWatch):
    """Also when each pod was first seen with its PodGroup annotation (and which), and
    ungated; and, from a watch of the namespace's PodGroups, when each was first seen."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.grouped: dict[str, float] = {}
        self.group_of: dict[str, str] = {}
        self.ungated: dict[str, float] = {}
        self.made: dict[str, float] = {}
        """PodGroup name -> monotonic time it was first seen."""
        super().__init__(api, namespace)
        self.groups = client.CustomObjectsApi(api)
        threading.Thread(target=self._watch_groups, daemon=True).start()

    def _watch_groups(self) -> None:
        rv = ""
        while not self.stop.is_set():
            resp = self.groups.list_namespaced_custom_object(
                *PODGROUPS[:2], self.ns, PODGROUPS[2], watch=True, resource_version=rv,
                timeout_seconds=5, allow_watch_bookmarks=True, _preload_content=False,
            )  # fmt: skip
            for line in resp:
                meta = (msgspec.json.decode(line).get("object") or {}).get("metadata") or {}
                rv = meta.get("resourceVersion", rv)
                if meta.get("name"):
                    self.made.setdefault(meta["name"], time.monotonic())
                if self.stop.is_set():
                    break

    def note(self, name: str, obj: dict[str, Any], now: float) -> None:
        super().note(name, obj, now)
        group = ((obj.get("metadata") or {}).get("annotations") or {}).get(GROUP_NAME_ANNOTATION)
        if group:
            self.grouped.setdefault(name, now)
            self.group_of.setdefault(name, group)
        if not (obj.get("spec") or {}).get("schedulingGates"):
            self.ungated.setdefault(name, now)

    def group_made(self) -> dict[str, float]:
        """Pod name -> when the PodGroup it names was first seen."""
        made = self.made
        return {pod: made[group] for pod, group in self.group_of.items() if group in made}


def over_rounds(rows: list[dict[str, Any]]) -> dict[str, float]:
    """One phase over the rounds: its ratio to stock (median, mean and 95 % half-width;
    each round against its own stock phase, a paired sample) and its mean CPU per pod."""
    ratios = [r.get("ratio_to_stock", 1.0) for r in rows]
    mean, half = interval95(ratios)
    cpu = [r["cpu_ms_per_pod"]["total"] for r in rows]
    return {
        "ratio_median": float(statistics.median(ratios)),
        "ratio_mean": mean,
        "ratio_ci95": half,
        "cpu_ms_mean": float(statistics.fmean(cpu)),
    }


def pod(name: str, ns: str, scheduler: str, owner: dict[str, Any] | None = None) -> dict[str, Any]:
    requests = {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "schedulerName": scheduler,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"requests": requests, "limits": {"nvidia.com/gpu": "1"}},
                }
            ],
        },
    }


def _replica_set(api: client.ApiClient, ns: str, replicas: int) -> dict[str, Any]:
    """A ReplicaSet whose pods the phase creates itself (a devcluster runs no
    controller-manager); returns the owner reference its pods carry."""
    labels = {"app": "bench"}
    spec = {"schedulerName": "volcano", "containers": [{"name": "c", "image": "busybox"}]}
    body = {
        "metadata": {"name": "bench"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }
    rs = client.AppsV1Api(api).create_namespaced_replica_set(ns, body)
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "bench",
        "uid": rs.metadata.uid,
        "controller": True,
    }


def run_phase(
    api: client.ApiClient,
    cost: PhaseCost,
    ns: str,
    scheduler: str,
    adopted: bool,
    pods: int,
    settle: float,
) -> dict[str, Any]:
    core = client.CoreV1Api(api)
    labels = {ENABLED_LABEL: "true"} if adopted else {}
    core.create_namespace({"metadata": {"name": ns, "labels": labels}})
    owner = _replica_set(api, ns, pods) if ns.startswith("owned") else None
    watch = StageWatch(api, ns)
    time.sleep(0.5)
    created: dict[str, float] = {}
    cost.start(ns)
    start = time.monotonic()

    def make(i: int) -> None:
        name = f"p-{i}"
        created[name] = time.monotonic()
        body = pod(name, ns, scheduler, owner)
        core.create_namespaced_pod(ns, body, _preload_content=False)

    with ThreadPoolExecutor(8) as ex:
        list(ex.map(make, range(pods)))
    if not watch.wait(pods, 300):
        raise SystemExit(f"{ns}: only {len(watch.bound)}/{pods} pods bound in 300 s")
    last = max(watch.bound.values())
    time.sleep(settle)
    spent = cost.stop(pods)  # until --settle after the last bind: the writes that follow
    watch.stop.set()
    out: dict[str, Any] = {
        "pods_per_s": pods / (last - start),
        "pod_latency_p50_s": pct([watch.bound[n] - created[n] for n in created], 50),
        "pod_latency_p99_s": pct([watch.bound[n] - created[n] for n in created], 99),
        "cpu_ms_per_pod": spent["cpu_ms_per_pod"],
        "writes_per_pod": {k: v for k, v in spent["writes_per_pod"].items() if v >= 0.05},
    }
    if adopted:
        stages = (("grouped", watch.grouped), ("made", watch.group_made()))
        for stage, seen in (*stages, ("ungated", watch.ungated)):
            # a PodGroup made before the pod (an owner's, for its later pods): 0
            got = [max(seen[n] - created[n], 0.0) for n in created if n in seen]
            out[f"{stage}_p50_s"] = pct(got, 50)
            out[f"{stage}_p99_s"] = pct(got, 99)
    core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    deadline = time.monotonic() + 120
    while core.list_namespaced_pod(ns, limit=1).items and time.monotonic() < deadline:
        time.sleep(0.5)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=100, help="kwok nodes, 8 GPUs each")
    ap.add_argument("--pods", type=int, default=400, help="pods per phase")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of the three phases")
    ap.add_argument("--settle", type=float, default=8.0, help="seconds after the last bind counted")
    ap.add_argument("--name", default="adoptedbench", help="devcluster name")
    ap.add_argument(
        "--controller-workers",
        type=int,
        default=0,
        help="the controllers' --workers (concurrent reconciles per controller); 0 = their default",
    )
    args = ap.parse_args(argv)
    cluster = Cluster(args.name)
    if cluster.state is not None:
        cluster.down(quiet=True)
    st = cluster.up(nodes=args.nodes, shape=NodeShape(cpu="64", memory="512Gi", gpus=8))
    result: dict[str, list[dict[str, Any]]] = {kind: [] for kind, _, _ in PHASES}
    try:
        cluster.start_sidecar()
        cluster.wait_sidecar_ready()
        workers = [f"--workers={args.controller_workers}"] if args.controller_workers else []
        enable_controllers(cluster, extra=workers)
        enable_webhook(cluster)
        cfg = client.Configuration()
        config.load_kube_config(config_file=st.kubeconfig, client_configuration=cfg)
        api = client.ApiClient(cfg)
        cost = PhaseCost(api, str(cluster.dir))
        for r in range(args.rounds):
            for kind, scheduler, adopted in PHASES:
                say(f"round {r + 1}/{args.rounds}: {kind}")
                got = run_phase(
                    api, cost, f"{kind}-{r}", scheduler, adopted, args.pods, args.settle
                )
                result[kind].append(got)
    finally:
        cluster.down(quiet=True)
    print(f"{'phase':<8} {'round':>5} {'pods/s':>7} {'ratio':>6} {'p50 s':>6} {'p99 s':>6}")
    for kind, rows in result.items():
        for r, row in enumerate(rows):
            row["ratio_to_stock"] = row["pods_per_s"] / result["stock"][r]["pods_per_s"]
            print(
                f"{kind:<8} {r + 1:>5} {row['pods_per_s']:>7.1f} {row['ratio_to_stock']:>6.2f} "
                f"{row['pod_latency_p50_s']:>6.2f} {row['pod_latency_p99_s']:>6.2f}"
            )
    summary = {kind: over_rounds(rows) for kind, rows in result.items()}
    stock_cpu = summary.pop("stock")["cpu_ms_mean"]
    if args.rounds > 1:
        print("over the rounds (each round against its own stock phase; mean ± 95 %):")
        for kind, got in summary.items():
            print(
                f"  {kind:<8} ratio median {got['ratio_median']:.2f}, mean "
                f"{got['ratio_mean']:.2f} ± {got['ratio_ci95']:.2f}; CPU per pod "
                f"{got['cpu_ms_mean']:.1f} ms (stock {stock_cpu:.1f})"
            )
    for kind, rows in result.items():
        print(f"{kind}: CPU ms per pod (last round) {rows[-1]['cpu_ms_per_pod']}")
        print(f"{kind}: API writes per pod (last round) {rows[-1]['writes_per_pod']}")
    for kind in ("adopted", "owned"):
        last = result[kind][-1]
        print(
            f"{kind}: create to PodGroup annotation p50/p99 "
            f"{last['grouped_p50_s']:.2f}/{last['grouped_p99_s']:.2f} s, to PodGroup made "
            f"{last['made_p50_s']:.2f}/{last['made_p99_s']:.2f} s, to gate lifted "
            f"{last['ungated_p50_s']:.2f}/{last['ungated_p99_s']:.2f} s"
        )
    print(
        json.dumps(
            {
                "bench": "adopted-pods",
                "nodes": args.nodes,
                "pods": args.pods,
                **result,
                "over_rounds": summary,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
