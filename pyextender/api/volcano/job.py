"""``batch.volcano.sh/v1alpha1`` Job: tasks of pods run as one gang, with lifecycle policies."""

from __future__ import annotations

from typing import Literal

from pyextender.api.volcano.codec import (
    Duration,
    Kind,
    Model,
    PrinterColumn,
    Problem,
    RawObject,
    Resource,
    Timestamp,
    attr,
    model,
)
from pyextender.api.volcano.job_plugins import PluginArgs, check_roles, parse_plugins
from pyextender.api.volcano.meta import ObjectMeta
from pyextender.api.volcano.network_topology import DNS_LABEL, DNS_SUBDOMAIN, NetworkTopologySpec

JobPhase = Literal[
    "Pending",
    "Aborting",
    "Aborted",
    "Running",
    "Restarting",
    "Completing",
    "Completed",
    "Terminating",
    "Terminated",
    "Failed",
]
JobEvent = Literal[
    "*",
    "PodFailed",
    "PodEvicted",
    "PodPending",
    "Unknown",
    "TaskCompleted",
    "OutOfSync",
    "CommandIssued",
    "JobUpdated",
    "TaskFailed",
]
"""Events a lifecycle policy reacts to ("*" = any). PodPending counts only for a
policy with a ``timeout``: the pod still Pending that long."""
JobAction = Literal[
    "AbortJob",
    "RestartJob",
    "RestartTask",
    "RestartPod",
    "RestartPartition",
    "TerminateJob",
    "CompleteJob",
    "ResumeJob",
]
"""What the Job controller does when a policy fires. RestartPod restarts only the pod
that raised the event; RestartPartition the pods of that pod's partition, and since
partitionPolicy is refused at admission there are none: as in Volcano, it then
restarts nothing (see controllers/job_state.py)."""


@model
class LifecyclePolicy(Model):
    """When an event happens (or a container exits with a code), take an action."""

    action: JobAction | None = attr(
        "Action to take. RestartTask/RestartPod restart only the pods of the event's task, "
        "or its pod; RestartPartition restarts nothing, as no pod has a partition.",
        default=None,
    )
    event: JobEvent | None = attr("Event that triggers the action.", default=None)
    events: list[JobEvent] = attr("Events that trigger the action.", default_factory=list)
    exit_code: int | None = attr(
        "Container exit code that triggers the action (not with event/events).", default=None
    )
    timeout: Duration | None = attr(
        "Grace period before the action is taken; unset means immediately.", default=None
    )

    def check(self) -> list[Problem]:
        has_event = self.event is not None or bool(self.events)
        if has_event and self.exit_code is not None:
            return [("", "set either event/events or exitCode, not both")]
        if not has_event and self.exit_code is None:
            return [("", "one of event, events or exitCode is required")]
        if self.exit_code == 0:
            return [("exitCode", "must not be 0 (0 is success)")]
        return []


@model
class VolumeSpec(Model):
    """A volume mounted into every pod of the job."""

    mount_path: str = attr(
        "Mount path in the containers; no ':'.", required=True, default="", pattern=r"[^:]+"
    )
    volume_claim_name: str = attr("Existing PVC to mount.", default="", max_length=253)
    volume_claim: RawObject | None = attr("Spec of a PVC to create for the job.", default=None)


@model
class DependsOn(Model):
    """Tasks that must be running before this task's pods are created."""

    name: list[str] = attr("Names of the tasks depended on.", default_factory=list)
    iteration: Literal["any", "all"] | None = attr(
        "any: one of them suffices; all: every one is needed.", default=None
    )


@model
class PartitionPolicySpec(Model):
    """Splits a task's pods into equal partitions, each placed as its own topology unit."""

    total_partitions: int = attr("Number of partitions.", required=True, default=1, minimum=1)
    partition_size: int = attr("Pods per partition.", required=True, default=1, minimum=1)
    network_topology: NetworkTopologySpec | None = attr(
        "Topology constraint of each partition.", default=None
    )
    min_partitions: int = attr("Partitions that must be placeable together.", default=0, minimum=0)


@model
class TaskSpec(Model):
    """A role in the job: a pod template and how many replicas of it."""

    name: str = attr(
        "Task name, unique within the job.", default="", max_length=63, pattern=DNS_LABEL
    )
    replicas: int = attr("Pods of this task.", default=0, minimum=0)
    min_available: int | None = attr(
        "Pods of this task that must be placeable together; defaults to replicas.",
        default=None,
        minimum=0,
    )
    template: RawObject = attr("Pod template (core/v1 PodTemplateSpec).", default_factory=dict)
    policies: list[LifecyclePolicy] = attr("Lifecycle policies of this task.", default_factory=list)
    topology_policy: Literal["none", "best-effort", "restricted", "single-numa-node"] | None = attr(
        "NUMA topology policy of the task's pods.", default=None
    )
    max_retry: int = attr(
        "Container restarts of the task's pods beyond which TaskFailed is raised; "
        "0 means 3, -1 no limit.",
        default=0,
        minimum=-1,
    )
    depends_on: DependsOn | None = attr("Tasks this one waits for.", default=None)
    partition_policy: PartitionPolicySpec | None = attr(
        "Partitioning of the task's pods.", default=None
    )

    @property
    def min_members(self) -> int:
        return self.replicas if self.min_available is None else self.min_available

    def check(self) -> list[Problem]:
        if self.min_available is not None and self.min_available > self.replicas:
            return [
                ("minAvailable", f"must be <= replicas ({self.replicas}), got {self.min_available}")
            ]
        return []


@model
class JobSpec(Model):
    """Tasks, gang size, queue and lifecycle of a batch job."""

    scheduler_name: str = attr("schedulerName given to the job's pods.", default="", max_length=63)
    min_available: int = attr(
        "Pods that must be placeable together; defaults to the sum of replicas.",
        default=0,
        minimum=0,
    )
    volumes: list[VolumeSpec] = attr("Volumes for every pod.", default_factory=list)
    tasks: list[TaskSpec] = attr("The job's tasks.", default_factory=list)
    policies: list[LifecyclePolicy] = attr("Default lifecycle policies.", default_factory=list)
    plugins: dict[str, list[str]] = attr(
        "Job plugins (ssh, svc, env, ...) by name, with their arguments.", default_factory=dict
    )
    running_estimate: Duration | None = attr(
        "The user's estimate of the job's run time (used by backfill).", default=None
    )
    queue: str = attr(
        "Queue the job is submitted to.",
        default="default",
        schema_default=True,
        max_length=253,
        pattern=DNS_SUBDOMAIN,
    )
    max_retry: int = attr(
        "Retries before the job is marked failed.", default=3, minimum=0, schema_default=True
    )
    ttl_seconds_after_finished: int | None = attr(
        "Seconds after finishing when the job may be deleted; unset means never.",
        default=None,
        minimum=0,
    )
    priority_class_name: str = attr(
        "PriorityClass of the job.", default="", max_length=253, pattern=DNS_SUBDOMAIN
    )
    min_success: int | None = attr(
        "Succeeded pods that make the job complete.", default=None, minimum=1
    )
    network_topology: NetworkTopologySpec | None = attr(
        "Network topology constraint over HyperNodes.", default=None
    )

    @property
    def total_replicas(self) -> int:
        return sum(t.replicas for t in self.tasks)

    @property
    def gang_size(self) -> int:
        """Members that must be placeable together (minAvailable, or every replica)."""
        return self.min_available or self.total_replicas

    def check(self) -> list[Problem]:
        problems: list[Problem] = []
        seen: set[str] = set()
        for i, task in enumerate(self.tasks):
            if task.name and task.name in seen:
                problems.append((f"tasks[{i}].name", f"duplicate task name {task.name!r}"))
            seen.add(task.name)
        if self.tasks and self.min_available > self.total_replicas:
            problems.append(
                (
                    "minAvailable",
                    f"must be <= the sum of task replicas ({self.total_replicas}), "
                    f"got {self.min_available}",
                )
            )
        plugins, plugin_problems = parse_plugins(self.plugins)
        problems += plugin_problems + check_roles(plugins, [t.name for t in self.tasks])
        return problems

    @property
    def plugin_args(self) -> dict[str, PluginArgs]:
        """The plugins the job runs (implied ones included), with typed arguments."""
        return parse_plugins(self.plugins)[0]


@model
class JobState(Model):
    """The job's phase and why it got there."""

    phase: JobPhase | None = attr("Phase of the job.", default=None)
    reason: str = attr("CamelCase reason for the last transition.", default="")
    message: str = attr("Human-readable details.", default="")
    last_transition_time: Timestamp | None = attr("When the phase last changed.", default=None)


@model
class TaskState(Model):
    """Pod counts of one task by pod phase."""

    phase: dict[str, int] = attr("Pods per pod phase.", default_factory=dict)


@model
class JobCondition(Model):
    """A phase the job went through, and when."""

    status: JobPhase = attr("Phase entered.", required=True, default="Pending")
    last_transition_time: Timestamp | None = attr("When it was entered.", default=None)


@model
class JobStatus(Model):
    """Observed state of the job and pod counts."""

    state: JobState = attr("Current state.", default_factory=JobState)
    min_available: int = attr("Gang size in effect.", default=0, minimum=0)
    task_status_count: dict[str, TaskState] = attr("Pod counts per task.", default_factory=dict)
    pending: int = attr("Pending pods.", default=0, minimum=0)
    running: int = attr("Running pods.", default=0, minimum=0)
    succeeded: int = attr("Succeeded pods.", default=0, minimum=0)
    failed: int = attr("Failed pods.", default=0, minimum=0)
    terminating: int = attr("Terminating pods.", default=0, minimum=0)
    unknown: int = attr("Pods in phase Unknown.", default=0, minimum=0)
    version: int = attr("Version of the job, bumped on restart.", default=0, minimum=0)
    retry_count: int = attr("Restarts so far.", default=0, minimum=0)
    running_duration: Duration | None = attr("How long the job ran.", default=None)
    controlled_resources: dict[str, str] = attr(
        "Objects created for the job (Services, ConfigMaps, ...).", default_factory=dict
    )
    conditions: list[JobCondition] = attr("Phase history.", default_factory=list)


@model
class Job(Resource):
    """A Volcano batch job: tasks of pods scheduled as one gang."""

    KIND = Kind(
        group="batch.volcano.sh",
        version="v1alpha1",
        kind="Job",
        plural="jobs",
        scope="Namespaced",
        description="A Volcano batch job: tasks of pods scheduled as one gang.",
        short_names=("vcjob", "vj"),
        printer_columns=(
            PrinterColumn("STATUS", "string", ".status.state.phase"),
            PrinterColumn("minAvailable", "integer", ".status.minAvailable"),
            PrinterColumn("RUNNINGS", "integer", ".status.running"),
            PrinterColumn("AGE", "date", ".metadata.creationTimestamp"),
            PrinterColumn("QUEUE", "string", ".spec.queue", priority=1),
        ),
    )

    metadata: ObjectMeta = attr("Standard object metadata.", default_factory=ObjectMeta)
    spec: JobSpec = attr("Desired job.", default_factory=JobSpec)
    status: JobStatus = attr("Observed state.", default_factory=JobStatus)
