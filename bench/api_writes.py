"""CPU per API write: the generated kubernetes client against libcurl (RawApi), same run.

The sidecar writes once or twice per pod it schedules: the Binding (extender
mode), a gang member's gate lift, per gang its PodGroup's status, release and
an event. This bench sends the same writes both ways to a devcluster's real
kube-apiserver (TLS, client certificate), alternating blocks of --block
requests so both see the same machine, and reports per request the calling
thread's CPU time (CLOCK_THREAD_CPUTIME_ID: what the sidecar's API threads pay)
and the wall time, p50 / p99.

  generated : client.CoreV1Api(...).create_namespaced_binding /
              patch_namespaced_pod with _preload_content=False and the reply
              read as bytes (what the sidecar did before: the best use of it)
  libcurl   : pyextender.api.raw_requests.RawApi.post / .patch (what it does now)

Then what each write costs the API server and etcd (their CPU over a block of
--pods sequential requests of one kind, from /proc, per request), through
libcurl only, in --rounds alternating rounds:

  binding  : a pod's Binding (every pod; kube-scheduler's own in stock mode),
             to a node name no kwok manages, so no status write follows
  lift     : removing a gang member's scheduling gate, the JSON patch the
             actuator sends (extender mode: one per gang member)
  annotate : a merge patch of one pod annotation (the size of a small update)
  lift-sa  : the lift, sent as a ServiceAccount granted what the chart grants the
             sidecar (pods patch, podgroups release), with a bearer token
  lift-sa-hold : the same, with the chart's hold policy in force (the
             ValidatingAdmissionPolicy that lets only holders of "release" lift
             our gate: its match condition and authorization check run on each)
  annotate-sa, annotate-sa-hold : the annotation patch as that ServiceAccount,
             without and with the policy (any pod update in an adopted namespace
             pays its match condition)

These are the floor under a gang pod's cost in extender mode: stock kube-scheduler
writes a Binding per pod; a gated gang member needs the lift as well.

Usage: python bench/api_writes.py [--pods 400] [--block 50] [--rounds 2]
Last line: one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
from kubernetes import client, config

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import contextlib
import subprocess
from collections.abc import Iterator

import yaml

from devcluster import build
from devcluster.cluster import Cluster
from devcluster.nodes import NodeShape
from pyextender.api.client import body_of
from pyextender.api.names import ENABLED_LABEL, GANG_GATE
from pyextender.api.raw_requests import JSON_PATCH, MERGE_PATCH, RawApi
from pyextender.server.actuator import lift_patch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from phase_cost import HZ, cpu_ticks

NS = "default"
Write = Callable[[str, int], None]


def say(msg: str) -> None:
    print(f"bench/api_writes: {msg}", file=sys.stderr, flush=True)


SERVER = ("kube-apiserver", "etcd")
"""The processes whose CPU per request the server-side part reports."""
UNMANAGED_NODE = "no-kwok-here"
"""Bindings of the server-side part go to this node name: no node object, so kwok
writes no pod status after them and the figure is the Binding's alone."""


def _pod(name: str, gated: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": "nobody", "containers": [{"name": "c", "image": "x"}]}
    if gated:
        spec["schedulingGates"] = [{"name": GANG_GATE}]
    return {"metadata": {"name": name}, "spec": spec}


def _binding(name: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {
            "name": name,
            "namespace": NS,
            "annotations": {"pyextender.io/gpu-index": "0"},
        },
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


def writers(api: client.ApiClient, node: str) -> dict[str, dict[str, Write]]:
    core = client.CoreV1Api(api)
    raw = RawApi(api.configuration)
    binding: Any = core.create_namespaced_binding
    patch: Any = core.patch_namespaced_pod

    def gen_bind(name: str, i: int) -> None:
        body_of(binding(NS, _binding(name, node), _preload_content=False))

    def gen_patch(name: str, i: int) -> None:
        body = {"metadata": {"annotations": {"n": str(i)}}}
        body_of(patch(name, NS, body, _content_type=MERGE_PATCH, _preload_content=False))

    def raw_bind(name: str, i: int) -> None:
        raw.post(f"/api/v1/namespaces/{NS}/pods/{name}/binding", _binding(name, node))

    def raw_patch(name: str, i: int) -> None:
        raw.patch(
            f"/api/v1/namespaces/{NS}/pods/{name}", {"metadata": {"annotations": {"n": str(i)}}}
        )

    return {
        "generated": {"binding": gen_bind, "patch": gen_patch},
        "libcurl": {"binding": raw_bind, "patch": raw_patch},
    }


Server = Callable[[dict[str, Any]], None]


def raw_writers(api: client.ApiClient, sidecar: client.Configuration) -> dict[str, Server]:
    """The server-side part's writes, each given the pod as created (name, uid)."""
    raw = RawApi(api.configuration)
    as_sidecar = RawApi(sidecar)

    def path(pod: dict[str, Any]) -> str:
        return f"/api/v1/namespaces/{NS}/pods/{pod['metadata']['name']}"

    def binding(pod: dict[str, Any]) -> None:
        raw.post(path(pod) + "/binding", _binding(pod["metadata"]["name"], UNMANAGED_NODE))

    def lift(pod: dict[str, Any]) -> None:  # the actuator's own patch
        raw.patch(path(pod), lift_patch(pod["metadata"]["uid"], 0), JSON_PATCH)

    def annotate(pod: dict[str, Any]) -> None:
        raw.patch(path(pod), {"metadata": {"annotations": {"pyextender.io/bench": "1"}}})

    def lift_sa(pod: dict[str, Any]) -> None:
        as_sidecar.patch(path(pod), lift_patch(pod["metadata"]["uid"], 0), JSON_PATCH)

    def annotate_sa(pod: dict[str, Any]) -> None:
        as_sidecar.patch(path(pod), {"metadata": {"annotations": {"pyextender.io/bench": "1"}}})

    return {
        "binding": binding,
        "lift": lift,
        "annotate": annotate,
        "lift-sa": lift_sa,
        "lift-sa-hold": lift_sa,
        "annotate-sa": annotate_sa,
        "annotate-sa-hold": annotate_sa,
    }


SIDECAR_SA = "bench-sidecar"
NOBODY = "bench-nobody"
HOLD_TEMPLATE = "templates/hold-policy.yaml"


PATCH_PODS = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "patch"]}
RELEASE = {"apiGroups": ["scheduling.volcano.sh"], "resources": ["podgroups"], "verbs": ["release"]}


def _grant(api: client.ApiClient, name: str, subject: dict[str, str], rules: list[Any]) -> None:
    """A ClusterRole ``name`` of ``rules``, bound to ``subject``."""
    rbac = client.RbacAuthorizationV1Api(api)
    rbac.create_cluster_role({"metadata": {"name": name}, "rules": rules})
    role = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}
    rbac.create_cluster_role_binding(
        {"metadata": {"name": name}, "roleRef": role, "subjects": [subject]}
    )


def sidecar_identity(api: client.ApiClient) -> client.Configuration:
    """A connection as a ServiceAccount with what the chart grants the sidecar for a
    lift (patch pods; the hold policy's verb), by bearer token, as the sidecar in a pod
    authenticates."""
    core = client.CoreV1Api(api)
    core.create_namespaced_service_account(NS, {"metadata": {"name": SIDECAR_SA}})
    account = {"kind": "ServiceAccount", "name": SIDECAR_SA, "namespace": NS}
    _grant(api, SIDECAR_SA, account, [PATCH_PODS, RELEASE])
    token = core.create_namespaced_service_account_token(
        SIDECAR_SA, NS, {"spec": {"expirationSeconds": 3600}}
    ).status.token
    cfg = client.Configuration()
    cfg.host, cfg.ssl_ca_cert = api.configuration.host, api.configuration.ssl_ca_cert
    cfg.api_key, cfg.api_key_prefix = {"BearerToken": token}, {"BearerToken": "Bearer"}
    return cfg


def hold_policy() -> list[dict[str, Any]]:
    """The chart's hold policy, then its bindings, as ``helm template`` renders them."""
    helm = build.ensure_binaries(quiet=True, only=["helm"])["helm"]
    chart = Path(__file__).resolve().parent.parent / "charts" / "pyextender"
    out = subprocess.run(
        [str(helm), "template", "pyextender", str(chart), "-s", HOLD_TEMPLATE],
        capture_output=True, text=True, check=True, timeout=120,
    ).stdout  # fmt: skip
    return [d for d in yaml.safe_load_all(out) if d]


@contextlib.contextmanager
def policy_in_force(api: client.ApiClient, docs: list[dict[str, Any]]) -> Iterator[None]:
    """The hold policy applied (waiting until the API server enforces it), then removed."""
    reg = client.AdmissionregistrationV1Api(api)
    policy, *bindings = docs
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    if not rbac.list_cluster_role(field_selector=f"metadata.name={NOBODY}").items:
        # the probe's user: may patch pods, lacks the policy's verb
        user = {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": NOBODY}
        _grant(api, NOBODY, user, [PATCH_PODS])
    # the chart binds it to adopted namespaces: adopt this one (no webhook runs here)
    core.patch_namespace(NS, {"metadata": {"labels": {ENABLED_LABEL: "true"}}})
    reg.create_validating_admission_policy(policy)
    for binding in bindings:
        reg.create_validating_admission_policy_binding(binding)
    probe = core.create_namespaced_pod(NS, _pod("hold-probe", gated=True))
    nobody = client.ApiClient(api.configuration)
    nobody.set_default_header("Impersonate-User", NOBODY)

    def refused() -> bool:  # a dry-run lift by a user without the verb
        try:
            client.CoreV1Api(nobody).patch_namespaced_pod(
                "hold-probe", NS, lift_patch(probe.metadata.uid, 0), dry_run="All"
            )
        except client.ApiException as exc:
            if exc.status != 403:
                raise
            return "may not lift" in str(exc.body)  # else RBAC's 403, not propagated yet
        return False

    def until(enforced: bool) -> None:
        deadline = time.monotonic() + 30
        while refused() != enforced:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the hold policy not {'in force' if enforced else 'gone'}")
            time.sleep(0.2)

    try:
        until(enforced=True)
        yield
    finally:
        for binding in bindings:
            reg.delete_validating_admission_policy_binding(binding["metadata"]["name"])
        reg.delete_validating_admission_policy(policy["metadata"]["name"])
        until(enforced=False)  # the API server stops enforcing it a moment later
        core.delete_namespaced_pod("hold-probe", NS, grace_period_seconds=0)


def server_side(
    core: client.CoreV1Api,
    ways: dict[str, Server],
    pods: int,
    rounds: int,
    marker: str,
    around: dict[str, Callable[[], contextlib.AbstractContextManager[None]]] | None = None,
) -> dict[str, dict[str, float]]:
    """CPU ms per request of the API server and etcd, per kind of write (median of the
    rounds); each round creates ``pods`` fresh pods per kind (gated for the lifts);
    ``around[kind]`` is entered around that kind's writes (the hold policy)."""
    per: dict[str, dict[str, list[float]]] = {w: {p: [] for p in SERVER} for w in ways}
    for rnd in range(rounds):
        for kind, write in ways.items():
            say(f"server side, round {rnd + 1}/{rounds}: {pods} x {kind}")
            gated = kind.startswith("lift")
            made = [
                msgspec.json.decode(body_of(core.create_namespaced_pod(
                    NS, _pod(f"s{rnd}-{kind}-{i}", gated=gated), _preload_content=False
                )))
                for i in range(pods)
            ]  # fmt: skip
            with (around or {}).get(kind, contextlib.nullcontext)():
                time.sleep(1.0)  # the creates' watch events are out
                before = cpu_ticks(marker)
                for pod in made:
                    write(pod)
                time.sleep(0.5)  # ... and this block's
                after = cpu_ticks(marker)
            for proc in SERVER:
                per[kind][proc].append((after[proc] - before[proc]) * 1000 / HZ / pods)
            core.delete_collection_namespaced_pod(NS, grace_period_seconds=0)
            time.sleep(1.0)
    out = {
        kind: {proc: round(float(np.median(v)), 2) for proc, v in procs.items()}
        for kind, procs in per.items()
    }
    print(f"\nAPI server and etcd CPU per request (ms; median of {rounds} rounds of {pods}):")
    for kind, procs in out.items():
        rounds_text = " / ".join(f"{x:.2f}" for x in per[kind]["kube-apiserver"])
        print(
            f"{kind:16s} kube-apiserver {procs['kube-apiserver']:.2f} ({rounds_text})  "
            f"etcd {procs['etcd']:.2f}"
        )
    for kind in [k for k in per if k.endswith("-hold") and k[: -len("-hold")] in per]:
        # the same write without the policy ran just before, in the same round: pairs
        base, held = per[kind[: -len("-hold")]]["kube-apiserver"], per[kind]["kube-apiserver"]
        diffs = [h - b for b, h in zip(base, held, strict=True)]
        extra = round(float(np.median(diffs)), 2)
        out[kind]["kube-apiserver_extra"] = extra
        print(
            f"{kind}: the hold policy adds {extra:+.2f} ms of API server CPU per request "
            f"(median of the rounds' paired differences: "
            + " / ".join(f"{d:+.2f}" for d in diffs)
            + ")"
        )
    return out


def timed(write: Write, name: str, i: int) -> tuple[float, float]:
    """(thread CPU µs, wall µs) of one write."""
    c0, w0 = time.thread_time_ns(), time.perf_counter_ns()
    write(name, i)
    return (time.thread_time_ns() - c0) / 1e3, (time.perf_counter_ns() - w0) / 1e3


def pct(xs: list[float]) -> dict[str, float]:
    a = np.asarray(xs)
    return {
        "p50": round(float(np.percentile(a, 50)), 1),
        "p99": round(float(np.percentile(a, 99)), 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pods", type=int, default=400, help="pods (one Binding, one PATCH each way)")
    ap.add_argument("--block", type=int, default=50, help="requests per alternating block")
    ap.add_argument(
        "--rounds", type=int, default=2, help="rounds of the server-side part (each kind once)"
    )
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-api-writes-"))
    cluster = Cluster(f"bench-writes-{os.getpid()}", root=root)
    say(f"starting a devcluster (1 node) in {root}")
    st = cluster.up(nodes=1, shape=NodeShape(cpu="64", memory="512Gi", gpus=8), timeout=600)
    try:
        cfg = client.Configuration()
        config.load_kube_config(config_file=st.kubeconfig, client_configuration=cfg)
        api = client.ApiClient(cfg)
        core = client.CoreV1Api(api)
        node = core.list_node().items[0].metadata.name
        ways = writers(api, node)
        names = {w: [f"{w[:3]}-{i}" for i in range(args.pods)] for w in ways}
        say(f"creating {2 * args.pods} pods no scheduler picks up")
        for w in ways:
            for n in names[w]:
                body_of(core.create_namespaced_pod(NS, _pod(n), _preload_content=False))
        cpu: dict[str, dict[str, list[float]]] = {w: {"binding": [], "patch": []} for w in ways}
        wall: dict[str, dict[str, list[float]]] = {w: {"binding": [], "patch": []} for w in ways}
        for w in ways:  # warm: connections open, code paths loaded
            ways[w]["patch"](names[w][0], -1)
        for op in ("patch", "binding"):
            say(f"{op}: {args.pods} per way, alternating blocks of {args.block}")
            for start in range(0, args.pods, args.block):
                for w in ways:
                    for i in range(start, min(start + args.block, args.pods)):
                        c, t = timed(ways[w][op], names[w][i], i)
                        cpu[w][op].append(c)
                        wall[w][op].append(t)
        out: dict[str, Any] = {"bench": "api-writes", "pods": args.pods, "ops": {}}
        heads = ("CPU p50", "CPU p99", "wall p50", "wall p99")
        print(f"{'op':8s} {'client':10s} " + " ".join(f"{h:>9s}" for h in heads) + "  (µs)")
        for op in ("binding", "patch"):
            out["ops"][op] = {}
            for w in ways:
                cpu_us, wall_us = pct(cpu[w][op]), pct(wall[w][op])
                out["ops"][op][w] = {"cpu_us": cpu_us, "wall_us": wall_us}
                figures = (cpu_us["p50"], cpu_us["p99"], wall_us["p50"], wall_us["p99"])
                print(f"{op:8s} {w:10s} " + " ".join(f"{x:9.1f}" for x in figures))
            gen = out["ops"][op]["generated"]["cpu_us"]["p50"]
            lib = out["ops"][op]["libcurl"]["cpu_us"]["p50"]
            out["ops"][op]["cpu_p50_ratio_generated_over_libcurl"] = round(gen / lib, 2)
            print(f"{op:8s} CPU p50 generated / libcurl = {gen / lib:.2f}")
        server = raw_writers(api, sidecar_identity(api))
        docs = hold_policy()
        out["server_cpu_ms"] = server_side(
            core, server, args.pods, args.rounds, str(root),
            around={k: lambda: policy_in_force(api, docs) for k in server if k.endswith("-hold")},
        )  # fmt: skip
        print(json.dumps(out))
    finally:
        cluster.down(quiet=True)


if __name__ == "__main__":
    main()
