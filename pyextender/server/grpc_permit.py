"""Framework mode's gang barrier: the Permit decision.

The HTTP front end holds gang members inside its bind verb (barrier.py). In
framework mode kube-scheduler itself holds them, in Permit, and the shim asks
us, member by member, whether the gang is ready. A member counts when it is
bound, reserved here, or waiting in the caller's Permit; the last case lets a
restarted sidecar (whose reservations were in memory) still count members
that kube-scheduler kept waiting.

A gang waits as long as it makes progress: the Wait reply carries the stall
window (--gang-timeout) and a cap on the whole wait (--gang-max-wait), and the
shim rejects the gang's waiting members once no new member has reached Permit
for the stall window, or once the cap has passed since its first member
arrived. A fixed wait from the first member cannot work: kube-scheduler brings
~15-20 pods/s to Permit, so a gang of 1,000 needs about a minute to assemble.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pyextender.api.objects import PodInfo
from pyextender.cache.cluster import ClusterCache

DEFAULT_MAX_WAIT_S = 600.0
"""Cap on a gang's whole wait in Permit, seconds. Enough for a gang of ~9,000
members at kube-scheduler's 15 pods/s, while a gang that trickles in holds its
reserved capacity for at most 10 minutes."""
FRAMEWORK_MAX_WAIT_S = 900.0
"""kube-scheduler's own cap on a Permit wait (15 min, maxTimeout in
pkg/scheduler/framework/runtime); --gang-max-wait may not exceed it."""


@dataclass(frozen=True, slots=True)
class Quorum:
    gang: str
    """PodGroup key "namespace/name"; "" for a pod of no group."""
    ready: int
    """Members bound, reserved or waiting, this pod included."""
    min_member: int
    """minMember of the PodGroup (0 when it is not a gang)."""

    @property
    def reached(self) -> bool:
        return self.ready >= self.min_member

    def reason(self, stall_s: float, max_wait_s: float) -> str:
        return (
            f"gang {self.gang}: {self.ready}/{self.min_member} members reserved; "
            f"waiting while members keep arriving (rejected after {stall_s:g}s without "
            f"a new one, or {max_wait_s:g}s in all)"
        )


def quorum(cache: ClusterCache, pod: PodInfo, waiting: Iterable[str]) -> Quorum:
    """How many members of ``pod``'s gang may bind now, counting ``pod`` itself."""
    key = cache.group_of(pod)
    group = cache.groups.get(key) if key else None
    if group is None or group.min_member <= 1:
        # no gang to wait for (the caller refuses a pod of an unknown PodGroup first)
        return Quorum(key, 1, 0)
    # members that Succeeded count too (a late elastic member must not wait for
    # minMember new ones)
    counted = {pod.uid, *waiting, *cache.succeeded.uids(key)}
    held = cache.state.pods
    for uid in cache.members.uids(key):
        member = cache.pods_by_uid.get(uid)
        if member is not None and member.node_name and not member.deleting:
            counted.add(uid)
            continue
        rec = held.get(uid)
        if rec is not None and rec.assumed:
            counted.add(uid)
    return Quorum(key, len(counted), group.min_member)
