"""proportion (and capacity): each queue deserves a share of the cluster.

Deserved shares are computed by water-filling, per resource: every queue
first gets its guarantee; what is left is split in proportion to weight
among queues that still want more, each capped at min(request, capability);
the split repeats until nothing is left or nobody wants more. ``capacity``
is the same plugin, but a queue's explicit ``spec.deserved`` wins over the
weight split (Volcano's capacity plugin).

Guarantees follow the queue tree (``spec.parent``): a parent's guarantee is what its
subtree keeps out of everyone else's reach, and its children's guarantees are carved
out of it; a parent that sets none on a resource reserves the sum of its children's.
So a queue may reach at most min(capability, what its parent may reach - the
guarantees of the parent's children + its own guarantee), from the cluster down
(Volcano's capacity plugin, checkHierarchicalQueue / realCapability). Children whose
guarantees add up to more than their parent's are a misconfiguration (Volcano logs
it): their guarantees are then honoured only within the parent's, scaled to fit it
in the deserved split. Flat setups: every queue's reach is the cluster minus the
other queues' guarantees, as before.

Admission (enqueue): allocated + admitted + the job's minimum must stay within the
queue's reach, and, for every ancestor queue (up to root), the sum over that
ancestor's subtree must stay within the ancestor's reach.
Reclaim: only from reclaimable queues above their deserved share,
and only while they stay at or above it.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

import numpy as np

from pyextender.api.resources import format_amount
from pyextender.framework.plugin_args import arguments
from pyextender.framework.registry import PluginSpec
from pyextender.framework.session import (
    FloatArray,
    IntArray,
    Job,
    QueueState,
    Session,
    Task,
    unschedulable,
)
from pyextender.framework.status import SUCCESS, Status

_EPS = 1e-9


@arguments
class Args:
    """proportion takes no arguments (queues carry weight, capability, guarantee)."""


def _vec(ssn: Session, amounts: dict[str, int]) -> IntArray:
    out = np.zeros(len(ssn.state.resources), dtype=np.int64)
    for name, value in amounts.items():
        col = ssn.state.column.get(name)
        if col is not None:
            out[col] = value
    return out


def _cap(ssn: Session, q: QueueState) -> FloatArray:
    """Capability as a vector; unlimited (inf) where not set."""
    cap = np.full(len(ssn.state.resources), np.inf)
    for name, value in q.view.capability.items():
        col = ssn.state.column.get(name)
        if col is not None:
            cap[col] = value
    return cap


def water_fill(
    total: FloatArray,
    weights: dict[str, float],
    want: dict[str, FloatArray],
    floor: dict[str, FloatArray],
) -> dict[str, FloatArray]:
    """Split ``total`` among queues by weight, never above ``want``; start at ``floor``
    (floors that add up to more than ``total`` are scaled down to fit it)."""
    start = {n: np.minimum(floor[n], want[n]).astype(np.float64) for n in weights}
    asked = sum(start.values(), np.zeros_like(total))
    fit = np.ones_like(total)
    over = asked > total + _EPS
    fit[over] = np.maximum(total[over], 0.0) / asked[over]
    deserved = {n: v * fit for n, v in start.items()}
    remaining = total - sum(deserved.values(), np.zeros_like(total))
    remaining = np.maximum(remaining, 0.0)
    active = {n for n in weights if (want[n] - deserved[n] > _EPS).any()}
    while active and (remaining > _EPS).any():
        wsum = sum(weights[n] for n in active)
        given = np.zeros_like(total)
        for n in list(active):
            offer = remaining * (weights[n] / wsum)
            new = np.minimum(deserved[n] + offer, want[n])
            given += new - deserved[n]
            deserved[n] = new
            if not (want[n] - new > _EPS).any():
                active.discard(n)
        if not (given > _EPS).any():
            break
        remaining = np.maximum(remaining - given, 0.0)
    return deserved


def tree_fill(
    total: FloatArray,
    parents: dict[str, str],
    weights: dict[str, float],
    own_want: dict[str, FloatArray],
    floor: dict[str, FloatArray],
    cap: dict[str, FloatArray],
) -> dict[str, FloatArray]:
    """Deserved shares down the queue tree: ``total`` is water-filled among the top
    queues, each subtree wanting what its queues want (within its root's capability);
    a queue's share is then water-filled among its children, and its own jobs as one
    more member with its weight. Returns each queue's own deserved (what its own jobs
    may hold). A missing parent, or a parent chain that loops, makes a queue top-level."""
    kids = _children(parents)
    floor = effective_guarantees(parents, floor)
    want: dict[str, FloatArray] = {}

    def subtree(n: str) -> FloatArray:
        w = own_want[n] + sum((subtree(k) for k in kids.get(n, [])), np.zeros_like(total))
        want[n] = np.minimum(w, cap[n])
        return want[n]

    for top in kids.get("root", []):
        subtree(top)
    own: dict[str, FloatArray] = {}

    def split(parent: str, amount: FloatArray) -> None:
        names = kids.get(parent, [])
        w = {n: weights[n] for n in names}
        wants = {n: want[n] for n in names}
        floors = {n: floor[n] for n in names}
        if parent != "root" and (own_want[parent] > _EPS).any():
            w[_OWN] = weights[parent]
            wants[_OWN] = own_want[parent]
            floors[_OWN] = np.zeros_like(amount)
        shares = water_fill(amount, w, wants, floors)
        if parent != "root":
            own[parent] = shares.pop(_OWN, np.zeros_like(amount))
        for n, got in shares.items():
            split(n, got)

    split("root", total)
    return {n: own.get(n, np.zeros_like(total)) for n in parents}


def effective_guarantees(
    parents: dict[str, str], guarantee: dict[str, FloatArray]
) -> dict[str, FloatArray]:
    """Per queue, what its subtree reserves: its own guarantee on each resource it sets
    one for (> 0), else the sum of its children's (recursively)."""
    kids = _children(parents)
    out: dict[str, FloatArray] = {}

    def walk(n: str) -> FloatArray:
        below = sum((walk(k) for k in kids.get(n, [])), np.zeros_like(guarantee[n]))
        out[n] = np.where(guarantee[n] > _EPS, guarantee[n], below)
        return out[n]

    for top in kids.get("root", []):
        walk(top)
    return out


def reaches(
    total: FloatArray,
    parents: dict[str, str],
    guarantee: dict[str, FloatArray],
    cap: dict[str, FloatArray],
) -> dict[str, FloatArray]:
    """Per queue, the most its subtree may hold: min(capability, what its parent may
    reach - the parent's children's guarantees + its own), from ``total`` down."""
    kids = _children(parents)
    g = effective_guarantees(parents, guarantee)
    out: dict[str, FloatArray] = {}

    def split(parent: str, reach: FloatArray) -> None:
        names = kids.get(parent, [])
        held = sum((g[n] for n in names), np.zeros_like(reach))
        free = np.maximum(reach - held, 0.0)
        for n in names:
            out[n] = np.minimum(cap[n], free + g[n])
            split(n, out[n])

    split("root", total.astype(np.float64))
    return out


class Proportion:
    name = "proportion"
    explicit_deserved = False

    def __init__(self, args: Args) -> None:
        self.args = args
        self._reach: tuple[weakref.ref[Session] | None, dict[str, FloatArray]] = (None, {})
        """(the session, queue -> reach) computed at open_session. A weak reference to
        the session itself, not its id: a later session at the same address never reads
        stale reaches, and a finished session (its snapshot of every pod and node) is
        not kept alive until the next cycle opens."""

    def reach(self, ssn: Session, q: QueueState) -> FloatArray:
        """The most q's subtree may hold (see ``reaches``)."""
        ref = self._reach[0]
        if ref is None or ref() is not ssn:
            self._reach = (weakref.ref(ssn), _session_reaches(ssn))
        got = self._reach[1].get(q.name)
        return got if got is not None else _cap(ssn, q)

    def open_session(self, ssn: Session) -> None:
        self._reach = (weakref.ref(ssn), _session_reaches(ssn))
        queues = {n: q for n, q in ssn.queues.items() if n != "root"}
        own_want = {
            n: np.minimum(q.request.astype(np.float64), _cap(ssn, q)) for n, q in queues.items()
        }
        floor = {n: _vec(ssn, q.view.guarantee).astype(np.float64) for n, q in queues.items()}
        if self.explicit_deserved:
            for n, q in queues.items():
                if q.view.deserved:
                    fixed = np.minimum(_vec(ssn, q.view.deserved).astype(np.float64), _cap(ssn, q))
                    floor[n] = fixed
                    own_want[n] = np.minimum(own_want[n], fixed)
        caps = {n: _cap(ssn, q) for n, q in queues.items()}
        parents = {n: q.view.parent for n, q in queues.items()}
        weights = {n: float(q.view.weight) for n, q in queues.items()}
        own = tree_fill(ssn.total.astype(np.float64), parents, weights, own_want, floor, caps)
        for n, q in queues.items():
            q.deserved = own.get(n, np.zeros(len(ssn.state.resources)))
            q.share = _share(q.allocated + q.inqueue, q.deserved)

    def on_allocate(self, ssn: Session, job: Job, request: IntArray) -> None:
        q = ssn.queues.get(job.queue)
        if q is not None:
            q.share = _share(q.allocated + q.inqueue, q.deserved)

    def queue_order(self, ssn: Session, a: QueueState, b: QueueState) -> int:
        return (a.share > b.share) - (a.share < b.share)

    def job_enqueueable(self, ssn: Session, job: Job, request: IntArray) -> Status:
        q = ssn.queues.get(job.queue)
        if q is None:
            return unschedulable(self.name, f'queue "{job.queue}" does not exist', structural=True)
        if not q.view.open:
            return unschedulable(self.name, f'queue "{q.name}" is {q.view.state}', structural=True)
        # ancestors first: a limit inherited from a parent is reported as the parent's
        parents = _within_ancestors(ssn, q, request, self.name, self.reach)
        if not parents.ok:
            return parents
        cap = _cap(ssn, q)
        real = self.reach(ssn, q)
        after = q.allocated + q.inqueue + request
        over = np.flatnonzero((after > real) & (request > 0))
        if over.shape[0]:
            c = int(over[0])
            name = ssn.state.resources[c]
            limit = _limit(ssn, cap, real, c)
            return unschedulable(
                self.name,
                f'queue "{q.name}" {limit} exceeded: {name} '
                f"{format_amount(name, int(after[c]))}/{format_amount(name, int(real[c]))}",
            )
        return SUCCESS

    def allocatable(self, ssn: Session, queue: QueueState, request: IntArray) -> bool:
        """An elastic member: its queue's reach and every ancestor's still hold."""
        after = queue.allocated + queue.inqueue + request
        if ((after > self.reach(ssn, queue)) & (request > 0)).any():
            return False
        return _within_ancestors(ssn, queue, request, self.name, self.reach).ok

    def overused(self, ssn: Session, queue: QueueState) -> bool:
        used = queue.allocated > 0
        return bool(used.any() and (queue.allocated[used] >= queue.deserved[used] - _EPS).all())

    def reclaimable(self, ssn: Session, reclaimer: Job, victims: list[Task]) -> list[Task]:
        left: dict[str, IntArray] = {}
        out = []
        for t in victims:
            job = ssn.job_of.get(t.pod.uid)
            if job is None or job.queue == reclaimer.queue:
                continue
            q = ssn.queues.get(job.queue)
            if q is None or not q.view.reclaimable:
                continue
            alloc = left.get(q.name, q.allocated.copy())
            after = alloc - t.request
            asked = t.request > 0
            # the victim's queue must stay at or above its deserved share
            if (after[asked] + _EPS >= q.deserved[asked]).all():
                left[q.name] = after
                out.append(t)
        return out

    def preemptable(self, ssn: Session, preemptor: Job, victims: list[Task]) -> list[Task]:
        return [
            t for t in victims if (j := ssn.job_of.get(t.pod.uid)) and j.queue == preemptor.queue
        ]


class Capacity(Proportion):
    name = "capacity"
    explicit_deserved = True


_OWN = "\0own"
"""Key of a parent queue's own jobs among its children in the water fill."""


def _children(parents: dict[str, str]) -> dict[str, list[str]]:
    """Parent name -> child names; "root" for top-level queues, and for any queue whose
    parent is missing or whose parent chain loops."""
    out: dict[str, list[str]] = {}
    for n, parent in parents.items():
        parent = parent if parent in parents else "root"
        seen = {n}
        p = parent
        while p != "root" and p not in seen:  # a loop back makes the queue top-level
            seen.add(p)
            p = parents[p] if parents[p] in parents else "root"
        out.setdefault(parent if p == "root" else "root", []).append(n)
    return out


def _ancestors(ssn: Session, q: QueueState) -> list[QueueState]:
    """q's parent, its parent, ... up to (not including) root; a cycle ends the walk."""
    out: list[QueueState] = []
    seen = {q.name}
    parent = q.view.parent
    while parent and parent != "root" and parent not in seen:
        a = ssn.queues.get(parent)
        if a is None:
            break
        out.append(a)
        seen.add(parent)
        parent = a.view.parent
    return out


def _within_ancestors(
    ssn: Session,
    q: QueueState,
    request: IntArray,
    plugin: str,
    reach: Callable[[Session, QueueState], FloatArray],
) -> Status:
    """A parent's reach (its capability, less what the guarantees of queues outside
    its subtree keep) bounds the sum of its subtree (itself and every queue below it):
    allocated + admitted + this job's minimum."""
    chain = _ancestors(ssn, q)
    if not chain:
        return SUCCESS
    for a in chain:
        cap = reach(ssn, a)
        if np.isinf(cap).all():
            continue
        held = sum(
            (
                o.allocated + o.inqueue
                for o in ssn.queues.values()
                if o is a or a in _ancestors(ssn, o)
            ),
            np.zeros_like(ssn.total),
        )
        after = held + request
        over = np.flatnonzero((after > cap) & (request > 0))
        if over.shape[0]:
            c = int(over[0])
            name = ssn.state.resources[c]
            limit = _limit(ssn, _cap(ssn, a), cap, c)
            return unschedulable(
                plugin,
                f'queue "{q.name}": parent queue "{a.name}" {limit} exceeded: {name} '
                f"{format_amount(name, int(after[c]))}/{format_amount(name, int(cap[c]))}",
            )
    return SUCCESS


def _limit(ssn: Session, cap: FloatArray, reach: FloatArray, c: int) -> str:
    """What bounds a queue in resource ``c``: its capability, else the whole cluster
    (no queue outside it guarantees any), else what other queues' guarantees leave."""
    if cap[c] <= reach[c]:
        return "capability"
    if reach[c] >= ssn.total[c]:
        return "cluster capacity"
    return "share left by other queues' guarantees"


def _session_reaches(ssn: Session) -> dict[str, FloatArray]:
    queues = {n: q for n, q in ssn.queues.items() if n != "root"}
    return reaches(
        ssn.total.astype(np.float64),
        {n: q.view.parent for n, q in queues.items()},
        {n: _vec(ssn, q.view.guarantee).astype(np.float64) for n, q in queues.items()},
        {n: _cap(ssn, q) for n, q in queues.items()},
    )


def _share(allocated: IntArray, deserved: FloatArray) -> float:
    mask = deserved > _EPS
    if not mask.any():
        return float("inf") if (allocated > 0).any() else 0.0
    return float((allocated[mask] / deserved[mask]).max())


SPEC = PluginSpec(
    name="proportion",
    args_type=Args,
    factory=Proportion,
    summary="Queue shares by weight (water-filling), capability and guarantee; reclaim over-share.",
)
CAPACITY_SPEC = PluginSpec(
    name="capacity",
    args_type=Args,
    factory=Capacity,
    summary="proportion, with each queue's explicit spec.deserved taking precedence.",
)
