"""drf: dominant resource fairness between jobs (and, hierarchically, queues).

A job's dominant share is max over resources r of allocated_r / total_r.
The job with the smaller share goes first. With ``enableHierarchy`` queues
are ordered by hierarchical DRF: at the first level where two queues' paths
from root differ, the subtree with the smaller share/weight goes first.
"""

from __future__ import annotations

import numpy as np

from pyextender.framework.plugin_args import arg, arguments
from pyextender.framework.registry import PluginSpec
from pyextender.framework.session import IntArray, Job, QueueState, Session, Task


@arguments
class Args:
    enable_hierarchy: bool = arg(
        "Order queues by hierarchical DRF over the queue tree (Volcano's enableHierarchy).",
        default=False,
        aliases=("enableHierarchy",),
    )


def dominant_share(allocated: IntArray, total: IntArray) -> float:
    mask = total > 0
    if not mask.any():
        return 0.0
    return float((allocated[mask] / total[mask]).max())


def dominant_shares(held: list[IntArray], total: IntArray) -> list[float]:
    """dominant_share of each array (all as wide as ``total``), in one expression."""
    mask = total > 0
    if not held or not mask.any():
        return [0.0] * len(held)
    shares: list[float] = (np.stack(held)[:, mask] / total[mask]).max(axis=1).tolist()
    return shares


class Drf:
    name = "drf"

    def __init__(self, args: Args) -> None:
        self.args = args
        self._qshare: dict[str, float] = {}
        self._paths: dict[str, list[str]] = {}

    def open_session(self, ssn: Session) -> None:
        # Most jobs hold one of a few arrays (the session's shared zero vector, a kept
        # Task's read-only request): one share per distinct array, not per job. At
        # 100,000 lone-pod jobs the per-job numpy calls were ~0.5 s of every cycle.
        # Keyed by id(): every array is held by its job until the loop ends.
        # The distinct arrays' shares are then taken in one numpy expression: with
        # hundreds of running gangs (an array each) the per-array calls were 12 % of
        # a cycle.
        by_array: dict[int, IntArray] = {}
        for job in ssn.jobs.values():
            by_array.setdefault(id(job.allocated), job.allocated)
        shares = dominant_shares(list(by_array.values()), ssn.total)
        share_of = dict(zip(by_array, shares, strict=True))
        for job in ssn.jobs.values():
            job.share = share_of[id(job.allocated)]
        if self.args.enable_hierarchy or ssn.options.get(self.name, {}).get("enableHierarchy"):
            self._hierarchy(ssn)

    def _hierarchy(self, ssn: Session) -> None:
        parent = {q.name: q.view.parent for q in ssn.queues.values()}
        subtree: dict[str, IntArray] = {n: q.allocated.copy() for n, q in ssn.queues.items()}
        for name, q in ssn.queues.items():
            p = parent.get(name, "")
            seen = {name}
            while p and p in subtree and p not in seen:
                subtree[p] = subtree[p] + q.allocated
                seen.add(p)
                p = parent.get(p, "")
        self._qshare = {
            n: dominant_share(a, ssn.total) / max(ssn.queues[n].view.weight, 1)
            for n, a in subtree.items()
        }
        self._paths = {}
        for name in ssn.queues:
            path, p, seen = [name], parent.get(name, ""), {name}
            while p and p not in seen:
                path.append(p)
                seen.add(p)
                p = parent.get(p, "")
            self._paths[name] = list(reversed(path))

    def on_allocate(self, ssn: Session, job: Job, request: IntArray) -> None:
        job.share = dominant_share(job.allocated, ssn.total)

    def job_order(self, ssn: Session, a: Job, b: Job) -> int:
        return (a.share > b.share) - (a.share < b.share)

    def job_order_key(self, ssn: Session, job: Job) -> float:
        return job.share  # the smaller dominant share first

    def queue_order(self, ssn: Session, a: QueueState, b: QueueState) -> int:
        if not self._paths:
            return 0
        pa, pb = self._paths.get(a.name, [a.name]), self._paths.get(b.name, [b.name])
        for x, y in zip(pa, pb, strict=False):
            if x != y:
                sx, sy = self._qshare.get(x, 0.0), self._qshare.get(y, 0.0)
                return (sx > sy) - (sx < sy)
        return 0

    def preemptable(self, ssn: Session, preemptor: Job, victims: list[Task]) -> list[Task]:
        # a victim's job must keep a larger share than the preemptor will have
        after = dominant_share(preemptor.allocated + sum_pending(preemptor), ssn.total)
        out = []
        for t in victims:
            owner = ssn.job_of.get(t.pod.uid)
            if owner is None or dominant_share(owner.allocated - t.request, ssn.total) >= after:
                out.append(t)
        return out


def sum_pending(job: Job) -> IntArray:
    total = np.zeros_like(job.allocated)
    for t in job.pending:
        total = total + t.request
    return total


SPEC = PluginSpec(
    name="drf",
    args_type=Args,
    factory=Drf,
    summary="Dominant resource fairness: smaller dominant share first (hierarchical option).",
)
