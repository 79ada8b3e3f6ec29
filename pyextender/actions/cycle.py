"""One scheduling cycle: the configured actions, in order, over one session."""

from __future__ import annotations

from collections.abc import Sequence

from pyextender.actions.decisions import Decisions
from pyextender.actions.enqueue import allocate_elastic, enqueue
from pyextender.actions.evict import preempt, reclaim
from pyextender.actions.reservation import reserve
from pyextender.framework.session import Session

KNOWN_ACTIONS = ("enqueue", "allocate", "preempt", "reclaim", "backfill", "reservation", "shuffle")
"""allocate is kube-scheduler's own cycle (our filter/prioritize/bind); reservation holds
nodes for the gang waiting past its sla-waiting-time (also done whenever the sla plugin is
on); shuffle is accepted for Volcano compatibility and does nothing."""


def run_cycle(ssn: Session, actions: Sequence[str], sla: bool) -> Decisions:
    """Decide; apply nothing. Reservations are made when ``reservation`` is among the
    actions or ``sla`` (the sla plugin is on, giving every gang its waiting time)."""
    decisions = Decisions()
    # Reservations from the last cycle (in ssn.state.reservations) steer this
    # cycle's admissions; fresh ones, from who is still starving, take over next.
    backfill = "backfill" in actions
    if "enqueue" in actions:
        enqueue(ssn, decisions, backfill)
    if "allocate" in actions:
        allocate_elastic(ssn, decisions, backfill)
    if "preempt" in actions:
        preempt(ssn, decisions)
    if "reclaim" in actions:
        reclaim(ssn, decisions)
    if sla or "reservation" in actions:
        decisions.reservations = reserve(ssn, decisions.starving)
    return decisions
