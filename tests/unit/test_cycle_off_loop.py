"""The scheduling cycle runs on its own thread over a snapshot: the event loop
that serves filter/prioritize keeps running, and the snapshot does not move
while the loop applies watch events to the live cache."""

from __future__ import annotations

import asyncio
import math
import os
import threading
import time

import pytest

from pyextender.actions.decisions import Decisions
from pyextender.plugins.defaults import load
from pyextender.server import scheduler_loop as loop_mod
from pyextender.server.actuator import Actuator
from pyextender.server.metrics import Metrics
from pyextender.server.scheduler_loop import SchedulerLoop
from tests.unit.batch_fixtures import World


def test_snapshot_does_not_see_later_changes() -> None:
    w = World(nodes=2, gpus=8)
    w.gang("a", 2, gpus=4, phase="Running", bound=["n0", "n0"])
    snap = w.cache.snapshot()
    gpu = snap.state.column["nvidia.com/gpu"]
    used_before = snap.state.used[: snap.state.size, gpu].copy()
    # the live cache moves on: a new gang, a pod bound, a node gone
    w.gang("b", 2, gpus=4, phase="Running", bound=["n1", "n1"])
    w.cache.node_event("DELETED", {"metadata": {"name": "n0"}})
    assert set(snap.groups) == {"t/a"} and "t/b" in w.cache.groups
    assert (snap.state.used[: snap.state.size, gpu] == used_before).all()
    assert "n0" in snap.state.index and "n0" not in w.cache.state.index
    assert len(snap.pods_by_uid) == 2 and len(w.cache.pods_by_uid) == 4
    assert snap.state.gpu is not w.cache.state.gpu
    assert snap.state.gpu.free_mask is not w.cache.state.gpu.free_mask


def _node(name: str, cpu: str, gpus: int, topology: str | None = None) -> dict[str, object]:
    meta: dict[str, object] = {"name": name}
    if topology is not None:
        meta["annotations"] = {"pyextender.io/gpu-topology": topology}
    alloc = {"cpu": cpu, "memory": "256Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return {"metadata": meta, "status": {"allocatable": alloc}}


def test_snapshot_shares_node_fields_until_either_side_writes() -> None:
    """Node-side fields are shared, not copied, at the snapshot: a node event on the
    live cache, or a new resource column on the copy, must copy them first."""
    w = World(nodes=2, gpus=8)
    live = w.cache.state
    snap = w.cache.snapshot()
    assert snap.state.alloc is live.alloc and snap.state.gpu.nvlink is live.gpu.nvlink
    cpu = live.column["cpu"]
    row = live.index["n1"]
    # the live side: n1 shrinks to 32 CPUs and 4 GPUs with a topology, n2 arrives
    w.cache.node_event("MODIFIED", _node("n1", "32", 4, '{"nvlink": [[0,1],[2,3]]}'))
    w.cache.node_event("ADDED", _node("n2", "16", 2))
    assert live.alloc[row, cpu] == 32_000 and snap.state.alloc[row, cpu] == 64_000
    assert int(live.gpu.count[row]) == 4 and int(snap.state.gpu.count[row]) == 8
    assert "n2" in live.index and "n2" not in snap.state.index
    assert snap.state.size == 2 and len(snap.state.gpu.layouts) < len(live.gpu.layouts)
    # the copy's side: a request naming a resource never seen adds a column to it only
    width = len(live.resources)
    vec = snap.state.vector({"cpu": 1000, "example.com/fpga": 1})
    assert vec.shape[0] == width + 1 and len(snap.state.resources) == width + 1
    assert len(live.resources) == width and live.alloc.shape[1] == width
    assert "example.com/fpga" not in live.column
    # a second snapshot shares the live side's new fields, and is not moved by the first
    again = w.cache.snapshot()
    assert again.state.alloc is live.alloc and again.state.alloc[row, cpu] == 32_000
    w.cache.node_event("DELETED", {"metadata": {"name": "n2"}})
    assert "n2" in again.state.index and "n2" not in live.index


def test_snapshot_leaves_out_what_the_cycle_never_reads() -> None:
    """Not copied on the loop; a use of it on the cycle's thread fails loudly rather
    than read the live container."""
    w = World(nodes=2, gpus=8)
    w.gang("a", 2, gpus=4, phase="Running", bound=["n0", "n0"])
    snap = w.cache.snapshot()
    for read in (
        lambda: snap.members.uids("t/a"),
        lambda: len(snap.pods_by_key),
        lambda: "x" in snap.state.gpu.placed,
        lambda: snap.deleted_uids.get("x"),
    ):
        with pytest.raises(RuntimeError, match="not part of a reading copy"):
            read()
    assert w.cache.members.uids("t/a") and w.cache.state.gpu.placed  # the live ones are there
    # what the cycle does read is there
    ssn = SchedulerLoop(w.cache, lambda: load(None), Actuator.__new__(Actuator), Metrics())
    assert ssn._build(snap, time.time(), {}, set()).jobs["t/a"].bound_count == 2


def test_a_slow_cycle_does_not_block_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    w = World(nodes=2, gpus=8)
    w.gang("g", 2, gpus=4)

    def slow_cycle(*args: object) -> Decisions:
        time.sleep(0.5)  # stands in for a long cycle at scale (holds no lock the loop needs)
        return Decisions()

    monkeypatch.setattr(loop_mod, "run_cycle", slow_cycle)
    cfg = load(None)
    metrics = Metrics()
    sl = SchedulerLoop(w.cache, lambda: cfg, Actuator.__new__(Actuator), metrics)

    async def apply(d: Decisions, *a: object) -> object:
        return None

    sl.actuator.apply = apply  # type: ignore[method-assign]
    sl.actuator.forget = lambda live: None  # type: ignore[method-assign]

    async def main() -> int:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        t = asyncio.create_task(ticker())
        await sl.cycle(time.time())
        t.cancel()
        return ticks

    ticks = asyncio.run(main())
    # on the loop, a 0.5 s cycle would let the ticker run 0 times
    assert ticks >= 10, f"the event loop was blocked during the cycle ({ticks} ticks)"


def test_a_cycle_handing_the_verbs_new_plans_moves_the_state_generation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Reservations and gang plans come from the cycle, not from a cache event: the
    generation must move with them, or a verdict memoised on it (framework Reserve
    keeping Filter's pick) would outlive them."""
    w = World(nodes=2, gpus=8)
    w.gang("g", 2, gpus=4)
    monkeypatch.setattr(loop_mod, "run_cycle", lambda *a: Decisions())
    sl = SchedulerLoop(w.cache, lambda: load(None), Actuator.__new__(Actuator), Metrics())

    async def apply(d: Decisions, *a: object) -> object:
        return None

    sl.actuator.apply = apply  # type: ignore[method-assign]
    sl.actuator.forget = lambda live: None  # type: ignore[method-assign]
    before = w.cache.state.generation
    asyncio.run(sl.cycle(time.time()))
    assert w.cache.state.generation == before + 1


def test_the_decide_thread_runs_niced_below_the_event_loop() -> None:
    def niceness() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    mine = niceness()
    theirs = loop_mod.DECIDE_THREAD.submit(niceness).result(timeout=10)
    # the thread started at our niceness, then lowered its own priority
    assert theirs == min(mine + loop_mod.DECIDE_NICE, 19)
    assert niceness() == mine  # the calling thread is untouched


def test_cycles_space_out_when_they_cost_more_than_their_share_of_a_core(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The gap after a cycle follows the decide thread's CPU for it: the 0.1 s minimum
    for cheap cycles, C * 9 for a cycle of C CPU seconds (10 % of a core), at most the
    1 s heartbeat. A cycle that only sleeps costs no CPU and keeps the minimum."""
    w = World(nodes=2, gpus=8)
    w.gang("g", 2, gpus=4)
    busy = [0.0]

    def cycle(*args: object) -> Decisions:
        end = time.thread_time() + busy[0]
        while time.thread_time() < end:  # CPU, not a sleep
            pass
        time.sleep(0.05)
        return Decisions()

    monkeypatch.setattr(loop_mod, "run_cycle", cycle)
    cfg = load(None)
    sl = SchedulerLoop(w.cache, lambda: cfg, Actuator.__new__(Actuator), Metrics())
    assert sl.next_gap() == loop_mod.MIN_INTERVAL_S
    sl.decide(time.time())
    assert sl.next_gap() == loop_mod.MIN_INTERVAL_S, "sleeping is not CPU"
    busy[0] = 0.04
    sl.decide(time.time())
    assert 0.36 <= sl.next_gap() <= 0.6, sl.decide_cpu_s
    busy[0] = 0.3
    sl.decide(time.time())
    assert sl.next_gap() == loop_mod.HEARTBEAT_S


def test_cycles_wait_for_the_heartbeat_while_only_lone_pods_come_and_go() -> None:
    """Lone pods binding change the cache all the time, but no cycle decision is
    about them: the loop then cycles at the heartbeat only. A PodGroup to admit, or
    a member unbound (held or being placed), brings the cycles on changes back."""
    w = World(nodes=2, gpus=8)
    w.pod("lone-0", gpus=1)  # unbound, no group, no gate: kube-scheduler's
    w.pod("lone-1", gpus=1, node="n0")
    cfg = load(None)
    sl = SchedulerLoop(w.cache, lambda: cfg, Actuator.__new__(Actuator), Metrics())
    assert not sl.something_waits()
    v, t = w.cache.version, 100.0
    w.pod("lone-2", gpus=1)
    assert w.cache.version != v
    assert sl.should_cycle(t + 0.2, v, t, idle=False), "the cycle after the last wait"
    assert not sl.should_cycle(t + 0.2, v, t, idle=True), "changed, but nothing waits"
    assert sl.should_cycle(t + loop_mod.HEARTBEAT_S, v, t, idle=True), "the heartbeat"
    assert not sl.should_cycle(t + 0.2, w.cache.version, t, idle=False), "no change"
    # a PodGroup without a phase yet (to write Pending, or to admit) waits
    w.gang("g", 2, gpus=1, phase="")
    assert sl.something_waits() and sl.should_cycle(t + 0.2, v, t, idle=True)


def test_an_admitted_gang_waits_until_its_members_are_bound() -> None:
    w = World(nodes=2, gpus=8)
    w.gang("g", 2, gpus=1, phase="Inqueue")  # members unbound, gated
    cfg = load(None)
    sl = SchedulerLoop(w.cache, lambda: cfg, Actuator.__new__(Actuator), Metrics())
    assert sl.something_waits()
    w2 = World(nodes=2, gpus=8)
    w2.gang("g", 2, gpus=1, phase="Running", bound=["n0", "n1"])
    sl2 = SchedulerLoop(w2.cache, lambda: cfg, Actuator.__new__(Actuator), Metrics())
    assert not sl2.something_waits()
    w2.pod("g-late", gpus=1, group="g")  # one more member, ungated, not bound yet
    assert sl2.something_waits()


def test_a_gang_becoming_whole_is_told_once() -> None:
    """gang_whole fires when a PodGroup not admitted yet gets its minMember-th pod (or is
    created with its pods already there), once: not for more members, not for a repeated
    event of a member, not for an admitted PodGroup."""
    w = World(nodes=2, gpus=8)
    told: list[int] = []
    w.cache.gang_whole.append(lambda: told.append(1))
    w.gang("a", 3, min_member=2)  # PodGroup first, then pods: the 2nd pod makes it whole
    assert len(told) == 1
    w.pod("a-1", group="a")  # the same member again (a MODIFIED event)
    assert len(told) == 1
    w.gang("b", 2, phase="Inqueue")  # admitted already: nothing to admit
    assert len(told) == 1
    w.pod("c-0", group="c")  # pods before their PodGroup: its creation makes it whole
    assert len(told) == 1
    w.gang("c", 0, min_member=1)
    assert len(told) == 2


def test_a_whole_gang_cuts_the_wait_for_the_next_cycle() -> None:
    """The loop waits next_gap() between cycles (here the 1 s heartbeat: the last cycle
    was costly); a PodGroup becoming whole meanwhile starts the next one much sooner,
    unless cycles are costly and the last one has just run (WAKE_SHARE)."""
    w = World(nodes=2, gpus=8)
    sl = SchedulerLoop(w.cache, lambda: load(None), Actuator.__new__(Actuator), Metrics())
    sl.decide_cpu_s = 0.2  # next_gap() = min(1 s, 0.2 * 9) = 1 s; spacing 1.8 s
    assert sl.next_gap() == loop_mod.HEARTBEAT_S

    gangs = iter(range(100))

    async def pause(woken_after: float, last_run: float) -> float:
        async def wake_later() -> None:
            await asyncio.sleep(woken_after)
            w.gang(f"g{next(gangs)}", 2)  # the cache tells the loop

        t0 = time.monotonic()
        waker = asyncio.ensure_future(wake_later())
        await sl._pause(last_run)
        await waker
        return time.monotonic() - t0

    # the last cycle long ago: the whole gang's cycle comes at once
    assert asyncio.run(pause(0.05, last_run=0.0)) < 0.5
    # cheap cycles (1 ms), the last one just begun: WAKE_SHARE spaces the next 49 ms out
    sl.decide_cpu_s = 0.001
    waited = asyncio.run(pause(0.0, last_run=time.time()))
    assert 0.04 <= waited < loop_mod.MIN_INTERVAL_S, waited
    # costly ones (20 ms): no sooner than the regular gap (gangs streaming in keep
    # their batching)
    sl.decide_cpu_s = 0.02
    waited = asyncio.run(pause(0.0, last_run=time.time()))
    assert waited >= 0.95 * sl.next_gap(), waited


def test_the_cycle_after_a_newcomer_hold_comes_when_the_hold_ends() -> None:
    """A cycle that held extras back for the newcomer grace (Decisions.held_until) is
    followed by one just after the hold ends, not a whole gap later, and that one runs
    though nothing changed; never sooner than MIN_INTERVAL_S after the last began."""
    w = World(nodes=2, gpus=8)
    sl = SchedulerLoop(w.cache, lambda: load(None), Actuator.__new__(Actuator), Metrics())
    sl.decide_cpu_s = 0.2  # next_gap() = the 1 s heartbeat
    assert sl.held_until == math.inf

    def paused(last_run: float) -> float:
        t0 = time.monotonic()
        asyncio.run(sl._pause(last_run))
        return time.monotonic() - t0

    now = time.time()
    sl.held_until = now + 0.3
    waited = paused(last_run=now)
    assert 0.3 <= waited < 0.8, waited
    v = w.cache.version
    assert not sl.should_cycle(now + 0.2, v, now, idle=True), "before the hold's end"
    assert sl.should_cycle(now + 0.31, v, now, idle=True), "at its end, with no change"
    # a hold that ended already: the next cycle still keeps the minimum spacing
    now = time.time()
    sl.held_until = now - 5
    waited = paused(last_run=now)
    assert 0.09 <= waited < 0.8, waited
    # over, and no cycle since (the cache was not synced): retried at that spacing, not
    # at once again and again
    sl.held_until = now - 5
    waited = paused(last_run=now - 10)
    assert 0.09 <= waited < 0.8, waited
    sl.held_until = math.inf
    now = time.time()
    assert paused(last_run=now) >= 0.95 * loop_mod.HEARTBEAT_S
