"""The reservation action's holder keeps its nodes from its admission until its members
are bound (pyextender/actions/reservation.py). In between, kube-scheduler places the pods
of jobs admitted in the same cycle; dropping the hold at admission let one of them land
on the held node, and the gang never ran (seen in e2e test_reservation_action)."""

from __future__ import annotations

from pyextender.cache.reservations import Reservation
from tests.unit.batch_fixtures import World

NOW = 1767225600.0 + 3600
TIERS = [["priority", "gang"], ["proportion", "predicates"]]
ACTIONS = ("enqueue", "allocate", "reservation")


def _held(w: World) -> list[Reservation]:
    d = w.cycle(tiers=TIERS, now=NOW, actions=ACTIONS)
    w.cache.state.reservations.replace(d.reservations, {})
    return d.reservations


def _delete(w: World, name: str) -> None:
    w.cache.pod_event(
        "DELETED",
        {
            "metadata": {"name": name, "namespace": "t", "uid": f"uid-t-{name}"},
            "spec": {"containers": [{"name": "c"}]},
        },
    )


def test_the_holder_keeps_its_node_until_its_members_are_bound() -> None:
    w = World(nodes=2, gpus=8)
    w.gang("r0", 1, gpus=8, phase="Running", bound=["n0"])
    w.gang("r1", 1, gpus=8, phase="Running", bound=["n1"])
    w.gang("big", 1, gpus=8, annotations={"sla-waiting-time": "1s"})
    first = _held(w)
    assert [r.job for r in first] == ["t/big"]
    row = next(iter(first[0].rows))
    _delete(w, f"r{row}-0")  # the held node frees up: big is admitted this cycle
    d = w.cycle(tiers=TIERS, now=NOW, actions=ACTIONS)
    assert [j.key for j in d.admit] == ["t/big"]
    assert [(r.job, r.rows) for r in d.reservations] == [("t/big", first[0].rows)]


def test_the_hold_ends_once_the_members_are_bound() -> None:
    w = World(nodes=2, gpus=8)
    w.gang("r1", 1, gpus=8, phase="Running", bound=["n1"])
    w.gang("big", 1, gpus=8, phase="Running", bound=["n0"],
           annotations={"sla-waiting-time": "1s"})  # fmt: skip
    w.cache.state.reservations.replace(
        [Reservation(job="t/big", rows=frozenset({0}), since=NOW - 5, ready_at=NOW)], {}
    )
    assert w.cycle(tiers=TIERS, now=NOW, actions=ACTIONS).reservations == []
