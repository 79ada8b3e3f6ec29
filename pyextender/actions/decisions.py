"""What one cycle of the actions decided; applied to the API by the sidecar."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pyextender.cache.reservations import Reservation
from pyextender.framework.session import Job, Task


@dataclass(frozen=True, slots=True)
class Eviction:
    task: Task
    action: str
    """"preempt" or "reclaim"."""
    for_job: str
    reason: str


@dataclass(slots=True)
class Decisions:
    admit: list[Job] = field(default_factory=list)
    """Pending -> Inqueue (with enqueue.requireFit their first members' gates are in
    ``lift``; otherwise allocate lifts them when the whole gang fits)."""
    pending: list[Job] = field(default_factory=list)
    """PodGroups with no phase yet that stay Pending: phase Pending is written for
    them, as Volcano's scheduler writes it for every group not Inqueue or Running."""
    lift: list[Task] = field(default_factory=list)
    """Pods whose gang gate comes off: members a gang needs to reach minMember,
    members of admitted gangs still gated after a crash, elastic members in
    job order."""
    unschedulable: dict[str, str] = field(default_factory=dict)
    """job key -> why it was not admitted (PodGroup condition + event)."""
    assembling: set[str] = field(default_factory=set)
    """Jobs whose pods are still arriving (created moments ago): their
    "N/M tasks exist" is normal, so it is not written on the PodGroup."""
    starving: list[Job] = field(default_factory=list)
    """Jobs that passed the queue checks but did not fit: preempt/reclaim/reserve targets."""
    evictions: list[Eviction] = field(default_factory=list)
    reservations: list[Reservation] = field(default_factory=list)
    held_until: float = math.inf
    """When (epoch seconds) the newcomer grace stops holding the extras it held back
    this cycle (allocate's walk stopped at a member too young); inf when it held none.
    The loop cycles again then, not a whole gap later."""
