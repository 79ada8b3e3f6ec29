"""``scheduling.volcano.sh/v1beta1`` Queue: a share of the cluster for PodGroups.

Queues form a tree through ``spec.parent``; ``root`` is its top and
``default`` takes PodGroups that name no queue. Both exist from the start
(default_queues()).
"""

from __future__ import annotations

from typing import Literal

from pyextender.api.volcano.codec import (
    Kind,
    Model,
    PrinterColumn,
    Resource,
    ResourceList,
    attr,
    model,
)
from pyextender.api.volcano.meta import ObjectMeta

QueueState = Literal["Open", "Closed", "Closing", "Unknown"]

ROOT_QUEUE = "root"
DEFAULT_QUEUE = "default"
HIERARCHY = "volcano.sh/hierarchy"
"""Annotation of Volcano's older queue tree form: the queue's path, e.g. ``root/sci/dev``."""
HIERARCHY_WEIGHTS = "volcano.sh/hierarchy-weights"
"""Annotation: one weight per queue of HIERARCHY, e.g. ``1/2/3``."""


@model
class Guarantee(Model):
    """Resources reserved for the queue whatever other queues need."""

    resource: ResourceList = attr("Guaranteed resources.", default_factory=dict)


@model
class Reservation(Model):
    """Nodes locked for the queue and the idle resources on them."""

    nodes: list[str] = attr("Locked node names.", default_factory=list)
    resource: ResourceList = attr("Idle resources on the locked nodes.", default_factory=dict)


@model
class Cluster(Model):
    """A member cluster jobs of this queue may be dispatched to (multi-cluster; passed through)."""

    name: str = attr("Cluster name.", default="")
    weight: int = attr("Relative weight of the cluster.", default=0)
    capacity: ResourceList = attr("Capacity offered by the cluster.", default_factory=dict)


@model
class NodeGroupAffinity(Model):
    """Node groups (label ``volcano.sh/nodegroup-name``) the queue's pods should or must use."""

    required_during_scheduling_ignored_during_execution: list[str] = attr(
        "Node groups the pods must run in.", default_factory=list
    )
    preferred_during_scheduling_ignored_during_execution: list[str] = attr(
        "Node groups the pods prefer.", default_factory=list
    )


@model
class Affinity(Model):
    """Node-group affinity of the queue's pods (kept and served; not yet acted on)."""

    node_group_affinity: NodeGroupAffinity | None = attr("Node groups to use.", default=None)
    node_group_anti_affinity: NodeGroupAffinity | None = attr("Node groups to avoid.", default=None)


@model
class QueueSpec(Model):
    """The queue's share of the cluster and where it sits in the queue tree."""

    weight: int = attr(
        "Relative share among sibling queues (proportion plugin); at least 1. "
        "The webhook turns 0 in a new queue into 1, as Volcano's does.",
        default=1,
        minimum=1,
        schema_default=True,
    )
    capability: ResourceList = attr(
        "Hard upper limit of resources the queue's jobs may hold.", default_factory=dict
    )
    deserved: ResourceList = attr(
        "Resources the queue is entitled to; above this its jobs may be reclaimed.",
        default_factory=dict,
    )
    guarantee: Guarantee = attr("Resources reserved for the queue.", default_factory=Guarantee)
    reclaimable: bool | None = attr(
        "Whether other queues may reclaim resources from this one (unset means true).",
        default=None,
    )
    parent: str = attr('Parent queue in the hierarchy; empty means "root".', default="")
    priority: int = attr(
        "Queue priority: higher is scheduled first and reclaimed from last.", default=0
    )
    extend_clusters: list[Cluster] = attr(
        "Clusters the queue's jobs may be dispatched to.", default_factory=list
    )
    affinity: Affinity | None = attr("Node-group affinity of the queue's pods.", default=None)
    type: str = attr("Free-form queue type.", default="")
    dequeue_strategy: Literal["fifo", "traverse"] | None = attr(
        "fifo: only the head job may be admitted; traverse: later jobs may pass a blocked head.",
        default=None,
    )

    @property
    def effective_weight(self) -> int:
        return self.weight or 1

    @property
    def is_reclaimable(self) -> bool:
        return self.reclaimable is not False


@model
class QueueStatus(Model):
    """Queue state and PodGroup counts per phase."""

    state: QueueState | None = attr("Open, Closing, Closed or Unknown.", default=None)
    pending: int = attr("PodGroups in phase Pending.", default=0, minimum=0)
    inqueue: int = attr("PodGroups in phase Inqueue.", default=0, minimum=0)
    running: int = attr("PodGroups in phase Running.", default=0, minimum=0)
    unknown: int = attr("PodGroups in phase Unknown.", default=0, minimum=0)
    completed: int = attr("PodGroups in phase Completed.", default=0, minimum=0)
    reservation: Reservation = attr("Node reservation for the queue.", default_factory=Reservation)
    allocated: ResourceList = attr("Resources held by the queue's pods.", default_factory=dict)


@model
class Queue(Resource):
    """A cluster-scoped share of resources that PodGroups are admitted through."""

    KIND = Kind(
        group="scheduling.volcano.sh",
        version="v1beta1",
        kind="Queue",
        plural="queues",
        scope="Cluster",
        description="A share of the cluster that PodGroups are admitted through.",
        short_names=("q", "queue-v1beta1"),
        printer_columns=(
            PrinterColumn("STATE", "string", ".status.state"),
            PrinterColumn("WEIGHT", "integer", ".spec.weight"),
            PrinterColumn("PARENT", "string", ".spec.parent"),
            PrinterColumn("AGE", "date", ".metadata.creationTimestamp"),
            PrinterColumn("RECLAIMABLE", "boolean", ".spec.reclaimable", priority=1),
        ),
    )

    metadata: ObjectMeta = attr("Standard object metadata.", default_factory=ObjectMeta)
    spec: QueueSpec = attr("Desired share.", default_factory=QueueSpec)
    status: QueueStatus = attr("Observed state.", default_factory=QueueStatus)

    @property
    def parent_name(self) -> str:
        """The parent queue; every queue but root hangs under root by default."""
        if self.metadata.name == ROOT_QUEUE:
            return ""
        return self.spec.parent or ROOT_QUEUE


def default_queues() -> list[Queue]:
    """The queues that exist from the start: ``root`` and ``default`` (under root)."""
    root = Queue(
        metadata=ObjectMeta(name=ROOT_QUEUE),
        spec=QueueSpec(weight=1, reclaimable=False),
        status=QueueStatus(state="Open"),
    )
    default = Queue(
        metadata=ObjectMeta(name=DEFAULT_QUEUE),
        spec=QueueSpec(weight=1, reclaimable=True, parent=ROOT_QUEUE),
        status=QueueStatus(state="Open"),
    )
    return [root, default]
