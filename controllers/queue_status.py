"""Queue status: state machine, PodGroup counts per phase, allocated resources.

State follows Volcano's queue controller: OpenQueue opens; CloseQueue closes at
once when no PodGroup uses the queue, else the queue is Closing until the last
one is gone. Without a command, Closing becomes Closed when empty, and an
unset state is Open.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from controllers import pods as P
from controllers.store import Obj
from pyextender.api.resources import format_amount, parse_resource_list

PHASE_FIELDS = {
    "Pending": "pending",
    "Inqueue": "inqueue",
    "Running": "running",
    "Unknown": "unknown",
    "Completed": "completed",
}


def next_state(current: str | None, action: str | None, podgroups: int) -> str:
    """Queue state after ``action`` (OpenQueue, CloseQueue or None for a plain sync)."""
    if action == "OpenQueue":
        return "Open"
    if action == "CloseQueue":
        return "Closed" if podgroups == 0 else "Closing"
    if not current or current == "Open":
        return "Open"
    if current == "Closing":
        return "Closed" if podgroups == 0 else "Closing"
    return current  # Closed stays closed; Unknown is left to an explicit command


def queue_of(pg: Obj) -> str:
    return str((pg.get("spec") or {}).get("queue") or "default")


def phase_counts(podgroups: Iterable[Obj]) -> dict[str, int]:
    counts = dict.fromkeys(PHASE_FIELDS.values(), 0)
    for pg in podgroups:
        phase = str((pg.get("status") or {}).get("phase") or "Pending")
        field = PHASE_FIELDS.get(phase)
        if field is not None:
            counts[field] += 1
    return counts


def allocated(members: Iterable[Obj]) -> dict[str, str]:
    """Sum of requests of bound, non-terminated pods, as a ResourceList."""
    total: dict[str, int] = {}
    for pod in members:
        if not P.holds_resources(pod):
            continue
        for name, value in P.requests(pod).items():
            total[name] = total.get(name, 0) + value
    return {name: format_amount(name, v) for name, v in sorted(total.items()) if v}


def status_patch(
    queue: Obj,
    podgroups: list[Obj],
    members: Iterable[Obj],
    action: str | None = None,
) -> dict[str, Any]:
    """Merge patch for the Queue's status; {} when nothing changes."""
    status = queue.get("status") or {}
    want: dict[str, Any] = dict(phase_counts(podgroups))
    want["state"] = next_state(status.get("state"), action, len(podgroups))
    want["allocated"] = allocated(members)
    patch: dict[str, Any] = {}
    for field, value in want.items():
        current = status.get(field)
        if field == "allocated":
            # Volcano's Queue CRD requires status.allocated: always write it once
            if current is None or current != value:
                # merge patch merges maps: name dropped resources explicitly as null
                patch[field] = {**dict.fromkeys(current or {}), **value}
        elif field == "state":
            if current != value:
                patch[field] = value
        elif int(current or 0) != value:
            patch[field] = value
    return patch


# -- the queue tree: closing a parent closes its children, opening reopens them --------

CLOSED_BY_PARENT = "volcano.sh/closed-by-parent"
"""Annotation Volcano's queue controller puts on a queue it closed because its parent
closed ("true"), so that reopening the parent reopens only those; "false" after an
OpenQueue. A queue closed by its own CloseQueue never carries "true"."""

ROOT = "root"
SHUT = ("Closed", "Closing")
OPEN_RETRIES = 15
"""OpenQueue under a closed parent is retried this many times (the parent may be being
opened at the same moment) before it is dropped, as Volcano's controller requeues a
failed request up to its maxRequeueNum (15)."""


@dataclass(frozen=True, slots=True)
class TreeSteps:
    """What the queue tree asks for, besides the queue's own state change."""

    refuse: str = ""
    """Why the action cannot run now (it is retried, then dropped with this reason)."""
    close_children: tuple[str, ...] = ()
    """Children to mark closed-by-parent and close (the cascade goes on from them)."""
    open_children: tuple[str, ...] = ()
    """Children closed by this queue's closing, to open again."""
    follow: str | None = None
    """OpenQueue/CloseQueue this queue takes itself to follow its parent's state."""
    mark: str | None = None
    """Value for this queue's own closed-by-parent annotation, when it must change."""


def parent_of(queue: Obj) -> str:
    name = str((queue.get("metadata") or {}).get("name") or "")
    return "" if name == ROOT else str((queue.get("spec") or {}).get("parent") or ROOT)


def state_of(queue: Obj | None) -> str:
    return str(((queue or {}).get("status") or {}).get("state") or "")


def closed_by_parent(queue: Obj) -> bool:
    annotations = (queue.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(CLOSED_BY_PARENT) or "") == "true"


def tree_steps(
    queue: Obj, parent: Obj | None, children: list[Obj], action: str | None
) -> TreeSteps:
    """The hierarchy's part of an OpenQueue/CloseQueue command (or of a plain sync, action
    None) on ``queue``, given its parent (None for root or a missing one) and children.

    As Volcano's queue controller: CloseQueue on a queue that is not yet Closed/Closing
    closes every open child (marked closed-by-parent); root cannot be closed. OpenQueue
    on a queue that is not Open is refused while its parent (other than root) is
    Closed/Closing, else reopens the children marked closed-by-parent. A plain sync
    closes an open queue whose parent is shut, and reopens a queue closed by its parent
    once the parent is Open again.
    """
    meta_ = queue.get("metadata") or {}
    name = str(meta_.get("name") or "")
    state = state_of(queue)
    own_mark = str((meta_.get("annotations") or {}).get(CLOSED_BY_PARENT) or "")
    if action == "CloseQueue":
        if name == ROOT:
            return TreeSteps(refuse="the root queue cannot be closed")
        if state in SHUT:
            return TreeSteps()
        shut = tuple(str(c["metadata"]["name"]) for c in children if state_of(c) not in SHUT)
        return TreeSteps(close_children=shut)
    if action == "OpenQueue":
        if state != "Open":
            if parent is not None and parent_of(queue) != ROOT and state_of(parent) in SHUT:
                return TreeSteps(
                    refuse=f"its parent queue {parent_of(queue)} is {state_of(parent)}; "
                    "open the parent queue first"
                )
            reopen = tuple(str(c["metadata"]["name"]) for c in children if closed_by_parent(c))
            return TreeSteps(open_children=reopen, mark=None if own_mark == "false" else "false")
        return TreeSteps(mark=None if own_mark == "false" else "false")
    if parent is None:
        return TreeSteps()
    if state_of(parent) in SHUT and state not in SHUT:
        return TreeSteps(follow="CloseQueue", mark=None if own_mark == "true" else "true")
    if state_of(parent) == "Open" and state in SHUT and own_mark == "true":
        return TreeSteps(follow="OpenQueue")
    return TreeSteps()


def guarantee_of(queue: Obj) -> dict[str, int]:
    """spec.guarantee.resource as amounts; {} when missing or malformed."""
    raw = ((queue.get("spec") or {}).get("guarantee") or {}).get("resource")
    try:
        return parse_resource_list(raw if isinstance(raw, dict) else None)
    except (ValueError, TypeError):
        return {}


def children_over_guarantee(queue: Obj, children: list[Obj]) -> str:
    """Why the children's guarantees do not fit the queue's own ("" when they do): on
    each resource the queue guarantees, their sum must stay within it. Volcano's capacity
    plugin logs the same check (checkHierarchicalQueue); the scheduler then honours the
    children's guarantees only within the parent's."""
    own = guarantee_of(queue)
    if not own or not children:
        return ""
    total: dict[str, int] = {}
    for c in children:
        for name, value in guarantee_of(c).items():
            total[name] = total.get(name, 0) + value
    over = [
        f"{name} {format_amount(name, total[name])} > {format_amount(name, limit)}"
        for name, limit in sorted(own.items())
        if total.get(name, 0) > limit
    ]
    if not over:
        return ""
    names = ", ".join(sorted(str((c.get("metadata") or {}).get("name")) for c in children))
    return f"the guarantees of child queues ({names}) exceed this queue's: " + "; ".join(over)
