"""The scheduling core's decisions, table by table (no API server involved)."""

from __future__ import annotations

import numpy as np
import pytest

from pyextender.actions.cycle import run_cycle
from tests.unit.batch_fixtures import World


def admitted(d: object) -> list[str]:
    return [j.key for j in d.admit]  # type: ignore[attr-defined]


def test_gang_that_does_not_fit_is_not_admitted_and_says_why() -> None:
    w = World(nodes=1, gpus=8)
    w.pod("busy", gpus=2, node="n0")
    w.gang("g", 8)
    d = w.cycle(require_fit=True)
    assert admitted(d) == []
    assert d.unschedulable["t/g"].startswith(
        "2/8 tasks in gang unschedulable: Insufficient nvidia.com/gpu"
    )


def test_gang_that_fits_is_admitted_whole() -> None:
    w = World(nodes=1, gpus=8)
    w.gang("g", 8)
    assert admitted(w.cycle()) == ["t/g"]


def test_two_gangs_that_fit_alone_but_not_together() -> None:
    w = World(nodes=2, gpus=8)
    w.gang("a", 3, gpus=4)  # 12 GPUs
    w.gang("b", 3, gpus=4)  # 12 GPUs; together 24 > 16
    d = w.cycle()
    assert admitted(d) == ["t/a"]
    assert "t/b" in d.unschedulable


def test_admitted_unbound_gangs_hold_their_room() -> None:
    w = World(nodes=1, gpus=8)
    w.gang("first", 2, gpus=4, phase="Inqueue")  # admitted, not bound yet (gate lifted)
    for p in w.cache.pods_by_uid.values():
        p.gates = ()
    w.gang("second", 1, gpus=4)
    d = w.cycle()
    assert admitted(d) == [] and "t/second" in d.unschedulable


def test_inqueue_gang_with_gated_members_is_relifted() -> None:
    w = World()
    w.gang("g", 2, phase="Inqueue")
    for p in list(w.cache.pods_by_uid.values())[:1]:
        p.gates = ("pyextender.io/gang",)
    d = w.cycle()
    assert [t.pod.name for t in d.lift] == ["g-0"]


def test_missing_members_wait() -> None:
    w = World()
    w.gang("g", 2, min_member=4)
    d = w.cycle()
    assert (
        d.unschedulable["t/g"]
        == "4/4 tasks in gang unschedulable: gang: 2/4 tasks exist; waiting for the rest"
    )


def test_queue_capability_is_a_hard_limit() -> None:
    w = World(nodes=4, gpus=8)
    w.queue("a", capability={"nvidia.com/gpu": "16"})
    w.gang("running", 2, gpus=8, queue="a", phase="Running", bound=["n0", "n1"])
    w.gang("more", 1, gpus=8, queue="a")
    d = w.cycle()
    assert admitted(d) == []
    msg = d.unschedulable["t/more"]
    want = 'proportion: queue "a" capability exceeded: nvidia.com/gpu 24/16'
    assert msg == f"1/1 tasks in gang unschedulable: {want}"


def test_admitted_gangs_still_gated_hold_their_capability() -> None:
    """Between admission and the watch showing the lifted gates, the next cycle must
    count the admitted members: otherwise it admits more into the same room (a queue
    briefly above its capability, then reclaimed: a flake seen in e2e)."""
    w = World(nodes=2, gpus=8)
    w.queue("capped", weight=100, capability={"nvidia.com/gpu": "2"})
    for i in range(4):
        w.gang(f"c{i}", 1, gpus=1, queue="capped")
    # enqueue.requireFit: the gates are re-lifted (in the default mode the sidecar's
    # memory of lifts in flight holds the room: test_lifts_in_flight_count_as_ungated)
    first = w.cycle(actions=("enqueue", "allocate"), require_fit=True)
    assert len(admitted(first)) == 2
    # the admissions are written (phase Inqueue) but the gates still show: the watch
    # has not caught up with the lifts
    for job in first.admit:
        group = job.group
        assert group is not None
        w.cache.group_event(
            "MODIFIED",
            {
                "metadata": {
                    "name": group.name,
                    "namespace": group.namespace,
                    "uid": group.uid,
                    "creationTimestamp": group.created,
                },
                "spec": {"minMember": 1, "queue": "capped"},
                "status": {"phase": "Inqueue"},
            },
        )
    second = w.cycle(actions=("enqueue", "allocate"), require_fit=True)
    assert admitted(second) == [], "a third gang admitted past the queue's capability"
    assert sorted(t.pod.name for t in second.lift) == sorted(t.pod.name for t in first.lift)
    assert all("capability exceeded" in m for m in second.unschedulable.values())


def test_closed_queue_admits_nothing() -> None:
    w = World()
    w.cache.queue_event(
        "ADDED", {"metadata": {"name": "q"}, "spec": {}, "status": {"state": "Closed"}}
    )
    w.gang("g", 1, queue="q")
    assert "is Closed" in w.cycle().unschedulable["t/g"]


def test_deserved_shares_follow_weights() -> None:
    w = World(nodes=4, gpus=8)  # 32 GPUs
    w.queue("one", weight=1)
    w.queue("three", weight=3)
    for i in range(10):
        w.gang(f"a{i}", 1, gpus=8, queue="one")
        w.gang(f"b{i}", 1, gpus=8, queue="three")
    ssn = w.session()
    gpu = ssn.state.column["nvidia.com/gpu"]
    assert ssn.queues["one"].deserved[gpu] == 8 and ssn.queues["three"].deserved[gpu] == 24


def test_queue_order_serves_the_queue_furthest_below_its_share() -> None:
    w = World(nodes=4, gpus=8)
    w.queue("one", weight=1)
    w.queue("three", weight=3)
    w.gang("held", 1, gpus=8, queue="one", phase="Running", bound=["n0"])
    w.gang("a", 1, gpus=8, queue="one")
    w.gang("b", 1, gpus=8, queue="three")
    ssn = w.session()
    order = [j.key for j in ssn.ordered_jobs([ssn.jobs["t/a"], ssn.jobs["t/b"]])]
    assert order == ["t/b", "t/a"]


def test_drf_smaller_dominant_share_first() -> None:
    w = World(nodes=2, gpus=8)
    w.gang("big", 2, gpus=4, phase="Running", bound=["n0", "n1"])
    w.pod("big-extra", gpus=1, group="big")
    w.gang("small", 1, gpus=1, phase="Running", bound=["n0"])
    w.pod("small-extra", gpus=1, group="small")
    ssn = w.session(tiers=[["drf"]])
    assert ssn.jobs["t/small"].share < ssn.jobs["t/big"].share
    order = [j.key for j in ssn.ordered_jobs([ssn.jobs["t/big"], ssn.jobs["t/small"]])]
    assert order == ["t/small", "t/big"]


def test_priority_preemption_evicts_lower_priority_gang_whole() -> None:
    w = World(nodes=1, gpus=8)
    w.gang("low", 4, gpus=2, min_member=4, priority=1, phase="Running", bound=["n0"] * 4)
    w.gang("high", 2, gpus=2, priority=100)
    d = w.cycle()
    assert admitted(d) == []
    victims = sorted(e.task.pod.name for e in d.evictions)
    # taking 2 of 4 would leave "low" below minMember 4: it goes whole
    assert victims == ["low-0", "low-1", "low-2", "low-3"]
    assert {e.action for e in d.evictions} == {"preempt"}


def test_preemption_takes_only_spare_members_when_enough() -> None:
    w = World(nodes=1, gpus=8)
    w.gang("low", 4, gpus=2, min_member=2, priority=1, phase="Running", bound=["n0"] * 4)
    w.gang("high", 1, gpus=2, priority=100)
    d = w.cycle()
    assert len(d.evictions) == 1


def test_no_preemption_of_equal_priority_or_system_pods() -> None:
    w = World(nodes=1, gpus=8)
    w.gang("peer", 1, gpus=8, priority=5, phase="Running", bound=["n0"])
    w.gang("other", 1, gpus=8, priority=5)
    assert w.cycle().evictions == []
    w2 = World(nodes=1, gpus=8)
    w2.gang("sys", 1, gpus=8, priority=1, phase="Running", bound=["n0"], ns="kube-system")
    w2.gang("high", 1, gpus=8, priority=100, ns="kube-system")
    assert w2.cycle().evictions == []


def test_terminating_victims_are_not_evicted_twice() -> None:
    w = World(nodes=1, gpus=8)
    w.gang("low", 1, gpus=8, priority=1, phase="Running", bound=["n0"])
    w.gang("high", 1, gpus=8, priority=100)
    assert len(w.cycle().evictions) == 1
    for p in w.cache.pods_by_uid.values():
        if p.name == "low-0":
            p.deleting = True
    assert w.cycle().evictions == []


def test_choosing_a_victim_leaves_the_cached_pod_as_the_watch_showed_it() -> None:
    """A victim counts as terminating for the rest of its cycle only: the eviction
    may still be refused (a PodDisruptionBudget), and then the pod runs on. Had the
    cycle marked the cache's pod deleting, later cycles would wait for room that
    never comes instead of deciding again."""
    w = World(nodes=1, gpus=8)
    w.gang("low", 1, gpus=8, priority=1, phase="Running", bound=["n0"])
    w.gang("high", 1, gpus=8, priority=100)
    assert [e.task.pod.name for e in w.cycle().evictions] == ["low-0"]
    assert not any(p.deleting for p in w.cache.pods_by_uid.values())
    # refused: the next cycle chooses the same victim again
    assert [e.task.pod.name for e in w.cycle().evictions] == ["low-0"]


def test_a_gang_losing_a_pod_to_one_preemptor_is_not_cut_below_min_member_by_the_next() -> None:
    """Two starving gangs in one cycle: the second counts the running gang's spare
    pods after the first's eviction, so the running gang keeps minMember."""
    w = World(nodes=4, gpus=8)
    bound = ["n0", "n1", "n2", "n3"]
    w.gang("low", 4, gpus=8, min_member=2, priority=1, phase="Running", bound=bound)
    w.gang("high-a", 1, gpus=8, priority=100)
    w.gang("high-b", 3, gpus=8, priority=100)
    evicted = [e.task.pod.name for e in w.cycle().evictions]
    assert evicted, "the first starving gang takes a spare pod"
    assert len([n for n in evicted if n.startswith("low-")]) <= 2, evicted


def test_reclaim_from_reclaimable_queue_over_its_share() -> None:
    w = World(nodes=2, gpus=8)  # 16 GPUs; two queues weight 1:1 -> 8 each
    w.queue("greedy", weight=1, reclaimable=True)
    w.queue("owner", weight=1)
    w.gang("hog", 2, gpus=8, min_member=1, queue="greedy", phase="Running", bound=["n0", "n1"])
    w.gang("mine", 1, gpus=8, queue="owner")
    d = w.cycle()
    assert [(e.action, e.task.pod.name) for e in d.evictions] == [("reclaim", "hog-1")] or [
        (e.action, e.task.pod.name) for e in d.evictions
    ] == [("reclaim", "hog-0")]


def test_non_reclaimable_queue_is_never_reclaimed_from() -> None:
    w = World(nodes=2, gpus=8)
    w.queue("greedy", weight=1, reclaimable=False)
    w.queue("owner", weight=1)
    w.gang("hog", 2, gpus=8, min_member=1, queue="greedy", phase="Running", bound=["n0", "n1"])
    w.gang("mine", 1, gpus=8, queue="owner")
    assert w.cycle().evictions == []


def test_reservation_then_backfill_only_short_jobs() -> None:
    now = 1767225600.0 + 3600
    w = World(nodes=2, gpus=8)
    # n0 busy until now+100 (estimate), n1 busy until now+10
    w.gang(
        "long",
        1,
        gpus=8,
        phase="Running",
        bound=["n0"],
        annotations={"pyextender.io/running-estimate": "3700s"},
    )
    w.gang(
        "short",
        1,
        gpus=4,
        phase="Running",
        bound=["n1"],
        annotations={"pyextender.io/running-estimate": "3610s"},
    )
    w.gang("big", 2, gpus=8, annotations={"sla-waiting-time": "1s"})
    tiers = [["priority", "gang", "sla"], ["proportion", "predicates"]]
    d = w.cycle(tiers=tiers, now=now)
    assert [r.job for r in d.reservations] == ["t/big"]
    res = d.reservations[0]
    assert res.rows == frozenset({0, 1}) and res.ready_at > now
    w.cache.state.reservations.replace(d.reservations, {})
    # a 2-GPU job with no estimate may not take n1's free GPUs; one that ends in time may
    w.gang("noest", 1, gpus=2)
    w.gang("quick", 1, gpus=2, annotations={"pyextender.io/running-estimate": "5s"})
    d2 = w.cycle(tiers=tiers, now=now, require_fit=True)
    assert admitted(d2) == ["t/quick"]
    assert "reserved for waiting gang t/big" in d2.unschedulable["t/noest"]


def test_placement_counts_free_capacity_exactly() -> None:
    # 16 one-GPU members on 2 x 8 GPUs fill the cluster exactly: admitted
    w = World(nodes=2, gpus=8)
    w.gang("g", 16, gpus=1)
    ssn = w.session()
    d = run_cycle(ssn, ("enqueue",), False, require_fit=True)
    assert admitted(d) == ["t/g"]
    # the session the cycle ran in placed every member: no GPU left on either node
    gpu = ssn.state.column["nvidia.com/gpu"]
    assert np.all(ssn.free[:2, gpu] == 0)
    # one member more does not fit, and the reason says how many are short
    w2 = World(nodes=2, gpus=8)
    w2.gang("g", 17, gpus=1)
    d2 = w2.cycle(require_fit=True)
    assert admitted(d2) == []
    assert "1/17 tasks in gang unschedulable" in d2.unschedulable["t/g"]


def test_queues_take_turns_by_share() -> None:
    w = World(nodes=4, gpus=8)  # 32 GPUs, weights 1:3 -> 8 : 24
    w.queue("one", weight=1)
    w.queue("three", weight=3)
    for i in range(20):
        w.gang(f"a{i:02d}", 1, gpus=2, queue="one")
    for i in range(20):
        w.gang(f"b{i:02d}", 1, gpus=2, queue="three")
    d = w.cycle(require_fit=True)
    got = {"one": 0, "three": 0}
    for j in d.admit:
        got[j.queue] += 2
    assert got == {"one": 8, "three": 24}


def test_elastic_members_go_to_the_smaller_dominant_share_first() -> None:
    w = World(nodes=2, gpus=8)
    w.pod("blocker", gpus=4, node="n1")
    # x: 4 bound of 6 (8 GPUs); y: 1 bound of 3 (2 GPUs); 2 GPUs free on n1
    w.gang("x", 6, gpus=2, min_member=2, phase="Running", bound=["n0"] * 4)
    w.gang("y", 3, gpus=2, min_member=1, phase="Running", bound=["n1"])
    for p in w.cache.pods_by_uid.values():
        if not p.node_name:
            p.gates = ("pyextender.io/gang",)
    d = w.cycle(tiers=[["priority", "gang"], ["drf", "proportion"]])
    assert [t.pod.name for t in d.lift] == ["y-1"]


def _podless(w: World, name: str, gpus: str, min_member: int = 2) -> None:
    """A PodGroup as the Kubeflow training operator makes it: minResources, no pods
    (it creates them once the PodGroup is Inqueue); created an hour before ``now``."""
    w.cache.group_event("ADDED", {
        "metadata": {"name": name, "namespace": "t", "uid": f"pg-{name}",
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"minMember": min_member, "queue": "default",
                 "minResources": {"cpu": "2", "nvidia.com/gpu": gpus}},
        "status": {"phase": "Pending"},
    })  # fmt: skip


def test_podgroup_without_pods_is_admitted_on_its_min_resources() -> None:
    w = World(nodes=2, gpus=8)
    _podless(w, "pt", "12")
    _podless(w, "pu", "6")  # fits alone, not after pt: its room is held
    tiers = [["priority", "gang"], ["drf", "predicates"]]  # no queue limits
    d = w.cycle(tiers=tiers, require_fit=True)
    assert admitted(d) == ["t/pt"]
    assert d.unschedulable["t/pu"] == (
        "2/2 tasks in gang unschedulable: minResources exceed the free capacity: "
        "nvidia.com/gpu 6 > 4 free"
    )


def test_podgroup_without_pods_waits_for_them_during_the_grace_period() -> None:
    w = World(nodes=1, gpus=8)
    _podless(w, "pt", "4")
    d = w.cycle(now=1767225600.0 + 2, require_fit=True)  # 2 s after it was created
    assert admitted(d) == [] and "tasks exist" in d.unschedulable.get("t/pt", "tasks exist")


def test_parent_capability_bounds_its_children_at_admission() -> None:
    """Two children of "team" (capability 8 GPUs), each allowed 8 on its own: once one
    holds 6, the other's 4-GPU gang would take the team to 10 and waits; a 2-GPU one fits."""
    w = World(nodes=2, gpus=8)
    w.queue("team", capability={"nvidia.com/gpu": "8"})
    w.queue("a", parent="team", capability={"nvidia.com/gpu": "8"})
    w.queue("b", parent="team", capability={"nvidia.com/gpu": "8"})
    w.gang("run", 3, gpus=2, queue="a", phase="Running", bound=["n0", "n0", "n0"])
    w.gang("big", 2, gpus=2, queue="b")
    w.gang("small", 1, gpus=2, queue="b")
    d = w.cycle()
    assert admitted(d) == ["t/small"]
    assert d.unschedulable["t/big"] == (
        '2/2 tasks in gang unschedulable: proportion: queue "b": parent queue "team" '
        "capability exceeded: nvidia.com/gpu 10/8"
    )


def test_elastic_members_stop_at_a_parent_queues_capability() -> None:
    """x (minMember 1, 4 pods of 2 GPUs) runs one pod in child queue a of team (6 GPUs):
    allocate releases members while team stays within 6, so two more, not three."""
    w = World(nodes=2, gpus=8)
    w.queue("team", capability={"nvidia.com/gpu": "6"})
    w.queue("a", parent="team")
    w.gang("x", 4, gpus=2, min_member=1, queue="a", phase="Running", bound=["n0"])
    for p in w.cache.pods_by_uid.values():
        if not p.node_name:
            p.gates = ("pyextender.io/gang",)
    d = w.cycle()
    assert sorted(t.pod.name for t in d.lift) == ["x-1", "x-2"]


def test_reservation_action_reserves_without_the_sla_plugin() -> None:
    """The reservation action holds nodes for a gang past its sla-waiting-time annotation
    even when the sla plugin is not configured; without the action, nothing is held."""
    now = 1767225600.0 + 3600
    tiers = [["priority", "gang"], ["proportion", "predicates"]]
    w = World(nodes=2, gpus=8)
    w.gang("run", 1, gpus=8, phase="Running", bound=["n0"],
           annotations={"pyextender.io/running-estimate": "3700s"})  # fmt: skip
    w.gang("big", 2, gpus=8, annotations={"sla-waiting-time": "1s"})
    assert w.cycle(tiers=tiers, now=now).reservations == []
    d = w.cycle(tiers=tiers, now=now, actions=("enqueue", "allocate", "reservation"))
    assert [r.job for r in d.reservations] == ["t/big"]


def test_deserved_shares_follow_the_queue_tree() -> None:
    """16 GPUs: x and team split them 8/8 (weight 1 each); team's 8 go to its children
    a and b by their weights 3:1, so 6 and 2, though a and b outweigh x on their own."""
    w = World(nodes=2, gpus=8)
    w.queue("x")
    w.queue("team")
    w.queue("a", weight=3, parent="team")
    w.queue("b", weight=1, parent="team")
    for q in ("x", "a", "b"):
        w.gang(f"g{q}", 8, gpus=2, queue=q)
    ssn = w.session()
    gpu = ssn.state.column["nvidia.com/gpu"]
    got = {q: ssn.queues[q].deserved[gpu] for q in ("x", "team", "a", "b")}
    assert got == pytest.approx({"x": 8, "team": 0, "a": 6, "b": 2}), got


def test_reclaim_follows_the_queue_tree() -> None:
    """x runs 8 GPUs (its deserved 8); b, under team with a, runs 8 though team's 8 split
    3:1 leave it 2. a's 6-GPU gang reclaims from b only, never from x."""
    w = World(nodes=2, gpus=8)
    w.queue("x", reclaimable=True)
    w.queue("team")
    w.queue("a", weight=3, parent="team")
    w.queue("b", weight=1, parent="team", reclaimable=True)
    w.gang("xs", 4, gpus=2, min_member=1, queue="x", phase="Running", bound=["n0"] * 4)
    w.gang("bs", 4, gpus=2, min_member=1, queue="b", phase="Running", bound=["n1"] * 4)
    w.gang("as", 3, gpus=2, queue="a")
    d = w.cycle()
    victims = sorted(e.task.pod.name for e in d.evictions)
    assert victims and all(v.startswith("bs-") for v in victims), victims
    assert len(victims) == 3  # b keeps its deserved 2 GPUs
