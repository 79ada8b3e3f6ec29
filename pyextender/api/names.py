"""Annotation, label, gate and finalizer names we read or write."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

SCHEDULER_NAME = "volcano"
"""schedulerName of the pods we schedule (the kube-scheduler profile we serve)."""

GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
"""Volcano's pod annotation naming the PodGroup a pod belongs to."""

PODGROUP_PREFIX = "podgroup-"
"""Start of the name of the PodGroup a pod that names none is given (Volcano's):
``podgroup-`` and the uid of the pod's controller (its ReplicaSet, StatefulSet, ...),
so all pods of one owner share it, or of the pod itself."""


OWN_PODGROUP_ANNOTATION = "pyextender.io/own-podgroup"
"""Pod annotation ("true") our webhook adds, with the group-name annotation, to a pod
that names no PodGroup and has no controller owner: the PodGroup it names is the
pod's own, which the PodGroup controller creates (``own_podgroup_name``)."""


def own_podgroup_name(metadata: Mapping[str, Any]) -> str:
    """The PodGroup name a pod with ``metadata`` is given when it names none, or "" when
    neither a controller owner's nor its own uid is known yet: a pod being created has
    no uid until the API server stores it, but its owner reference carries the owner's.
    A pod without an owner that our webhook named at creation (OWN_PODGROUP_ANNOTATION)
    has the name it was given: ``podgroup-`` and a fresh uuid, as its uid is not known
    then."""
    uid: Any = None
    for ref in metadata.get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller"):
            uid = ref.get("uid")
            break
    if not uid:
        annotations = metadata.get("annotations")
        if isinstance(annotations, Mapping) and annotations.get(OWN_PODGROUP_ANNOTATION) == "true":
            named = annotations.get(GROUP_NAME_ANNOTATION)
            if isinstance(named, str) and named:
                return named
    uid = uid or metadata.get("uid")
    return f"{PODGROUP_PREFIX}{uid}" if isinstance(uid, str) and uid else ""


def fresh_podgroup_name() -> str:
    """A name for the PodGroup of its own of a pod being created without an owner:
    Volcano's shape (``podgroup-<uuid>``), from a random uuid (uuid4) instead of the pod's
    uid, which the API server assigns only after admission."""
    return f"{PODGROUP_PREFIX}{uuid.uuid4()}"


GANG_GATE = "pyextender.io/gang"
"""Scheduling gate the webhook puts on gang members; lifted by the enqueue action."""

BARRIER_ANNOTATION = "pyextender.io/gang-barrier"
"""Pod annotation ("true") the webhook or the Job controller adds in place of the gang
gate when run with --gang-barrier=scheduler (framework mode only): the shim's
PreEnqueue holds the pod until the sidecar releases it (gRPC WatchReleased), so no
per-pod write is needed to let a gang through. The sidecar's cache shows such a pod,
until released, with a gate of this same name (``BARRIER_GATE``): the actions treat
it like the gang gate."""

BARRIER_GATE = BARRIER_ANNOTATION
"""The gate the sidecar's cache shows on a pod held at the barrier (never written)."""

RELEASED_ANNOTATION = "pyextender.io/released-pods"
"""PodGroup annotation: comma-separated uids of its members released at the barrier
and not yet bound. Written by the leading sidecar, one write per gang and release
(not per pod); every replica's sidecar reads it from its watch."""

GANG_BARRIERS = ("gate", "scheduler")
"""How adopted gang pods are held until admitted: ``gate`` (a scheduling gate, any
kube-scheduler) or ``scheduler`` (annotation + the framework shim's PreEnqueue)."""

BATCH_RESOURCE = "pyextender.io/batch"
"""Marker extended resource the webhook requests (1) on adopted pods when pyextender
plugs into the cluster's existing kube-scheduler: its extender entry lists it in
managedResources (ignoredByScheduler), so only these pods reach the extender. No
node advertises it; schedulers and kubelet ignore it (manifests/extender/README.md)."""

GATED_BY_WEBHOOK_ANNOTATION = "pyextender.io/gated-by-webhook"
"""Pod annotation ("true") the webhook adds with the gang gate: such a pod is released
(gate lifted) when its namespace stops being adopted."""

ENABLED_LABEL = "pyextender.io/enabled"
"""Namespace label that opts a namespace in (value "true", or "shadow")."""

GPU_INDEX_ANNOTATION = "pyextender.io/gpu-index"
"""Written at bind: comma-separated GPU indices chosen on the node."""

GPU_TOPOLOGY_ANNOTATION = "pyextender.io/gpu-topology"
"""Node annotation: JSON description of the node's GPUs (see pyextender.api.gpu)."""

SUPERNODE_LABEL = "pyextender.io/supernode"
"""Node label naming the supernode (multi-node high-bandwidth domain)."""

GPU_MODEL_LABEL = "nvidia.com/gpu.product"
"""Node label with the GPU model, as NVIDIA's GPU feature discovery sets it."""

GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"
"""Node label with memory per GPU in MiB, as NVIDIA's GPU feature discovery sets it."""

GPU_GROUP_SIZE_ANNOTATIONS: tuple[str, ...] = (
    "pyextender.io/gpu-group-size",
    "metax-tech.com/gpu-group-size",
)
"""Pod annotations: GPUs per model-parallel unit (G), ours first."""

ATOMIC_GPU_GROUP_SIZE_ANNOTATIONS: tuple[str, ...] = (
    "pyextender.io/atomic-gpu-group-size",
    "metax-tech.com/atomic-gpu-group-size",
)
"""Pod annotations: GPUs per atomic sub-unit (A) that must share one supernode."""

GANG_SIZE_ANNOTATION = "pyextender.io/gang-size"
"""Pod annotation: pods in the gang (the PodGroup's minMember), for supernode planning."""

QUEUE_NAME_ANNOTATION = "scheduling.volcano.sh/queue-name"
"""Pod annotation naming the queue of a pod that has no PodGroup."""

RUNNING_ESTIMATE_ANNOTATION = "pyextender.io/running-estimate"
"""PodGroup or pod annotation: expected run time (Go duration, e.g. "90s"); lets
backfill place short jobs on nodes reserved for a waiting gang."""

SLA_WAITING_TIME_ANNOTATION = "sla-waiting-time"
"""PodGroup annotation (Volcano's sla plugin): wait after which the gang gets
nodes reserved (Go duration)."""

# Volcano's keys on the pods its Job controller creates (volcano.sh/apis batch/v1alpha1).
VOLCANO_TASK_SPEC = "volcano.sh/task-spec"
"""Pod annotation and label: the task (role) of the Job the pod belongs to."""

VOLCANO_TASK_INDEX = "volcano.sh/task-index"
"""Pod annotation and label: the pod's index within its task."""

VOLCANO_JOB_NAME = "volcano.sh/job-name"
"""Pod annotation and label: the Volcano Job that created the pod."""

VOLCANO_JOB_NAMESPACE = "volcano.sh/job-namespace"
"""Pod label: namespace of that Job (the svc plugin's Service selects on it)."""

VOLCANO_QUEUE_NAME = "volcano.sh/queue-name"
"""Pod annotation and label: the Job's queue."""

VOLCANO_JOB_VERSION = "volcano.sh/job-version"
"""Pod annotation: Job status.version when the pod was created (bumped on every restart)."""

VOLCANO_TEMPLATE_UID = "volcano.sh/template-uid"
"""Pod annotation: ``<job>-<task>``, marks pods of one template as equivalent."""

VOLCANO_JOB_RETRY_COUNT = "volcano.sh/job-retry-count"
"""Pod annotation: Job status.retryCount when the pod was created."""

POD_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
"""Pod annotation: queue for the PodGroup made for a bare pod (no group annotation)."""
