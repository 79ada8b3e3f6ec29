"""``pyextender simulate``: replay the openb GPU trace (REPLAY.md) with our plugins.

One or more pod lists (``--pods`` repeated, or a folder of ``*pod_list*.csv``)
against the same node list; every (workload, policy, seed) is one run. Prints
progress per run on stderr, then one table across workloads on stdout and, as
its very last line, one JSON object ``{"<workload>": {"<policy>": {"alloc_at_100":
..., ...}}}`` (percent of the cluster's GPUs; ``*_sd`` = sd over seeds).
``--results DIR`` keeps every run's curves (and reuses runs found there);
``--plot`` draws one figure per workload.
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

from pyextender.simulate.runs import Run, load_run, paired, save_run, summarise, workload_name
from pyextender.simulate.trace import (
    NodeRow,
    PodRow,
    TraceError,
    default_traces,
    load_nodes,
    load_pods,
)

DEFAULT_TRACES = default_traces()


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


def pod_lists(paths: list[Path]) -> list[Path]:
    """Files as given; a folder stands for its ``*pod_list*.csv`` files (sorted)."""
    out: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(path.glob("*pod_list*.csv"))
            if not found:
                raise TraceError(f"{path}: no *pod_list*.csv files")
            out.extend(found)
        else:
            out.append(path)
    return out


POLICY_NAMES = (
    "pyextender",
    "pyextender-known",
    "fgd",
    "fgd-online",
    "random",
    "dotprod",
    "gpu-packing",
    "best-fit",
    "volcano-binpack",
)
"""The keys of ``policies.POLICIES``, for ``--help``: importing the policies imports
every plugin and numba, which no other sub-command of ``pyextender`` needs
(tests/unit/test_cli_imports.py keeps the two equal)."""


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "simulate",
        help="replay a GPU cluster trace with the scheduler's plugins",
        description=(
            "Replay the FGD allocation experiment (REPLAY.md) on the openb trace: pods arrive "
            "one by one until 130% of the cluster's GPUs is requested; report the GPU "
            "allocation rate per workload and policy, mean and sd over seeds."
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
        action="append",
        help=(
            "pod list CSV, repeatable, or a folder of *pod_list*.csv "
            f"(default {DEFAULT_TRACES / 'openb_pod_list_default.csv'})"
        ),
    )
    p.add_argument(
        "--policy",
        action="append",
        metavar="NAME",
        help=f"policy to replay, repeatable, or 'all' ({', '.join(POLICY_NAMES)}; "
        "default pyextender)",
    )
    p.add_argument("--seeds", type=parse_seeds, default=list(range(42, 52)), help="e.g. 42-51")
    p.add_argument(
        "--plot",
        type=Path,
        help="PNG per workload: a file for one workload, else a folder of <workload>.png",
    )
    p.add_argument("--results", type=Path, help="folder keeping each run's curves (reused)")
    p.add_argument(
        "--stored-only",
        action="store_true",
        help="replay nothing: report the runs found in --results (seeds may differ per policy)",
    )
    p.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="worker processes")
    p.set_defaults(func=run)


def _run_one(
    nodes: list[NodeRow], pods: list[PodRow], workload: str, policy: str, seed: int
) -> Run:
    from pyextender.simulate.policies import POLICIES
    from pyextender.simulate.protocol import arrival_sequence
    from pyextender.simulate.replay import replay

    total_gpus = sum(n.gpus for n in nodes)
    arrivals = arrival_sequence(pods, total_gpus, seed)
    res = replay(nodes, pods, arrivals, POLICIES[policy], seed, time.perf_counter)
    return Run(workload, res.policy, seed, res.pods, res.placed, res.seconds, res.curves)


def run(args: argparse.Namespace) -> int:
    from pyextender.simulate.policies import POLICIES

    names = args.policy or ["pyextender"]
    if "all" in names:
        names = list(POLICIES)
    unknown = [n for n in names if n not in POLICIES]
    if unknown:
        print(f"unknown policy {unknown[0]!r}; known: {', '.join(POLICIES)}", file=sys.stderr)
        return 2
    if args.stored_only and args.results is None:
        print("error: --stored-only needs --results", file=sys.stderr)
        return 2
    try:
        files = pod_lists(args.pods or [DEFAULT_TRACES / "openb_pod_list_default.csv"])
        nodes = load_nodes(args.nodes)
        workloads = {workload_name(f): load_pods(f) for f in files}
    except TraceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    gpu_nodes = [n for n in nodes if n.gpus > 0]  # CPU-only nodes are not used (§1)
    results: dict[str, dict[str, list[Run]]] = {w: {n: [] for n in names} for w in workloads}
    todo = []
    for w in workloads:
        for name in names:
            for seed in args.seeds:
                kept = load_run(args.results, w, name, seed) if args.results else None
                if kept is not None:
                    results[w][name].append(kept)
                elif not args.stored_only:
                    todo.append((w, name, seed))
    reused = sum(len(runs) for by in results.values() for runs in by.values())
    print(
        f"{len(workloads)} workloads x {len(names)} policies x {len(args.seeds)} seeds on "
        f"{len(gpu_nodes)} nodes ({sum(n.gpus for n in gpu_nodes)} GPUs): {len(todo)} runs on "
        f"{args.jobs} processes, {reused} reused from {args.results}",
        file=sys.stderr,
        flush=True,
    )
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        futures = [
            pool.submit(_run_one, gpu_nodes, workloads[w], w, name, seed) for w, name, seed in todo
        ]
        for done, fut in enumerate(as_completed(futures), 1):
            res = fut.result()
            results[res.workload][res.policy].append(res)
            if args.results:
                save_run(args.results, res)
            elapsed = time.perf_counter() - start
            eta = elapsed / done * (len(todo) - done)
            print(
                f"[{done}/{len(todo)}] {res.workload:<12} {res.policy:<16} seed {res.seed}: "
                f"alloc@100 {res.curves.alloc[100]:.2f}%  alloc@130 {res.curves.alloc[130]:.2f}%  "
                f"({res.seconds:.0f}s; {elapsed:.0f}s elapsed, ~{eta:.0f}s left)",
                file=sys.stderr,
                flush=True,
            )
    results = {w: {n: r for n, r in by.items() if r} for w, by in results.items()}
    results = {w: by for w, by in results.items() if by}
    summary = {
        w: {n: summarise(sorted(runs, key=lambda r: r.seed)) for n, runs in by.items()}
        for w, by in results.items()
    }
    from pyextender.simulate.report import KNOWN, ONLINE_FGD, OURS, print_table

    # ours against each FGD replay seed by seed (the same arrivals), and the
    # diagnostic (our scoring told FGD's classes) against FGD
    fgd_paired, online_paired, known_paired = (
        _paired_with(results, summary, policy, base, prefix)
        for policy, base, prefix in (
            (OURS, "fgd", "vs_fgd_"),
            (OURS, ONLINE_FGD, "vs_fgd_online_"),
            (KNOWN, "fgd", "vs_fgd_"),
        )
    )
    print_table(summary, fgd_paired, online_paired, known_paired)
    if args.plot:
        from pyextender.simulate.plot import plot_workload

        for w, by in results.items():
            out = args.plot if len(results) == 1 and args.plot.suffix == ".png" else None
            out = out or args.plot / f"{w}.png"
            plot_workload(w, by, out)
            print(f"wrote {out}")
    print(json.dumps(summary))
    return 0


def _paired_with(
    results: dict[str, dict[str, list[Run]]],
    summary: dict[str, dict[str, dict[str, float]]],
    policy: str,
    base: str,
    prefix: str,
) -> dict[str, dict[str, float]]:
    """``policy`` minus ``base`` seed by seed per workload where both ran
    (``runs.paired``), also added to ``policy``'s summary under ``prefix``."""
    out = {
        w: paired(by[policy], by[base]) for w, by in results.items() if policy in by and base in by
    }
    out = {w: row for w, row in out.items() if row["seeds"]}
    for w, row in out.items():
        # no interval with one seed: left out of the JSON line (NaN is not JSON)
        summary[w][policy].update(
            {f"{prefix}{k}": v for k, v in row.items() if k != "seeds" and not math.isnan(v)}
        )
    return out
