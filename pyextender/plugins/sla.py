"""sla: a job waiting longer than its sla-waiting-time goes first and gets
nodes reserved for it (see pyextender.actions.reservation), so smaller jobs
cannot starve it. Per-job override: PodGroup annotation ``sla-waiting-time``.

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
        sa, sb = past_sla(ssn, a) and not a.ready, past_sla(ssn, b) and not b.ready
        return int(sb) - int(sa)

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
