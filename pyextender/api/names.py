"""Annotation, label, gate and finalizer names we read or write."""

from __future__ import annotations

SCHEDULER_NAME = "volcano"
"""schedulerName of the pods we schedule (the kube-scheduler profile we serve)."""

GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
"""Volcano's pod annotation naming the PodGroup a pod belongs to."""

GANG_GATE = "pyextender.io/gang"
"""Scheduling gate the webhook puts on gang members; lifted by the enqueue action."""

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
