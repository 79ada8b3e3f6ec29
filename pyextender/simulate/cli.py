"""``pyextender simulate``: replay the openb GPU trace (REPLAY.md) with our plugins.

Prints progress on stderr, then a table on stdout and, as its very last
line, one JSON object ``{"<policy>": {"alloc_at_100": ..., ...}, ...}``
(percent of the cluster's GPUs; ``*_sd`` = standard deviation over seeds).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import numpy as np

from pyextender.simulate.trace import (
    NodeRow,
    PodRow,
    TraceError,
    default_traces,
    load_nodes,
    load_pods,
)

DEFAULT_TRACES = default_traces()

# (json key, column, curve) reported per policy
METRICS: tuple[tuple[str, int, str], ...] = (
    ("alloc_at_100", 100, "alloc"),
    ("alloc_at_130", 130, "alloc"),
    ("frag_amount_at_100", 100, "frag_amount"),
    ("frag_ratio_at_80", 80, "frag_ratio"),
    ("frag_ratio_at_100", 100, "frag_ratio"),
)


def parse_seeds(text: str) -> list[int]:
    """``42-51`` or ``42,45,50`` (or a mix) -> seeds."""
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, dash, hi = part.partition("-")
        try:
            if dash:
                seeds.extend(range(int(lo), int(hi) + 1))
            else:
                seeds.append(int(part))
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"bad seed range {part!r}") from exc
    if not seeds:
        raise argparse.ArgumentTypeError("no seeds given")
    return seeds


def register(sub: Any) -> None:
    from pyextender.simulate.policies import POLICIES

    p: argparse.ArgumentParser = sub.add_parser(
        "simulate",
        help="replay a GPU cluster trace with the scheduler's plugins",
        description=(
            "Replay the FGD allocation experiment (REPLAY.md) on the openb trace: pods arrive "
            "one by one until 130% of the cluster's GPUs is requested; report the GPU "
            "allocation rate per policy, mean and sd over seeds."
        ),
    )
    p.add_argument(
        "--nodes",
        type=Path,
        default=DEFAULT_TRACES / "openb_node_list_gpu_node.csv",
        help="node list CSV (default %(default)s)",
    )
    p.add_argument(
        "--pods",
        type=Path,
        default=DEFAULT_TRACES / "openb_pod_list_default.csv",
        help="pod list CSV (default %(default)s)",
    )
    p.add_argument(
        "--policy",
        action="append",
        metavar="NAME",
        help=f"policy to replay, repeatable, or 'all' ({', '.join(POLICIES)}; default pyextender)",
    )
    p.add_argument("--seeds", type=parse_seeds, default=list(range(42, 52)), help="e.g. 42-51")
    p.add_argument("--plot", type=Path, help="write allocation vs arrived workload as PNG")
    p.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="worker processes")
    p.set_defaults(func=run)


def _run_one(nodes: list[NodeRow], pods: list[PodRow], policy: str, seed: int) -> Any:
    from pyextender.simulate.policies import POLICIES
    from pyextender.simulate.protocol import arrival_sequence
    from pyextender.simulate.replay import replay

    total_gpus = sum(n.gpus for n in nodes)
    arrivals = arrival_sequence(pods, total_gpus, seed)
    return replay(nodes, pods, arrivals, POLICIES[policy], seed, time.perf_counter)


def _stats(values: list[float]) -> tuple[float, float]:
    arr = np.asarray(values, dtype=np.float64)
    if arr.shape[0] == 0 or np.isnan(arr).all():
        return math.nan, math.nan
    sd = float(np.nanstd(arr, ddof=1)) if arr.shape[0] > 1 else 0.0
    return float(np.nanmean(arr)), sd


def run(args: argparse.Namespace) -> int:
    from pyextender.simulate.policies import POLICIES

    names = args.policy or ["pyextender"]
    if "all" in names:
        names = list(POLICIES)
    unknown = [n for n in names if n not in POLICIES]
    if unknown:
        print(f"unknown policy {unknown[0]!r}; known: {', '.join(POLICIES)}", file=sys.stderr)
        return 2
    try:
        nodes = load_nodes(args.nodes)
        pods = load_pods(args.pods)
    except TraceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    gpu_nodes = [n for n in nodes if n.gpus > 0]  # CPU-only nodes are not used (§1)
    jobs = [(name, seed) for name in names for seed in args.seeds]
    print(
        f"replaying {len(pods)} pods on {len(gpu_nodes)} nodes "
        f"({sum(n.gpus for n in gpu_nodes)} GPUs): {len(names)} policies x "
        f"{len(args.seeds)} seeds on {args.jobs} processes",
        file=sys.stderr,
        flush=True,
    )
    results: dict[str, list[Any]] = {n: [] for n in names}
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        futures = {
            pool.submit(_run_one, gpu_nodes, pods, name, seed): (name, seed) for name, seed in jobs
        }
        for done, fut in enumerate(as_completed(futures), 1):
            res = fut.result()
            results[res.policy].append(res)
            print(
                f"[{done}/{len(jobs)}] {res.policy:<16} seed {res.seed}: "
                f"alloc@100 {res.curves.alloc[100]:.2f}%  alloc@130 {res.curves.alloc[130]:.2f}%  "
                f"({res.seconds:.1f}s, {time.perf_counter() - start:.0f}s elapsed)",
                file=sys.stderr,
                flush=True,
            )
    summary: dict[str, dict[str, float]] = {}
    for name in names:
        runs = sorted(results[name], key=lambda r: r.seed)
        row: dict[str, float] = {}
        for key, col, curve in METRICS:
            mean, sd = _stats([float(getattr(r.curves, curve)[col]) for r in runs])
            row[key] = round(mean, 3)
            row[f"{key}_sd"] = round(sd, 3)
        row["seeds"] = len(runs)
        summary[name] = row
    _print_table(summary)
    if args.plot:
        _plot(results, args.plot)
        print(f"wrote {args.plot}")
    print(json.dumps(summary, sort_keys=False))
    return 0


def _print_table(summary: dict[str, dict[str, float]]) -> None:
    head = (
        f"{'policy':<16} {'seeds':>5} {'alloc@100 (sd)':>16} {'alloc@130 (sd)':>16} "
        f"{'frag amt@100':>13} {'frag ratio@80':>14} {'frag ratio@100':>15}"
    )
    print("GPU allocation, % of cluster GPUs, mean (sd) over seeds")
    print(head)
    print("-" * len(head))
    for name, row in summary.items():
        a100 = f"{row['alloc_at_100']:.2f} ({row['alloc_at_100_sd']:.2f})"
        a130 = f"{row['alloc_at_130']:.2f} ({row['alloc_at_130_sd']:.2f})"
        print(
            f"{name:<16} {int(row['seeds']):>5} {a100:>16} {a130:>16} "
            f"{row['frag_amount_at_100']:>13.2f} {row['frag_ratio_at_80']:>14.2f} "
            f"{row['frag_ratio_at_100']:>15.2f}"
        )
    print("paper (REPLAY.md §7): FGD 95.23 / 95.39, BestFit 92.86 / 93.08, Random 86.30 / 87.47")


def _plot(results: dict[str, list[Any]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    x = np.arange(131)
    for name, runs in results.items():
        curve = np.nanmean(np.stack([r.curves.alloc for r in runs]), axis=0)
        ax.plot(x, curve, label=name)
    ax.plot(x, np.minimum(x, 100), color="grey", linestyle=":", label="ideal")
    ax.set_xlabel("arrived GPU demand, % of cluster GPUs")
    ax.set_ylabel("allocated GPUs, % of cluster GPUs")
    ax.set_xlim(0, 130)
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title("openb trace replay (mean over seeds)")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
