"""``scheduling.volcano.sh/v1beta1`` PodGroup: a gang of pods scheduled all-or-nothing.

Pods join a PodGroup through the ``scheduling.k8s.io/group-name`` annotation
(pyextender.api.names.GROUP_NAME_ANNOTATION).
"""

from __future__ import annotations

from typing import Literal

from pyextender.api.volcano.codec import (
    Kind,
    Model,
    PrinterColumn,
    Problem,
    Resource,
    ResourceList,
    Timestamp,
    attr,
    model,
)
from pyextender.api.volcano.meta import ObjectMeta
from pyextender.api.volcano.network_topology import NetworkTopologySpec

PodGroupPhase = Literal["Pending", "Inqueue", "Running", "Unknown", "Completed"]
PodGroupConditionType = Literal["Unschedulable", "Scheduled"]

DEFAULT_QUEUE = "default"

# Condition reasons Volcano writes (kept so tools that match on them keep working).
REASON_NOT_ENOUGH_RESOURCES = "NotEnoughResources"
REASON_NOT_ENOUGH_TASKS = "NotEnoughTasks"
REASON_NOT_ENOUGH_PODS_OF_TASK = "NotEnoughPodsOfTask"
REASON_POD_FAILED = "PodFailed"
REASON_POD_DELETED = "PodDeleted"


@model
class PodGroupCondition(Model):
    """One observation about the gang's scheduling (why it is or is not placed)."""

    type: PodGroupConditionType | None = attr("Condition type.", default=None)
    status: Literal["True", "False", "Unknown"] | None = attr(
        "Whether the condition holds.", default=None
    )
    transition_id: str = attr(
        "ID of the scheduling session that made the transition.",
        default="",
        json_name="transitionID",
    )
    last_transition_time: Timestamp | None = attr("When the condition last changed.", default=None)
    reason: str = attr("CamelCase reason, e.g. NotEnoughResources.", default="")
    message: str = attr("Human-readable explanation.", default="")


@model
class PodGroupSpec(Model):
    """What the gang needs before any member may run."""

    min_member: int = attr(
        "Members that must be placeable together before any of them is bound.",
        default=0,
        minimum=0,
    )
    min_task_member: dict[str, int] = attr(
        "Per task (role) name, the members of that task that must be placeable together.",
        default_factory=dict,
    )
    queue: str = attr('Queue the gang is admitted through; empty means "default".', default="")
    priority_class_name: str = attr("PriorityClass giving the gang's priority.", default="")
    min_resources: ResourceList = attr(
        "Resources the minimum gang needs in total; used for admission (enqueue).",
        default_factory=dict,
    )
    network_topology: NetworkTopologySpec | None = attr(
        "Network topology constraint over HyperNodes.", default=None
    )

    @property
    def queue_name(self) -> str:
        return self.queue or DEFAULT_QUEUE

    def check(self) -> list[Problem]:
        return [
            (f"minTaskMember[{task}]", f"must be an integer >= 0, got {n}")
            for task, n in self.min_task_member.items()
            if n < 0
        ]


@model
class PodGroupStatus(Model):
    """Where the gang is in its life, and why."""

    phase: PodGroupPhase | None = attr("Current phase of the gang.", default=None)
    conditions: list[PodGroupCondition] = attr("Scheduling conditions.", default_factory=list)
    running: int = attr("Members running now.", default=0, minimum=0)
    succeeded: int = attr("Members that succeeded.", default=0, minimum=0)
    failed: int = attr("Members that failed.", default=0, minimum=0)

    def condition(self, type_: PodGroupConditionType) -> PodGroupCondition | None:
        for cond in self.conditions:
            if cond.type == type_:
                return cond
        return None


@model
class PodGroup(Resource):
    """A set of pods scheduled together: none runs until ``minMember`` can."""

    KIND = Kind(
        group="scheduling.volcano.sh",
        version="v1beta1",
        kind="PodGroup",
        plural="podgroups",
        scope="Namespaced",
        description="A gang of pods that is scheduled all-or-nothing.",
        short_names=("pg", "podgroup-v1beta1"),
        # As Volcano's own PodGroup CRD: status is written through the object. Tools
        # that update a PodGroup whole (Volcano's scheduler does) keep working, and the
        # sidecar's admission carries the gang's barrier release in the same write
        # (pyextender.server.actuator._admit): one PodGroup write per gang, not two.
        status_subresource=False,
        printer_columns=(
            PrinterColumn("STATUS", "string", ".status.phase"),
            PrinterColumn("minMember", "integer", ".spec.minMember"),
            PrinterColumn("RUNNINGS", "integer", ".status.running"),
            PrinterColumn("AGE", "date", ".metadata.creationTimestamp"),
            PrinterColumn("QUEUE", "string", ".spec.queue", priority=1),
        ),
    )

    metadata: ObjectMeta = attr("Standard object metadata.", default_factory=ObjectMeta)
    spec: PodGroupSpec = attr("Desired gang behaviour.", default_factory=PodGroupSpec)
    status: PodGroupStatus = attr("Observed state.", default_factory=PodGroupStatus)


def one_pod_group(min_member: int, members: int) -> bool:
    """A PodGroup of one pod (minMember at most 1, at most one member): a standalone
    pod's or a single-pod job's. Its phase and its pod's own events say all a gang's
    events would (Enqueued, GangRunning, GangCompleted), so those are not posted."""
    return min_member <= 1 and members <= 1
