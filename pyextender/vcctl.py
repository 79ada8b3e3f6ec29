"""``vcctl``: Volcano's command line for jobs and queues, plus ``explain``.

Flags follow Volcano's vcctl (``-N`` job name, ``-n`` namespace for jobs but
queue name for queues). ``vcctl job run`` creates Volcano's one-task job from
flags (image, replicas, min, requests, limits, scheduler) or the Job in a YAML
file. Suspend/resume go through bus.volcano.sh Commands, as
in Volcano, so the controllers act on them. ``vcctl explain`` prints why a pod
or PodGroup waits (the PodGroup's conditions and the scheduler's events), why a
job waits (its queue's share, its place in the queue, what it waits for, when
it can start) and a queue's allocated / deserved / capability and who waits
(pyextender.vcctl_explain). ``vcctl version`` prints ours and the server's.

Kubernetes configuration is found as kubectl finds it (--kubeconfig,
in-cluster, $KUBECONFIG, ~/.kube/config).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import platform
import sys
import uuid
from collections.abc import Sequence
from typing import Any

import urllib3
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pyextender.api.client import ClientConfigError, api_client
from pyextender.vcctl_explain import Snapshot, explain_job, explain_queue, job_podgroup

BATCH = ("batch.volcano.sh", "v1alpha1")
SCHED = ("scheduling.volcano.sh", "v1beta1")
BUS = ("bus.volcano.sh", "v1alpha1")


def _table(rows: list[list[str]], head: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    lines = [
        "  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) for r in [head, *rows]
    ]
    return "\n".join(line.rstrip() for line in lines)


class Vcctl:
    def __init__(self, kubeconfig: str | None) -> None:
        api = api_client(kubeconfig)
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)

    # -- jobs ----------------------------------------------------------------------
    def job_list(self, ns: str | None) -> str:
        items = (
            self.custom.list_namespaced_custom_object(*BATCH, ns, "jobs")["items"]
            if ns
            else self.custom.list_cluster_custom_object(*BATCH, "jobs")["items"]
        )
        rows = []
        for j in items:
            st = j.get("status") or {}
            spec = j.get("spec") or {}
            replicas = sum(int(t.get("replicas") or 0) for t in spec.get("tasks") or [])
            rows.append(
                [
                    j["metadata"]["name"],
                    j["metadata"].get("creationTimestamp", ""),
                    (st.get("state") or {}).get("phase", "Pending"),
                    str(replicas),
                    str(spec.get("minAvailable", "")),
                    str(st.get("pending", 0)),
                    str(st.get("running", 0)),
                    str(st.get("succeeded", 0)),
                    str(st.get("failed", 0)),
                    spec.get("queue", "default"),
                ]
            )
        head = ["Name", "Creation", "Phase", "Replicas", "Min", "Pending", "Running",
                "Succeeded", "Failed", "Queue"]  # fmt: skip
        return _table(rows, head) if rows else "No resources found"

    def job_run(self, ns: str, body: dict[str, Any]) -> str:
        meta = body.setdefault("metadata", {})
        ns = meta.setdefault("namespace", ns)
        self.custom.create_namespaced_custom_object(*BATCH, ns, "jobs", body)
        return f"run job {meta.get('name')} successfully"

    def job_view(self, ns: str, name: str) -> str:
        job = self.custom.get_namespaced_custom_object(*BATCH, ns, "jobs", name)
        return json.dumps({k: job.get(k) for k in ("metadata", "spec", "status")}, indent=2)

    def _command(self, ns: str, name: str, action: str) -> str:
        job = self.custom.get_namespaced_custom_object(*BATCH, ns, "jobs", name)
        body = {
            "apiVersion": "bus.volcano.sh/v1alpha1",
            "kind": "Command",
            "metadata": {
                "name": f"{name}-{action.lower()}-{uuid.uuid4().hex[:5]}",
                "namespace": ns,
            },
            "action": action,
            "target": {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "name": name,
                "uid": job["metadata"]["uid"],
            },
            "reason": "vcctl",
            "message": f"{action} requested with vcctl",
        }
        self.custom.create_namespaced_custom_object(*BUS, ns, "commands", body)
        return f"{action} sent to job {ns}/{name}"

    def job_delete(self, ns: str, name: str) -> str:
        self.custom.delete_namespaced_custom_object(*BATCH, ns, "jobs", name)
        return f"delete job {ns}/{name} successfully"

    # -- queues --------------------------------------------------------------------
    def queue_create(self, name: str, weight: int, state: str, parent: str) -> str:
        spec: dict[str, Any] = {"weight": weight, "reclaimable": True}
        if parent:
            spec["parent"] = parent
        body = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": name},
            "spec": spec,
        }
        self.custom.create_cluster_custom_object(*SCHED, "queues", body)
        if state == "Closed":
            return self.queue_operate(name, "close", 0)
        return f"create queue {name} successfully"

    def queue_list(self) -> str:
        rows = []
        for q in self.custom.list_cluster_custom_object(*SCHED, "queues")["items"]:
            st = q.get("status") or {}
            spec = q.get("spec") or {}
            rows.append(
                [
                    q["metadata"]["name"],
                    str(spec.get("weight", 1)),
                    st.get("state", ""),
                    str(st.get("inqueue", 0)),
                    str(st.get("pending", 0)),
                    str(st.get("running", 0)),
                    str(st.get("completed", 0)),
                    spec.get("parent", ""),
                ]
            )
        head = ["Name", "Weight", "State", "Inqueue", "Pending", "Running", "Completed", "Parent"]
        return _table(rows, head) if rows else "No resources found"

    def queue_get(self, name: str) -> str:
        q = self.custom.get_cluster_custom_object(*SCHED, "queues", name)
        return json.dumps({k: q.get(k) for k in ("metadata", "spec", "status")}, indent=2)

    def queue_operate(self, name: str, action: str, weight: int) -> str:
        if action == "update":
            if weight <= 0:
                raise SystemExit("vcctl queue operate -a update: --weight must be > 0")
            self.custom.patch_cluster_custom_object(
                *SCHED, "queues", name, {"spec": {"weight": weight}},
                _content_type="application/merge-patch+json",
            )  # fmt: skip
            return f"update queue {name} weight to {weight} successfully"
        verb = {"open": "OpenQueue", "close": "CloseQueue"}[action]
        # the Command's target is an owner reference: the CRD requires the queue's uid
        queue = self.custom.get_cluster_custom_object(*SCHED, "queues", name)
        body = {
            "apiVersion": "bus.volcano.sh/v1alpha1",
            "kind": "Command",
            "metadata": {"generateName": f"{name}-{action}-", "namespace": "default"},
            "action": verb,
            "target": {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "name": name,
                "uid": queue["metadata"]["uid"],
            },
            "reason": "vcctl",
        }
        self.custom.create_namespaced_custom_object(*BUS, "default", "commands", body)
        return f"{verb} sent to queue {name}"

    def queue_delete(self, name: str) -> str:
        self.custom.delete_cluster_custom_object(*SCHED, "queues", name)
        return f"delete queue {name} successfully"

    # -- explain -------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """Every object an explanation of a job or queue reads, listed once."""
        ser = self.core.api_client.sanitize_for_serialization
        classes = client.SchedulingV1Api(self.core.api_client).list_priority_class().items
        return Snapshot(
            nodes=[ser(n) for n in self.core.list_node().items],
            pods=[ser(p) for p in self.core.list_pod_for_all_namespaces().items],
            podgroups=self.custom.list_cluster_custom_object(*SCHED, "podgroups")["items"],
            queues=self.custom.list_cluster_custom_object(*SCHED, "queues")["items"],
            priority_classes={c.metadata.name: int(c.value or 0) for c in classes},
        )

    def explain_job(self, ns: str, name: str) -> str:
        """A Volcano Job, or (for operators' PodGroups) a PodGroup of that name, or of
        the name the Spark operator or KubeRay derives from it."""
        job: dict[str, Any] | None
        try:
            job = self.custom.get_namespaced_custom_object(*BATCH, ns, "jobs", name)
        except ApiException as exc:
            if exc.status != 404:
                raise
            job = None
        snap = self.snapshot()
        group = job_podgroup(snap, job) if job else None
        if job is None:
            # an operator's PodGroup, by its own name or the name the operator gave it:
            # Kubeflow <job>, Spark operator spark-<app>-pg, KubeRay ray-<cluster>-pg
            for candidate in (name, f"spark-{name}-pg", f"ray-{name}-pg"):
                group = snap.groups.get(f"{ns}/{candidate}")
                if group is not None:
                    break
        if job is None and group is None:
            return f"job {ns}/{name}: no Volcano Job or PodGroup of that name"
        return explain_job(snap, job, group, f"{ns}/{name}")

    def explain(self, ns: str, kind: str, name: str) -> str:
        if kind == "job":
            return self.explain_job(ns, name)
        if kind == "queue":
            return explain_queue(self.snapshot(), name)
        out: list[str] = []
        group = name
        if kind == "pod":
            pod = self.core.read_namespaced_pod(name, ns)
            ann = pod.metadata.annotations or {}
            group = ann.get("scheduling.k8s.io/group-name", "")
            gates = [g.name for g in pod.spec.scheduling_gates or []]
            out.append(
                f"pod {ns}/{name}: phase {pod.status.phase}, node {pod.spec.node_name or '-'}"
            )
            out.append(f"  scheduler {pod.spec.scheduler_name}, gates {gates or 'none'}")
            if "pyextender.io/gpu-index" in ann:
                out.append(f"  GPUs chosen at bind: {ann['pyextender.io/gpu-index']}")
            out += self._events(ns, name, "  ")
        if group:
            try:
                pg = self.custom.get_namespaced_custom_object(*SCHED, ns, "podgroups", group)
            except ApiException as exc:
                if exc.status != 404:
                    raise
                out.append(f"podgroup {ns}/{group}: not found (the gang cannot be admitted)")
            else:
                st = pg.get("status") or {}
                spec = pg.get("spec") or {}
                out.append(
                    f"podgroup {ns}/{group}: phase {st.get('phase', 'Pending')}, "
                    f"minMember {spec.get('minMember', 1)}, queue {spec.get('queue', 'default')}, "
                    f"running {st.get('running', 0)}"
                )
                for c in st.get("conditions") or []:
                    out.append(f"  {c.get('type')}={c.get('status')}: {c.get('message', '')}")
                out += self._events(ns, group, "  ")
        return "\n".join(out)

    def _events(self, ns: str, name: str, indent: str) -> list[str]:
        evs = self.core.list_namespaced_event(ns, field_selector=f"involvedObject.name={name}")
        recent = sorted(evs.items, key=lambda e: str(e.last_timestamp or e.event_time or ""))[-5:]
        return [f"{indent}event {e.type} {e.reason}: {e.message}" for e in recent]


def resource_list(text: str) -> dict[str, str]:
    """``cpu=1000m,memory=100Mi`` -> {"cpu": "1000m", "memory": "100Mi"}."""
    out: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, amount = item.partition("=")
        if not sep or not name or not amount:
            raise ValueError(f"{item!r} is not name=quantity")
        out[name] = amount
    return out


def job_from_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The Job ``vcctl job run`` creates: Volcano's one-task job from the flags, or the
    Job in ``--filename``. The task is named ``default0``, the name Volcano's webhook
    gives a nameless first task (ours requires a name)."""
    if args.filename:
        with open(args.filename, encoding="utf-8") as f:
            loaded = yaml.safe_load(f)
        if not isinstance(loaded, dict) or loaded.get("kind") != "Job":
            raise ValueError(f"{args.filename}: not a batch.volcano.sh Job")
        return loaded
    if not args.name:
        raise ValueError("job name cannot be left blank (--name, or --filename)")
    container = {
        "name": args.name,
        "image": args.image,
        "imagePullPolicy": "IfNotPresent",
        "resources": {
            "requests": resource_list(args.requests),
            "limits": resource_list(args.limits),
        },
    }
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": args.name, "namespace": args.namespace},
        "spec": {
            "minAvailable": args.min,
            "schedulerName": args.scheduler,
            "tasks": [
                {
                    "name": "default0",
                    "replicas": args.replicas,
                    "template": {
                        "metadata": {"name": args.name, "labels": {"job.volcano.sh": args.name}},
                        "spec": {"restartPolicy": "OnFailure", "containers": [container]},
                    },
                }
            ],
        },
    }


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vcctl",
        description="Volcano's command line for jobs and queues, plus explain (why a job, pod or "
        "PodGroup waits; a queue's share and who waits) and version.",
    )
    p.add_argument("--kubeconfig", help="kubeconfig path (default: as kubectl finds it)")
    sub = p.add_subparsers(dest="group", required=True, metavar="{job,queue,explain,version}")

    job = sub.add_parser("job", help="Volcano batch jobs")
    jsub = job.add_subparsers(dest="cmd", required=True)
    jl = jsub.add_parser("list", help="list jobs")
    jl.add_argument("-n", "--namespace", default="default")
    jl.add_argument("--all-namespaces", action="store_true")
    jr = jsub.add_parser("run", help="run a one-task job from flags, or the Job in a YAML file")
    jr.add_argument("-N", "--name", default="", help="job name")
    jr.add_argument("-n", "--namespace", default="default")
    jr.add_argument("-i", "--image", default="busybox", help="container image")
    jr.add_argument("-m", "--min", type=int, default=1, help="minAvailable of the job")
    jr.add_argument("-r", "--replicas", type=int, default=1, help="pods of the task")
    jr.add_argument("-R", "--requests", default="cpu=1000m,memory=100Mi", help="per pod")
    jr.add_argument("-L", "--limits", default="cpu=1000m,memory=100Mi", help="per pod")
    jr.add_argument("-S", "--scheduler", default="volcano", help="schedulerName")
    jr.add_argument("-f", "--filename", default="", help="a YAML file holding a Job")
    job_commands = (
        ("view", "show one job"),
        ("suspend", "abort a job (AbortJob command)"),
        ("resume", "resume a job (ResumeJob command)"),
        ("delete", "delete a job"),
    )
    for cmd, text in job_commands:
        c = jsub.add_parser(cmd, help=text)
        c.add_argument("-N", "--name", required=True, help="job name")
        c.add_argument("-n", "--namespace", default="default")

    queue = sub.add_parser("queue", help="Volcano queues")
    qsub = queue.add_subparsers(dest="cmd", required=True)
    qc = qsub.add_parser("create", help="create a queue")
    qc.add_argument("-n", "--name", required=True, help="queue name")
    qc.add_argument("-w", "--weight", type=int, default=1)
    qc.add_argument("-S", "--state", default="Open", choices=["Open", "Closed"])
    qc.add_argument("-p", "--parent", default="", help="parent queue (hierarchy)")
    qsub.add_parser("list", help="list queues")
    for cmd, text in (("get", "show one queue"), ("delete", "delete a queue")):
        c = qsub.add_parser(cmd, help=text)
        c.add_argument("-n", "--name", required=True, help="queue name")
    qo = qsub.add_parser("operate", help="open, close or re-weight a queue")
    qo.add_argument("-n", "--name", required=True, help="queue name")
    qo.add_argument("-a", "--action", required=True, choices=["open", "close", "update"])
    qo.add_argument("-w", "--weight", type=int, default=0)

    ex = sub.add_parser(
        "explain",
        help="why a job, pod or PodGroup waits; a queue's share and who waits in it",
    )
    ex.add_argument("kind", choices=["job", "queue", "pod", "podgroup"])
    ex.add_argument("name")
    ex.add_argument("-n", "--namespace", default="default", help="(not used for a queue)")
    sub.add_parser("version", help="vcctl's version and the server's")
    return p


def version(kubeconfig: str | None) -> str:
    """Our version and Python's, then the API server's and the Volcano APIs it serves."""
    try:
        ours = importlib.metadata.version("pyextender")
    except importlib.metadata.PackageNotFoundError:
        ours = "unknown (not installed)"
    lines = [f"vcctl (pyextender) {ours}, Python {platform.python_version()}"]
    try:
        api = api_client(kubeconfig)
        info = client.VersionApi(api).get_code()
        groups = client.ApisApi(api).get_api_versions().groups
    except (ClientConfigError, ApiException, OSError, urllib3.exceptions.HTTPError) as exc:
        lines.append(f"server: not reachable ({type(exc).__name__}: {exc})".splitlines()[0])
        return "\n".join(lines)
    lines.append(f"server: Kubernetes {info.git_version}")
    volcano = sorted(
        g.preferred_version.group_version for g in groups if g.name.endswith(".volcano.sh")
    )
    lines.append(f"Volcano APIs served: {', '.join(volcano) or 'none (CRDs not installed)'}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> str:
    if args.group == "version":
        return version(args.kubeconfig)
    # a Job from flags or a file is checked before any cluster is asked
    run_body = job_from_flags(args) if getattr(args, "cmd", "") == "run" else None
    v = Vcctl(args.kubeconfig)
    if args.group == "explain":
        return v.explain(args.namespace, args.kind, args.name)
    if args.group == "job":
        if args.cmd == "list":
            return v.job_list(None if args.all_namespaces else args.namespace)
        if run_body is not None:
            return v.job_run(args.namespace, run_body)
        if args.cmd == "view":
            return v.job_view(args.namespace, args.name)
        if args.cmd == "delete":
            return v.job_delete(args.namespace, args.name)
        action = "AbortJob" if args.cmd == "suspend" else "ResumeJob"
        return v._command(args.namespace, args.name, action)
    if args.cmd == "create":
        return v.queue_create(args.name, args.weight, args.state, args.parent)
    if args.cmd == "list":
        return v.queue_list()
    if args.cmd == "get":
        return v.queue_get(args.name)
    if args.cmd == "delete":
        return v.queue_delete(args.name)
    return v.queue_operate(args.name, args.action, args.weight)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        print(run(args))
    except (ClientConfigError, ValueError, OSError) as exc:
        print(f"vcctl: {exc}", file=sys.stderr)
        return 2
    except ApiException as exc:
        reason = exc.reason
        with contextlib.suppress(ValueError):  # the API server's message, when it sent one
            reason = json.loads(exc.body or "{}").get("message", reason)
        print(f"vcctl: {reason}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
