"""Nodes held for a starving gang (sla), and what may still run on them.

Written by the sidecar's actions loop once per cycle; read by the ``sla``
filter on every pod. A job other than the holder may use a reserved node only
when it is expected to finish before the gang can start there (backfill).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Reservation:
    job: str
    """Key of the job the nodes are held for ("namespace/podgroup")."""
    rows: frozenset[int]
    since: float
    """epoch seconds the reservation was first made"""
    ready_at: float
    """epoch seconds by which the held nodes are expected to be free (inf: unknown)."""


@dataclass(slots=True)
class Reservations:
    by_row: dict[int, Reservation] = field(default_factory=dict)
    held: dict[str, Reservation] = field(default_factory=dict)
    """job key -> its reservation."""
    estimates: dict[str, float] = field(default_factory=dict)
    """job key -> expected run time in seconds, for jobs that declared one."""

    def replace(self, reservations: list[Reservation], estimates: dict[str, float]) -> None:
        self.held = {r.job: r for r in reservations}
        self.by_row = {row: r for r in reservations for row in r.rows}
        self.estimates = estimates
