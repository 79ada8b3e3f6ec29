"""Latency of the filter and prioritize verbs over HTTP, names only.

The sidecar's real ASGI app runs under uvicorn in a child process pinned to
one core, with a cache holding N nodes (8 GPUs each, a few pods on most).
This process, pinned to the other core, sends the requests kube-scheduler
would (nodeCacheCapable: the Pod plus all node names), one at a time on a
keep-alive connection. Baselines from the same run: the /healthz round trip
(HTTP cost with no work) and the verb's time in-process (work with no HTTP),
both for the wire path HTTP serves (raw request fields, reply bytes written
from arrays) and for the struct path (msgspec structs per node, as before).

Three verbs: filter and prioritize as kube-scheduler calls them with
--no-filter-picks-node, and "pick": filter with --filter-picks-node (the default),
which also scores the feasible nodes and answers the best one, the only call
kube-scheduler then makes before bind (served by a second server process).

Two scenarios per size:
- best case: one identical request, no cache change in between (every memo hits);
- churn: a new pod every filter+prioritize pair (as kube-scheduler's cycles
  go), its node names in a new order each time (kube-scheduler's parallel filters
  append them as they pass: see arrival_order) and prioritize asked about the nodes
  filter answered (as kube-scheduler passes them on), while the server applies pod
  events (a bind and a pending pod arriving per tick, --churn-rate ticks/s) and
  runs the scheduler's actions loop in the same process (its writes go nowhere:
  there is no API server here). The same requests are then made in this process
  (thread CPU per call, the cache changed between them by as many ticks as the
  server applied per request): the verbs' own work under churn, apart from the
  transport and the actions loop's competition for the interpreter.

Usage: python bench/verbs.py [--nodes 1000,5000] [--requests 2000] [--churn-rate 100]
Last line: one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from typing import Any

import msgspec
import numpy as np

from pyextender.api.extender import ExtenderArgs
from pyextender.cache.cluster import ClusterCache
from pyextender.framework.runtime import build_profile
from pyextender.plugins.defaults import load, plugins_of
from pyextender.server.extender_wire import ExtenderArgsWire
from pyextender.server.metrics import Metrics
from pyextender.server.verbs import Extender


def node_doc(i: int) -> dict[str, Any]:
    alloc = {"cpu": "96", "memory": "768Gi", "pods": "110", "nvidia.com/gpu": "8"}
    return {"metadata": {"name": f"node-{i:05d}"}, "status": {"allocatable": alloc}}


BENCH_GROUP = "j1"
"""The PodGroup every pod of pod_doc names (churn's pending pods name their own)."""


def pod_doc(name: str, gpus: int, node: str | None) -> dict[str, Any]:
    req = {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": str(gpus)}
    return {
        "metadata": {
            "name": name,
            "namespace": "bench",
            "uid": f"uid-{name}",
            "labels": {"app": "trainer", "job": "j1"},
            "annotations": {"scheduling.k8s.io/group-name": BENCH_GROUP},
        },
        "spec": {
            "schedulerName": "volcano",
            "nodeName": node,
            "containers": [
                {
                    "name": "main",
                    "image": "pytorch/pytorch:latest",
                    "command": ["torchrun", "--nproc_per_node=8", "train.py"],
                    "env": [{"name": f"VAR_{k}", "value": "x" * 20} for k in range(10)],
                    "resources": {"requests": req, "limits": {"nvidia.com/gpu": str(gpus)}},
                }
            ],
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
            ],
        },
        "status": {"phase": "Running" if node else "Pending"},
    }


def group_doc(name: str, min_member: int, phase: str | None) -> dict[str, Any]:
    """A PodGroup in the bench's namespace (phase None: not yet admitted)."""
    doc: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "bench", "uid": f"uid-pg-{name}"},
        "spec": {"minMember": min_member, "queue": "default"},
    }
    if phase is not None:
        doc["status"] = {"phase": phase}
    return doc


def check_reply(verb: str, reply: bytes, nodes: int) -> None:
    """Stop the bench unless ``reply`` is the verb's real answer: a filter that filtered
    (feasible nodes listed, no Error) or a prioritize that scored every node. A pod the
    sidecar turns away (its PodGroup unknown, held at the barrier) is answered with an
    Error at once, and timing that would time nothing."""
    doc = json.loads(reply)
    if verb == "prioritize":
        if not isinstance(doc, list) or len(doc) != nodes:
            raise SystemExit(f"prioritize: {len(doc)} scores for {nodes} nodes: {reply[:200]!r}")
        return
    if doc.get("Error") or not doc.get("NodeNames"):
        raise SystemExit(f"{verb}: the reply filtered nothing: {reply[:300]!r}")


def build_extender(nodes: int, pick: bool = False) -> Extender:
    cache = ClusterCache()
    cache.replace_nodes([node_doc(i) for i in range(nodes)])
    # the measured pods' PodGroup, admitted: without it the filter answers "PodGroup
    # does not exist (yet)" and places nothing
    cache.group_event("ADDED", group_doc(BENCH_GROUP, 1, "Running"))
    rng = np.random.default_rng(1)
    pods = []
    for i in range(nodes):
        # 0..7 GPUs busy per node, so some nodes fail the 4-GPU request
        busy = int(rng.integers(0, 8))
        if busy:
            pods.append(pod_doc(f"run-{i}", busy, f"node-{i:05d}"))
    cache.replace_pods(pods)
    metrics = Metrics()
    profile = build_profile(plugins_of(load(None)), metrics.observe_plugin)
    return Extender(cache, profile, None, metrics, pick_node=pick)  # type: ignore[arg-type]


def as_served(ext: Extender) -> Extender:
    """The sidecar's interpreter settings (server.app: fewer gen0 collections, the synced
    cache frozen out of the scans, a short GIL switch interval), as the served process
    has them: the in-process figures then time the same work, not collections a server
    would not make (BENCH_DEFAULT_GC=1: Python's defaults, here and in the server)."""
    if os.environ.get("BENCH_DEFAULT_GC") != "1":
        from pyextender.server.app import freeze_heap, tune_gc, tune_switch_interval

        tune_gc()
        tune_switch_interval()
        freeze_heap()
    return ext


class NoWrites:
    """The actuator of the bench's actions loop: decisions are made, never written."""

    async def apply(self, decisions: Any, allowed: Any = None) -> Any:
        from pyextender.server.actuator import Applied

        return Applied()

    def forget(self, live_jobs: set[str]) -> None:
        return None

    def cancel_background(self) -> None:
        return None


class Churn:
    """The cache changes of a live cluster, one tick at a time: one running pod
    finishes, one pod binds (both as watch events), and a pending pod of a small gang
    arrives (the oldest pending ones leave)."""

    def __init__(self, ext: Extender, nodes: int) -> None:
        self.cache = ext.cache
        self.nodes = nodes
        self.rng = np.random.default_rng(7)
        self.running = [u for u in self.cache.state.pods]
        self.pending: list[dict[str, Any]] = []
        self.ticks = 0

    def tick(self) -> None:
        cache, rng = self.cache, self.rng
        self.ticks += 1
        tick = self.ticks
        if self.running:
            uid = self.running.pop(int(rng.integers(0, len(self.running))))
            rec = cache.state.pods.get(uid)
            if rec is not None:
                cache.pod_event("DELETED", pod_doc(rec.pod.name, 1, None))
        name = f"churn-{tick}"
        gpus = int(rng.integers(1, 3))
        node = f"node-{int(rng.integers(0, self.nodes)):05d}"
        cache.pod_event("ADDED", pod_doc(name, gpus, node))
        self.running.append(f"uid-{name}")
        # gangs of 4 pending pods, each with its PodGroup (not admitted: the cycles
        # decide on them), gone with their last pod
        group = f"g{tick // 4}"
        if tick % 4 == 0:
            cache.group_event("ADDED", group_doc(group, 4, None))
        doc = pod_doc(f"wait-{tick}", int(rng.integers(1, 9)), None)
        doc["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": group}
        cache.pod_event("ADDED", doc)
        pending = self.pending
        pending.append(doc)
        if len(pending) > 200:
            gone = pending.pop(0)
            cache.pod_event("DELETED", gone)
            gone_group = gone["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
            if not any(
                p["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == gone_group
                for p in pending[:4]
            ):
                cache.group_event("DELETED", group_doc(gone_group, 4, None))


async def churn(ext: Extender, nodes: int, rate: float, actions: Any) -> None:
    """Churn ticks at ``rate`` per second, on the server's event loop."""
    import asyncio

    churner = Churn(ext, nodes)
    while True:
        await asyncio.sleep(1.0 / rate)
        churner.tick()
        if churner.ticks % 500 == 0:  # shows that the actions loop does run beside the verbs
            print(
                f"bench server: tick {churner.ticks}, {actions.cycles} action cycles",
                file=sys.stderr,
            )


def serve(nodes: int, port: int, rate: float, pick: bool = False) -> None:
    os.sched_setaffinity(0, {0})
    import asyncio

    import uvicorn

    from pyextender.server.http import ExtenderApp

    ext = as_served(build_extender(nodes, pick))
    app = ExtenderApp(ext, lambda: (True, "ok"))
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="error",
        access_log=False,
        http="httptools",
        loop="uvloop",
        timeout_keep_alive=120,  # s: the client pauses to build its in-process copy
    )

    async def main() -> None:
        tasks = []
        if rate > 0:
            from pyextender.server.scheduler_loop import SchedulerLoop

            config_ = load(None)
            actions = SchedulerLoop(
                ext.cache,
                lambda: config_,
                NoWrites(),  # type: ignore[arg-type]
                ext.metrics,
                courtesy=ext.courtesy,  # the sidecar's: its cycle gives way to the verbs
            )
            tasks = [
                asyncio.ensure_future(churn(ext, nodes, rate, actions)),
                asyncio.ensure_future(actions.run()),
            ]
        await uvicorn.Server(config).serve()
        for t in tasks:
            t.cancel()

    import uvloop

    uvloop.run(main())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def measure(
    conn: http.client.HTTPConnection, method: str, path: str, body: bytes | None, n: int
) -> list[float]:
    out: list[float] = []
    headers = {"Content-Type": "application/json"}
    for _ in range(n):
        t0 = time.perf_counter()
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        resp.read()
        out.append((time.perf_counter() - t0) * 1000)
        if resp.status != 200:
            raise SystemExit(f"{path}: HTTP {resp.status}")
    return out


def in_process(
    ext: Extender, body: bytes, verb: str, n: int, path: str
) -> tuple[list[float], list[float]]:
    """(wall ms, this thread's CPU ms) per call, decode to reply bytes, on the wire
    path HTTP serves or on the struct path (one msgspec struct per node, encoded
    by msgspec). CPU time is what a shared machine disturbs least."""
    dec = msgspec.json.Decoder(ExtenderArgs)
    wire = msgspec.json.Decoder(ExtenderArgsWire)
    enc = msgspec.json.Encoder()
    out: list[float] = []
    cpu: list[float] = []
    for _ in range(n):
        c0 = time.thread_time()
        t0 = time.perf_counter()
        if path == "wire":
            w = wire.decode(body)
            ext.prioritize_json(w) if verb == "prioritize" else ext.filter_json(w)
        else:
            args = dec.decode(body)
            enc.encode(ext.prioritize(args) if verb == "prioritize" else ext.filter(args))
        out.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.thread_time() - c0) * 1000)
    return out, cpu


def arrival_order(names: list[str], rng: np.random.Generator) -> list[str]:
    """The names in an order of one kube-scheduler cycle: its filters run in parallel
    over chunks of about √n nodes and each feasible node is appended as it passes, so
    the list it sends is in chunks whose order changes from cycle to cycle (never the
    same list twice: the sidecar maps it afresh every call). Modelled as chunks of
    ⌈√n⌉ names in a random order."""
    size = max(1, int(np.ceil(np.sqrt(len(names)))))
    chunks = [names[i : i + size] for i in range(0, len(names), size)]
    return [name for c in rng.permutation(len(chunks)).tolist() for name in chunks[c]]


def churn_http(
    conn: http.client.HTTPConnection, names: list[str], n: int, verbs: tuple[str, ...]
) -> dict[str, list[float]]:
    """kube-scheduler's cycles: a new pod per filter+prioritize pair (per filter alone
    when it picks the node), its node names in a new order (arrival_order); prioritize
    gets the nodes filter answered, in that order, as kube-scheduler passes them on."""
    out: dict[str, list[float]] = {verb: [] for verb in verbs}
    headers = {"Content-Type": "application/json"}
    rng = np.random.default_rng(11)
    for i in range(n):
        pod = pod_doc(f"incoming-{i}", 1 + i % 4, None)
        asked = arrival_order(names, rng)
        for verb in verbs:
            body = json.dumps({"Pod": pod, "NodeNames": asked}).encode()
            t0 = time.perf_counter()
            conn.request("POST", f"/{verb}", body=body, headers=headers)
            resp = conn.getresponse()
            reply = resp.read()
            out[verb].append((time.perf_counter() - t0) * 1000)
            if resp.status != 200:
                raise SystemExit(f"{verb}: HTTP {resp.status}")
            if i == 0:
                check_reply(verb, reply, len(asked))
            if verb == "filter":
                asked = json.loads(reply)["NodeNames"]
    return out


def start(
    nodes: int, rate: float, pick: bool = False
) -> tuple[subprocess.Popen[bytes], http.client.HTTPConnection]:
    port = free_port()
    cmd = [sys.executable, __file__, "--serve", str(nodes), "--port", str(port)]
    cmd += ["--pick"] if pick else []
    proc = subprocess.Popen([*cmd, "--churn-rate", str(rate)])
    deadline = time.monotonic() + 60
    while True:
        try:
            # s: a first call compiles the kernels, slow on a loaded machine
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            c.request("GET", "/healthz")
            c.getresponse().read()
            return proc, c
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise SystemExit("bench server did not start") from None
            time.sleep(0.1)


def churn_in_process(
    nodes: int, requests: int, ticks_per_request: float, pick: bool = False
) -> dict[str, list[float]]:
    """churn_http's requests (the same pods and node lists) made in this process: this
    thread's CPU ms per call, from the request's bytes to the reply's, with the cache
    changed between requests as the server's churn changed it (``ticks_per_request``:
    the ticks per filter the HTTP run saw). No actions loop here: this is the verbs'
    own work, which the HTTP figures add the transport and the loop's competition to."""
    ext = as_served(build_extender(nodes, pick))
    churner = Churn(ext, nodes)
    wire = msgspec.json.Decoder(ExtenderArgsWire)
    verbs = ("filter",) if pick else ("filter", "prioritize")
    names = [f"node-{i:05d}" for i in range(nodes)]
    out: dict[str, list[float]] = {verb: [] for verb in verbs}
    rng = np.random.default_rng(11)
    owed = 0.0
    warm = max(requests // 20, 20)
    for i in range(warm + requests):
        pod = pod_doc(f"incoming-{i}", 1 + i % 4, None)
        asked = arrival_order(names, rng)
        for verb in verbs:
            body = json.dumps({"Pod": pod, "NodeNames": asked}).encode()
            c0 = time.thread_time()
            args = wire.decode(body)
            reply = ext.prioritize_json(args) if verb == "prioritize" else ext.filter_json(args)
            if i >= warm:
                out[verb].append((time.thread_time() - c0) * 1000)
            if verb == "filter":
                asked = json.loads(reply)["NodeNames"]
        owed += ticks_per_request
        while owed >= 1.0:
            churner.tick()
            owed -= 1.0
    return out


def run_churn(nodes: int, requests: int, rate: float, pick: bool = False) -> dict[str, Any]:
    """Filter+prioritize pairs (filter alone when it picks), a new pod each, while
    the server churns."""
    proc, c = start(nodes, rate, pick)
    verbs = ("filter",) if pick else ("filter", "prioritize")
    try:
        names = [f"node-{i:05d}" for i in range(nodes)]
        churn_http(c, names, max(requests // 20, 20), verbs)  # warm-up
        t0 = time.perf_counter()
        lat = churn_http(c, names, requests, verbs)
        wall = time.perf_counter() - t0
        res: dict[str, Any] = {}
        if pick:
            res["churn_pick_pods_per_s"] = requests / wall
        else:
            res["churn_rate_per_s"] = rate
            res["churn_pairs_per_s"] = requests / wall
        for verb, ms in lat.items():
            name = "pick" if pick else verb
            res[f"churn_{name}_p50_ms"] = pct(ms, 50)
            res[f"churn_{name}_p99_ms"] = pct(ms, 99)
        c.close()
    finally:
        proc.terminate()
        proc.wait(10)
    per_request = rate * wall / requests  # churn ticks between two pods in that run
    local = churn_in_process(nodes, max(requests // 4, 100), per_request, pick)
    for verb, ms in local.items():
        name = "pick" if pick else verb
        res[f"churn_{name}_inprocess_cpu_p50_ms"] = pct(ms, 50)
        res[f"churn_{name}_inprocess_cpu_p99_ms"] = pct(ms, 99)
    return res


def run(nodes: int, requests: int) -> dict[str, Any]:
    proc, c = start(nodes, 0)
    picker, cp = start(nodes, 0, pick=True)
    try:
        os.sched_setaffinity(0, {1 % (os.cpu_count() or 1)})
        names = [f"node-{i:05d}" for i in range(nodes)]
        body = json.dumps({"Pod": pod_doc("incoming", 4, None), "NodeNames": names}).encode()
        res: dict[str, Any] = {"nodes": nodes, "request_bytes": len(body)}
        warm = max(requests // 10, 50)
        health = measure(c, "GET", "/healthz", None, warm)
        health = measure(c, "GET", "/healthz", None, requests)
        res["healthz_p50_ms"] = pct(health, 50)
        res["healthz_p99_ms"] = pct(health, 99)
        exts = {pick: as_served(build_extender(nodes, pick)) for pick in (False, True)}
        for verb in VERBS:
            conn, ext = (cp, exts[True]) if verb == "pick" else (c, exts[False])
            path = "/prioritize" if verb == "prioritize" else "/filter"
            conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
            check_reply(verb, conn.getresponse().read(), nodes)
            wire = msgspec.json.Decoder(ExtenderArgsWire).decode(body)
            fn = ext.prioritize_json if verb == "prioritize" else ext.filter_json
            check_reply(verb, fn(wire), nodes)
            measure(conn, "POST", path, body, warm)
            t0 = time.perf_counter()
            lat = measure(conn, "POST", path, body, requests)
            wall = time.perf_counter() - t0
            local, local_cpu = in_process(ext, body, verb, max(requests // 4, 100), "wire")
            struct, struct_cpu = in_process(ext, body, verb, max(requests // 4, 100), "struct")
            res[f"{verb}_inprocess_cpu_p50_ms"] = pct(local_cpu, 50)
            res[f"{verb}_inprocess_struct_cpu_p50_ms"] = pct(struct_cpu, 50)
            res[f"{verb}_p50_ms"] = pct(lat, 50)
            res[f"{verb}_p99_ms"] = pct(lat, 99)
            res[f"{verb}_mean_ms"] = statistics.fmean(lat)
            res[f"{verb}_requests_per_s"] = requests / wall
            res[f"{verb}_inprocess_p50_ms"] = pct(local, 50)
            res[f"{verb}_inprocess_p99_ms"] = pct(local, 99)
            res[f"{verb}_inprocess_struct_p50_ms"] = pct(struct, 50)
            res[f"{verb}_inprocess_struct_p99_ms"] = pct(struct, 99)
            res[f"{verb}_http_overhead_p50_ms"] = pct(lat, 50) - pct(local, 50)
            res[f"{verb}_p99_vs_budget_2ms"] = pct(lat, 99) / 2.0
        c.close()
        cp.close()
        return res
    finally:
        for p in (proc, picker):
            p.terminate()
            p.wait(10)


VERBS = ("filter", "prioritize", "pick")
"""pick: /filter on a server with --filter-picks-node (scores too, answers one node)."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", default="1000,5000", help="comma-separated cache sizes")
    ap.add_argument("--requests", type=int, default=2000, help="measured requests per verb")
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--pick", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument(
        "--churn-rate", type=float, default=100.0, help="churn ticks/s (0: best case only)"
    )
    args = ap.parse_args()
    if args.serve is not None:
        serve(args.serve, args.port, args.churn_rate, args.pick)
        return
    results = []
    for n in (int(x) for x in args.nodes.split(",")):
        print(
            f"bench/verbs: {n} nodes, {args.requests} requests per verb...",
            file=sys.stderr,
            flush=True,
        )
        res = run(n, args.requests)
        if args.churn_rate > 0:
            res.update(run_churn(n, args.requests, args.churn_rate))
            res.update(run_churn(n, args.requests, args.churn_rate, pick=True))
        results.append(res)
    head = ("nodes", "verb", "p50 ms", "p99 ms", "req/s", "in-proc p50/p99", "struct p50/p99")
    print("{:>6} {:<11} {:>8} {:>8} {:>8} {:>16} {:>16}".format(*head), "churn p50/p99")
    for r in results:
        for verb in VERBS:
            cells = (
                r["nodes"],
                verb,
                r[f"{verb}_p50_ms"],
                r[f"{verb}_p99_ms"],
                r[f"{verb}_requests_per_s"],
                f"{r[f'{verb}_inprocess_p50_ms']:.3f}/{r[f'{verb}_inprocess_p99_ms']:.3f}",
                f"{r[f'{verb}_inprocess_struct_p50_ms']:.3f}/"
                f"{r[f'{verb}_inprocess_struct_p99_ms']:.3f}",
            )
            churned = (
                f"{r[f'churn_{verb}_p50_ms']:.3f}/{r[f'churn_{verb}_p99_ms']:.3f}"
                if f"churn_{verb}_p50_ms" in r
                else "-"
            )
            print("{:>6} {:<11} {:>8.3f} {:>8.3f} {:>8.0f} {:>16} {:>16}".format(*cells), churned)
            churn_cpu = (
                f", churn {r[f'churn_{verb}_inprocess_cpu_p50_ms']:.3f} ms"
                f" (p99 {r[f'churn_{verb}_inprocess_cpu_p99_ms']:.3f})"
                if f"churn_{verb}_inprocess_cpu_p50_ms" in r
                else ""
            )
            print(
                f"  {verb} in-process CPU p50: wire {r[f'{verb}_inprocess_cpu_p50_ms']:.3f} ms,"
                f" struct {r[f'{verb}_inprocess_struct_cpu_p50_ms']:.3f} ms{churn_cpu}"
            )
        print(f"healthz p50 {r['healthz_p50_ms']:.3f} ms at {r['nodes']} nodes")
    print("budget (DESIGN.md §5): filter/prioritize p99 <= 2 ms at 5,000 nodes on one core")
    print("pick: filter with --filter-picks-node (the default), kube-scheduler's only call")
    print(json.dumps({"bench": "verbs", "results": results}))


if __name__ == "__main__":
    main()
