"""backfill: may a job use nodes reserved for another, waiting gang?

Only if it cannot delay the gang: it declared a running estimate that ends
before the reserved nodes are expected to be free for the gang (the holder's
start), or it asks for nothing (best effort).
"""

from __future__ import annotations

from pyextender.cache.reservations import Reservation
from pyextender.framework.session import IntArray, Job


def may_backfill(job: Job, request: IntArray, reservation: Reservation, now: float) -> bool:
    if not (request > 0).any():
        return True
    est = job.running_estimate
    return est is not None and now + est <= reservation.ready_at
