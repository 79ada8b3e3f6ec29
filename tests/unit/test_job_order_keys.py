"""Jobs sorted by the plugins' keys come out in job_compare's order (the pairwise
comparisons Volcano's plugins define), for every JobOrder plugin and mixes of them."""

from __future__ import annotations

import functools
import random
from typing import Any

import pytest

from pyextender.framework.session import Job, JobOrder, JobOrderKey, Session
from tests.unit.batch_fixtures import World

ORDER_PLUGINS = ["priority", "gang", "drf", "sla"]


def _world(seed: int) -> World:
    rng = random.Random(seed)
    w = World(nodes=4, gpus=8)
    for q in ("a", "b"):
        w.queue(q, weight=rng.randint(1, 3))
    for i in range(40):
        size = rng.randint(1, 3)
        bound = [f"n{rng.randrange(4)}" for _ in range(rng.randint(0, size))]
        annotations = {}
        if rng.random() < 0.4:  # some jobs with an SLA waiting time of their own
            annotations["sla-waiting-time"] = f"{rng.choice([1, 5, 30])}m"
        w.gang(
            f"j{i}",
            size,
            gpus=rng.choice([0, 1, 2]),
            queue=rng.choice(["a", "b", "default"]),
            min_member=rng.randint(1, size),
            priority=rng.choice([0, 0, 10, 100]),
            phase="Running" if bound else "Pending",
            bound=bound or None,
            annotations=annotations,
        )
    return w


def _by_comparisons(ssn: Session, jobs: list[Job]) -> list[str]:
    """The reference: queues by queue_compare, then jobs by job_compare, both pairwise."""
    queues = sorted(
        {j.queue for j in jobs if j.queue in ssn.queues},
        key=functools.cmp_to_key(lambda x, y: ssn.queue_compare(ssn.queues[x], ssn.queues[y])),
    )
    rank = {q: i for i, q in enumerate(queues)}
    by_job = sorted(jobs, key=functools.cmp_to_key(ssn.job_compare))
    return [j.key for j in sorted(by_job, key=lambda j: rank.get(j.queue, len(rank)))]


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize(
    "tiers",
    [
        [["priority", "gang"], ["drf"]],
        [["sla", "priority"], ["gang", "drf"]],
        [["drf"], ["sla"]],
        [["gang"]],
        [["proportion"]],  # no JobOrder plugin: creation time, then name
    ],
)
def test_keys_sort_as_the_comparisons_do(seed: int, tiers: list[list[str]]) -> None:
    ssn = _world(seed).session(tiers=tiers)
    jobs = list(ssn.jobs.values())
    random.Random(seed).shuffle(jobs)
    chain = [p for tier in ssn.tiers for p in tier if isinstance(p, JobOrder)]
    assert all(isinstance(p, JobOrderKey) for p in chain)
    if any(p.name == "sla" for p in chain):  # deadlines and no deadlines both
        assert {j.sla_wait is None for j in jobs} == {True, False}
    assert [j.key for j in ssn.ordered_jobs(jobs)] == _by_comparisons(ssn, jobs)


class _NoKey:
    """A JobOrder without a key: longer names first."""

    name = "nokey"

    def job_order(self, ssn: Session, a: Job, b: Job) -> int:
        return len(b.key) - len(a.key)


def test_a_plugin_without_a_key_sorts_by_comparisons() -> None:
    ssn = _world(7).session(tiers=[["priority"], ["gang"]])
    ssn.tiers.insert(1, [_NoKey()])
    jobs: list[Any] = list(ssn.jobs.values())
    got = [j.key for j in ssn.ordered_jobs(jobs)]
    assert got == _by_comparisons(ssn, jobs)
    # the keyless plugin decided somewhere: its order shows among equal priorities
    prio = {k: ssn.jobs[k].priority for k in got}
    assert any(
        prio[a] == prio[b] and len(a) > len(b) and got.index(a) < got.index(b)
        for a in got
        for b in got
    )
