"""One scheduling cycle: the configured actions, in order, over one session."""

from __future__ import annotations

from collections.abc import Sequence

from pyextender.actions.allocate import admit_all_pending, allocate
from pyextender.actions.decisions import Decisions
from pyextender.actions.enqueue import account_admitted, admitted, awaiting_members, enqueue
from pyextender.actions.evict import preempt, reclaim
from pyextender.actions.reservation import reserve
from pyextender.framework.session import Session

KNOWN_ACTIONS = ("enqueue", "allocate", "preempt", "reclaim", "backfill", "reservation", "shuffle")
"""enqueue moves PodGroups to Inqueue; allocate lifts gang gates (kube-scheduler's own
cycle then places the pods: our filter/prioritize/bind); reservation holds nodes for
the gang waiting past its sla-waiting-time (also done whenever the sla plugin is on);
shuffle is accepted for Volcano compatibility and does nothing."""


def run_cycle(
    ssn: Session, actions: Sequence[str], sla: bool, require_fit: bool = False
) -> Decisions:
    """Decide; apply nothing. Reservations are made when ``reservation`` is among the
    actions or ``sla`` (the sla plugin is on, giving every gang its waiting time).
    ``require_fit``: enqueue's stricter mode (admit only gangs that fit now)."""
    decisions = Decisions()
    # Reservations from the last cycle (in ssn.state.reservations) steer this
    # cycle's admissions; fresh ones, from who is still starving, take over next.
    backfill = "backfill" in actions
    relifted: set[str] = set()
    if "enqueue" in actions:
        relifted = enqueue(ssn, decisions, backfill, require_fit)
    if "allocate" in actions:
        if "enqueue" not in actions:
            relifted = account_admitted(ssn, decisions, require_fit=False)
            admit_all_pending(ssn, decisions)
        allocate(ssn, decisions, backfill, relifted)
    if "preempt" in actions:
        preempt(ssn, decisions)
    if "reclaim" in actions:
        reclaim(ssn, decisions)
    if sla or "reservation" in actions:
        decisions.reservations = reserve(ssn, decisions.starving)
    admitting = {j.key for j in decisions.admit}
    # A group enqueue has not judged yet (its pods are on their way) is written
    # Pending only if it still waits once judged: most are admitted in the next
    # cycle, and the write (one of ~7 API writes per single-pod gang on this path)
    # would only be overwritten by Inqueue.
    waits_for_pods = "enqueue" in actions
    decisions.pending = [
        j
        for j in ssn.jobs.values()
        if j.group is not None
        and not j.group.phase_written
        and not admitted(j)
        and j.key not in admitting
        and not (waits_for_pods and awaiting_members(ssn, j))
    ]
    return decisions
