"""Queue status: state machine, PodGroup counts per phase, allocated resources.

State follows Volcano's queue controller: OpenQueue opens; CloseQueue closes at
once when no PodGroup uses the queue, else the queue is Closing until the last
one is gone. Without a command, Closing becomes Closed when empty, and an
unset state is Open.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from controllers import pods as P
from controllers.store import Obj
from pyextender.api.resources import format_amount

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
