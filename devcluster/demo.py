"""``make run``: the whole system on a local cluster, with a live table.

Brings up a devcluster (kwok GPU nodes, two stock kube-schedulers), starts the
pyextender sidecar, controllers and admission webhook, adopts namespace
``demo`` (label ``pyextender.io/enabled=true``), applies the Volcano Jobs in
``examples/demo/volcano-jobs.yaml`` and the plain GPU pods in
``examples/demo/gpu-workload.yaml``, and shows every pod going from Pending to
bound/Running with its gang's phase and the extender's decision (where it was
bound and with what score, or why it cannot be); under the table, each Volcano
Job's phase and the GPUs each queue holds. Pods run until deleted on kwok's
nodes; the sweep Job's pods run 20 s (``pyextender.io/simulated-duration``), so
the demo waits until that Job has completed. Leaves the cluster running and says
how to look at it and how to stop it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config
from rich.console import Console
from rich.live import Live
from rich.table import Table

from devcluster.build import KUBE_VERSION, binary_path
from devcluster.cluster import MODES, Cluster, ClusterState, cycle_socket_path
from devcluster.controllers import enable_controllers
from devcluster.kwok_stages import DURATION_ANNOTATION
from devcluster.nodes import NodeShape
from devcluster.webhook import enable_webhook
from pyextender.api.names import BARRIER_ANNOTATION, ENABLED_LABEL

DEMO = Path(__file__).resolve().parent.parent / "examples" / "demo"
EXAMPLE = DEMO / "gpu-workload.yaml"
JOBS = DEMO / "volcano-jobs.yaml"


def _decisions(url: str) -> dict[str, dict[str, Any]]:
    """Latest filter/prioritize/bind decision per pod, from the sidecar."""
    try:
        with urllib.request.urlopen(f"{url}/debug/decisions", timeout=2) as r:
            rows = json.loads(r.read())
    except Exception:
        return {}
    latest: dict[str, dict[str, Any]] = {}
    for d in rows:
        latest.setdefault(d["pod"], {})[d["verb"]] = d
    return latest


def _failures(core: client.CoreV1Api) -> dict[str, str]:
    """Latest FailedScheduling message per pod name (kube-scheduler's own words)."""
    out: dict[str, tuple[str, str]] = {}
    for e in core.list_namespaced_event("demo", field_selector="reason=FailedScheduling").items:
        when = str(e.last_timestamp or e.event_time or "")
        name = e.involved_object.name
        if name not in out or when >= out[name][0]:
            out[name] = (when, e.message or "")
    return {k: v[1] for k, v in out.items()}


def _why(pod: Any, seen: dict[str, Any], failure: str, held: str = "") -> str:
    """What the sidecar (or kube-scheduler) last said about the pod; ``held``: why its
    PodGroup is not admitted, when the pod is held (gated, or at the barrier) for it."""
    bind = seen.get("bind")
    if held and not pod.spec.node_name:
        return held
    if pod.spec.node_name:
        pri = seen.get("prioritize")
        score = f", score {pri['score']}/10 over {pri['nodes']} nodes" if pri else ""
        return f"bound by pyextender{score}"
    if bind and bind.get("error"):
        return f"bind refused: {bind['error']}"
    filt = seen.get("filter")
    if failure and (not filt or filt["feasible"] == 0):
        # kube-scheduler's own filters ran first; the extender only sees nodes they pass
        return "kube-scheduler: " + failure.split(". ")[0].replace(" are available:", ":")
    if filt:
        if filt["feasible"] == 0:
            return "no node fits: " + "; ".join(filt["reasons"][:2])
        return f"{filt['feasible']} nodes fit; waiting for bind"
    return "waiting for kube-scheduler"


def _gpus(pod: Any) -> int:
    total = 0
    for c in pod.spec.containers:
        req = (c.resources.requests or {}) if c.resources else {}
        total += int(req.get("nvidia.com/gpu", 0))
    return total


def _groups(custom: client.CustomObjectsApi) -> dict[str, tuple[str, str]]:
    """PodGroup name -> (phase, why it is not admitted: its Unschedulable condition's
    message without the gang count and plugin name, else "")."""
    items = custom.list_namespaced_custom_object(
        "scheduling.volcano.sh", "v1beta1", "demo", "podgroups"
    )["items"]
    out = {}
    for g in items:
        status = g.get("status") or {}
        why = next(
            (
                str(c.get("message") or "")
                for c in status.get("conditions") or []
                if c.get("type") == "Unschedulable" and c.get("status") == "True"
            ),
            "",
        )
        out[g["metadata"]["name"]] = (status.get("phase", "Pending"), why.split(": ", 2)[-1])
    return out


def _jobs_and_queues(custom: client.CustomObjectsApi) -> str:
    """One line: each Volcano Job's phase, and what each queue holds (its status.allocated)."""
    jobs = custom.list_namespaced_custom_object("batch.volcano.sh", "v1alpha1", "demo", "jobs")
    phases = [
        f"{j['metadata']['name']} {((j.get('status') or {}).get('state') or {}).get('phase', '-')}"
        for j in jobs["items"]
    ]
    queues = custom.list_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues")
    held = []
    for q in queues["items"]:
        allocated = (q.get("status") or {}).get("allocated") or {}
        gpus = allocated.get("nvidia.com/gpu")
        if gpus:
            held.append(
                f"{q['metadata']['name']} holds {gpus} GPUs, {allocated.get('cpu', 0)} CPUs"
            )
    return f"Volcano Jobs: {', '.join(phases) or '-'}; queues: {', '.join(held) or 'nothing held'}"


def _timed_pods_running(pods: list[Any]) -> bool:
    """A pod that will end by itself (pyextender.io/simulated-duration) has not ended yet."""
    return any(
        p.status.phase not in ("Succeeded", "Failed")
        and DURATION_ANNOTATION in (p.metadata.annotations or {})
        for p in pods
    )


def _table(
    pods: list[Any],
    decisions: dict[str, dict[str, Any]],
    failures: dict[str, str],
    groups: dict[str, tuple[str, str]],
    elapsed: float,
    caption: str = "",
) -> Table:
    bound = sum(1 for p in pods if p.spec.node_name)
    t = Table(
        title=f"pods in namespace demo: {bound}/{len(pods)} bound, {elapsed:.0f}s",
        caption=caption or None,
    )
    for col in ("POD", "GPUS", "GANG (PHASE)", "PHASE", "NODE"):
        t.add_column(col, no_wrap=True)
    t.add_column("DECISION, OR WHY HELD")
    for p in sorted(pods, key=lambda p: p.metadata.name):
        seen = decisions.get(f"demo/{p.metadata.name}", {})
        phase = p.status.phase or "Pending"
        style = "green" if p.spec.node_name else "yellow"
        group = (p.metadata.annotations or {}).get("scheduling.k8s.io/group-name", "")
        # a finished Job's PodGroup is removed by the controllers
        group_phase, not_admitted = groups.get(group, ("done", ""))
        gang = f"{group[:24]} ({group_phase})" if group else "-"
        held = ""
        waiting = not_admitted or "its PodGroup is not admitted yet"
        if p.spec.scheduling_gates:
            phase = "Gated"
            if not group:
                held = "waiting for the PodGroup controller to give it a PodGroup"
            elif group_phase == "Pending":
                held = waiting
        elif (
            BARRIER_ANNOTATION in (p.metadata.annotations or {})
            and not p.spec.node_name
            and group_phase == "Pending"
        ):
            phase = "Held"  # at the framework shim's barrier: the gang is not admitted
            held = waiting
        t.add_row(
            p.metadata.name,
            str(_gpus(p)),
            gang,
            f"[{style}]{phase}[/]",
            p.spec.node_name or "-",
            _why(p, seen, failures.get(p.metadata.name, ""), held),
        )
    return t


_PY_GET = (
    "python3 -c 'import sys,urllib.request as u;"
    "sys.stdout.write(u.urlopen(sys.argv[1]).read().decode())'"
)
"""curl's stand-in where curl is not installed."""


def inspect_commands(st: ClusterState, name: str, pod: str, decided: str = "") -> list[str]:
    """The commands ``make run`` prints at the end, in order; each works when pasted
    into a shell in the repository (tests/e2e/test_demo.py runs every one).
    ``pod`` is described and explained (a pending one: vcctl says why it waits); the
    decision log is asked about ``decided`` (default ``pod``), a pod the sidecar has
    decided about.

    kubectl is the one devcluster built (same version as the API server), put first
    on PATH, so nothing has to be installed by hand.
    """
    kubectl_dir = binary_path("kubectl").parent
    curl = "curl -s" if shutil.which("curl") else _PY_GET
    return [
        f"export KUBECONFIG={st.kubeconfig}",
        f"export PATH={kubectl_dir}:$PATH    # kubectl {KUBE_VERSION}, built by devcluster",
        "kubectl get pods -n demo -o wide",
        "kubectl get vcjob,podgroups -n demo",
        "kubectl get queues",
        f"kubectl describe pod -n demo {pod}    # its gates, events and conditions",
        f".venv/bin/vcctl explain -n demo pod {pod}    # why it waits: its PodGroup, queue",
        "kubectl get nodes -L pyextender.io/supernode",
        f"{curl} {st.extender_url}/metrics | grep ^pyextender_",
        f"{curl} '{st.extender_url}/debug/decisions?pod=demo/{decided or pod}'",
        f"make cluster-status NAME={name}    # processes, ports; logs in {st.logs}/",
        f"make cluster-down NAME={name}    # stops every process of the cluster",
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m devcluster.demo", description=__doc__)
    ap.add_argument("--name", default="demo", help="cluster name (default %(default)s)")
    ap.add_argument("--nodes", type=int, default=8, help="kwok GPU nodes, 4..16 (default 8)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds to watch (default 60)")
    ap.add_argument(
        "--mode",
        choices=MODES,
        default="extender",
        help="extender (stock kube-scheduler + HTTP extender) or framework (kube-scheduler "
        "built with the gRPC shim; gangs wait in Permit) (default %(default)s)",
    )
    args = ap.parse_args(argv)
    console = Console(width=max(Console().width, 160))
    cluster = Cluster(args.name)
    if cluster.state is not None:
        cluster.down(quiet=True)
    st = cluster.up(
        nodes=args.nodes,
        shape=NodeShape(cpu="64", memory="512Gi", gpus=8),
        supernodes=2,
        mode=args.mode,
    )
    cluster.start_sidecar()
    cluster.wait_sidecar_ready()
    if args.mode == "framework":
        console.print(
            f"[bold]sidecar ready[/] (framework mode: kube-scheduler-pyextender calls it over "
            f"gRPC at {st.grpc_socket}, Filter and Reserve on the cycle socket "
            f"{cycle_socket_path(st.grpc_socket)}; HTTP at {st.extender_url} for /metrics and "
            "/debug)"
        )
    else:
        console.print(f"[bold]sidecar ready[/] at {st.extender_url}")
    # framework mode: gang pods wait at the shim's barrier (no gate to lift pod by pod)
    barrier = ["--gang-barrier=scheduler"] if args.mode == "framework" else None
    enable_controllers(cluster, extra=barrier)
    console.print("[bold]controllers ready[/] (Job, PodGroup, Queue, Command; leader elected)")
    enable_webhook(cluster, extra=barrier)
    held = "holds gang pods at the shim's barrier" if barrier else "gates gang pods"
    console.print(f"[bold]admission webhook ready[/] ({held}, validates Volcano objects)")

    cfg = client.Configuration()
    config.load_kube_config(config_file=st.kubeconfig, client_configuration=cfg)
    api = client.ApiClient(cfg)
    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    core.create_namespace({"metadata": {"name": "demo", "labels": {ENABLED_LABEL: "true"}}})
    console.print(f"applying {JOBS.name} (Volcano Jobs) and {EXAMPLE.name} (plain pods)")
    for job in yaml.safe_load_all(JOBS.read_text()):
        custom.create_namespaced_custom_object("batch.volcano.sh", "v1alpha1", "demo", "jobs", job)
    time.sleep(1.0)  # let the gangs queue first; the plain pods then take what is left
    doc = yaml.safe_load(EXAMPLE.read_text())
    for item in doc["items"]:
        core.create_namespaced_pod("demo", item)

    start = time.monotonic()
    last_change = start
    last_bound = -1
    with Live(console=console, refresh_per_second=4) as live:
        while True:
            pods = core.list_namespaced_pod("demo").items
            bound = sum(1 for p in pods if p.spec.node_name)
            now = time.monotonic()
            if bound != last_bound:
                last_bound, last_change = bound, now
            live.update(
                _table(
                    pods,
                    _decisions(st.extender_url),
                    _failures(core),
                    _groups(custom),
                    now - start,
                    _jobs_and_queues(custom),
                )
            )
            # settled: nothing new bound for 5 s (the rest cannot fit) and no pod with a
            # simulated run time still running, or time is up
            quiet = now - last_change > 5 and not _timed_pods_running(pods)
            if quiet or now - start > args.timeout:
                break
            time.sleep(0.5)

    console.print(
        "\n(On kwok's fake nodes pods run until deleted: pretrain keeps its 32 GPUs; "
        "sweep's pods carry pyextender.io/simulated-duration: 20s and end Succeeded, "
        "then the Job is Completed: kubectl get vcjob -n demo.)\n"
        "\n[bold]The cluster keeps running.[/] Look around (copy and paste):"
    )
    pending = sorted(p.metadata.name for p in pods if not p.spec.node_name)
    described = pending[0] if pending else "train-0"
    # A pod kube-scheduler turned down before asking the extender (its own resource
    # check failed on every node) is not in the sidecar's log: ask the log about a
    # pod it has (pending ones first), so the example shows a decision.
    logged = {k.removeprefix("demo/") for k in _decisions(st.extender_url)}
    names = sorted(p.metadata.name for p in pods)
    decided = next((n for n in [*pending, *names] if n in logged), described)
    for line in inspect_commands(st, args.name, described, decided):
        console.print(f"  {line}", highlight=False, markup=False, soft_wrap=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
