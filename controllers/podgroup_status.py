"""PodGroup status from its member pods: counts, phase and the Scheduled condition.

We own ``running``/``succeeded``/``failed``, the phases Running, Completed and
Unknown, and the condition of type Scheduled. The sidecar (the scheduler) owns
Pending and Inqueue and the Unschedulable condition: it writes Pending for every
new PodGroup it does not admit at once, as Volcano's scheduler does at the end of
each session (pkg/scheduler/framework/session.go, jobStatus), so nothing here
ever writes Pending or Inqueue. Volcano's scheduler computes the same thing each session (a member
counts as *allocated* when it is bound and alive, or has succeeded):

- allocated >= minMember: Running, or Completed when every allocated member
  has succeeded;
- a Running gang whose allocated members drop below minMember: Unknown (the
  gang is broken; the sidecar decides whether it goes back to Pending);
- otherwise the phase is left alone.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from controllers import pods as P
from controllers.store import Obj

SCHEDULED = "Scheduled"
REASON_SCHEDULED = "GangScheduled"


@dataclass(frozen=True, slots=True)
class Members:
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    allocated: int = 0
    """Bound and alive (Pending-on-node or Running), plus Succeeded."""


def count_members(members: Iterable[Obj]) -> Members:
    running = succeeded = failed = allocated = 0
    for pod in members:
        phase = P.phase(pod)
        if phase == "Succeeded":
            succeeded += 1
            allocated += 1
        elif phase == "Failed":
            failed += 1
        elif P.deleting(pod):
            continue  # releasing: neither running nor allocated any more
        elif P.node_name(pod) and phase in ("Pending", "Running"):
            allocated += 1
            if phase == "Running":
                running += 1
    return Members(running, succeeded, failed, allocated)


def next_phase(current: str | None, min_member: int, m: Members) -> str | None:
    """The phase we move the PodGroup to, or None to leave it as it is."""
    if current == "Completed":
        return None  # terminal
    if m.allocated > 0 and m.allocated >= min_member:
        target = "Completed" if m.succeeded == m.allocated else "Running"
        return target if target != current else None
    if current == "Running":
        return "Unknown"
    return None


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def scheduled_conditions(
    conditions: list[dict[str, Any]], min_member: int, m: Members, now: str | None = None
) -> list[dict[str, Any]] | None:
    """The conditions list with our Scheduled condition set, or None if unchanged.

    Scheduled turns True once minMember members are allocated, and stays so:
    Volcano never withdraws it; a broken gang shows as phase Unknown.
    """
    if m.allocated == 0 or m.allocated < min_member:
        return None
    message = f"{m.allocated}/{max(min_member, 1)} members of the gang are bound"
    for cond in conditions:
        if cond.get("type") == SCHEDULED and cond.get("status") == "True":
            return None
    out = [c for c in conditions if c.get("type") != SCHEDULED]
    out.append(
        {
            "type": SCHEDULED,
            "status": "True",
            "reason": REASON_SCHEDULED,
            "message": message,
            "lastTransitionTime": now or _now(),
        }
    )
    return out


def status_patch(pg: Obj, members: Iterable[Obj], now: str | None = None) -> dict[str, Any]:
    """Merge patch for ``status`` touching only our fields; {} when nothing changes."""
    spec = pg.get("spec") or {}
    status = pg.get("status") or {}
    min_member = int(spec.get("minMember") or 0)
    m = count_members(members)
    patch: dict[str, Any] = {}
    for field in ("running", "succeeded", "failed"):
        value = getattr(m, field)
        if int(status.get(field) or 0) != value:
            patch[field] = value
    phase = next_phase(status.get("phase"), min_member, m)
    if phase is not None:
        patch["phase"] = phase
    conds = scheduled_conditions(list(status.get("conditions") or []), min_member, m, now)
    if conds is not None:
        patch["conditions"] = conds
    return patch
