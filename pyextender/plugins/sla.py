"""sla: a job waiting longer than its sla-waiting-time is served first, admitted
whatever the queue and cluster limits of later tiers say, and keeps what is free
for itself, so smaller, later jobs cannot starve it (Volcano's sla plugin:
JobOrderFn, JobEnqueueableFn and JobPipelinedFn; pkg/scheduler/plugins/sla/sla.go).
Per-job override: PodGroup annotation ``sla-waiting-time``.

- order: a job with a waiting time goes before one without; among them, the one
  whose deadline (creation + waiting time) comes first goes first;
- enqueue: past its deadline a job is permitted (Pending -> Inqueue);
- allocate: past its deadline a gang that does not fit keeps the free capacity it
  would use (pyextender.actions.allocate), and the reservation action holds nodes
  for it (pyextender.actions.reservation).

As a filter it keeps other jobs off reserved nodes, except backfill: a job
that declares a running estimate (``pyextender.io/running-estimate``) short
enough to end before the holder can start, and best-effort pods (no
requests), which never delay anyone.
"""

from __future__ import annotations

import datetime as dt
import time

import numpy as np

from pyextender.api.names import RUNNING_ESTIMATE_ANNOTATION
from pyextender.api.objects import PodInfo
from pyextender.api.resources import PODS
from pyextender.api.volcano.codec import duration_seconds
from pyextender.framework.interfaces import FilterResult, IntArray, PodContext
from pyextender.framework.plugin_args import arg, arguments
from pyextender.framework.registry import PluginSpec
from pyextender.framework.session import Job, Session, past_sla


@arguments
class Args:
    sla_waiting_time: dt.timedelta | None = arg(
        "Wait after which a pending job is served first and gets nodes reserved.",
        default=None,
        aliases=("sla-waiting-time",),
    )


class Sla:
    name = "sla"

    def __init__(self, args: Args) -> None:
        self.args = args

    def open_session(self, ssn: Session) -> None:
        if self.args.sla_waiting_time is None:
            return
        default = self.args.sla_waiting_time.total_seconds()
        for job in ssn.jobs.values():
            if job.sla_wait is None:
                job.sla_wait = default

    def job_order(self, ssn: Session, a: Job, b: Job) -> int:
        da, db = _deadline(a), _deadline(b)
        if da is None or db is None:
            return (da is None) - (db is None)  # with a waiting time first
        return (da > db) - (da < db)

    def job_order_key(self, ssn: Session, job: Job) -> tuple[float, float]:
        deadline = _deadline(job)
        return (1.0, 0.0) if deadline is None else (0.0, deadline)

    def enqueue_permit(self, ssn: Session, job: Job) -> bool:
        return past_sla(ssn, job)

    def filter(self, ctx: PodContext, rows: IntArray) -> FilterResult:
        res = ctx.state.reservations
        n = rows.shape[0]
        if not res.by_row:
            return FilterResult.all_pass(n)
        key = job_key(ctx.pod)
        codes = np.zeros(n, dtype=np.int8)
        ids = np.zeros(n, dtype=np.int32)
        reasons = [""]
        if _best_effort(ctx) or key in res.held:
            return FilterResult(codes, ids, reasons)
        estimate = res.estimates.get(key, _pod_estimate(ctx.pod))
        now = time.time()
        for i, row in enumerate(rows.tolist()):
            r = res.by_row.get(row)
            if r is None or (estimate is not None and now + estimate <= r.ready_at):
                continue
            why = f"node reserved for gang {r.job} (waiting {now - r.since:.0f}s); " + (
                "declare a running estimate to backfill"
                if estimate is None
                else f"this job's estimate ({estimate:.0f}s) ends after the gang's start"
            )
            if why not in reasons:
                reasons.append(why)
            codes[i] = 1  # UNSCHEDULABLE: the reservation ends when the gang is placed
            ids[i] = reasons.index(why)
        return FilterResult(codes, ids, reasons)


def _deadline(job: Job) -> float | None:
    """Epoch seconds by which the job should have been served (None: no SLA)."""
    return None if job.sla_wait is None else job.created + job.sla_wait


def job_key(pod: PodInfo) -> str:
    """The key the session uses for the pod's job (see framework.snapshot)."""
    group = pod.group_name
    return f"{pod.namespace}/{group}" if group else f"pod:{pod.key}"


def _best_effort(ctx: PodContext) -> bool:
    pods_col = ctx.state.column[PODS]
    mask = np.ones(ctx.request.shape[0], dtype=np.bool_)
    mask[pods_col] = False
    return not bool((ctx.request[mask] > 0).any())


def _pod_estimate(pod: PodInfo) -> float | None:
    raw = pod.annotations.get(RUNNING_ESTIMATE_ANNOTATION)
    if not raw:
        return None
    try:
        return duration_seconds(raw)
    except ValueError:
        return None


SPEC = PluginSpec(
    name="sla",
    args_type=Args,
    factory=Sla,
    summary="Jobs past sla-waiting-time go first and get nodes reserved until they fit.",
)
