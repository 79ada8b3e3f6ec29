"""Admission webhook under load: pod creates at a target rate through a real
kube-apiserver that calls our webhook for each one.

Starts its own devcluster (2 kwok nodes) and the webhook (devcluster/webhook.py),
then creates gang-member pods (group-name annotation, so the API server sends
every create to the webhook) in an adopted namespace at --rate per second for
--duration seconds. Creates are paced open-loop (create i is due at start + i/rate)
and sent by --threads threads, so a slow answer does not lower the offered rate.
The pods are gated by the webhook, so nothing schedules them. First, unless
--no-baseline, the same load goes into a namespace the webhook ignores: what the
API server and this client manage on this machine without us, in the same run.

Reported: offered and achieved creates/s, client-side create latency p50/p99
(the whole API call: the API server, the webhook call, etcd), the webhook's own
handling time p50/p99 (its histogram on /metrics) and the API server's view of
the webhook call (apiserver_admission_webhook_admission_duration_seconds),
failed creates, how late creates started against their schedule, and CPU seconds
per process over the run (the machine may be shared: see where the CPU went).

Usage: python bench/webhook_load.py [--rate 200] [--duration 60] [--threads 48] [--quick]
Last line: one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
from kubernetes import client, config

from devcluster.cluster import Cluster, ClusterState
from devcluster.nodes import NodeShape
from devcluster.webhook import enable_webhook, webhook_url
from pyextender.api.names import ENABLED_LABEL, GROUP_NAME_ANNOTATION

NAMESPACE = "load"
PLAIN_NAMESPACE = "load-plain"
"""Not adopted: the API server does not call the webhook (the baseline phase)."""
WEBHOOK_SERIES = "pyextender_webhook_admission_duration_seconds"
APISERVER_SERIES = "apiserver_admission_webhook_admission_duration_seconds"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def say(msg: str) -> None:
    print(f"bench/webhook_load: {msg}", file=sys.stderr, flush=True)


def pod(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"p-{i}", "annotations": {GROUP_NAME_ANNOTATION: f"g-{i // 8}"}},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "10m"}}}
            ],
        },
    }


def api_client(st: ClusterState, pool: int) -> client.ApiClient:
    cfg = client.Configuration()
    config.load_kube_config(config_file=st.kubeconfig, client_configuration=cfg)
    cfg.connection_pool_maxsize = pool
    return client.ApiClient(cfg)


# -- histograms from Prometheus text --------------------------------------------------


def buckets(text: str, series: str, match: dict[str, str]) -> dict[float, float]:
    """Cumulative bucket counts (le -> count) summed over the series matching labels."""
    out: dict[float, float] = {}
    for line in text.splitlines():
        if not line.startswith(series + "_bucket{"):
            continue
        key, _, value = line.rpartition(" ")
        labels = dict(
            part.split("=", 1) for part in key[key.index("{") + 1 : key.rindex("}")].split(",")
        )
        labels = {k: v.strip('"') for k, v in labels.items()}
        if any(labels.get(k) != v for k, v in match.items()):
            continue
        le = float("inf") if labels["le"] == "+Inf" else float(labels["le"])
        out[le] = out.get(le, 0.0) + float(value)
    return out


def quantile(before: dict[float, float], after: dict[float, float], q: float) -> float | None:
    """q-quantile (seconds) of the observations between two scrapes, interpolated
    linearly inside its bucket, as Prometheus's histogram_quantile."""
    les = sorted(after)
    counts = [after[le] - before.get(le, 0.0) for le in les]
    if not counts or counts[-1] <= 0:
        return None
    rank = q * counts[-1]
    prev_le, prev_c = 0.0, 0.0
    for le, c in zip(les, counts, strict=True):
        if c >= rank:
            if le == float("inf"):
                return prev_le
            return prev_le + (le - prev_le) * ((rank - prev_c) / max(c - prev_c, 1e-12))
        prev_le, prev_c = le, c
    return None


def scrape(url: str, ctx: ssl.SSLContext) -> str:
    with urllib.request.urlopen(url, context=ctx, timeout=10) as r:
        text: str = r.read().decode()
        return text


# -- CPU accounting -------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process and its reaped children, seconds (0 if gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(x) for x in fields[11:15]) / CLK_TCK


def cpu_by_role(st: ClusterState) -> dict[str, float]:
    out = {role: cpu_seconds(pid) for role, pid in st.pids.items()}
    t = os.times()
    out["bench (this process)"] = t.user + t.system
    return out


# -- the load -------------------------------------------------------------------------


class Load:
    def __init__(
        self, api: client.ApiClient, rate: float, duration: float, namespace: str = NAMESPACE
    ) -> None:
        self.core = client.CoreV1Api(api)
        self.namespace = namespace
        self.rate = rate
        self.total = int(rate * duration)
        self.next = 0
        self.lock = threading.Lock()
        self.latency: list[float] = []
        self.lag: list[float] = []
        self.failures: list[str] = []
        self.ends: list[float] = []
        self.start = 0.0

    def worker(self) -> None:
        while True:
            with self.lock:
                i = self.next
                self.next += 1
            if i >= self.total:
                return
            due = self.start + i / self.rate
            now = time.monotonic()
            if due > now:
                time.sleep(due - now)
            sent = time.monotonic()
            try:
                resp = self.core.create_namespaced_pod(
                    self.namespace, pod(i), _preload_content=False, _request_timeout=30
                )
                resp.read()
                ok = True
            except Exception as exc:
                ok = False
                with self.lock:
                    self.failures.append(f"p-{i}: {exc}"[:200])
            done = time.monotonic()
            with self.lock:
                if ok:
                    self.latency.append(done - sent)
                self.lag.append(sent - due)
                self.ends.append(done)

    def run(self, threads: int) -> float:
        self.start = time.monotonic() + 0.2
        pool = [threading.Thread(target=self.worker, daemon=True) for _ in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        return max(self.ends) - self.start if self.ends else 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=200.0, help="pod creates per second (200)")
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of load (60)")
    ap.add_argument("--threads", type=int, default=48, help="concurrent creates (48)")
    ap.add_argument("--quick", action="store_true", help="a short smoke run: 10 s")
    ap.add_argument(
        "--no-baseline",
        action="store_true",
        help="skip the baseline phase (the same load into a namespace the webhook ignores)",
    )
    args = ap.parse_args()
    if args.quick:
        args.duration = 10.0
    root = Path(tempfile.mkdtemp(prefix="webhook-load-"))
    cluster = Cluster("webhook-load", root=root)
    say(f"starting a devcluster in {root}")
    cluster.up(nodes=2, shape=NodeShape(cpu="64", memory="256Gi", gpus=8))
    try:
        enable_webhook(cluster)
        st = cluster.state
        assert st is not None
        api = api_client(st, args.threads)
        client.CoreV1Api(api).create_namespace(
            {"metadata": {"name": NAMESPACE, "labels": {ENABLED_LABEL: "true"}}}
        )
        base: Load | None = None
        base_wall = 0.0
        if not args.no_baseline:
            # the same creates where the webhook is not called: what this machine's API
            # server (and this client) can do without us, measured in the same run
            client.CoreV1Api(api).create_namespace({"metadata": {"name": PLAIN_NAMESPACE}})
            say(f"baseline: {int(args.rate * args.duration)} creates, no webhook call")
            base = Load(api, args.rate, args.duration, PLAIN_NAMESPACE)
            base_wall = base.run(args.threads)
        pki = Path(st.dir) / "pki"
        ca = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        admin = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        admin.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
        hook = webhook_url(cluster)
        pod_create = {"kind": "Pod", "operation": "CREATE"}
        api_match = {"type": "admit", "operation": "CREATE"}
        hook_before = buckets(scrape(f"{hook}/metrics", ca), WEBHOOK_SERIES, pod_create)
        api_before = buckets(scrape(f"{st.server}/metrics", admin), APISERVER_SERIES, api_match)
        cpu_before = cpu_by_role(st)
        say(f"creating {int(args.rate * args.duration)} pods at {args.rate:.0f}/s")
        load = Load(api, args.rate, args.duration)
        wall = load.run(args.threads)
        cpu_after = cpu_by_role(st)
        hook_after = buckets(scrape(f"{hook}/metrics", ca), WEBHOOK_SERIES, pod_create)
        api_after = buckets(scrape(f"{st.server}/metrics", admin), APISERVER_SERIES, api_match)
        stored = len(
            json.loads(
                client.CoreV1Api(api)
                .list_namespaced_pod(NAMESPACE, _preload_content=False, _request_timeout=60)
                .data
            )["items"]
        )
    finally:
        cluster.down(quiet=True)
    lat = np.asarray(load.latency) * 1000
    lag = np.asarray(load.lag) * 1000

    def ms(v: float | None) -> float | None:
        return None if v is None else round(v * 1000, 2)

    cpu = {k: round(cpu_after.get(k, 0.0) - cpu_before.get(k, 0.0), 1) for k in cpu_after}
    base_rate = round(len(base.latency) / base_wall, 1) if base is not None and base_wall else None
    rate = len(load.latency) / wall if wall else 0.0
    base_lat = np.asarray(base.latency if base is not None else []) * 1000
    result = {
        "offered_creates_per_s": args.rate,
        "duration_s": args.duration,
        "threads": args.threads,
        "creates": len(load.ends),
        "failed_creates": len(load.failures),
        "pods_stored": stored,
        "creates_per_s": round(rate, 1),
        "wall_s": round(wall, 1),
        "p50_ms": round(float(np.percentile(lat, 50)), 1) if lat.size else None,
        "p99_ms": round(float(np.percentile(lat, 99)), 1) if lat.size else None,
        "max_ms": round(float(lat.max()), 1) if lat.size else None,
        "start_lag_p99_ms": round(float(np.percentile(lag, 99)), 1) if lag.size else None,
        "webhook_handler_p50_ms": ms(quantile(hook_before, hook_after, 0.5)),
        "webhook_handler_p99_ms": ms(quantile(hook_before, hook_after, 0.99)),
        "apiserver_webhook_call_p50_ms": ms(quantile(api_before, api_after, 0.5)),
        "apiserver_webhook_call_p99_ms": ms(quantile(api_before, api_after, 0.99)),
        "webhook_timeout_s": 5,
        "baseline_creates_per_s": base_rate,
        "baseline_failed_creates": len(base.failures) if base is not None else None,
        "baseline_p99_ms": round(float(np.percentile(base_lat, 99)), 1) if base_lat.size else None,
        "ratio_vs_baseline": round(rate / base_rate, 2) if base_rate else None,
        "cpu_s": cpu,
        "cpus": os.cpu_count(),
    }
    rows = [
        ("offered creates/s", f"{args.rate:.0f} for {args.duration:.0f}s, {args.threads} threads"),
        ("achieved creates/s", f"{result['creates_per_s']} ({result['wall_s']}s wall)"),
        ("failed creates", f"{result['failed_creates']} (pods stored: {stored})"),
        (
            "create latency p50/p99/max",
            f"{result['p50_ms']} / {result['p99_ms']} / {result['max_ms']} ms",
        ),
        ("start lag p99", f"{result['start_lag_p99_ms']} ms behind schedule"),
        (
            "baseline (no webhook call)",
            f"{result['baseline_creates_per_s']} creates/s, p99 {result['baseline_p99_ms']} ms, "
            f"{result['baseline_failed_creates']} failed",
        ),
        ("with webhook / baseline", f"{result['ratio_vs_baseline']} (creates/s)"),
        (
            "webhook handler p50/p99",
            f"{result['webhook_handler_p50_ms']} / "
            f"{result['webhook_handler_p99_ms']} ms (its histogram)",
        ),
        (
            "apiserver->webhook call p50/p99",
            f"{result['apiserver_webhook_call_p50_ms']} / "
            f"{result['apiserver_webhook_call_p99_ms']} ms (timeout 5 s)",
        ),
    ]
    rows += [(f"cpu s: {k}", f"{v}") for k, v in sorted(cpu.items(), key=lambda kv: -kv[1])]
    width = max(len(r[0]) for r in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    for f in load.failures[:5]:
        print(f"failed: {f}")
    print(json.dumps(result))
    return 0 if not load.failures else 1


if __name__ == "__main__":
    sys.exit(main())
