"""The batch scheduling core on a real cluster: gangs, queues, DRF, preemption,
reclaim, backfill with reservation, and crash safety (issue 3's e2e list).

Gang pods are created gated, as the admission webhook would create them; the
sidecar's enqueue action lifts the gates. The cluster has 2 nodes x 8 GPUs.

The gang scenarios (all-or-nothing, two gangs, queue shares, preemption, crash
mid-gang) take the ``env`` fixture and run twice, with the same assertions: in
extender mode (stock kube-scheduler, gang barrier in the bind verb) and in
framework mode (kube-scheduler built with the shim, gang barrier in Permit).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3
from kubernetes import client
from kubernetes import watch as kwatch

from tests.e2e.conftest import Env, create
from tests.e2e.kube import (
    bound,
    bound_of,
    condition,
    create_member,
    gang,
    gpus_per_node,
    metrics,
    pod,
    podgroup,
    priority_class,
    queue,
    reasons_for,
    wait_for,
)
from tests.e2e.waits import Sampler, barrier_waiting, cycles_pass

pytestmark = pytest.mark.e2e


def _held(env: Env, names: list[str]) -> int:
    """Members held for their gang: in the bind verb's barrier (extender mode) or,
    as the sidecar last told the shim, waiting in Permit (framework mode)."""
    if env.mode == "extender":
        return int(barrier_waiting(env.sidecar))
    keys = {f"{env.namespace}/{n}" for n in names}
    ready = [
        int(d.get("ready", 0))  # type: ignore[call-overload]
        for d in _decisions(env.sidecar)
        if d["verb"] == "permit" and d["pod"] in keys and d.get("result") == "wait"
    ]
    return max(ready, default=0)


def _decisions(url: str) -> list[dict[str, object]]:
    with urllib.request.urlopen(f"{url}/debug/decisions", timeout=5) as r:
        rows: list[dict[str, object]] = json.loads(r.read())
    return rows


class Nominations:
    """Pods of a namespace ever seen with status.nominatedNodeName, from a watch
    (a poll could miss the moment between the write and the binding)."""

    def __init__(self, core: client.CoreV1Api, namespace: str) -> None:
        self.watch = kwatch.Watch()
        self.events = 0
        self.names: set[str] = set()
        self.stopping = False
        stream = self.watch.stream(core.list_namespaced_pod, namespace, timeout_seconds=300)
        self.thread = threading.Thread(target=self._run, args=(stream,), daemon=True)
        self.thread.start()

    def _run(self, stream: Iterator[dict[str, Any]]) -> None:
        try:
            for event in stream:
                self.events += 1
                obj = event["object"]
                if obj.status and obj.status.nominated_node_name:
                    self.names.add(obj.metadata.name)
        except urllib3.exceptions.ProtocolError:
            # after close() the stream lives on until its next event, and ends
            # this way when the cluster goes; before close() it is a real failure
            if not self.stopping:
                raise

    def close(self) -> tuple[int, set[str]]:
        """(events seen, pods nominated)."""
        self.stopping = True
        self.watch.stop()
        self.thread.join(timeout=10)
        return self.events, self.names


def test_gang_all_or_nothing(env: Env) -> None:
    core, api, namespace, sidecar = env.core, env.api, env.namespace, env.sidecar
    create(core, pod("block-8", namespace, gpus=8, scheduler="default-scheduler"))
    create(core, pod("block-2", namespace, gpus=2, scheduler="default-scheduler"))
    wait_for("blockers bound", lambda: len(bound(core, namespace)) == 2)
    nominations = Nominations(core, namespace)
    names = gang(core, api, namespace, "g", 8, gpus=1)
    sampler = Sampler(lambda: bound_of(core, namespace, names))
    why = wait_for(
        "an Unschedulable condition", lambda: condition(api, namespace, "g", "Unschedulable")
    )
    assert why.startswith("2/8 tasks in gang unschedulable: Insufficient nvidia.com/gpu"), why
    cycles_pass(sidecar, 3)  # three more chances to (wrongly) admit it
    assert sampler.seen and max(sampler.seen) == 0, "a member bound with only 6 of 8 GPUs free"
    core.delete_namespaced_pod("block-2", namespace, grace_period_seconds=0)
    wait_for("all 8 bound", lambda: bound_of(core, namespace, names) == 8, timeout=60)
    seen = sampler.close()
    assert sampler.partial_runs(8) == 0, seen

    def binds() -> list[dict[str, object]]:
        return [
            d
            for d in _decisions(sidecar)
            if d["verb"] == "bind" and str(d["pod"]).startswith(f"{namespace}/")
        ]

    # the gang's Bindings are written together and logged once all have answered:
    # the API server can show the 8th bound a moment before the sidecar logs them
    wait_for("8 bind decisions", lambda: sum(d["result"] == "bound" for d in binds()) == 8)
    times = [float(d["time"]) for d in binds() if d["result"] == "bound"]  # type: ignore[arg-type]
    assert len(times) == 8 and max(times) - min(times) < 2.0, binds()
    assert all(v <= 8 for v in gpus_per_node(core).values())
    # the GPUs chosen for each member reach the pod on its Binding (extender: the
    # bind verb's; framework: the shim's Bind, with what Reserve chose), distinct
    # on each node
    chosen: dict[str, list[str]] = {}
    members = [p for p in core.list_namespaced_pod(namespace).items if p.metadata.name in names]
    for p in members:
        index = (p.metadata.annotations or {}).get("pyextender.io/gpu-index", "")
        assert len(index.split(",")) == 1 and index.isdigit(), (p.metadata.name, index)
        chosen.setdefault(p.spec.node_name, []).append(index)
    assert all(len(set(v)) == len(v) for v in chosen.values()), chosen
    # no write of its own for that, and none from kube-scheduler while members
    # waited in Permit (the shim turns NominatedNodeNameForExpectation off)
    assert not [d for d in _decisions(sidecar) if d["verb"] == "prebind"]
    events, nominated = nominations.close()
    assert events >= 8 and not nominated, (events, nominated)
    if env.mode == "framework":
        # the shim sent every Filter and Reserve on its Cycle stream, no unary call
        counters = metrics(sidecar)
        for call in ("filter", "reserve"):
            streamed = counters.get(f'pyextender_grpc_cycle_messages_total{{call="{call}"}}', 0.0)
            answered = sum(
                v
                for k, v in counters.items()
                if k.startswith("pyextender_verb_requests_total{") and f'verb="grpc_{call}"' in k
            )
            assert streamed >= 8 and streamed == answered, (call, streamed, answered)
        # on the cycle socket (devcluster passes it to both sides), not the gRPC stream
        opened = {
            t: counters.get(f'pyextender_grpc_cycle_streams_total{{transport="{t}"}}', 0.0)
            for t in ("socket", "grpc")
        }
        assert opened["socket"] >= 1 and opened["grpc"] == 0, opened


def test_a_pod_without_a_podgroup_goes_through_the_sidecar(env: Env) -> None:
    """Both modes place a pod of our scheduler that has no PodGroup through the
    sidecar, as Volcano's scheduler places every pod of its own: our filter and
    bind (framework mode: the shim's Filter, Reserve and Bind, the bind counted from
    the sidecar's watch), and its GPUs chosen and written on the Binding."""
    core, namespace, sidecar = env.core, env.namespace, env.sidecar
    create(core, pod("solo", namespace, gpus=2))
    wait_for("solo bound", lambda: "solo" in bound(core, namespace), timeout=60)
    key = f"{namespace}/solo"

    def mine() -> list[dict[str, object]]:
        return [d for d in _decisions(sidecar) if d["pod"] == key]

    # framework mode counts the bind when the sidecar's watch shows the pod bound
    wait_for(
        "the bind in the decision log",
        lambda: [d for d in mine() if d["verb"] == "bind" and d["result"] == "bound"],
        timeout=10,
    )
    verbs = {str(d["verb"]) for d in mine()}
    assert "filter" in verbs, mine()
    assert "permit" not in verbs, mine()  # no gang, no barrier
    got = core.read_namespaced_pod("solo", namespace)
    index = (got.metadata.annotations or {}).get("pyextender.io/gpu-index", "")
    chosen = index.split(",")
    assert len(chosen) == 2 and len(set(chosen)) == 2 and all(g.isdigit() for g in chosen), index


def test_a_member_of_a_missing_podgroup_waits_for_it(env: Env) -> None:
    """Pods that name a PodGroup nobody created yet, and no gate (a Job's next run
    created before its PodGroup, or an operator that creates them out of order):
    as Volcano, none runs without its PodGroup, so a gang is never started in part,
    and kube-scheduler's event says which PodGroup is missing. Once it exists the gang
    goes: in extender mode the filter answered with an error, so kube-scheduler tries
    again within its backoff (<= 10 s); in framework mode PreFilter refused the pods as
    unresolvable, which parks them until a cluster event (the creation of a PodGroup is
    none kube-scheduler watches), so the sidecar lists them on the WatchReleased stream
    and the shim moves them back to the active queue."""
    core, api, namespace = env.core, env.api, env.namespace
    names = ["later-0", "later-1"]
    for name in names:
        m = pod(name, namespace, gpus=4)
        m["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": "later"}
        create(core, m)
    sampler = Sampler(lambda: bound_of(core, namespace, names))
    want = f"PodGroup {namespace}/later does not exist"

    def said() -> list[str]:
        events = core.list_namespaced_event(namespace, field_selector="reason=FailedScheduling")
        return [e.message for e in events.items if want in (e.message or "")]

    wait_for("a FailedScheduling event naming the PodGroup", said, timeout=30)
    time.sleep(2)
    assert sampler.close() and max(sampler.seen) == 0, "a member bound without its PodGroup"
    podgroup(api, namespace, "later", 2)
    # within a minute: kube-scheduler's own flush of parked pods comes after five
    wait_for("both bound", lambda: bound_of(core, namespace, names) == 2, timeout=60)


def _seen_whole_node_jobs(core: client.CoreV1Api, namespace: str) -> None:
    """Show the sidecar an 8-GPU pod (bound by default-scheduler, then deleted). It
    learns the workload's GPU sizes from the pods it sees bound, and gpu-topology keeps
    whole nodes free only for sizes it has seen: without this, whether it packs a
    1-GPU pod depends on what earlier tests of the session ran (alone, it has seen
    1-GPU pods only, and Volcano's least-requested spreads them)."""
    create(core, pod("whole", namespace, gpus=8, cpu="1", scheduler="default-scheduler"))
    wait_for("the 8-GPU pod bound", lambda: "whole" in bound(core, namespace), timeout=60)
    core.delete_namespaced_pod("whole", namespace, grace_period_seconds=0)
    wait_for(
        "the 8-GPU pod gone",
        lambda: "whole" not in {p.metadata.name for p in core.list_namespaced_pod(namespace).items},
        timeout=30,
    )


def test_the_sidecars_policy_chooses_the_node(env: Env) -> None:
    """The node is the one our score plugins rank first, in both modes, as Volcano's
    scheduler chooses it: extender mode's filter answers only that node; framework
    mode's profile leaves kube-scheduler no resource scores of its own to add
    (NodeResourcesFit's least-allocated and NodeResourcesBalancedAllocation, which
    our nodeorder plugin covers). The default policy packs GPUs, keeping a whole
    8-GPU node free; least-allocated would spread a second 12-CPU pod to the
    emptier node."""
    core, namespace = env.core, env.namespace
    _seen_whole_node_jobs(core, namespace)
    create(core, pod("first", namespace, gpus=1, cpu="12"))
    wait_for("first bound", lambda: "first" in bound(core, namespace), timeout=60)
    create(core, pod("second", namespace, gpus=1, cpu="12"))
    wait_for("second bound", lambda: "second" in bound(core, namespace), timeout=60)
    nodes = bound(core, namespace)
    assert nodes["second"] == nodes["first"], nodes


def test_a_pick_that_kube_scheduler_turns_down_is_retried_on_every_node(env: Env) -> None:
    """The sidecar does not model host ports; kube-scheduler's NodePorts does. Our
    packing ranks the node of the first pod first for the second, which asks for
    the same host port. Extender mode: kube-scheduler's filters ran before ours, so
    that node is not offered. Framework mode: the shim narrowed the cycle to the
    sidecar's pick, NodePorts turned it down, PostFilter sent the pod straight back,
    and the sidecar, whose pick never reached Reserve, answered with every node."""
    core, namespace, sidecar = env.core, env.namespace, env.sidecar

    def with_port(name: str) -> dict[str, Any]:
        manifest = pod(name, namespace, gpus=1, cpu="12")
        manifest["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 18080}]
        return manifest

    _seen_whole_node_jobs(core, namespace)
    create(core, with_port("first"))
    wait_for("first bound", lambda: "first" in bound(core, namespace), timeout=60)
    taken = bound(core, namespace)["first"]
    create(core, with_port("second"))
    wait_for("second bound", lambda: "second" in bound(core, namespace), timeout=30)
    assert bound(core, namespace)["second"] != taken, bound(core, namespace)
    if env.mode == "framework":
        mine = [d for d in _decisions(sidecar) if d["pod"] == f"{namespace}/second"]
        picks = [d for d in mine if d["verb"] == "pick"]
        assert picks[0].get("best") == taken, mine  # the first pick: packing, then NodePorts
        assert any(f"the pick of {taken} was not reserved" in str(d.get("skipped")) for d in picks)
        assert metrics(sidecar).get('pyextender_picks_total{result="not_reserved"}', 0.0) >= 1


def test_a_preferred_node_affinity_outweighs_our_packing(env: Env) -> None:
    """A soft preference is kube-scheduler's to weigh (our score plugins do not
    repeat NodeAffinity): extender mode's filter does not pick a node for such a
    pod, so kube-scheduler scores the feasible ones and adds prioritize's
    scores; nor does framework mode's, so kube-scheduler's NodeAffinity score counts
    there too. The second pod prefers the node our packing would not choose, and
    gets it."""
    core, namespace = env.core, env.namespace
    create(core, pod("first", namespace, gpus=1, cpu="12"))
    wait_for("first bound", lambda: "first" in bound(core, namespace), timeout=60)
    taken = bound(core, namespace)["first"]
    other = next(n.metadata.name for n in core.list_node().items if n.metadata.name != taken)
    second = pod("second", namespace, gpus=1, cpu="12")
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [other]}]}
    second["spec"]["affinity"] = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "preference": term}]
        }
    }
    create(core, second)
    wait_for("second bound", lambda: "second" in bound(core, namespace), timeout=60)
    assert bound(core, namespace)["second"] == other, bound(core, namespace)


def test_a_prefer_no_schedule_taint_outweighs_our_packing(env: Env) -> None:
    """kube-scheduler's TaintToleration scores PreferNoSchedule taints; our score
    plugins do not. With such a taint on a feasible node that the pod does not
    tolerate, the sidecar picks no node in either mode, so kube-scheduler's
    TaintToleration score counts: the second pod avoids the tainted node where our
    packing alone would put it."""
    core, namespace = env.core, env.namespace
    create(core, pod("first", namespace, gpus=1, cpu="12"))
    wait_for("first bound", lambda: "first" in bound(core, namespace), timeout=60)
    taken = bound(core, namespace)["first"]
    before = core.read_node(taken).spec.taints or []
    taint = {"key": "e2e/avoid", "value": "yes", "effect": "PreferNoSchedule"}
    core.patch_node(taken, {"spec": {"taints": [*before, taint]}})
    try:
        time.sleep(1.0)  # both watches (kube-scheduler's, the sidecar's) see the taint
        create(core, pod("second", namespace, gpus=1, cpu="12"))
        wait_for("second bound", lambda: "second" in bound(core, namespace), timeout=60)
        assert bound(core, namespace)["second"] != taken, bound(core, namespace)
    finally:
        core.patch_node(taken, {"spec": {"taints": before or None}})


def test_two_gangs_that_fit_alone_but_not_together(env: Env) -> None:
    core, api, namespace = env.core, env.api, env.namespace
    a = gang(core, api, namespace, "a", 3, gpus=4)
    b = gang(core, api, namespace, "b", 3, gpus=4)
    wait_for(
        "one gang fully bound",
        lambda: 3 in (bound_of(core, namespace, a), bound_of(core, namespace, b)),
        timeout=60,
    )
    loser = "a" if bound_of(core, namespace, a) < 3 else "b"
    # the scheduler looked at the loser and said why it waits; by then nothing of it runs
    why = wait_for(
        "the other gang's Unschedulable condition",
        lambda: condition(api, namespace, loser, "Unschedulable"),
        timeout=30,
    )
    assert "tasks in gang unschedulable" in why
    counts = sorted([bound_of(core, namespace, a), bound_of(core, namespace, b)])
    assert counts == [0, 3], counts


def test_queue_weights_converge_and_capability_holds(env: Env) -> None:
    core, api, namespace = env.core, env.api, env.namespace
    suffix = namespace.replace("-", "")
    q1, q3 = f"one{suffix}", f"three{suffix}"
    queue(api, q1, weight=1)
    queue(api, q3, weight=3)
    jobs: dict[str, list[str]] = {q1: [], q3: []}
    for i in range(16):
        for q in (q1, q3):
            jobs[q] += gang(core, api, namespace, f"{q}-{i}", 1, gpus=1, queue_name=q)

    def split() -> tuple[int, int]:
        b = bound(core, namespace)
        return sum(1 for n in jobs[q1] if n in b), sum(1 for n in jobs[q3] if n in b)

    def converged() -> tuple[int, int] | None:
        one, three = split()
        return (one, three) if one + three == 16 and abs(three / max(one, 1) - 3) <= 0.3 else None

    one, three = wait_for("GPU allocation 1:3", converged, timeout=90, interval=0.5)
    assert (one, three) == (4, 12)

    capped = f"capped{suffix}"
    queue(api, capped, weight=100, capability={"nvidia.com/gpu": "2"})
    mine = []
    for i in range(4):
        mine += gang(core, api, namespace, f"{capped}-{i}", 1, gpus=1, queue_name=capped)
    sampler = Sampler(lambda: bound_of(core, namespace, mine))
    wait_for(
        "capped queue at its capability", lambda: bound_of(core, namespace, mine) == 2, timeout=60
    )

    def capped_reasons() -> int:
        waiting = [condition(api, namespace, f"{capped}-{i}", "Unschedulable") for i in range(4)]
        return sum(f'queue "{capped}" capability exceeded' in w for w in waiting)

    # conditions are rewritten at most every 5 s per PodGroup, so allow for that
    wait_for("capability named on the 2 waiting jobs", lambda: capped_reasons() == 2, timeout=20)
    cycles_pass(env.sidecar, 3)
    assert max(sampler.close()) <= 2


def test_drf_smaller_dominant_share_goes_first(
    core: client.CoreV1Api, api: client.ApiClient, namespace: str, sidecar: str
) -> None:
    create(core, pod("block", namespace, gpus=8, scheduler="default-scheduler"))
    wait_for("blocker bound", lambda: len(bound(core, namespace)) == 1)
    x = gang(core, api, namespace, "x", 6, gpus=2, min_member=2)
    wait_for("x holds the free 8 GPUs", lambda: bound_of(core, namespace, x) == 4, timeout=60)
    y = gang(core, api, namespace, "y", 3, gpus=2, min_member=1)
    wait_for("y says why it waits", lambda: condition(api, namespace, "y", "Unschedulable"))
    assert bound_of(core, namespace, y) == 0
    core.delete_namespaced_pod("block", namespace, grace_period_seconds=0)
    # 8 GPUs free: y's minimum (2), then elastic members by dominant share:
    # y (2/16) before x (8/16) until they are level
    wait_for("y fully bound", lambda: bound_of(core, namespace, y) == 3, timeout=60)
    wait_for("x takes what is left", lambda: bound_of(core, namespace, x) == 5, timeout=30)
    cycles_pass(sidecar, 3)
    assert bound_of(core, namespace, x) == 5, "x should get only what is left after y"


def test_priority_preemption_evicts_victim_gangs_whole(env: Env) -> None:
    core, api, namespace = env.core, env.api, env.namespace
    priority_class(api, "e2e-batch-low", 10)
    priority_class(api, "e2e-batch-high", 1000)
    low = gang(core, api, namespace, "low", 4, gpus=4, priority_class="e2e-batch-low")
    wait_for("low gang bound", lambda: bound_of(core, namespace, low) == 4, timeout=60)
    high = gang(core, api, namespace, "high", 2, gpus=4, priority_class="e2e-batch-high")
    wait_for("high gang bound", lambda: bound_of(core, namespace, high) == 2, timeout=90)
    left = [p for p in core.list_namespaced_pod(namespace).items if p.metadata.name in low]
    # evicting 2 of 4 would leave "low" below minMember 4: it must have gone whole
    assert left == [] or all(p.metadata.deletion_timestamp for p in left)
    assert reasons_for(core, namespace, "Preempted", set(low)) == set(low)


def test_reclaim_only_from_reclaimable_queues(
    core: client.CoreV1Api, api: client.ApiClient, namespace: str, sidecar: str
) -> None:
    suffix = namespace.replace("-", "")
    locked, owner = f"locked{suffix}", f"owner{suffix}"
    queue(api, locked, weight=1, reclaimable=False)
    queue(api, owner, weight=1)
    hogs = gang(core, api, namespace, "hog-a", 1, gpus=8, queue_name=locked)
    hogs += gang(core, api, namespace, "hog-b", 1, gpus=8, queue_name=locked)
    wait_for(
        "locked queue holds all GPUs", lambda: bound_of(core, namespace, hogs) == 2, timeout=60
    )
    mine = gang(core, api, namespace, "mine", 1, gpus=8, queue_name=owner)
    wait_for("owner job says why", lambda: condition(api, namespace, "mine", "Unschedulable"))
    cycles_pass(sidecar, 5)  # five chances to reclaim from the locked queue
    assert bound_of(core, namespace, hogs) == 2 and bound_of(core, namespace, mine) == 0
    assert core.list_namespaced_event(namespace, field_selector="reason=Reclaimed").items == []

    # the same with a reclaimable queue: the owner takes its deserved share back
    for n in hogs:
        core.delete_namespaced_pod(n, namespace, grace_period_seconds=0)
    greedy = f"greedy{suffix}"
    queue(api, greedy, weight=1, reclaimable=True)
    wait_for("owner bound once free", lambda: bound_of(core, namespace, mine) == 1, timeout=60)
    g = gang(core, api, namespace, "g-a", 1, gpus=8, queue_name=greedy)
    wait_for("greedy fills the rest", lambda: bound_of(core, namespace, g) == 1, timeout=60)
    core.delete_namespaced_pod("mine-0", namespace, grace_period_seconds=0)
    g += gang(core, api, namespace, "g-b", 1, gpus=8, queue_name=greedy)
    wait_for("greedy takes the idle share", lambda: bound_of(core, namespace, g) == 2, timeout=60)
    again = gang(core, api, namespace, "mine2", 1, gpus=8, queue_name=owner)
    wait_for("owner reclaims its share", lambda: bound_of(core, namespace, again) == 1, timeout=90)
    # the event follows the eviction without being waited for: it may land a moment later
    evs = wait_for(
        "the Reclaimed event",
        lambda: core.list_namespaced_event(namespace, field_selector="reason=Reclaimed").items,
        timeout=10,
    )
    assert len(evs) == 1 and evs[0].involved_object.name in g


def test_backfill_short_jobs_without_delaying_a_reserved_gang(
    core: client.CoreV1Api, api: client.ApiClient, namespace: str, sidecar: str
) -> None:
    estimate = {"pyextender.io/running-estimate": "15s"}
    running = gang(core, api, namespace, "running", 1, gpus=8, annotations=estimate)
    wait_for("running job bound", lambda: bound_of(core, namespace, running) == 1, timeout=60)
    started = time.monotonic()
    big = gang(core, api, namespace, "big", 2, gpus=8, annotations={"sla-waiting-time": "1s"})
    time.sleep(3)  # big waits past its SLA: both nodes are reserved for it
    short = gang(
        core,
        api,
        namespace,
        "short",
        1,
        gpus=2,
        annotations={"pyextender.io/running-estimate": "3s"},
    )
    unknown = gang(core, api, namespace, "unknown", 1, gpus=2)
    wait_for("short job backfilled", lambda: bound_of(core, namespace, short) == 1, timeout=30)
    cycles_pass(sidecar, 3)
    assert bound_of(core, namespace, unknown) == 0, "a job with no estimate took a reserved node"
    # held back by the reservation, or (Volcano's enqueue) already by big's Inqueue
    # minimum counted in the queue (pkg/scheduler/plugins/proportion/proportion.go)
    why = condition(api, namespace, "unknown", "Unschedulable")
    assert "reserved for waiting gang" in why or "cluster capacity exceeded" in why, why
    core.delete_namespaced_pod("short-0", namespace, grace_period_seconds=0)  # it finished
    # the running job "ends" at its estimate; the gang then starts without delay
    time.sleep(max(0.0, 15 - (time.monotonic() - started)))
    core.delete_namespaced_pod("running-0", namespace, grace_period_seconds=0)
    ended = time.monotonic()
    wait_for("big gang bound", lambda: bound_of(core, namespace, big) == 2, timeout=60)
    assert time.monotonic() - ended < 10
    assert bound_of(core, namespace, unknown) == 0


def test_sidecar_killed_mid_gang(env: Env) -> None:
    """Extender mode: three members wait in the bind verb; framework mode: in Permit."""
    cluster, core, api, namespace = env.cluster, env.core, env.api, env.namespace
    gang(core, api, namespace, "crash", 0, gpus=2, min_member=4)
    names = [f"crash-{i}" for i in range(4)]
    for i in range(3):
        create_member(core, namespace, "crash", i, gpus=2)
    # the 4th member can never be placed by kube-scheduler: three wait at the barrier
    create_member(core, namespace, "crash", 3, gpus=2, node_selector={"nope": "true"})
    sampler = Sampler(lambda: bound_of(core, namespace, names))
    wait_for("three members held for their gang", lambda: _held(env, names) == 3, timeout=60)
    cluster.stop_role("sidecar", signal.SIGKILL)
    assert bound_of(core, namespace, names) == 0
    cluster.start_sidecar()
    cluster.wait_sidecar_ready()
    core.delete_namespaced_pod("crash-3", namespace, grace_period_seconds=0)
    wait_for(
        "member deleted",
        lambda: (
            "crash-3" not in {p.metadata.name for p in core.list_namespaced_pod(namespace).items}
        ),
    )
    create_member(core, namespace, "crash", 3, gpus=2)
    wait_for(
        "whole gang bound after restart", lambda: bound_of(core, namespace, names) == 4, timeout=90
    )
    seen = sampler.close()
    assert sampler.partial_runs(4) == 0, seen
    assert all(v <= 8 for v in gpus_per_node(core).values())


def test_invalid_config_and_crd_are_refused_with_the_reason(
    state: object, api: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    bad = tmp_path / "sched.yaml"
    bad.write_text(
        "actions: enqueue\ntiers:\n- plugins:\n  - name: binpak\n"
        "  - name: binpack\n    arguments: {binpack.wieght: 2}\n"
    )
    kubeconfig = state.kubeconfig  # type: ignore[attr-defined]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pyextender.cli",
            "serve",
            f"--kubeconfig={kubeconfig}",
            f"--config={bad}",
            "--port=0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
    )
    assert proc.returncode == 2
    assert 'unknown plugin "binpak"' in proc.stderr and "binpack.wieght" in proc.stderr, proc.stderr
    with pytest.raises(client.ApiException) as err:
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            "scheduling.volcano.sh",
            "v1beta1",
            namespace,
            "podgroups",
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": "bad"},
                "spec": {"minMember": "eight"},
            },
        )
    assert err.value.status == 422 and "spec.minMember" in str(err.value.body)
