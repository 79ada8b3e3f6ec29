"""overcommit: admit jobs while everything admitted stays within total × factor.

Lets a few more gangs queue in kube-scheduler than fit right now (their pods
bind as capacity frees), without flooding it.
"""

from __future__ import annotations

import numpy as np

from pyextender.api.resources import format_amount
from pyextender.framework.plugin_args import arg, arguments
from pyextender.framework.registry import PluginSpec
from pyextender.framework.session import IntArray, Job, Session, unschedulable
from pyextender.framework.status import SUCCESS, Status


@arguments
class Args:
    overcommit_factor: float = arg(
        "Admitted + allocated may reach this multiple of the cluster's allocatable.",
        default=1.2,
        aliases=("overcommit-factor",),
    )


class Overcommit:
    name = "overcommit"

    def __init__(self, args: Args) -> None:
        if args.overcommit_factor < 1.0:
            raise ValueError("overcommit-factor must be >= 1.0")
        self.args = args

    def job_enqueueable(self, ssn: Session, job: Job, request: IntArray) -> Status:
        held = sum((q.allocated + q.inqueue for q in ssn.queues.values()), np.zeros_like(ssn.total))
        limit = ssn.total * self.args.overcommit_factor
        after = held + request
        over = np.flatnonzero((after > limit) & (request > 0))
        if over.shape[0]:
            c = int(over[0])
            name = ssn.state.resources[c]
            return unschedulable(
                self.name,
                f"cluster overcommit limit reached: {name} "
                f"{format_amount(name, int(after[c]))}/{format_amount(name, int(limit[c]))}",
            )
        return SUCCESS


SPEC = PluginSpec(
    name="overcommit",
    args_type=Args,
    factory=Overcommit,
    summary="Admit while admitted + allocated <= allocatable x overcommit-factor.",
)
