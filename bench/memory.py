"""Sidecar memory at scale: RSS with N nodes and M pods in the cache.

Builds the sidecar's real cache (ClusterCache) from node and pod documents
delivered one at a time, as the informers deliver them, after importing
everything the sidecar imports and compiling its numba kernels (warm-up).
Budget (DESIGN.md §5): <= 300 MB RSS at 5,000 nodes / 50,000 pods.

Usage: python bench/memory.py [--nodes 5000] [--pods 50000]
Last line: one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from verbs import node_doc, pod_doc

from pyextender.cache.cluster import ClusterCache
from pyextender.framework.runtime import build_profile
from pyextender.plugins.defaults import load, plugins_of
from pyextender.server import app  # noqa: F401  (the sidecar's imports)
from pyextender.server.warmup import warm_up


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        return int(f.read().split("VmRSS:")[1].split()[0]) / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=50000)
    args = ap.parse_args()
    imports = rss_mb()
    warm_up(build_profile(plugins_of(load(None))))
    kernels = rss_mb()
    cache = ClusterCache()
    cache.replace_nodes([node_doc(i) for i in range(args.nodes)])
    cache.replace_pods([])
    for i in range(args.pods):
        # 80 % bound, 20 % pending, as a busy cluster looks
        node = f"node-{i % args.nodes:05d}" if i % 5 else None
        cache.pod_event("ADDED", pod_doc(f"p{i}", 1, node))
    gc.collect()
    full = rss_mb()
    print(f"{'stage':<34} {'RSS MB':>8}")
    print(f"{'imports':<34} {imports:>8.0f}")
    print(f"{'+ compiled kernels (warm-up)':<34} {kernels:>8.0f}")
    print(f"{f'+ cache: {args.nodes} nodes, {args.pods} pods':<34} {full:>8.0f}")
    print(
        f"budget (DESIGN.md §5): <= 300 MB at 5,000 nodes / 50,000 pods -> {full / 300:.2f} of it"
    )
    print(json.dumps({"bench": "memory", "nodes": args.nodes, "pods": args.pods,
                      "imports_rss_mb": imports, "kernels_rss_mb": kernels,
                      "total_rss_mb": full, "cache_mb": full - kernels,
                      "vs_budget_300mb": full / 300}))  # fmt: skip


if __name__ == "__main__":
    main()
