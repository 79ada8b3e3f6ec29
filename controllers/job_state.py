"""The Volcano Job life cycle as pure functions: which action a request triggers, what
to kill, and which phase follows.

A request carries an event (a pod failed, was evicted, a task completed, the
PodGroup went Unknown) or an explicit action (from a Command). ``decide``
turns it into an action through the task's, then the job's, lifecycle
policies, as Volcano's applyPolicies. ``plan`` says, for the job's phase and
that action, what to kill and which rule gives the next phase; ``next_phase``
applies the rule to the pod counts taken after killing/syncing.

Phases (Volcano's): Pending -> Running -> Completing/Completed or Failed;
Restarting (then Pending again, or Failed after maxRetry); Aborting/Aborted
(ResumeJob restarts); Terminating/Terminated.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from controllers import pods as P
from controllers.store import Obj
from pyextender.api import names
from pyextender.api.volcano import Job
from pyextender.api.volcano.codec import duration_seconds
from pyextender.api.volcano.job import TaskSpec

SYNC = "SyncJob"
RETAIN_SOFT = frozenset({"Succeeded", "Failed"})
"""Pods kept when a job is aborted, completed or terminated: their logs and exit codes."""
RETAIN_NONE: frozenset[str] = frozenset()
FINISHED = ("Completed", "Failed", "Terminated")
"""Phases after which ttlSecondsAfterFinished counts (Volcano's garbage collector)."""


@dataclass(frozen=True, slots=True)
class Request:
    """Why the job is being reconciled."""

    event: str = "OutOfSync"
    action: str = ""
    """Set by a Command: overrides policies."""
    task: str = ""
    pod: str = ""
    version: int = -1
    """Job version stamped on the pod that caused the event; -1 when not from a pod."""
    exit_code: int | None = None


def decide(job: Job, req: Request) -> str:
    """The action for ``req``: the Command's, or the first matching policy, or SyncJob."""
    return decide_with_delay(job, req)[0]


def decide_with_delay(job: Job, req: Request) -> tuple[str, float]:
    """(action, seconds to wait before taking it): a matching policy's ``timeout``
    delays its action (Volcano's delayed actions); 0 means now."""
    if req.action:
        return req.action, 0.0
    if req.event == "OutOfSync":
        return SYNC, 0.0
    if 0 <= req.version < job.status.version:
        return SYNC, 0.0  # an event from pods of a previous run of the job
    policy_lists = [t.policies for t in job.spec.tasks if t.name == req.task and req.task]
    policy_lists.append(job.spec.policies)
    for policies in policy_lists:
        for policy in policies:
            delay = duration_seconds(policy.timeout) if policy.timeout else 0.0
            events = [*policy.events, *([policy.event] if policy.event else [])]
            if events and (req.event in events or "*" in events) and policy.action:
                if req.event == "PodPending" and not delay:
                    continue  # Volcano: PodPending acts only after a policy's timeout
                return policy.action, delay
            if policy.exit_code is not None and policy.exit_code == req.exit_code:
                return policy.action or SYNC, delay
    return SYNC, 0.0


INTERNAL_ACTIONS = frozenset({SYNC})
"""Actions that do not cancel the job's delayed actions (any policy or Command action does)."""


def task_restarts_exceeded(job: Job, task: str, pods: Iterable[Obj]) -> bool:
    """Volcano's TaskFailed: the container restarts of the task's Pending/Running pods
    add up to more than the task's maxRetry (0 stands for Volcano's default, 3). Pods
    being deleted do not count: they are a restarted run's leftovers, whose restarts
    would otherwise fail the new run at once."""
    spec = next((t for t in job.spec.tasks if t.name == task), None)
    if spec is None or spec.replicas == 0 or spec.max_retry == NO_RETRY_LIMIT:
        return False
    limit = spec.max_retry or DEFAULT_TASK_MAX_RETRY
    restarts = sum(
        P.restart_count(p)
        for p in pods
        if P.annotations_of(p).get(names.VOLCANO_TASK_SPEC) == task
        and P.phase(p) in ("Pending", "Running")
        and not P.deleting(p)
    )
    return restarts > limit


DEFAULT_TASK_MAX_RETRY = 3
NO_RETRY_LIMIT = -1
"""A task's maxRetry that never raises TaskFailed (Volcano's cache.TaskFailed)."""


def dependencies_ready(job: Job, task: TaskSpec, pods: Iterable[Obj]) -> bool:
    """Volcano's dependsOn: a task's pods are created once the tasks it depends on are
    ready: at least their minAvailable pods (replicas when unset, as Volcano's webhook
    defaults it) Running or Succeeded with every container ready. ``iteration: any``
    with several names needs one of them; otherwise all."""
    deps = task.depends_on.name if task.depends_on else []
    if not deps:
        return True
    listed = list(pods)
    ready = [_task_ready(job, name, listed) for name in deps]
    if len(deps) > 1 and task.depends_on is not None and task.depends_on.iteration == "any":
        return any(ready)
    return all(ready)


def _task_ready(job: Job, name: str, pods: list[Obj]) -> bool:
    spec = next((t for t in job.spec.tasks if t.name == name), None)
    if spec is None:
        return True  # the webhook refuses this; nothing to wait for
    up = sum(
        1
        for p in pods
        if P.annotations_of(p).get(names.VOLCANO_TASK_SPEC) == name
        and not P.deleting(p)
        and P.phase(p) in ("Running", "Succeeded")
        and P.containers_ready(p)
    )
    return up >= spec.min_members


@dataclass(frozen=True, slots=True)
class Plan:
    kill: str
    """"" (sync: create missing pods), "none" (count only), "job", "task" or "pod"."""
    retain: frozenset[str]
    """Pod phases kept when killing."""
    rule: str
    """How the next phase is chosen; see next_phase."""
    drop_podgroup: bool = False
    """Delete the PodGroup (a whole-job kill); the next run gets a fresh one."""


TARGETS = {"RestartTask": "task", "RestartPod": "pod"}
"""Volcano's killTarget: these restart only the pods of the request's task, or its pod,
whatever their phase (no pods kept on the last retry), without bumping the job's
version (the other pods' events still count) and keeping the PodGroup; the job
goes Restarting with one more retry, as a RestartJob would."""
NO_PARTITION = "RestartPartition"
"""Restarts the pods of the request's pod's partition. partitionPolicy is refused at
admission, so no pod has one; Volcano's killPods then finds no partition and returns
before touching pods or status: the action is recorded (ExecuteAction) and cancels
delayed actions, but nothing restarts, and phase and retryCount stay."""

_KILLS = {
    "RestartJob": Plan("job", RETAIN_NONE, "restart", drop_podgroup=True),
    **{action: Plan(kill, RETAIN_NONE, "restart") for action, kill in TARGETS.items()},
    NO_PARTITION: Plan("none", RETAIN_NONE, "keep"),
    "AbortJob": Plan("job", RETAIN_SOFT, "to:Aborting", drop_podgroup=True),
    "CompleteJob": Plan("job", RETAIN_SOFT, "to:Completing", drop_podgroup=True),
    "TerminateJob": Plan("job", RETAIN_SOFT, "to:Terminating", drop_podgroup=True),
}


def plan(phase: str, action: str) -> Plan:
    if phase in ("Pending", "Running"):
        return _KILLS.get(action) or Plan("", RETAIN_NONE, phase.lower())
    if phase == "Restarting":
        if action in TARGETS:  # Volcano: killTarget again, then the Restarting rule
            return Plan(TARGETS[action], RETAIN_NONE, "restarting")
        return Plan("none", RETAIN_NONE, "restarting")
    soft_kill = Plan("job", RETAIN_SOFT, "keep", drop_podgroup=True)
    if phase in ("Aborting", "Aborted"):
        if action == "ResumeJob":
            return Plan("job", RETAIN_SOFT, "restart", drop_podgroup=True)
        return Plan("job", RETAIN_SOFT, "aborting" if phase == "Aborting" else "keep", True)
    if phase == "Completing":
        return Plan("job", RETAIN_SOFT, "completing", drop_podgroup=True)
    if phase == "Terminating":
        return Plan("job", RETAIN_SOFT, "terminating", drop_podgroup=True)
    return soft_kill  # Completed, Terminated, Failed: make sure nothing is left running


@dataclass(slots=True)
class Counts:
    pending: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    unknown: int = 0
    terminating: int = 0
    tasks: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, pod: Obj) -> None:
        if P.deleting(pod):
            self.terminating += 1
            return
        phase = P.phase(pod)
        attr = phase.lower() if phase in ("Pending", "Running", "Succeeded", "Failed") else None
        if attr is None:
            self.unknown += 1
            phase = "Unknown"
        else:
            setattr(self, attr, getattr(self, attr) + 1)
        task = P.annotations_of(pod).get(names.VOLCANO_TASK_SPEC)
        if task:
            per = self.tasks.setdefault(task, {})
            per[phase] = per.get(phase, 0) + 1

    @property
    def alive(self) -> int:
        return self.terminating + self.pending + self.running


def count(pods: Iterable[Obj]) -> Counts:
    c = Counts()
    for pod in pods:
        c.add(pod)
    return c


def _running_outcome(job: Job, c: Counts) -> str | None:
    """Volcano's Running-state rule: finished once every pod succeeded or failed."""
    replicas = job.spec.total_replicas
    if replicas == 0:
        return None  # scaled to zero: keep the phase
    min_success = job.spec.min_success
    if min_success is not None and c.succeeded >= min_success:
        return "Completed"
    if c.succeeded + c.failed != replicas:
        return None
    task_min_total = sum(t.min_members for t in job.spec.tasks)
    if job.spec.gang_size >= task_min_total:
        for task in job.spec.tasks:
            if task.min_available is None:
                continue
            done = c.tasks.get(task.name, {}).get("Succeeded", 0)
            if done < task.min_available:
                return "Failed"
    if min_success is not None and c.succeeded < min_success:
        return "Failed"
    return "Completed" if c.succeeded >= job.spec.gang_size else "Failed"


def next_phase(rule: str, job: Job, c: Counts) -> tuple[str | None, int]:
    """(new phase or None to keep, retryCount increment)."""
    if rule == "restart":
        return "Restarting", 1
    if rule.startswith("to:"):
        return rule[3:], 0
    if rule == "pending":
        done = c.running + c.succeeded + c.failed
        return ("Running" if job.spec.gang_size <= done else None), 0
    if rule == "running":
        return _running_outcome(job, c), 0
    if rule == "restarting":
        if job.status.retry_count >= job.spec.max_retry:
            return "Failed", 0
        if job.spec.total_replicas - c.terminating >= job.spec.gang_size:
            return "Pending", 0
        return None, 0
    if rule in ("aborting", "completing", "terminating"):
        if c.alive:
            return None, 0
        return {"aborting": "Aborted", "completing": "Completed", "terminating": "Terminated"}[
            rule
        ], 0
    return None, 0


def retained(job: Job, plan_: Plan) -> frozenset[str]:
    """On the last retry Volcano keeps Succeeded/Failed pods whatever the plan says
    (killJob); a task or pod restart kills its target whatever its phase (killTarget)."""
    if plan_.kill in ("task", "pod"):
        return RETAIN_NONE
    if job.status.retry_count >= job.spec.max_retry - 1:
        return RETAIN_SOFT
    return plan_.retain
