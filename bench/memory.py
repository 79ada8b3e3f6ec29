"""Sidecar memory at scale: RSS at start-up and under live HTTP load.

This process plays the sidecar: it imports what the sidecar imports, compiles
its numba kernels (warm-up), then fills a real ClusterCache through the
informer's own LIST path (Informer._list: pages of JSON bytes decoded by
msgspec, handed to the loop with call_soon_threadsafe, then replace_*), from
a fake API server that encodes each page when asked (so this process never
holds the whole list beyond what the informer itself holds). Pods are varied:
namespaces, labels, annotations, container counts, CPU / memory / whole-GPU /
shared-GPU requests, owner references, 80 % bound and 20 % pending.

Then the sidecar's HTTP app serves under uvicorn in this process while a
client process sends kube-scheduler's calls (filter + prioritize, all node
names, a new pod per pair) for --load-seconds, and the leader's actions loop
runs its cycles (snapshot, session, kept Tasks; decisions made, never written;
--no-cycles leaves it out); RSS is sampled meanwhile.

Figures: RSS after imports, after warm-up, peak RSS during start-up (VmHWM
right after the LIST, i.e. the list's dicts and the cache at once), RSS once
synced, and the maximum RSS sampled under load (steady state, with its anonymous
and file-backed parts) with the final VmHWM. Budget (issue 12): <= 500 MB at
10,000 nodes / 100,000 pods under load.

Usage: python bench/memory.py [--nodes 10000] [--pods 100000] [--load-seconds 20] [--dicts]
Last line: one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import http.client
import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))

from verbs import NoWrites, check_reply, node_doc, pod_doc

from pyextender.api.informer import PAGE_SIZE, Informer
from pyextender.api.resources import PYEXTENDER_GPU_MILLI
from pyextender.cache.cluster import ClusterCache
from pyextender.framework.runtime import build_profile
from pyextender.plugins.defaults import load, plugins_of
from pyextender.server import app  # the sidecar's imports (and its freeze_heap)
from pyextender.server.metrics import Metrics
from pyextender.server.scheduler_loop import SchedulerLoop
from pyextender.server.verbs import Extender
from pyextender.server.warmup import warm_up


def status_mb(field: str) -> float:
    """A /proc/self/status memory field (VmRSS, VmHWM, RssAnon, RssFile) in MB."""
    with open("/proc/self/status") as f:
        return int(f.read().split(f"{field}:")[1].split()[0]) / 1024


def varied_pod(i: int, nodes: int) -> dict[str, Any]:
    """Pod i of a busy mixed cluster: no two share every field."""
    node = f"node-{(i * 7919) % nodes:05d}" if i % 5 else None  # 80 % bound
    kind = i % 10
    doc = pod_doc(f"p{i}-{'x' * (i % 17)}", 0, node)
    meta = doc["metadata"]
    meta["namespace"] = f"team-{i % 40}"
    meta["labels"] = {"app": f"svc-{i % 300}", "job": f"j{i // 8}", "tier": ("a", "b", "c")[i % 3]}
    meta["annotations"] = {"scheduling.k8s.io/group-name": f"j{i // 8}"}
    meta["ownerReferences"] = [{"kind": "Job", "name": f"j{i // 8}", "uid": f"owner-{i // 8}"}]
    containers = doc["spec"]["containers"]
    req: dict[str, str] = {"cpu": f"{100 + (i % 64) * 125}m", "memory": f"{256 * (1 + i % 32)}Mi"}
    if kind < 4:
        req["nvidia.com/gpu"] = str(1 + i % 8)  # whole GPUs
    elif kind < 6:
        req["nvidia.com/gpu"] = "1"  # a share of one GPU
        meta["annotations"][PYEXTENDER_GPU_MILLI] = str(100 * (1 + i % 9))
    containers[0]["resources"] = {"requests": req, "limits": dict(req)}
    for k in range(i % 3):  # sidecar containers
        containers.append({"name": f"side-{k}", "image": "busybox", "resources": {}})
    return doc


class FakeList:
    """list_fn of a fake API server: pages of PAGE_SIZE items, encoded on demand."""

    def __init__(self, total: int, make: Any) -> None:
        self.total = total
        self.make = make
        self.enc = msgspec.json.Encoder()

    def __call__(self, **kwargs: Any) -> Any:
        start = int(kwargs.get("_continue") or 0)
        end = min(start + kwargs.get("limit", PAGE_SIZE), self.total)
        meta: dict[str, Any] = {"resourceVersion": "1"}
        if end < self.total:
            meta["continue"] = str(end)
        page = {"items": [self.make(i) for i in range(start, end)], "metadata": meta}

        class Resp:
            data = self.enc.encode(page)

        return Resp()


async def fill(cache: ClusterCache, nodes: int, pods: int, dicts: bool = False) -> None:
    """Both informers' LISTs, run as the sidecar runs them (a thread each); with
    ``dicts`` the pod pages are kept as documents until the end (the former path)."""
    loop = asyncio.get_running_loop()
    inf_nodes = Informer(
        "nodes", FakeList(nodes, node_doc), loop, cache.replace_nodes, cache.node_event
    )
    inf_pods = Informer(
        "pods",
        FakeList(pods, lambda i: varied_pod(i, nodes)),
        loop,
        cache.replace_pods,
        cache.pod_event,
        convert=None if dicts else cache.pods_of_page,  # as server/app.py
    )
    t_nodes = threading.Thread(target=inf_nodes._list)
    t_nodes.start()
    while not cache.synced_nodes:
        await asyncio.sleep(0.05)
    t_pods = threading.Thread(target=inf_pods._list)  # pods after nodes, as they bind to rows
    t_pods.start()
    while not cache.synced_pods:
        await asyncio.sleep(0.05)
    t_nodes.join()
    t_pods.join()


def client(port: int, nodes: int, seconds: float) -> None:
    """kube-scheduler's side: filter + prioritize pairs until the time is up."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    names = [f"node-{i:05d}" for i in range(nodes)]
    headers = {"Content-Type": "application/json"}
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        pod = varied_pod(10**7 + i, nodes)
        # a pod of no gang: one naming a PodGroup the cache lacks is turned away at
        # once (filter answers an Error), which would load nothing
        del pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
        pod["spec"]["nodeName"] = None
        body = json.dumps({"Pod": pod, "NodeNames": names})
        for verb in ("filter", "prioritize"):
            conn.request("POST", f"/{verb}", body=body.encode(), headers=headers)
            resp = conn.getresponse()
            reply = resp.read()
            if resp.status != 200:
                raise SystemExit(f"{verb}: HTTP {resp.status}")
            if i == 0:
                check_reply(verb, reply, nodes)
        i += 1
    print(json.dumps({"pairs": i}))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def serve_under_load(ext: Extender, nodes: int, seconds: float) -> tuple[float, float, int]:
    """(max RSS MB and max anonymous RSS MB sampled while a client loads the verbs,
    pairs served)."""
    import uvicorn

    from pyextender.server.http import ExtenderApp

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            ExtenderApp(ext, lambda: (True, "ok")),
            host="127.0.0.1",
            port=port,
            log_level="error",
            access_log=False,
            http="httptools",
        )
    )
    serving = asyncio.ensure_future(server.serve())
    while not server.started:
        await asyncio.sleep(0.05)
    cmd = [sys.executable, __file__, "--client", str(port), "--nodes", str(nodes)]
    proc = await asyncio.create_subprocess_exec(
        *cmd, "--load-seconds", str(seconds), stdout=subprocess.PIPE
    )
    peak = anon = 0.0
    while proc.returncode is None:
        peak = max(peak, status_mb("VmRSS"))
        anon = max(anon, status_mb("RssAnon"))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), 0.2)
    out = await proc.stdout.read() if proc.stdout else b""
    server.should_exit = True
    await serving
    if proc.returncode != 0:
        raise SystemExit("load client failed")
    return peak, anon, int(json.loads(out.decode().strip().splitlines()[-1])["pairs"])


async def sidecar(args: argparse.Namespace) -> dict[str, Any]:
    res: dict[str, Any] = {"bench": "memory", "nodes": args.nodes, "pods": args.pods}
    res["list_pages"] = "documents until the end" if args.dicts else "converted per page"
    res["imports_rss_mb"] = status_mb("VmRSS")
    app.tune_gc()  # the sidecar's collector thresholds and GIL hand-over, as at its start
    app.tune_switch_interval()
    metrics = Metrics()
    profile = build_profile(plugins_of(load(None)), metrics.observe_plugin)
    warm_up(profile)
    res["kernels_rss_mb"] = status_mb("VmRSS")
    cache = ClusterCache()
    t0 = time.perf_counter()
    await fill(cache, args.nodes, args.pods, args.dicts)
    res["list_seconds"] = time.perf_counter() - t0
    res["startup_peak_rss_mb"] = status_mb("VmHWM")  # the LIST's dicts and the cache at once
    app.freeze_heap()  # as the sidecar does once synced
    res["synced_rss_mb"] = status_mb("VmRSS")
    res["cached_pods"] = len(cache.pods_by_uid)
    ext = Extender(cache, profile, None, metrics)  # type: ignore[arg-type]
    cfg = load(None)
    actions = SchedulerLoop(
        cache,
        lambda: cfg,
        NoWrites(),  # type: ignore[arg-type]  # decides, never writes (no API server)
        metrics,
        courtesy=ext.courtesy,
    )
    cycling = None if args.no_cycles else asyncio.ensure_future(actions.run())
    peak, anon, pairs = await serve_under_load(ext, args.nodes, args.load_seconds)
    if cycling is not None:
        cycling.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await cycling
    res["cycles_during_load"] = actions.cycles
    res["load_seconds"] = args.load_seconds
    res["load_pairs"] = pairs
    res["under_load_max_rss_mb"] = peak
    # RSS also counts the pages of shared libraries mapped in (libllvmlite.so is 178 MB):
    # 54-115 MB of them at import alone, depending on how much of the file the page
    # cache holds (a freshly installed venv: more). The anonymous part does not vary.
    res["under_load_max_anon_mb"] = anon
    res["under_load_file_mb_at_end"] = status_mb("RssFile")
    res["final_rss_mb"] = status_mb("VmRSS")
    res["final_hwm_mb"] = status_mb("VmHWM")
    res["vs_budget_500mb"] = max(peak, res["final_rss_mb"]) / 500
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=10000)
    ap.add_argument("--pods", type=int, default=100000)
    ap.add_argument("--load-seconds", type=float, default=20.0)
    ap.add_argument(
        "--dicts", action="store_true", help="keep LIST pages as documents (the former path)"
    )
    ap.add_argument(
        "--no-cycles", action="store_true", help="serve the verbs without the actions loop"
    )
    ap.add_argument("--client", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.client is not None:
        client(args.client, args.nodes, args.load_seconds)
        return
    gc.collect()
    res = asyncio.run(sidecar(args))
    print(f"{'stage':<44} {'RSS MB':>8}")
    rows = [
        ("imports", "imports_rss_mb"),
        ("+ compiled kernels (warm-up)", "kernels_rss_mb"),
        ("start-up peak (VmHWM after the LISTs)", "startup_peak_rss_mb"),
        (f"synced: {args.nodes} nodes, {res['cached_pods']} pods", "synced_rss_mb"),
        (
            f"under HTTP load, max ({res['load_pairs']} pairs, {res['cycles_during_load']} cycles)",
            "under_load_max_rss_mb",
        ),
        ("  of it anonymous (heap, arrays; max)", "under_load_max_anon_mb"),
        ("  of it file-backed (libraries' pages, at end)", "under_load_file_mb_at_end"),
        ("after load", "final_rss_mb"),
        ("peak over the whole run (VmHWM)", "final_hwm_mb"),
    ]
    for label, key in rows:
        print(f"{label:<44} {res[key]:>8.0f}")
    print(f"budget (issue 12): <= 500 MB under load -> {res['vs_budget_500mb']:.2f} of it")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
