"""enqueue and allocate with Volcano's semantics (the default), and the requireFit option.

Volcano: pkg/scheduler/actions/enqueue/enqueue.go (Inqueue on minResources, pods not
required), actions/allocate/allocate.go (Pending skipped only when enqueue is
configured), framework/session.go jobStatus (Pending written for the rest),
plugins/gang/gang.go (JobValid: minMember pods exist).
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

import numpy as np

from pyextender.actions.allocate import NEWCOMER_GRACE_S
from pyextender.actions.enqueue import ASSEMBLY_GRACE_S
from pyextender.framework.action_args import EnqueueArgs, require_fit
from tests.unit.batch_fixtures import World

CREATED = 1767225600.0  # _group's creationTimestamp
NOW = CREATED + 3600


def _group(w: World, name: str, min_member: int, phase: str | None, **spec: Any) -> None:
    doc: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "t", "uid": f"pg-{name}",
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"minMember": min_member, "queue": "default", **spec},
        "status": {"phase": phase} if phase else {},
    }  # fmt: skip
    w.cache.group_event("ADDED", doc)


def test_podgroup_without_pods_is_inqueue_at_once_on_its_min_resources() -> None:
    w = World(nodes=2, gpus=8)
    _group(w, "pt", 2, "Pending", minResources={"nvidia.com/gpu": "4"})
    d = w.cycle(now=1767225600.0 + 1)  # a second after creation: no grace needed
    assert [j.key for j in d.admit] == ["t/pt"] and d.lift == []


def test_without_min_resources_a_group_waits_for_its_pods_before_admission() -> None:
    """A queue capped at 8 GPUs; "big" (no minResources, minMember 2, 8 GPUs a pod) has
    one pod a second after creation: not admitted on half its request. With both pods
    it is refused (16/8); a group whose pods never come is judged after the grace."""
    created = "2026-01-01T00:00:00Z"  # the group's creation (_group), CREATED
    w = World(nodes=2, gpus=8)
    w.queue("a", capability={"nvidia.com/gpu": "8"})
    _group(w, "big", 2, "Pending", queue="a")
    w.pod("big-0", gpus=8, group="big", gated=True, created=created)
    d = w.cycle(now=CREATED + 1)
    assert d.admit == [] and "t/big" not in d.unschedulable
    w.pod("big-1", gpus=8, group="big", gated=True, created=created)
    d = w.cycle(now=CREATED + 1)
    assert d.admit == []
    assert "capability exceeded: nvidia.com/gpu 16/8" in d.unschedulable["t/big"]
    # the second pod never came: after the grace, judged on the one there is
    w2 = World(nodes=2, gpus=8)
    w2.queue("a", capability={"nvidia.com/gpu": "8"})
    _group(w2, "big", 2, "Pending", queue="a")
    w2.pod("big-0", gpus=8, group="big", gated=True, created=created)
    d = w2.cycle(now=CREATED + 6)
    assert [j.key for j in d.admit] == ["t/big"]


def test_gang_is_inqueue_before_it_fits_and_its_gates_stay_on() -> None:
    w = World(nodes=2, gpus=8)
    other = {"scheduling.volcano.sh/queue-name": "other"}
    w.queue("other")
    w.pod("busy", gpus=6, node="n0", annotations=other)
    w.pod("busy2", gpus=6, node="n1", annotations=other)
    w.gang("g", 2, gpus=4)
    d = w.cycle(tiers=[["priority", "gang"], ["drf", "predicates", "proportion"]])
    assert [j.key for j in d.admit] == ["t/g"]
    assert d.lift == []
    assert d.unschedulable["t/g"].startswith("2/2 tasks in gang unschedulable: Insufficient")
    assert [j.key for j in d.starving] == ["t/g"]


def test_an_inqueue_gang_holds_its_queue_and_lifts_when_it_fits() -> None:
    """g (minResources 8 GPUs, Inqueue, gated) holds 8 of queue a's 8: h is not
    admitted; g's gates come off once it fits. Without minResources nothing is held
    (Volcano's proportion counts minResources only)."""
    w = World(nodes=2, gpus=8)
    w.queue("a", capability={"nvidia.com/gpu": "8"})
    w.gang("g", 2, gpus=4, queue="a", phase="Inqueue")
    w.cache.groups["t/g"].min_resources["nvidia.com/gpu"] = 8
    for p in w.cache.pods_by_uid.values():
        p.gates = ("pyextender.io/gang",)
    w.gang("h", 1, gpus=2, queue="a")
    d = w.cycle()
    assert [j.key for j in d.admit] == []
    assert "capability exceeded: nvidia.com/gpu 10/8" in d.unschedulable["t/h"]
    assert sorted(t.pod.name for t in d.lift) == ["g-0", "g-1"]


def test_overcommit_bounds_what_is_inqueue() -> None:
    """16 GPUs x 1.2 = 19.2: two 8-GPU PodGroups without pods are Inqueue, a third is not."""
    w = World(nodes=2, gpus=8)
    for name in ("a", "b", "c"):
        _group(w, name, 1, "Pending", minResources={"nvidia.com/gpu": "8"})
    d = w.cycle()
    assert [j.key for j in d.admit] == ["t/a", "t/b"]
    assert "cluster overcommit limit reached: nvidia.com/gpu 24/19" in d.unschedulable["t/c"]


def test_pending_is_written_for_groups_without_a_phase() -> None:
    w = World(nodes=1, gpus=8)
    _group(w, "new", 1, None, minResources={"nvidia.com/gpu": "100"})
    _group(w, "old", 1, "Pending", minResources={"nvidia.com/gpu": "100"})
    _group(w, "fits", 1, None, minResources={"nvidia.com/gpu": "1"})
    d = w.cycle()
    assert [j.key for j in d.pending] == ["t/new"]  # "fits" is admitted instead
    assert [j.key for j in d.admit] == ["t/fits"]


def test_a_group_waiting_for_its_pods_is_written_pending_only_once_judged() -> None:
    """Without minResources a PodGroup is judged on its members' requests once they
    exist: seen before its pods (the usual order), it is not written Pending (it is
    mostly admitted a cycle later, and the write would be overwritten); if its pods
    never come, it is judged (and admitted, as Volcano does) once the grace is over."""
    w = World(nodes=1, gpus=8)
    _group(w, "early", 1, None)
    _group(w, "sized", 1, None, minResources={"nvidia.com/gpu": "100"})
    d = w.cycle(now=CREATED + 1)
    assert [j.key for j in d.pending] == ["t/sized"]  # judged at once: too big
    assert d.admit == []
    d = w.cycle(now=CREATED + ASSEMBLY_GRACE_S + 1)
    assert [j.key for j in d.admit] == ["t/early"]
    assert [j.key for j in d.pending] == ["t/sized"]


def test_without_enqueue_allocate_admits_and_lifts() -> None:
    w = World(nodes=1, gpus=8)
    w.gang("g", 2, gpus=2)
    w.gang("big", 2, gpus=8)
    d = w.cycle(actions=("allocate", "backfill"))
    assert sorted(j.key for j in d.admit) == ["t/big", "t/g"]
    assert sorted(t.pod.name for t in d.lift) == ["g-0", "g-1"]
    assert d.pending == []


def test_every_gangs_minimum_before_any_extras() -> None:
    """Three elastic jobs (minMember 2, 16 one-GPU members each) on 16 GPUs: each gets
    its 2 members first; extras only once a gang runs, with what is left."""
    w = World(nodes=2, gpus=8)
    for name in ("a", "b", "c"):
        w.gang(name, 16, gpus=1, min_member=2)
    d = w.cycle()
    per_job: dict[str, int] = {}
    for t in d.lift:
        per_job[t.pod.name[0]] = per_job.get(t.pod.name[0], 0) + 1
    assert [t.pod.name for t in d.lift[:6]] == ["a-0", "a-1", "b-0", "b-1", "c-0", "c-1"]
    assert sum(per_job.values()) == 16 and min(per_job.values()) >= 2, per_job
    # the same once the minimums run: the extras share the 10 GPUs left
    w2 = World(nodes=2, gpus=8)
    for i, name in enumerate(("a", "b", "c")):
        w2.gang(name, 16, gpus=1, min_member=2, phase="Running", bound=[f"n{i % 2}"] * 2)
        for p in w2.cache.pods_by_uid.values():
            if not p.node_name:
                p.gates = ("pyextender.io/gang",)
    d2 = w2.cycle()
    per_job = {}
    for t in d2.lift:
        per_job[t.pod.name[0]] = per_job.get(t.pod.name[0], 0) + 1
    assert sum(per_job.values()) == 10 and set(per_job) == {"a", "b", "c"}, per_job


def test_a_gang_still_being_created_keeps_room_from_extras() -> None:
    """a runs its minimum and was scaled up as b's PodGroup was created, moments ago;
    b has 1 of its 2 pods: a's new extras wait 3 s, then leave b's minimum
    (minResources 4 GPUs) free until b's pods are all there (5 s at most)."""
    w = World(nodes=1, gpus=8)
    w.gang("a", 8, gpus=1, min_member=2, phase="Running", bound=["n0", "n0"])
    for p in w.cache.pods_by_uid.values():
        if not p.node_name:
            p.gates = ("pyextender.io/gang",)
            p.created = "2026-01-01T01:00:00Z"
    w.cache.group_event("ADDED", {
        "metadata": {"name": "b", "namespace": "t", "uid": "pg-b",
                     "creationTimestamp": "2026-01-01T01:00:00Z"},
        "spec": {"minMember": 2, "queue": "default", "minResources": {"nvidia.com/gpu": "4"}},
        "status": {"phase": "Pending"},
    })  # fmt: skip
    w.pod("b-0", gpus=2, group="b", gated=True, created="2026-01-01T01:00:00Z")
    d = w.cycle(now=1767225600.0 + 3600 + 0.5)  # half a second old: no extras yet
    assert d.lift == [] and "t/b" in d.assembling
    d = w.cycle(now=1767225600.0 + 3600 + 4)  # 4 s: extras, but b's room stays
    assert sorted(t.pod.name for t in d.lift if t.pod.name.startswith("a")) == [
        "a-2", "a-3"
    ]  # fmt: skip
    assert "t/b" in d.assembling


def test_new_podgroups_arriving_without_pause_do_not_starve_extras() -> None:
    """a runs its minimum; its extras were created an hour ago. A new PodGroup every
    second (a bare pod's, already running) would keep the newcomer hold on for ever:
    extras older than NEWCOMER_GRACE_S are released anyway, younger ones still wait."""
    w = World(nodes=1, gpus=8)
    w.gang("a", 4, gpus=1, min_member=2, phase="Running", bound=["n0", "n0"])
    for p in w.cache.pods_by_uid.values():
        if not p.node_name:
            p.gates = ("pyextender.io/gang",)

    def bare_pod_created(name: str, at: float) -> str:
        stamp = dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        w.cache.group_event("ADDED", {
            "metadata": {"name": name, "namespace": "t", "uid": f"pg-{name}",
                         "creationTimestamp": stamp},
            "spec": {"minMember": 1, "queue": "default"},
            "status": {"phase": "Running"},
        })  # fmt: skip
        w.pod(f"{name}-0", gpus=1, group=name, node="n0", created=stamp)
        return stamp

    young = bare_pod_created("bare", NOW - 1)
    w.pod("a-4", gpus=1, group="a", gated=True, created=young)
    d = w.cycle(now=NOW)
    assert sorted(t.pod.name for t in d.lift) == ["a-2", "a-3"]  # a-4 is a second old
    # held until a-4 (and the newest PodGroup, "bare") is grace-old: the loop's next cycle
    assert d.held_until == NOW - 1 + NEWCOMER_GRACE_S
    # another PodGroup a second before the next cycle: a-4 has waited the grace out
    bare_pod_created("bare2", NOW + NEWCOMER_GRACE_S - 1)
    d = w.cycle(now=NOW + NEWCOMER_GRACE_S)
    assert sorted(t.pod.name for t in d.lift) == ["a-2", "a-3", "a-4"]
    assert d.held_until == math.inf, "nothing held back: no early cycle"


def test_old_extras_do_not_jump_ahead_of_a_newcomers_in_job_order() -> None:
    """x runs 4 of 6 members (minimum 2); its extras are an hour old. y (minMember 1,
    3 members) came a second ago: it gets its minimum, and is first in drf's order
    (2/16 against 8/16), but its extras are a second old. Nothing after them in the
    order goes first: x's old extras wait too, until y's have waited the grace out;
    then y's go first (tests/e2e/test_gangs.py::test_drf_smaller_dominant_share_goes_first)."""
    w = World(nodes=2, gpus=8)
    w.gang("x", 6, gpus=2, min_member=2, phase="Running", bound=["n0"] * 4)
    for p in w.cache.pods_by_uid.values():
        if not p.node_name:
            p.gates = ("pyextender.io/gang",)
    young = dt.datetime.fromtimestamp(NOW - 1, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    w.cache.group_event("ADDED", {
        "metadata": {"name": "y", "namespace": "t", "uid": "pg-y", "creationTimestamp": young},
        "spec": {"minMember": 1, "queue": "default"},
        "status": {"phase": "Inqueue"},
    })  # fmt: skip
    for i in range(3):
        w.pod(f"y-{i}", gpus=2, group="y", gated=True, created=young)
    d = w.cycle(now=NOW)
    assert [t.pod.name for t in d.lift] == ["y-0"]
    assert d.held_until == NOW - 1 + NEWCOMER_GRACE_S
    d = w.cycle(now=NOW + NEWCOMER_GRACE_S)
    assert [t.pod.name for t in d.lift] == ["y-0", "y-1", "y-2", "x-4"]


def test_require_fit_option_reads_typed_and_plain_arguments() -> None:
    assert require_fit({"enqueue": EnqueueArgs(require_fit=True)})
    assert require_fit({"enqueue": {"requireFit": True}})
    assert not require_fit({"enqueue": {"overcommit-factor": 1.2}})
    assert not require_fit({})


def test_lifts_in_flight_count_as_ungated() -> None:
    """A gate we lifted that the watch still shows: the gang is not decided again, and
    its members hold their room."""
    from pyextender.actions.cycle import run_cycle
    from pyextender.framework.snapshot import build_session
    from pyextender.plugins.registry import REGISTRY

    w = World(nodes=2, gpus=8)
    w.gang("g", 2, gpus=4, phase="Inqueue")
    for p in w.cache.pods_by_uid.values():
        p.gates = ("pyextender.io/gang",)
    w.gang("h", 1, gpus=4)
    tiers = [
        [REGISTRY[n].factory(REGISTRY[n].args_type()) for n in names]
        for names in (("priority", "gang"), ("drf", "proportion"))
    ]
    lifting = {"uid-t-g-0", "uid-t-g-1"}
    ssn = build_session(w.cache, tiers, NOW, lifting=lifting)
    d = run_cycle(ssn, ("enqueue", "allocate"), False)
    assert [t.pod.name for t in d.lift] == ["h-0"] and [j.key for j in d.admit] == ["t/h"]
    gpu = ssn.state.column["nvidia.com/gpu"]
    assert int(np.sum(ssn.free[:, gpu])) == 4  # g's 8 GPUs held, h's 4 taken


SLA_TIERS = [["priority", "gang", "sla"], ["drf", "predicates", "proportion", "overcommit"]]


def test_sla_past_its_waiting_time_is_admitted_over_the_limits() -> None:
    """Volcano's sla Permit: lower tiers' overcommit and queue limits do not hold back a
    job past its deadline; one not past it stays Pending."""
    w = World(nodes=2, gpus=8)
    _group(w, "a", 1, "Inqueue", minResources={"nvidia.com/gpu": "16"})
    for name, wait in (("late", "1s"), ("early", "2h")):
        _group(w, name, 1, "Pending", minResources={"nvidia.com/gpu": "8"})
        w.cache.groups[f"t/{name}"].annotations["sla-waiting-time"] = wait
    d = w.cycle(tiers=SLA_TIERS)
    assert [j.key for j in d.admit] == ["t/late"]
    assert "cluster capacity exceeded: nvidia.com/gpu 32/16" in d.unschedulable["t/early"]


def test_sla_earlier_deadline_goes_first() -> None:
    w = World(nodes=2, gpus=8)
    w.gang("patient", 2, gpus=8, phase="Inqueue", annotations={"sla-waiting-time": "10m"})
    w.gang("urgent", 2, gpus=8, phase="Inqueue", annotations={"sla-waiting-time": "1s"})
    for p in w.cache.pods_by_uid.values():
        p.gates = ("pyextender.io/gang",)
    d = w.cycle(tiers=SLA_TIERS)
    assert sorted(t.pod.name for t in d.lift) == ["urgent-0", "urgent-1"]


def test_sla_gang_past_its_deadline_keeps_the_free_room() -> None:
    """big (2 x 8 GPUs, past its deadline) does not fit beside the busy node; small
    (8 GPUs, Inqueue, no SLA) would fit the free node but waits behind big."""
    w = World(nodes=2, gpus=8)
    w.pod("busy", gpus=8, node="n0", annotations={"scheduling.volcano.sh/queue-name": "o"})
    w.queue("o")
    w.gang("big", 2, gpus=8, phase="Inqueue", annotations={"sla-waiting-time": "1s"})
    w.gang("small", 1, gpus=8, phase="Inqueue", queue="o")
    for p in w.cache.pods_by_uid.values():
        if not p.node_name:
            p.gates = ("pyextender.io/gang",)
    d = w.cycle(tiers=SLA_TIERS)
    assert d.lift == []
    assert "reserved for waiting gang t/big" in d.unschedulable["t/small"]
    # without the SLA small takes the free node at once
    w.cache.groups["t/big"].annotations.pop("sla-waiting-time")
    d2 = w.cycle(tiers=SLA_TIERS)
    assert [t.pod.name for t in d2.lift] == ["small-0"]


def test_a_job_that_backfills_is_admitted_past_the_reserved_gangs_hold() -> None:
    """big (past its SLA, Inqueue, nodes reserved until the running job's estimated end)
    holds the queue; a 2-GPU job that ends before then is admitted and lifted onto the
    free node, one without an estimate is not."""
    from pyextender.cache.reservations import Reservation

    w = World(nodes=2, gpus=8)
    est = {"pyextender.io/running-estimate": "15s"}
    w.gang("running", 1, gpus=8, phase="Running", bound=["n0"], annotations=est)
    w.gang("big", 2, gpus=8, phase="Inqueue", annotations={"sla-waiting-time": "1s"})
    w.cache.groups["t/big"].min_resources["nvidia.com/gpu"] = 16
    for p in w.cache.pods_by_uid.values():
        if not p.node_name:
            p.gates = ("pyextender.io/gang",)
        else:  # started 5 s ago: ends in 10 s by its estimate
            p.started = dt.datetime.fromtimestamp(NOW - 5, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    w.gang("short", 1, gpus=2, annotations={"pyextender.io/running-estimate": "3s"})
    w.gang("unknown", 1, gpus=2)
    res = Reservation(job="t/big", rows=frozenset({0, 1}), since=NOW - 5, ready_at=NOW + 10)
    w.cache.state.reservations.replace([res], {"t/short": 3.0})
    tiers = [["priority", "gang", "conformance", "sla"], ["drf", "predicates", "proportion"]]
    d = w.cycle(tiers=tiers, now=NOW)
    assert [j.key for j in d.admit] == ["t/short"]
    assert [t.pod.name for t in d.lift] == ["short-0"]
    assert "cluster capacity exceeded" in d.unschedulable["t/unknown"]


def test_members_released_by_someone_else_do_not_hold_the_queue() -> None:
    """stuck (minMember 10, Inqueue) has 3 members of 8 GPUs that lost their gates
    without allocate (their namespace was no longer adopted): they wait at the bind
    barrier for members that never come, so the queue's 16 GPUs stay open to h."""
    w = World(nodes=2, gpus=8)
    _group(w, "stuck", 10, "Inqueue")
    for i in range(3):
        w.pod(f"stuck-{i}", gpus=8, group="stuck")  # ungated, unbound
    w.gang("h", 2, gpus=1)
    d = w.cycle()
    assert [j.key for j in d.admit] == ["t/h"]
    assert sorted(t.pod.name for t in d.lift) == ["h-0", "h-1"]
