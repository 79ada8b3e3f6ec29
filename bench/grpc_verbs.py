"""Filter and Score over gRPC (framework mode) against the HTTP extender verbs, same run.

One child process, pinned to one core, runs what the sidecar runs: the real
ASGI app under uvicorn and the real grpc.aio server (pyextender.v1.Scheduler
on a Unix socket, as the shim dials it), in one uvloop event loop over one
Extender whose cache holds N nodes (8 GPUs each, a few pods on most; the same
cache as bench/verbs.py). This process, pinned to the other core, alternates
the two front ends request by request, so both see the same machine:

  HTTP  POST /filter, /prioritize with the Pod and all node names (nodeCacheCapable)
  gRPC  Filter, Score with the pod's identity and all node names

Python client: bodies are encoded once and replies are read as bytes on both
sides, so the figures are transport + server work, not client-side encoding.

Go client (shim/benchclient, skipped with --no-go-client): the callers as they
really are, kube-scheduler's HTTPExtender (encoding/json of ExtenderArgs with the
whole Pod, reply decoded) and the shim (protobuf PodRef + names, reply
decoded), again alternating call by call. Python's gRPC client costs a few
hundred microseconds per call more than http.client; Go's does not. The Go
client also times what the shim asks per pod before Reserve: one Filter call
with_scores (verdicts and scores together), against Filter then Score; and the
shim's two calls per pod (Filter, Reserve) as unary calls, as messages on its
gRPC Cycle stream, and as the same messages on the sidecar's cycle socket (no
gRPC), with the sidecar's CPU and context switches per pod for each.

Usage: python bench/grpc_verbs.py [--nodes 1000,5000,10000] [--requests 1000] [--no-go-client]
Last line: one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from verbs import build_extender, check_reply, free_port, pct, pod_doc

from pyextender.server.proto_gen.pyextender.v1 import scheduler_pb2 as pb

SERVICE = "/pyextender.v1.Scheduler"
POD = "incoming"


async def _serve(nodes: int, port: int, sock: str) -> None:
    import uvicorn

    from pyextender.server.app import freeze_heap, tune_gc, tune_switch_interval
    from pyextender.server.grpc_server import GrpcOptions, GrpcServer
    from pyextender.server.grpc_service import SchedulerService
    from pyextender.server.http import ExtenderApp

    ext = build_extender(nodes)
    ext.cache.pod_event("ADDED", pod_doc(POD, 4, None))  # gRPC names the pod; the cache has it
    tune_gc()
    tune_switch_interval()
    freeze_heap()

    def ready() -> tuple[bool, str]:
        return True, "ok"

    grpc_server = GrpcServer(
        SchedulerService(ext, 20.0), GrpcOptions(socket=sock, cycle_socket=_cycle(sock)), ready
    )
    await grpc_server.start()
    config = uvicorn.Config(
        ExtenderApp(ext, ready),
        host="127.0.0.1",
        port=port,
        log_level="error",
        access_log=False,
        http="httptools",
        lifespan="off",
    )
    await uvicorn.Server(config).serve()


def _cycle(sock: str) -> str:
    """The cycle socket beside the gRPC one."""
    return str(Path(sock).with_name("cycle.sock"))


def serve(nodes: int, port: int, sock: str) -> None:
    os.sched_setaffinity(0, {0})
    import uvloop

    uvloop.run(_serve(nodes, port, sock))


def _wait_up(port: int, sock: str, proc: subprocess.Popen[bytes]) -> http.client.HTTPConnection:
    deadline = time.monotonic() + 120
    while True:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            c.request("GET", "/healthz")
            c.getresponse().read()
            if os.path.exists(sock):
                return c
        except OSError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            raise SystemExit("bench server did not start")
        time.sleep(0.1)


def _http(c: http.client.HTTPConnection, path: str, body: bytes) -> float:
    t0 = time.perf_counter()
    c.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    resp = c.getresponse()
    resp.read()
    took = (time.perf_counter() - t0) * 1000
    if resp.status != 200:
        raise SystemExit(f"{path}: HTTP {resp.status}")
    return took


def _grpc(call: Any, body: bytes) -> float:
    t0 = time.perf_counter()
    call(body, timeout=10)
    return (time.perf_counter() - t0) * 1000


def check_grpc_reply(verb: str, raw: bytes, nodes: int) -> None:
    """Stop unless a Filter answered every node with some fitting, or a Score scored
    every node (a status other than OK is the pod turned away)."""
    reply = (pb.FilterResponse if verb == "filter" else pb.ScoreResponse).FromString(raw)
    if reply.status.code != 0:
        raise SystemExit(f"gRPC {verb}: status {reply.status.code} {reply.status.reason!r}")
    column = reply.codes if verb == "filter" else reply.scores
    if len(column) != nodes or (verb == "filter" and column.count(0) == 0):
        raise SystemExit(f"gRPC {verb}: {len(column)} answers for {nodes} nodes, none fitting")


SHIM_DIR = Path(__file__).resolve().parent.parent / "shim"


def build_go_client(out: Path) -> Path | None:
    """shim/benchclient, built like devcluster builds (Go's cache makes it quick)."""
    go = shutil.which("go")
    if go is None:
        print("bench/grpc_verbs: no Go toolchain; skipping the Go client", file=sys.stderr)
        return None
    exe = out / "benchclient"
    env = dict(os.environ, CGO_ENABLED="0", GOFLAGS="-mod=mod")
    cmd = [go, "build", "-trimpath", "-o", str(exe), "./benchclient"]
    subprocess.run(cmd, cwd=SHIM_DIR, env=env, check=True)
    return exe


def go_client(
    exe: Path, port: int, sock: str, nodes: int, requests: int, tmp: str, server_pid: int
) -> Any:
    pod_file = Path(tmp) / "pod.json"
    doc = pod_doc(POD, 4, None)
    doc["metadata"]["resourceVersion"] = "1"
    pod_file.write_text(json.dumps(doc))
    cmd = [
        str(exe),
        f"-http=http://127.0.0.1:{port}",
        f"-grpc=unix://{sock}",
        f"-pod={pod_file}",
        f"-nodes={nodes}",
        f"-requests={requests}",
        f"-server-pid={server_pid}",
        f"-cycle-socket={_cycle(sock)}",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=1800)
    if out.returncode != 0:
        raise SystemExit(f"bench/grpc_verbs: Go client failed: {out.stderr.strip()}")
    return json.loads(out.stdout)


def run(nodes: int, requests: int, go_exe: Path | None = None) -> dict[str, Any]:
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        sock = str(Path(tmp) / "sched.sock")
        args = [
            sys.executable,
            __file__,
            "--serve",
            str(nodes),
            "--port",
            str(port),
            "--sock",
            sock,
        ]
        proc = subprocess.Popen(args)
        try:
            c = _wait_up(port, sock, proc)
            os.sched_setaffinity(0, {1 % (os.cpu_count() or 1)})
            channel = grpc.insecure_channel(f"unix://{sock}")
            names = [f"node-{i:05d}" for i in range(nodes)]
            ref = pb.PodRef(uid=f"uid-{POD}", namespace="bench", name=POD, resource_version="1")
            http_body = json.dumps({"Pod": pod_doc(POD, 4, None), "NodeNames": names}).encode()
            grpc_filter = pb.FilterRequest(pod=ref, node_names=names).SerializeToString()
            grpc_score = pb.ScoreRequest(pod=ref, node_names=names).SerializeToString()
            pairs = {
                "filter": ("/filter", channel.unary_unary(f"{SERVICE}/Filter"), grpc_filter),
                "score": ("/prioritize", channel.unary_unary(f"{SERVICE}/Score"), grpc_score),
            }
            res: dict[str, Any] = {
                "nodes": nodes,
                "http_request_bytes": len(http_body),
                "grpc_request_bytes": len(grpc_score),
            }
            warm = max(requests // 10, 50)
            # transport baselines: a call that does no work on either front end
            check = channel.unary_unary("/grpc.health.v1.Health/Check")
            empty_check = b""
            hz: list[float] = []
            gz: list[float] = []
            for i in range(warm + requests):
                t0 = time.perf_counter()
                c.request("GET", "/healthz")
                c.getresponse().read()
                t1 = time.perf_counter()
                check(empty_check, timeout=10)
                t2 = time.perf_counter()
                if i >= warm:
                    hz.append((t1 - t0) * 1000)
                    gz.append((t2 - t1) * 1000)
            res["noop_http_p50_ms"], res["noop_http_p99_ms"] = pct(hz, 50), pct(hz, 99)
            res["noop_grpc_p50_ms"], res["noop_grpc_p99_ms"] = pct(gz, 50), pct(gz, 99)
            # the replies timed must be real answers, not a pod turned away at once
            for verb, (path, call, body) in pairs.items():
                c.request(
                    "POST", path, body=http_body, headers={"Content-Type": "application/json"}
                )
                check_reply(
                    "prioritize" if verb == "score" else "filter", c.getresponse().read(), nodes
                )
                check_grpc_reply(verb, call(body, timeout=10), nodes)
            for verb, (path, call, body) in pairs.items():
                for _ in range(warm):
                    _http(c, path, http_body)
                    _grpc(call, body)
                h: list[float] = []
                g: list[float] = []
                for _ in range(requests):  # alternate, so both see the same machine
                    h.append(_http(c, path, http_body))
                    g.append(_grpc(call, body))
                for front, lat in (("http", h), ("grpc", g)):
                    res[f"{verb}_{front}_p50_ms"] = pct(lat, 50)
                    res[f"{verb}_{front}_p99_ms"] = pct(lat, 99)
                    res[f"{verb}_{front}_mean_ms"] = statistics.fmean(lat)
                res[f"{verb}_grpc_p99_below_http"] = pct(g, 99) < pct(h, 99)
            channel.close()
            c.close()
            if go_exe is not None:
                go = go_client(go_exe, port, sock, nodes, requests, tmp, proc.pid)
                for key, value in go.items():
                    res[f"go_{key}"] = value
                for verb in ("filter", "score"):
                    below = go[f"{verb}_grpc_p99_ms"] < go[f"{verb}_http_p99_ms"]
                    res[f"go_{verb}_grpc_p99_below_http"] = below
                unary, stream, sock_cpu = (
                    go[f"pod_calls_{w}_server_cpu_us"] for w in ("unary", "stream", "socket")
                )
                res["go_pod_calls_server_cpu_unary_vs_stream"] = unary / stream if stream else None
                res["go_pod_calls_server_cpu_stream_vs_socket"] = (
                    stream / sock_cpu if sock_cpu else None
                )
            return res
        finally:
            proc.terminate()
            proc.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", default="1000,5000,10000", help="comma-separated cache sizes")
    ap.add_argument("--requests", type=int, default=1000, help="measured requests per verb")
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--sock", help=argparse.SUPPRESS)
    ap.add_argument("--no-go-client", action="store_true", help="only the Python client")
    args = ap.parse_args()
    if args.serve is not None:
        serve(args.serve, args.port, args.sock)
        return
    build_dir = Path(tempfile.mkdtemp(prefix="grpc-verbs-"))
    go_exe = None if args.no_go_client else build_go_client(build_dir)
    results = []
    for n in (int(x) for x in args.nodes.split(",")):
        print(
            f"bench/grpc_verbs: {n} nodes, {args.requests} requests per verb and front end...",
            file=sys.stderr,
            flush=True,
        )
        results.append(run(n, args.requests, go_exe))
    shutil.rmtree(build_dir, ignore_errors=True)
    head = ("nodes", "call", "HTTP p50", "HTTP p99", "gRPC p50", "gRPC p99", "gRPC p99 < HTTP")
    print("Python client (bodies encoded once, replies read as bytes):")
    print("{:>6} {:<7} {:>9} {:>9} {:>9} {:>9} {:>16}".format(*head))
    for r in results:
        cells = (
            r["nodes"],
            "no-op",
            r["noop_http_p50_ms"],
            r["noop_http_p99_ms"],
            r["noop_grpc_p50_ms"],
            r["noop_grpc_p99_ms"],
            "",
        )
        print("{:>6} {:<7} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>16}".format(*cells))
        for verb in ("filter", "score"):
            cells = (
                r["nodes"],
                verb,
                r[f"{verb}_http_p50_ms"],
                r[f"{verb}_http_p99_ms"],
                r[f"{verb}_grpc_p50_ms"],
                r[f"{verb}_grpc_p99_ms"],
                "yes" if r[f"{verb}_grpc_p99_below_http"] else "NO",
            )
            print("{:>6} {:<7} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>16}".format(*cells))
    if go_exe is not None:
        print("Go client (kube-scheduler's HTTPExtender encoding vs the shim's protobuf):")
        for r in results:
            for verb in ("filter", "score"):
                cells = (
                    r["nodes"],
                    verb,
                    r[f"go_{verb}_http_p50_ms"],
                    r[f"go_{verb}_http_p99_ms"],
                    r[f"go_{verb}_grpc_p50_ms"],
                    r[f"go_{verb}_grpc_p99_ms"],
                    "yes" if r[f"go_{verb}_grpc_p99_below_http"] else "NO",
                )
                print("{:>6} {:<7} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>16}".format(*cells))
        print("Go client, the shim's gRPC calls per pod before Reserve (ms):")
        print("{:>6} {:>16} {:>16} {:>17} {:>17}".format(
            "nodes", "Filter+Score p50", "Filter+Score p99", "Filter+scores p50",
            "Filter+scores p99"))  # fmt: skip
        for r in results:
            print(
                "{:>6} {:>16.3f} {:>16.3f} {:>17.3f} {:>17.3f}".format(
                    r["nodes"],
                    r["go_cycle_two_calls_p50_ms"],
                    r["go_cycle_two_calls_p99_ms"],
                    r["go_cycle_one_call_p50_ms"],
                    r["go_cycle_one_call_p99_ms"],
                )
            )
        print("Go client, the shim's two calls per pod (Filter with scores, Reserve): unary")
        print("calls, messages on one gRPC Cycle stream, and the same messages on the cycle")
        print("socket (no gRPC), alternating blocks of 50 pods; sidecar CPU and context")
        print("switches per pod over all its threads:")
        print("{:>6} {:>7} {:>11} {:>11} {:>11} {:>9} {:>13}".format(
            "nodes", "calls", "p50", "p99", "CPU", "switches", "CPU ratio"))  # fmt: skip
        for r in results:
            for way, ratio in (
                ("unary", r["go_pod_calls_server_cpu_unary_vs_stream"] or 0.0),
                ("stream", 1.0),
                ("socket", 1.0 / (r["go_pod_calls_server_cpu_stream_vs_socket"] or 1.0)),
            ):
                print(
                    "{:>6} {:>7} {:>8.3f} ms {:>8.3f} ms {:>8.0f} µs {:>9.1f} {:>9.2f} of "
                    "stream".format(
                        r["nodes"],
                        way,
                        r[f"go_pod_calls_{way}_p50_ms"],
                        r[f"go_pod_calls_{way}_p99_ms"],
                        r[f"go_pod_calls_{way}_server_cpu_us"],
                        r[f"go_pod_calls_{way}_server_switches"],
                        ratio,
                    )
                )
    print("milliseconds per call; HTTP score = POST /prioritize; no-op = GET /healthz and")
    print("grpc.health.v1.Health/Check (transport only). Goal (DESIGN.md §5): gRPC Score")
    print("p99 at 5,000 nodes below the HTTP verb's in the same run.")
    print(json.dumps({"bench": "grpc_verbs", "results": results}))


if __name__ == "__main__":
    main()
