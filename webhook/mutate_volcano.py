"""Defaults Volcano's own webhook writes into new Jobs and Queues, as JSONPatch.

Tools written against Volcano read these fields back from the stored object
(``spec.queue``, task names ``default0``...), so we store the same values.
Mutation runs before validation: a Job whose tasks have no names is named
first, then validated.

Job (CREATE):

- ``spec.queue`` empty -> ``default``; ``spec.schedulerName`` empty -> ``volcano``;
- ``spec.maxRetry`` 0 or unset -> 3;
- per task: no name -> ``default<index>``; no ``minAvailable`` -> its replicas;
  ``maxRetry`` 0 or unset -> 3; a hostNetwork pod without ``dnsPolicy`` ->
  ``ClusterFirstWithHostNet`` (cluster DNS still resolves the job's host names);
- ``spec.minAvailable`` 0 or unset -> the sum of the tasks' minAvailable
  (replicas where a task has none);
- ``mpi``, ``pytorch`` and ``tensorflow`` plugins bring ``svc``; ``mpi`` brings ``ssh``.

Queue (CREATE): ``spec.weight`` 0 -> 1; ``spec.reclaimable`` unset -> true; a
``volcano.sh/hierarchy`` not starting at ``root`` is prefixed with ``root``
(and its weights with ``1``).

The document is read leniently: values of the wrong type are left alone for
validation to report by path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pyextender.api.names import SCHEDULER_NAME
from pyextender.api.volcano import Job, Queue
from pyextender.api.volcano.queue import DEFAULT_QUEUE, HIERARCHY, HIERARCHY_WEIGHTS, ROOT_QUEUE

Patch = list[dict[str, Any]]

DEFAULT_MAX_RETRY = 3
"""Volcano's default retries of a job and of each task."""
DEFAULT_TASK_PREFIX = "default"
"""Unnamed task ``i`` becomes ``default<i>``."""
HOST_NETWORK_DNS = "ClusterFirstWithHostNet"
PLUGINS_NEEDING_SVC = ("mpi", "pytorch", "tensorflow")


def _pointer(*parts: str | int) -> str:
    """A JSON pointer (RFC 6901: ``~`` -> ``~0``, ``/`` -> ``~1``)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _add(path: str, value: Any) -> dict[str, Any]:
    # "add" on an existing member replaces it, so it also fills explicit zeros/empties
    return {"op": "add", "path": path, "value": value}


def _int(value: Any) -> int | None:
    return value if type(value) is int else None


def _unset_or_zero(value: Any) -> bool:
    return value is None or (type(value) is int and value == 0)


def _task_patch(i: int, task: Mapping[str, Any]) -> tuple[Patch, int | None]:
    """Patches of task ``i`` and its minimum after defaulting (None if unreadable)."""
    out: Patch = []
    if not task.get("name"):
        out.append(_add(_pointer("spec", "tasks", i, "name"), f"{DEFAULT_TASK_PREFIX}{i}"))
    template = task.get("template")
    pod = template.get("spec") if isinstance(template, Mapping) else None
    if isinstance(pod, Mapping) and pod.get("hostNetwork") is True and not pod.get("dnsPolicy"):
        out.append(
            _add(_pointer("spec", "tasks", i, "template", "spec", "dnsPolicy"), HOST_NETWORK_DNS)
        )
    replicas = 0 if task.get("replicas") is None else _int(task.get("replicas"))
    minimum: int | None = _int(task.get("minAvailable"))
    if task.get("minAvailable") is None and replicas is not None:
        out.append(_add(_pointer("spec", "tasks", i, "minAvailable"), replicas))
        minimum = replicas
    if _unset_or_zero(task.get("maxRetry")):
        out.append(_add(_pointer("spec", "tasks", i, "maxRetry"), DEFAULT_MAX_RETRY))
    return out, minimum


def job_patch(job: Mapping[str, Any]) -> Patch:
    """The JSONPatch that fills Volcano's defaults into a new Job ([] when none apply)."""
    out: Patch = []
    spec = job.get("spec")
    if spec is None:
        out.append(_add("/spec", {}))
        spec = {}
    if not isinstance(spec, Mapping):
        return []
    if not spec.get("queue"):
        out.append(_add("/spec/queue", DEFAULT_QUEUE))
    if not spec.get("schedulerName"):
        out.append(_add("/spec/schedulerName", SCHEDULER_NAME))
    if _unset_or_zero(spec.get("maxRetry")):
        out.append(_add("/spec/maxRetry", DEFAULT_MAX_RETRY))
    tasks = spec.get("tasks")
    minimums: list[int | None] = []
    if isinstance(tasks, list):
        for i, task in enumerate(tasks):
            if isinstance(task, Mapping):
                patch, minimum = _task_patch(i, task)
                out += patch
                minimums.append(minimum)
            else:
                minimums.append(None)
    if _unset_or_zero(spec.get("minAvailable")) and minimums and None not in minimums:
        out.append(_add("/spec/minAvailable", sum(m for m in minimums if m is not None)))
    plugins = spec.get("plugins")
    if isinstance(plugins, Mapping):
        if any(p in plugins for p in PLUGINS_NEEDING_SVC) and "svc" not in plugins:
            out.append(_add("/spec/plugins/svc", []))
        if "mpi" in plugins and "ssh" not in plugins:
            out.append(_add("/spec/plugins/ssh", []))
    return out


def queue_patch(queue: Mapping[str, Any]) -> Patch:
    """The JSONPatch that fills Volcano's defaults into a new Queue ([] when none apply)."""
    out: Patch = []
    meta = queue.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    if isinstance(annotations, Mapping):
        hierarchy, weights = annotations.get(HIERARCHY), annotations.get(HIERARCHY_WEIGHTS)
        if (
            isinstance(hierarchy, str)
            and isinstance(weights, str)
            and hierarchy
            and weights
            and not hierarchy.startswith(ROOT_QUEUE)
        ):
            out.append(
                _add(_pointer("metadata", "annotations", HIERARCHY), f"{ROOT_QUEUE}/{hierarchy}")
            )
            out.append(_add(_pointer("metadata", "annotations", HIERARCHY_WEIGHTS), f"1/{weights}"))
    spec = queue.get("spec")
    if spec is None:
        out.append(_add("/spec", {}))
        spec = {}
    if not isinstance(spec, Mapping):
        return out
    if spec.get("reclaimable") is None:
        out.append(_add("/spec/reclaimable", True))
    if _unset_or_zero(spec.get("weight")):
        out.append(_add("/spec/weight", 1))
    return out


MUTATED_KINDS: dict[tuple[str, str], Callable[[Mapping[str, Any]], Patch]] = {
    (Job.KIND.group, Job.KIND.kind): job_patch,
    (Queue.KIND.group, Queue.KIND.kind): queue_patch,
}
"""(group, kind) -> its patch function."""
