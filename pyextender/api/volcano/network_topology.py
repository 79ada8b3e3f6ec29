"""NetworkTopologySpec: how far across the HyperNode tree a gang may spread.

The same shape appears in PodGroup.spec and batch Job.spec (and in a Job
task's partitionPolicy), so it lives here once.
"""

from __future__ import annotations

from typing import Literal

from pyextender.api.volcano.codec import Model, Problem, attr, model

DNS_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"


@model
class NetworkTopologySpec(Model):
    """Network topology constraint of a gang (works with HyperNodes)."""

    mode: Literal["hard", "soft"] = attr(
        "hard: the gang must fit under one HyperNode of at most the allowed tier; "
        "soft: prefer that, but spread further when it cannot.",
        default="hard",
        schema_default=True,
    )
    highest_tier_allowed: int | None = attr(
        "Highest HyperNode tier the gang may span (1 = the lowest tier).",
        default=None,
        minimum=0,
        int64=True,
    )
    highest_tier_name: str = attr(
        "Highest HyperNode tier the gang may span, by tier name. "
        "Mutually exclusive with highestTierAllowed.",
        default="",
        max_length=253,
        pattern=DNS_SUBDOMAIN,
    )

    def check(self) -> list[Problem]:
        if self.highest_tier_allowed is not None and self.highest_tier_name:
            return [("", "highestTierAllowed and highestTierName must not both be set")]
        return []
