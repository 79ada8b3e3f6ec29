"""What a Volcano Job turns into: its PodGroup and its pods, named as Volcano names them.

Pure functions of the Job document; the Job controller creates what they return.

- PodGroup ``<job>-<job uid>`` (Volcano >= 1.9), minMember = minAvailable,
  minTaskMember per task, queue, priorityClassName, minResources;
- pods ``<job>-<task>-<index>`` with Volcano's annotations and labels,
  schedulerName from the Job, what the Job's plugins add (job_plugins.py), and,
  for a gang (minAvailable > 1) not yet admitted, our scheduling gate so no
  member starts before the gang can.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from controllers import job_plugins
from controllers import pods as P
from pyextender.api import names
from pyextender.api.volcano import Job
from pyextender.api.volcano.job import TaskSpec

JOB_API_VERSION = "batch.volcano.sh/v1alpha1"
DEFAULT_TASK = "default"
"""Task name Volcano uses when a task has none."""

# Job annotations/labels Volcano copies onto every pod of the job.
INHERITED_ANNOTATIONS = (
    "volcano.sh/preemptable",
    "volcano.sh/cooldown-time",
    "volcano.sh/revocable-zone",
)
JDB_ANNOTATIONS = ("volcano.sh/jdb-min-available", "volcano.sh/jdb-max-unavailable")
"""Only the first present is copied (min-available wins, as in Volcano)."""
INHERITED_LABELS = ("volcano.sh/preemptable", "volcano.sh/cooldown-time")
NUMA_POLICY_ANNOTATION = "volcano.sh/numa-topology-policy"
SIMULATION_ANNOTATIONS = ("pyextender.io/simulated-duration", "pyextender.io/simulated-exit-code")
"""Run time of a pod on devcluster's kwok nodes (devcluster/kwok_stages.py): set on the Job,
they apply to every task whose template does not set them itself."""


def podgroup_name(job_name: str, job_uid: str) -> str:
    return f"{job_name}-{job_uid}"


def pod_name(job_name: str, task_name: str, index: int) -> str:
    return f"{job_name}-{task_name}-{index}"


def task_name(task: TaskSpec) -> str:
    return task.name or DEFAULT_TASK


def controller_ref(job: Job) -> dict[str, Any]:
    return {
        "apiVersion": JOB_API_VERSION,
        "kind": "Job",
        "name": job.metadata.name,
        "uid": job.metadata.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _pod_usage(template: dict[str, Any]) -> dict[str, int]:
    """Quota usage of one pod of the template (pods.quota_usage). A container without
    requests counts its limits: the API server defaults requests to limits when the
    pod is created, so that is what the pod will ask for (Volcano reads the template
    as written and would leave such a request out)."""
    spec = copy.deepcopy(template.get("spec") or {})
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or []:
            res = c.setdefault("resources", {}) or {}
            c["resources"] = res
            res["requests"] = {**(res.get("limits") or {}), **(res.get("requests") or {})}
    try:
        return P.quota_usage(spec)
    except (ValueError, TypeError, AttributeError):
        return {}


def min_resources(job: Job, priorities: Mapping[str, int] | None = None) -> dict[str, str]:
    """Resources of the minimal gang, as Volcano's calcPGMinResources: the quota usage
    (pods.quota_usage: ``cpu``, ``requests.cpu``, ``limits.cpu``, ``pods``,
    ``count/pods``, extended resources ...) of the job's first minAvailable pods.

    Which pods: when minAvailable is below the sum of the tasks' minimums (a task's
    minAvailable, else its replicas), the first minAvailable replicas in task order;
    otherwise each task's minAvailable pods (tasks that set it), capped at the job's
    minAvailable, then further replicas in task order until it is reached.
    Task order: by the value of the task template's PriorityClass (``priorities``:
    class name -> value; unknown or none counts 0), highest first, then as written.
    """
    want = job.spec.gang_size
    values = priorities or {}
    tasks = sorted(
        job.spec.tasks,
        key=lambda t: (
            -values.get(str((t.template.get("spec") or {}).get("priorityClassName") or ""), 0)
        ),
    )
    total: dict[str, int] = {}
    count = 0

    def add(task: TaskSpec, n: int) -> None:
        nonlocal count
        n = max(min(n, want - count), 0)
        for name, value in _pod_usage(task.template).items():
            total[name] = total.get(name, 0) + value * n
        count += n

    if want < sum(t.min_members for t in tasks):
        for task in tasks:
            add(task, task.replicas)
    else:
        for task in tasks:
            if task.min_available is not None:
                add(task, task.min_available)
        for task in tasks:
            add(task, task.replicas - (task.min_available or 0))
    return P.format_quota(total)


def podgroup_spec(job: Job, priorities: Mapping[str, int] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "minMember": job.spec.gang_size,
        "minTaskMember": {task_name(t): t.min_members for t in job.spec.tasks},
        "queue": job.spec.queue,
        "priorityClassName": job.spec.priority_class_name,
        "minResources": min_resources(job, priorities),
    }
    if job.spec.network_topology is not None:
        # as Volcano: the mode, and highestTierAllowed or else highestTierName
        nt = job.spec.network_topology
        topology: dict[str, Any] = {"mode": nt.mode}
        if nt.highest_tier_allowed is not None:
            topology["highestTierAllowed"] = nt.highest_tier_allowed
        elif nt.highest_tier_name:
            topology["highestTierName"] = nt.highest_tier_name
        spec["networkTopology"] = topology
    return spec


def build_podgroup(job: Job, priorities: Mapping[str, int] | None = None) -> dict[str, Any]:
    m = job.metadata
    annotations = dict(m.annotations)
    if job.spec.running_estimate:
        # backfill reads the expected run time from the PodGroup
        annotations[names.RUNNING_ESTIMATE_ANNOTATION] = job.spec.running_estimate
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": podgroup_name(m.name, m.uid),
            "namespace": m.namespace,
            "labels": dict(m.labels),
            "annotations": annotations,
            "ownerReferences": [controller_ref(job)],
        },
        "spec": podgroup_spec(job, priorities),
    }


def build_pod(
    job: Job, task: TaskSpec, index: int, gated: bool, barrier: bool = False
) -> dict[str, Any]:
    """The pod ``index`` of ``task``, as Volcano's job controller would create it.
    ``gated``: held until the scheduler admits the gang, behind the gang gate or, with
    ``barrier``, by the pyextender.io/gang-barrier annotation (framework shim)."""
    m = job.metadata
    tname = task_name(task)
    template = copy.deepcopy(task.template)
    tmeta = template.get("metadata") or {}
    spec: dict[str, Any] = template.get("spec") or {}
    if not spec.get("schedulerName"):
        # Volcano's admission webhook defaults an empty Job schedulerName to volcano
        spec["schedulerName"] = job.spec.scheduler_name or names.SCHEDULER_NAME
    if not spec.get("priorityClassName") and job.spec.priority_class_name:
        spec["priorityClassName"] = job.spec.priority_class_name
    for i, vol in enumerate(job.spec.volumes):
        if vol.volume_claim_name:
            vname = f"{m.name}-volume-{i}"
            job_plugins.add_mount(
                spec,
                {"name": vname, "persistentVolumeClaim": {"claimName": vol.volume_claim_name}},
                {"name": vname, "mountPath": vol.mount_path},
            )
    job_plugins.apply_to_pod(job, task, index, spec)
    if gated and not barrier:
        gates = [g for g in spec.get("schedulingGates") or [] if g.get("name") != names.GANG_GATE]
        spec["schedulingGates"] = [*gates, {"name": names.GANG_GATE}]

    annotations = dict(tmeta.get("annotations") or {})
    if gated and barrier:
        annotations[names.BARRIER_ANNOTATION] = "true"
    annotations.update(
        {
            names.VOLCANO_TASK_INDEX: str(index),
            names.VOLCANO_TASK_SPEC: tname,
            names.GROUP_NAME_ANNOTATION: podgroup_name(m.name, m.uid),
            names.VOLCANO_JOB_NAME: m.name,
            names.VOLCANO_QUEUE_NAME: job.spec.queue,
            names.VOLCANO_JOB_VERSION: str(job.status.version),
            names.VOLCANO_TEMPLATE_UID: f"{m.name}-{tname}",
            names.VOLCANO_JOB_RETRY_COUNT: str(job.status.retry_count),
        }
    )
    if task.topology_policy:
        annotations[NUMA_POLICY_ANNOTATION] = task.topology_policy
    for key in INHERITED_ANNOTATIONS:
        if key in m.annotations:
            annotations[key] = m.annotations[key]
    for key in JDB_ANNOTATIONS:
        if key in m.annotations:
            annotations[key] = m.annotations[key]
            break
    for key in SIMULATION_ANNOTATIONS:
        if key in m.annotations:
            annotations.setdefault(key, m.annotations[key])
    labels = dict(tmeta.get("labels") or {})
    labels.update(
        {
            names.VOLCANO_TASK_INDEX: str(index),
            names.VOLCANO_JOB_NAME: m.name,
            names.VOLCANO_TASK_SPEC: tname,
            names.VOLCANO_JOB_NAMESPACE: m.namespace,
            names.VOLCANO_QUEUE_NAME: job.spec.queue,
        }
    )
    for key in INHERITED_LABELS:
        if key in m.labels:
            labels[key] = m.labels[key]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(m.name, tname, index),
            "namespace": m.namespace,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [controller_ref(job)],
        },
        "spec": spec,
    }
