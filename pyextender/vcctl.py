"""``vcctl``: Volcano's command line for jobs, queues and pods, plus ``explain``.

The command tree, flags and list columns follow Volcano's vcctl (``cmd/cli/*.go``,
``pkg/cli/{job,queue,pod,util}``): ``job run|list|view|suspend|resume|delete``,
``queue create|delete|operate|list|get``, ``pod list``, ``version``; ``jobflow``
and ``jobtemplate`` exit with ``NOT_SUPPORTED`` naming what to use instead.
``-N`` is a job's name, ``-n`` the namespace for jobs and pods but the queue's
name for queues. As in Volcano every command takes ``--kubeconfig``/``-k`` and
``--master``/``-s`` after its name; ours also takes them (and ``--namespace``)
before the command. ``vcctl job run`` creates Volcano's one-task job from
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
from datetime import UTC, datetime
from typing import Any

import urllib3
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pyextender.api import names
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


NOT_SUPPORTED = 3
"""Exit code of a Volcano command pyextender does not implement (jobflow, jobtemplate)."""

JOB_TYPE_LABEL = "volcano.sh/job-type"
"""Volcano's label for a Job's type; Volcano's list shows "Batch" without it."""


def _age(stamp: str | None, now: datetime | None = None) -> str:
    """``2026-11-23T10:00:00Z`` -> ``3h12m`` (as kubectl prints ages); "" when unknown."""
    if not stamp:
        return ""
    try:
        then = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return ""
    seconds = max(0, int(((now or datetime.now(UTC)) - then).total_seconds()))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours}h" if hours else f"{days}d"
    if hours:
        return f"{hours}h{minutes}m" if minutes else f"{hours}h"
    if minutes:
        return f"{minutes}m{secs}s" if secs and minutes < 10 else f"{minutes}m"
    return f"{secs}s"


def pod_row(pod: dict[str, Any], now: datetime | None = None) -> list[str]:
    """Volcano's pod list row: Name, Ready (ready/containers), Status, Restart, Age."""
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for c in statuses if c.get("ready"))
    restarts = sum(int(c.get("restartCount") or 0) for c in statuses)
    reason = status.get("reason") or status.get("phase") or "Pending"
    for c in statuses:  # a waiting or terminated container says more than the phase
        state = c.get("state") or {}
        detail = (state.get("waiting") or state.get("terminated") or {}).get("reason")
        if detail and detail != "PodInitializing":
            reason = detail
    if reason == "Pending" and spec.get("schedulingGates"):
        reason = "SchedulingGated"  # as kubectl shows a gated pod
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        reason = "Terminating"
    return [
        pod["metadata"]["name"],
        f"{ready}/{len(spec.get('containers') or [])}",
        reason,
        str(restarts),
        _age(pod["metadata"].get("creationTimestamp"), now),
    ]


def job_row(job: dict[str, Any], all_namespaces: bool) -> list[str]:
    """Volcano's job list row (``pkg/cli/job/list.go``)."""
    st = job.get("status") or {}
    spec = job.get("spec") or {}
    meta = job["metadata"]
    replicas = sum(int(t.get("replicas") or 0) for t in spec.get("tasks") or [])
    row = [
        meta["name"],
        str(meta.get("creationTimestamp") or "")[:10],  # a date, as Volcano prints it
        (st.get("state") or {}).get("phase") or "Pending",
        (meta.get("labels") or {}).get(JOB_TYPE_LABEL) or "Batch",
        str(replicas),
        str(st.get("minAvailable", spec.get("minAvailable", 0))),
        *(str(st.get(k, 0)) for k in ("pending", "running", "succeeded", "failed", "unknown")),
        str(st.get("retryCount", 0)),
    ]
    return [meta.get("namespace", ""), *row] if all_namespaces else row


JOB_COLUMNS = ["Name", "Creation", "Phase", "JobType", "Replicas", "Min", "Pending", "Running",
               "Succeeded", "Failed", "Unknown", "RetryCount"]  # fmt: skip
QUEUE_COLUMNS = ["Name", "Weight", "State", "Inqueue", "Pending", "Running", "Unknown"]
POD_COLUMNS = ["Name", "Ready", "Status", "Restart", "Age"]


def queue_row(q: dict[str, Any]) -> list[str]:
    """Volcano's queue list/get row (``pkg/cli/queue/list.go``)."""
    st = q.get("status") or {}
    spec = q.get("spec") or {}
    return [
        q["metadata"]["name"],
        str(spec.get("weight", 1)),
        st.get("state", ""),
        *(str(st.get(k, 0)) for k in ("inqueue", "pending", "running", "unknown")),
    ]


class Vcctl:
    def __init__(self, kubeconfig: str | None, master: str | None = None) -> None:
        api = api_client(kubeconfig)
        if master:  # Volcano's --master: the API server's address overrides the kubeconfig's
            api.configuration.host = master
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)

    # -- jobs ----------------------------------------------------------------------
    def job_list(
        self, ns: str | None, queue: str = "", scheduler: str = "", selector: str = ""
    ) -> str:
        """Volcano's filters: queue and scheduler exactly, selector as a part of the name."""
        items = (
            self.custom.list_namespaced_custom_object(*BATCH, ns, "jobs")["items"]
            if ns
            else self.custom.list_cluster_custom_object(*BATCH, "jobs")["items"]
        )
        rows = []
        for j in items:
            spec = j.get("spec") or {}
            if queue and (spec.get("queue") or "default") != queue:
                continue
            if scheduler and spec.get("schedulerName", "") != scheduler:
                continue
            if selector and selector not in j["metadata"]["name"]:
                continue
            rows.append(job_row(j, ns is None))
        head = ["Namespace", *JOB_COLUMNS] if ns is None else JOB_COLUMNS
        return _table(rows, head) if rows else "No resources found"

    def job_run(self, ns: str, body: dict[str, Any]) -> str:
        meta = body.setdefault("metadata", {})
        ns = meta.setdefault("namespace", ns)
        self.custom.create_namespaced_custom_object(*BATCH, ns, "jobs", body)
        return f"run job {meta.get('name')} successfully"

    def job_view(self, ns: str, name: str) -> str:
        job = self.custom.get_namespaced_custom_object(*BATCH, ns, "jobs", name)
        evs = self.core.list_namespaced_event(ns, field_selector=f"involvedObject.name={name}")
        ser = self.core.api_client.sanitize_for_serialization
        return describe_job(job, [ser(e) for e in evs.items])

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
        rows = [
            queue_row(q) for q in self.custom.list_cluster_custom_object(*SCHED, "queues")["items"]
        ]
        return _table(rows, QUEUE_COLUMNS) if rows else "No resources found"

    def queue_get(self, name: str) -> str:
        """One queue's row under the list's header, as Volcano prints it."""
        return _table([queue_row(self.custom.get_cluster_custom_object(*SCHED, "queues", name))],
                      QUEUE_COLUMNS)  # fmt: skip

    # -- pods ----------------------------------------------------------------------
    def pod_list(self, ns: str | None, job: str = "", queue: str = "") -> str:
        """Pods of Volcano Jobs (label volcano.sh/job-name), of one job, or of one queue
        (a Job's pods by label, other workloads' pods by the queue annotation)."""
        ser = self.core.api_client.sanitize_for_serialization
        selector = f"{names.VOLCANO_JOB_NAME}={job}" if job else names.VOLCANO_JOB_NAME
        if queue and not job:
            selector = ""
        listed = (
            self.core.list_namespaced_pod(ns, label_selector=selector)
            if ns
            else self.core.list_pod_for_all_namespaces(label_selector=selector)
        )
        pods: list[dict[str, Any]] = [ser(p) for p in listed.items]
        if queue:

            def in_queue(p: dict[str, Any]) -> bool:
                meta = p.get("metadata") or {}
                return (meta.get("labels") or {}).get(names.VOLCANO_QUEUE_NAME) == queue or (
                    meta.get("annotations") or {}
                ).get(names.POD_QUEUE_ANNOTATION) == queue

            if job and pods and not all(in_queue(p) for p in pods):
                raise ValueError(f"the job {job} does not match the queue {queue}")
            pods = [p for p in pods if in_queue(p)]
        rows = [pod_row(p) for p in pods]
        return _table(rows, POD_COLUMNS) if rows else "No resources found"

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
        ann: dict[str, str] = {}
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
                own = ann.get(names.OWN_PODGROUP_ANNOTATION) == "true"
                why = (
                    "the pod's own, not made yet: the PodGroup controller creates it (a "
                    "refusal is a FailedCreatePodGroup event on the pod)"
                    if own
                    else "the gang cannot be admitted"
                )
                out.append(f"podgroup {ns}/{group}: not found ({why})")
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


def describe_job(job: dict[str, Any], events: list[dict[str, Any]]) -> str:
    """``vcctl job view``: the sections Volcano prints (``pkg/cli/job/view.go``: Name,
    Namespace, Labels, Annotations, API Version, Kind, Metadata, Spec with its tasks,
    Status with its State, then Events), in our own layout."""
    meta = job.get("metadata") or {}
    spec = job.get("spec") or {}
    st = job.get("status") or {}
    labels = json.dumps(meta["labels"]) if meta.get("labels") else "<none>"
    notes = json.dumps(meta["annotations"]) if meta.get("annotations") else "<none>"
    out = [
        f"Name:         {meta.get('name', '')}",
        f"Namespace:    {meta.get('namespace', '')}",
        f"Labels:       {labels}",
        f"Annotations:  {notes}",
        f"API Version:  {job.get('apiVersion', '')}",
        f"Kind:         {job.get('kind', '')}",
        "Metadata:",
        f"  Creation Timestamp:  {meta.get('creationTimestamp', '')}",
        f"  Generation:          {meta.get('generation', '')}",
        f"  Resource Version:    {meta.get('resourceVersion', '')}",
        f"  UID:                 {meta.get('uid', '')}",
        "Spec:",
        f"  Min Available:   {spec.get('minAvailable', 0)}",
        f"  Queue:           {spec.get('queue') or 'default'}",
        f"  Scheduler Name:  {spec.get('schedulerName', '')}",
        f"  Max Retry:       {spec.get('maxRetry', '')}",
        "  Plugins:" + ("" if spec.get("plugins") else "  <none>"),
    ]
    for plugin, plugin_args in (spec.get("plugins") or {}).items():
        out.append(f"    {plugin}: {plugin_args}")
    out.append("  Tasks:")
    for task in spec.get("tasks") or []:
        out.append(f"  - Name:      {task.get('name', '')}")
        out.append(f"    Replicas:  {task.get('replicas', 0)}")
        pod_spec = (task.get("template") or {}).get("spec") or {}
        for c in pod_spec.get("containers") or []:
            res = c.get("resources") or {}
            out.append(f"    Container {c.get('name', '')}: image {c.get('image', '')}")
            for kind in ("requests", "limits"):
                amounts = ", ".join(f"{k}={v}" for k, v in (res.get(kind) or {}).items())
                out.append(f"      {kind.capitalize()}: {amounts or '<none>'}")
        out.append(f"    Restart Policy:  {pod_spec.get('restartPolicy', '')}")
    out.append("Status:")
    counts = (("pending", "Pending"), ("running", "Running"), ("succeeded", "Succeeded"),
              ("failed", "Failed"), ("terminating", "Terminating"), ("unknown", "Unknown"),
              ("retryCount", "RetryCount"), ("minAvailable", "Min Available"),
              ("version", "Version"))  # fmt: skip
    for key, label in counts:  # Volcano prints only the non-zero ones
        if st.get(key):
            out.append(f"  {label + ':':<15}{st[key]}")
    state = st.get("state") or {}
    out += ["  State:", f"    Phase:  {state.get('phase') or 'Pending'}"]
    if state.get("reason") or state.get("message"):
        out.append(f"    Reason: {state.get('reason', '')} {state.get('message', '')}".rstrip())
    if st.get("conditions"):
        out.append("  Conditions:")
        for cond in st["conditions"]:
            out.append(f"    {cond.get('status', '')}  {cond.get('lastTransitionTime', '')}")
    if not events:
        out.append("Events:  <none>")
        return "\n".join(out)
    rows = []
    for e in sorted(events, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or "")):
        count = int(e.get("count") or 1)
        age = _age(e.get("lastTimestamp") or e.get("eventTime"))
        if count > 1:
            age = f"{age} (x{count} over {_age(e.get('firstTimestamp'))})"
        source = (e.get("source") or {}).get("component") or e.get("reportingComponent") or ""
        message = str(e.get("message", "")).strip()
        rows.append([e.get("type", ""), e.get("reason", ""), age, source, message])
    out += ["Events:", _table(rows, ["Type", "Reason", "Age", "From", "Message"])]
    return "\n".join(out)


def resource_list(text: str) -> dict[str, str]:
    """``cpu=1000m,memory=100Mi`` -> {"cpu": "1000m", "memory": "100Mi"}."""
    out: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, amount = item.partition("=")
        if not sep or not name or not amount:
            raise ValueError(f"{item!r} is not name=quantity")
        out[name] = amount
    return out


def job_from_flags(args: argparse.Namespace, ns: str | None = None) -> dict[str, Any]:
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
        "metadata": {"name": args.name, "namespace": ns or getattr(args, "namespace", "default")},
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


FLOW_COMMANDS = ("create", "list", "get", "delete", "describe")
"""Volcano's jobflow and jobtemplate commands."""


def _common(p: argparse.ArgumentParser, namespace: str) -> None:
    """Volcano's flags of every command (``pkg/cli/util``: --kubeconfig/-k, --master/-s),
    plus the namespace: ``-n/--namespace`` ("short"), ``--namespace`` only ("long", where
    ``-n`` is a queue's name) or none. SUPPRESS keeps a value given before the command
    when it is not repeated after it."""
    hide = argparse.SUPPRESS
    p.add_argument("-k", "--kubeconfig", default=hide,
                   help="kubeconfig path (default: as kubectl finds it)")  # fmt: skip
    p.add_argument("-s", "--master", default=hide, help="the API server's address")
    if namespace == "short":
        p.add_argument("-n", "--namespace", default=hide, help="namespace (default: default)")
    elif namespace == "long":
        p.add_argument("--namespace", default=hide, help=argparse.SUPPRESS)


def _group(
    sub: Any, name: str, text: str, required: bool = True
) -> tuple[argparse.ArgumentParser, Any]:
    p: argparse.ArgumentParser = sub.add_parser(name, help=text, description=text)
    cmds = [c for c, _ in GROUPS[name]]
    metavar = "{" + ",".join(cmds) + "}"
    inner = p.add_subparsers(dest="cmd", required=required, metavar=metavar)
    return p, inner


GROUPS: dict[str, list[tuple[str, str]]] = {
    "job": [
        ("run", "run a one-task job from flags, or the Job in a YAML file"),
        ("list", "list jobs (Name, Creation, Phase, JobType, Replicas, Min, ... RetryCount)"),
        ("view", "show one job and its events"),
        ("suspend", "abort a job (AbortJob command)"),
        ("resume", "resume a job (ResumeJob command)"),
        ("delete", "delete a job"),
    ],
    "queue": [
        ("create", "create a queue"),
        ("delete", "delete a queue"),
        ("operate", "open, close or re-weight a queue"),
        ("list", "list queues (Name, Weight, State, Inqueue, Pending, Running, Unknown)"),
        ("get", "show one queue"),
    ],
    "pod": [("list", "list the pods of Volcano Jobs (Name, Ready, Status, Restart, Age)")],
    "jobflow": [(c, f"not supported (Volcano's jobflow {c})") for c in FLOW_COMMANDS],
    "jobtemplate": [(c, f"not supported (Volcano's jobtemplate {c})") for c in FLOW_COMMANDS],
}
"""Volcano's command tree (``cmd/cli/*.go``): group -> (command, help)."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vcctl",
        description="Volcano's command line for jobs, queues and pods, plus explain (why a "
        "job, pod or PodGroup waits; a queue's share and who waits) and version. "
        "--kubeconfig, --master and --namespace go before or after the command.",
        epilog=f"exit codes: 0 ok, 1 the API server refused, 2 bad input, {NOT_SUPPORTED} a "
        "Volcano command pyextender does not implement (jobflow, jobtemplate)",
    )
    _common(p, "short")
    sub = p.add_subparsers(
        dest="group",
        required=True,
        metavar="{job,queue,pod,jobflow,jobtemplate,explain,version}",
    )
    texts = {c: t for c, t in GROUPS["job"]}

    _, jsub = _group(sub, "job", "Volcano batch jobs: " + "|".join(c for c, _ in GROUPS["job"]))
    jr = jsub.add_parser("run", help=texts["run"], description=texts["run"])
    _common(jr, "short")
    jr.add_argument("-N", "--name", default="", help="job name")
    jr.add_argument("-i", "--image", default="busybox", help="container image")
    jr.add_argument("-m", "--min", type=int, default=1, help="minAvailable of the job")
    jr.add_argument("-r", "--replicas", type=int, default=1, help="pods of the task")
    jr.add_argument("-R", "--requests", default="cpu=1000m,memory=100Mi", help="per pod")
    jr.add_argument("-L", "--limits", default="cpu=1000m,memory=100Mi", help="per pod")
    jr.add_argument("-S", "--scheduler", default="volcano", help="schedulerName")
    jr.add_argument("-f", "--filename", default="", help="a YAML file holding a Job")
    jl = jsub.add_parser("list", help=texts["list"], description=texts["list"])
    _common(jl, "short")
    jl.add_argument("--all-namespaces", action="store_true", help="jobs of every namespace")
    jl.add_argument("-q", "--queue", default="", help="only jobs of this queue")
    jl.add_argument("-S", "--scheduler", default="", help="only jobs of this schedulerName")
    jl.add_argument("--selector", default="", help="only jobs whose name contains this")
    for cmd in ("view", "suspend", "resume", "delete"):
        c = jsub.add_parser(cmd, help=texts[cmd], description=texts[cmd])
        _common(c, "short")
        c.add_argument("-N", "--name", required=True, help="job name")

    texts = {c: t for c, t in GROUPS["queue"]}
    _, qsub = _group(sub, "queue", "Volcano queues: " + "|".join(c for c, _ in GROUPS["queue"]))
    qc = qsub.add_parser("create", help=texts["create"], description=texts["create"])
    _common(qc, "long")
    qc.add_argument("-n", "--name", default="test", help="queue name (Volcano's default: test)")
    qc.add_argument("-w", "--weight", type=int, default=1)
    qc.add_argument("-S", "--state", default="Open", choices=["Open", "Closed"])
    qc.add_argument("-p", "--parent", default="", help="parent queue (hierarchy)")
    ql = qsub.add_parser("list", help=texts["list"], description=texts["list"])
    _common(ql, "long")
    for cmd in ("get", "delete"):
        c = qsub.add_parser(cmd, help=texts[cmd], description=texts[cmd])
        _common(c, "long")
        c.add_argument("-n", "--name", required=True, help="queue name")
    qo = qsub.add_parser("operate", help=texts["operate"], description=texts["operate"])
    _common(qo, "long")
    qo.add_argument("-n", "--name", required=True, help="queue name")
    qo.add_argument("-a", "--action", required=True, choices=["open", "close", "update"])
    qo.add_argument("-w", "--weight", type=int, default=0, help="the new weight (update)")

    _, psub = _group(sub, "pod", "pods of Volcano Jobs: list")
    text = GROUPS["pod"][0][1]
    pl = psub.add_parser("list", help=text, description=text)
    _common(pl, "short")
    pl.add_argument("--all-namespaces", action="store_true", help="pods of every namespace")
    pl.add_argument("-j", "--job", default="", help="only pods of this job")
    pl.add_argument("-q", "--queue", default="", help="only pods of this queue")

    for group, kind in (("jobflow", "JobFlow"), ("jobtemplate", "JobTemplate")):
        text = f"Volcano's {kind}s (flow.volcano.sh): not supported, exits {NOT_SUPPORTED}"
        _, fsub = _group(sub, group, text, required=False)
        for cmd, text in GROUPS[group]:
            c = fsub.add_parser(cmd, help=text, description=text)
            _common(c, "short")

    ex = sub.add_parser(
        "explain",
        help="why a job, pod or PodGroup waits; a queue's share and who waits in it",
    )
    _common(ex, "short")
    ex.add_argument("kind", choices=["job", "queue", "pod", "podgroup"])
    ex.add_argument("name")
    v = sub.add_parser("version", help="vcctl's version and the server's")
    _common(v, "none")
    return p


def not_supported(group: str) -> str:
    """Why ``vcctl jobflow|jobtemplate`` does nothing here, and what to use instead."""
    kind = "JobFlow" if group == "jobflow" else "JobTemplate"
    return (
        f"vcctl {group}: not supported: pyextender does not serve Volcano's {kind} API "
        "(flow.volcano.sh/v1alpha1) nor run its controller. Run the Jobs themselves "
        "(`vcctl job run -f JOB.yaml`, or kubectl apply) and order their tasks with "
        "spec.tasks[].dependsOn; see `vcctl job run --help`."
    )


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
    kubeconfig = getattr(args, "kubeconfig", None)
    if args.group == "version":
        return version(kubeconfig)
    if args.group in ("jobflow", "jobtemplate"):
        raise NotSupported(not_supported(args.group))
    ns: str = getattr(args, "namespace", None) or "default"
    # a Job from flags or a file is checked before any cluster is asked
    run_body = job_from_flags(args, ns) if getattr(args, "cmd", "") == "run" else None
    v = Vcctl(kubeconfig, getattr(args, "master", None))
    if args.group == "explain":
        return v.explain(ns, args.kind, args.name)
    if args.group == "pod":
        return v.pod_list(None if args.all_namespaces else ns, args.job, args.queue)
    if args.group == "job":
        if args.cmd == "list":
            return v.job_list(
                None if args.all_namespaces else ns, args.queue, args.scheduler, args.selector
            )
        if run_body is not None:
            return v.job_run(ns, run_body)
        if args.cmd == "view":
            return v.job_view(ns, args.name)
        if args.cmd == "delete":
            return v.job_delete(ns, args.name)
        action = "AbortJob" if args.cmd == "suspend" else "ResumeJob"
        return v._command(ns, args.name, action)
    if args.cmd == "create":
        return v.queue_create(args.name, args.weight, args.state, args.parent)
    if args.cmd == "list":
        return v.queue_list()
    if args.cmd == "get":
        return v.queue_get(args.name)
    if args.cmd == "delete":
        return v.queue_delete(args.name)
    return v.queue_operate(args.name, args.action, args.weight)


class NotSupported(Exception):
    """A Volcano command pyextender does not implement; exits NOT_SUPPORTED."""


def _fail(args: argparse.Namespace, why: str, code: int) -> int:
    """Volcano's wording, "Failed to <group> <command>: <why>" (on stderr here); the code."""
    what = " ".join(x for x in (getattr(args, "group", ""), getattr(args, "cmd", "")) if x)
    print(f"vcctl: Failed to {what}: {why}", file=sys.stderr)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # whatever follows jobflow/jobtemplate (e.g. -f flow.yaml) gets the not-supported answer
    if extra and args.group not in ("jobflow", "jobtemplate"):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        print(run(args))
    except NotSupported as exc:
        print(exc, file=sys.stderr)
        return NOT_SUPPORTED
    except (ClientConfigError, ValueError, OSError) as exc:
        return _fail(args, str(exc), 2)
    except urllib3.exceptions.HTTPError as exc:  # the API server did not answer
        return _fail(args, f"cannot reach the API server: {exc}", 2)
    except ApiException as exc:
        reason = exc.reason
        with contextlib.suppress(ValueError):  # the API server's message, when it sent one
            reason = json.loads(exc.body or "{}").get("message", reason)
        return _fail(args, str(reason), 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
