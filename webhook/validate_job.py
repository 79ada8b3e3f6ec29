"""batch.volcano.sh Job rules beyond the schema (the ones Volcano's own webhook enforces).

On CREATE and UPDATE: at least one task, named; pod names that fit 63
characters; pod templates whose containers the API server would accept
(names, images, resources: see validate_pod_template); lifecycle policies
without duplicate events or exit codes, no internal events, ``*`` alone;
volumes with one unique mount path each and exactly one of volumeClaim /
volumeClaimName; task dependencies that name tasks of the job and form no
cycle. Fields our controllers do not implement are
refused naming the field (a task's partitionPolicy), never accepted and ignored.
On CREATE: the queue exists and is open.
On UPDATE: only minAvailable, maxRetry and, per task, replicas, minAvailable
and maxRetry may change, and tasks may be neither added nor removed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyextender.api.volcano import Job
from pyextender.api.volcano.codec import show
from pyextender.api.volcano.job import LifecyclePolicy, TaskSpec
from webhook.findings import Findings
from webhook.queues import QueueSource, absent
from webhook.validate_pod_template import check_pod_template

POD_NAME_MAX = 63
"""Pod names become hostnames (DNS labels) in Volcano's svc plugin: 63 characters."""

INTERNAL_EVENTS = frozenset({"OutOfSync", "CommandIssued"})
"""Events the Job controller raises for itself; a policy on them would loop."""

UPDATABLE_SPEC = frozenset({"minAvailable", "maxRetry"})
UPDATABLE_TASK = frozenset({"replicas", "minAvailable", "maxRetry"})


def _check_policies(policies: list[LifecyclePolicy], path: str, found: Findings) -> None:
    events: dict[str, int] = {}
    exit_codes: dict[int, int] = {}
    for i, policy in enumerate(policies):
        named = ([policy.event] if policy.event else []) + policy.events
        for event in dict.fromkeys(named):
            if event in INTERNAL_EVENTS:
                found.problem(f"{path}[{i}].event", f"{event} is raised internally; not allowed")
            elif event in events:
                found.problem(
                    f"{path}[{i}].event", f"{event} is already handled by {path}[{events[event]}]"
                )
            else:
                events[event] = i
        if "PodPending" in named and policy.timeout is None:
            found.problem(
                f"{path}[{i}].timeout",
                "required with PodPending: the action is taken when a pod stays Pending that long",
            )
        if policy.exit_code is not None:
            first = exit_codes.get(policy.exit_code)
            if first is not None:
                found.problem(
                    f"{path}[{i}].exitCode",
                    f"{policy.exit_code} is already handled by {path}[{first}]",
                )
            else:
                exit_codes[policy.exit_code] = i
    if "*" in events and len(events) + len(exit_codes) > 1:
        found.problem(path, "a policy for event '*' must be the only policy")


def _check_volumes(job: Job, found: Findings, creating: bool) -> None:
    mounts: dict[str, int] = {}
    for i, volume in enumerate(job.spec.volumes):
        path = f"spec.volumes[{i}]"
        first = mounts.get(volume.mount_path)
        if first is not None:
            found.problem(
                f"{path}.mountPath",
                f"{show(volume.mount_path)} is already mounted by spec.volumes[{first}]",
            )
        mounts.setdefault(volume.mount_path, i)
        if volume.volume_claim is None and not volume.volume_claim_name:
            found.problem(path, "one of volumeClaim (a new PVC) or volumeClaimName is required")
        elif volume.volume_claim is not None and volume.volume_claim_name and creating:
            # on UPDATE both are set: the Job controller names the PVC it created
            found.problem(
                path, "set volumeClaim to create a PVC or volumeClaimName to use one, not both"
            )


def _dependency_cycle(tasks: list[TaskSpec]) -> list[str]:
    """A cycle of task names through dependsOn ([] when there is none)."""
    deps = {t.name: (t.depends_on.name if t.depends_on else []) for t in tasks}
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(name: str) -> list[str]:
        state[name] = 1
        path.append(name)
        for dep in deps.get(name, []):
            if state.get(dep) == 1:
                return [*path[path.index(dep) :], dep]
            if dep in deps and dep not in state and (cycle := visit(dep)):
                return cycle
        path.pop()
        state[name] = 2
        return []

    for name in deps:
        if name not in state and (cycle := visit(name)):
            return cycle
    return []


def _check_tasks(job: Job, found: Findings) -> None:
    tasks = job.spec.tasks
    if not tasks:
        found.problem("spec.tasks", "at least one task is required")
        return
    names = {t.name for t in tasks}
    job_name = job.metadata.name
    for i, task in enumerate(tasks):
        path = f"spec.tasks[{i}]"
        if not task.name:
            found.problem(f"{path}.name", "required (a DNS label, unique in the job)")
        elif job_name and task.replicas:
            # Volcano names pods <job>-<task>-<index>
            longest = f"{job_name}-{task.name}-{task.replicas - 1}"
            if len(longest) > POD_NAME_MAX:
                found.problem(
                    f"{path}.name",
                    f"pod names such as {show(longest)} would be {len(longest)} characters, "
                    f"more than {POD_NAME_MAX}; shorten the job or task name",
                )
        pod_spec = task.template.get("spec")
        if not isinstance(pod_spec, Mapping) or not pod_spec.get("containers"):
            found.problem(f"{path}.template.spec.containers", "at least one container is required")
        check_pod_template(task.template, f"{path}.template", found)
        _check_policies(task.policies, f"{path}.policies", found)
        if task.partition_policy is not None:
            found.problem(
                f"{path}.partitionPolicy",
                "not supported by pyextender: partitions are not placed as topology units; "
                "remove it (spec.networkTopology constrains the whole gang)",
            )
        for dep in task.depends_on.name if task.depends_on else []:
            if dep not in names:
                found.problem(f"{path}.dependsOn.name", f"no task named {show(dep)} in this job")
            elif dep == task.name:
                found.problem(f"{path}.dependsOn.name", "a task cannot depend on itself")
    cycle = _dependency_cycle(tasks)
    if len(cycle) > 2:  # a self-dependency is reported above
        found.problem("spec.tasks", "task dependencies form a cycle: " + " -> ".join(cycle))


def _changed_fields(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """spec fields that changed and may not, as paths."""
    changed = [
        f"spec.{key}"
        for key in sorted(set(old) | set(new))
        if key not in UPDATABLE_SPEC and key != "tasks" and old.get(key) != new.get(key)
    ]
    old_tasks, new_tasks = old.get("tasks") or [], new.get("tasks") or []
    if not isinstance(old_tasks, list) or not isinstance(new_tasks, list):
        return [*changed, "spec.tasks"]
    if len(old_tasks) != len(new_tasks):
        return [*changed, "spec.tasks (tasks may not be added or removed)"]
    for i, (a, b) in enumerate(zip(old_tasks, new_tasks, strict=True)):
        a = a if isinstance(a, Mapping) else {}
        b = b if isinstance(b, Mapping) else {}
        changed += [
            f"spec.tasks[{i}].{key}"
            for key in sorted(set(a) | set(b))
            if key not in UPDATABLE_TASK and a.get(key) != b.get(key)
        ]
    return changed


def _without_generated_claim_names(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The Job controller writes volumeClaimName for the PVCs it creates; that is no user edit."""
    out = dict(spec)
    volumes = spec.get("volumes")
    if isinstance(volumes, list):
        out["volumes"] = [
            {k: v for k, v in vol.items() if k != "volumeClaimName"}
            if isinstance(vol, Mapping) and vol.get("volumeClaim") is not None
            else vol
            for vol in volumes
        ]
    return out


def check_job_spec(job: Job) -> Findings:
    """The rules of a new Job's spec that need no lookups (a CronJob's template gets them)."""
    found = Findings()
    _check_tasks(job, found)
    _check_policies(job.spec.policies, "spec.policies", found)
    _check_volumes(job, found, creating=True)
    return found


def check_job(
    job: Job,
    operation: str,
    queues: QueueSource,
    old_spec: Mapping[str, Any] | None = None,
    new_spec: Mapping[str, Any] | None = None,
) -> Findings:
    """Rules for CREATE and UPDATE; ``old_spec``/``new_spec`` are the raw specs on UPDATE."""
    found = Findings()
    _check_tasks(job, found)
    _check_policies(job.spec.policies, "spec.policies", found)
    _check_volumes(job, found, creating=operation == "CREATE")
    if operation == "CREATE":
        name = job.spec.queue
        info = queues.get(name, recent=True)
        if info is None:
            found.problem("spec.queue", absent(name))
        elif not info.is_open:
            found.problem(
                "spec.queue",
                f"queue {show(name)} is {info.state}; only an Open queue takes new jobs",
            )
    elif old_spec is not None and new_spec is not None:
        changed = _changed_fields(
            _without_generated_claim_names(old_spec), _without_generated_claim_names(new_spec)
        )
        if changed:
            found.problem(
                "spec",
                "only minAvailable, maxRetry and tasks[*].replicas/minAvailable/maxRetry may "
                "change after creation; changed: " + ", ".join(changed),
            )
    return found
