"""The wire path of filter/prioritize (reply bytes written from arrays) answers
exactly what the struct path answers, and its memories follow cache changes."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import msgspec
import numpy as np
import pytest

from pyextender.api.extender import ExtenderArgs
from pyextender.cache.cluster import ClusterCache
from pyextender.cache.state import tie_rank
from pyextender.framework.runtime import build_profile
from pyextender.kernels.name_rows import NameTable
from pyextender.plugins.defaults import load, plugins_of
from pyextender.server.extender_wire import (
    ExtenderArgsWire,
    RowRecords,
    host_scores,
    name_list,
    reason_map,
    unknown_failed,
    unknown_scores,
)
from pyextender.server.metrics import Metrics
from pyextender.server.verbs import Extender

_wire = msgspec.json.Decoder(ExtenderArgsWire)
_args = msgspec.json.Decoder(ExtenderArgs)
_enc = msgspec.json.Encoder()


def _node(name: str, gpus: int, cordoned: bool = False) -> dict[str, Any]:
    alloc = {"cpu": "32", "memory": "128Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return {
        "metadata": {"name": name},
        "spec": {"unschedulable": cordoned},
        "status": {"allocatable": alloc},
    }


def _pod(name: str, gpus: int, node: str | None = None, cpu: str = "1") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "spec": {
            "schedulerName": "volcano",
            "nodeName": node,
            "containers": [
                {"name": "c", "resources": {"requests": {"cpu": cpu, "nvidia.com/gpu": str(gpus)}}}
            ],
        },
        "status": {"phase": "Running" if node else "Pending"},
    }


def _cluster(seed: int, n: int, pick: bool = False) -> tuple[Extender, list[str]]:
    rng = np.random.default_rng(seed)
    cache = ClusterCache()
    # names of different lengths, so records are padded differently
    names = [f"n{i}" + "x" * int(rng.integers(0, 12)) for i in range(n)]
    sizes = [int(rng.choice([0, 2, 4, 8])) for _ in names]
    cache.replace_nodes(
        [
            _node(nm, g, cordoned=bool(rng.random() < 0.1))
            for nm, g in zip(names, sizes, strict=True)
        ]
    )
    cache.replace_pods(
        [
            _pod(f"r{i}", int(rng.integers(0, g + 1)), nm)
            for i, (nm, g) in enumerate(zip(names, sizes, strict=True))
            if g
        ]
    )
    metrics = Metrics()
    profile = build_profile(plugins_of(load(None)))
    ext = Extender(cache, profile, None, metrics, pick_node=pick)  # type: ignore[arg-type]
    return ext, names


def _both(ext: Extender, verb: str, body: bytes) -> tuple[Any, Any]:
    """(struct path reply, wire path reply), both decoded from their JSON."""
    if verb == "filter":
        slow = _enc.encode(ext.filter(_args.decode(body)))
        fast = ext.filter_json(_wire.decode(body))
    else:
        slow = _enc.encode(ext.prioritize(_args.decode(body)))
        fast = ext.prioritize_json(_wire.decode(body))
    return json.loads(slow), json.loads(fast)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("verb", ["filter", "prioritize"])
@pytest.mark.parametrize("pick", [False, True])
@pytest.mark.parametrize("ghosts", [[], ["ghost-a", "ghost-bb"]])
def test_wire_reply_equals_struct_reply(
    seed: int, verb: str, pick: bool, ghosts: list[str]
) -> None:
    """Names all known (mapped from the request's bytes, kernels.name_rows) or some
    unknown to the cache (decoded name by name): the same reply as the struct path."""
    ext, names = _cluster(seed, 60, pick)
    rng = np.random.default_rng(100 + seed)
    cands = [names[i] for i in rng.permutation(len(names))[:40]] + ghosts
    for gpus in (0, 1, 4, 8, 16):
        body = json.dumps({"Pod": _pod("p", gpus), "NodeNames": cands}).encode()
        slow, fast = _both(ext, verb, body)
        assert fast == slow
        if verb == "filter":
            # every verdict kind appears in at least one of these cases
            assert set(fast) == {
                "Nodes",
                "NodeNames",
                "FailedNodes",
                "FailedAndUnresolvableNodes",
                "Error",
            }


@pytest.mark.parametrize("seed", range(3))
def test_prioritize_of_the_nodes_filter_answered_maps_no_name(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kube-scheduler asks prioritize about the nodes the filter reply listed, in that
    order, as Go encodes a list (no spaces): the rows come from that reply, with the
    same scores as a fresh mapping. Any other list is mapped again."""
    ext, names = _cluster(seed, 60)
    fresh, _ = _cluster(seed, 60)
    rng = np.random.default_rng(seed)
    for gpus in (1, 2, 4):
        listed = [names[i] for i in rng.permutation(len(names))]
        body = json.dumps({"Pod": _pod("p", gpus), "NodeNames": listed}).encode()
        answered = json.loads(ext.filter_json(_wire.decode(body)))["NodeNames"]
        assert len(set(map(len, answered))) > 1  # names padded to one width in the reply
        go = json.dumps({"Pod": _pod("p", gpus), "NodeNames": answered}, separators=(",", ":"))
        with monkeypatch.context() as m:
            m.setattr(NameTable, "rows", lambda self, raw: pytest.fail("names mapped again"))
            got = json.loads(ext.prioritize_json(_wire.decode(go.encode())))
        assert got == json.loads(fresh.prioritize_json(_wire.decode(go.encode())))
        assert [h["Host"] for h in got] == answered
        # one node less: not the answered list, so mapped (and answered right)
        fewer = json.dumps({"Pod": _pod("p", gpus), "NodeNames": answered[1:]}).encode()
        got = json.loads(ext.prioritize_json(_wire.decode(fewer)))
        assert got == json.loads(fresh.prioritize_json(_wire.decode(fewer)))


def test_host_scores_writes_every_score_and_the_tail() -> None:
    ext, _ = _cluster(2, 14)
    records = RowRecords.build(ext.cache.state)
    rows = np.asarray([13, 0, 7, 7, 2, 11, 5, 1, 9, 3, 12, 4, 6], dtype=np.int64)
    scores = np.asarray([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, -3, 12], dtype=np.int64)
    row_names = ext.cache.state.node_names
    for tail_names in ([], ["ghost-a", 'gh"ost']):
        got = json.loads(host_scores(records.hosts, rows, scores, unknown_scores(tail_names)))
        want = [
            {"Score": min(max(s, 0), 10), "Host": row_names[r]}
            for r, s in zip(rows.tolist(), scores.tolist(), strict=True)
        ] + [{"Host": n, "Score": 0} for n in tail_names]
        assert got == want
    assert json.loads(host_scores(records.hosts, rows[:0], scores[:0], b"")) == []
    assert json.loads(host_scores(records.hosts, rows[:0], scores[:0], unknown_scores(["x"]))) == [
        {"Host": "x", "Score": 0}
    ]


def test_name_list_and_reason_map_write_the_rows_asked_for() -> None:
    ext, _ = _cluster(3, 12)
    records = RowRecords.build(ext.cache.state)
    row_names = ext.cache.state.node_names
    rows = np.asarray([11, 2, 7, 0, 5, 9, 3], dtype=np.int64)
    assert json.loads(name_list(records.named, rows)) == [row_names[r] for r in rows.tolist()]
    assert json.loads(name_list(records.named, rows[:0])) == []
    table = ["", "Insufficient cpu", 'a "quoted" reason', "x" * 90]
    ids = np.asarray([1, 3, 1, 2, 3, 3, 1], dtype=np.int32)
    extra = unknown_failed(["ghost", 'gh"ost'], "not in the cache")
    got = json.loads(reason_map(records.quoted, rows, ids, table, extra))
    want = {row_names[r]: table[i] for r, i in zip(rows.tolist(), ids.tolist(), strict=True)}
    want |= {"ghost": "not in the cache", 'gh"ost': "not in the cache"}
    assert got == want
    assert json.loads(reason_map(records.quoted, rows[:0], ids[:0], table, extra)) == {
        "ghost": "not in the cache",
        'gh"ost': "not in the cache",
    }
    assert json.loads(reason_map(records.quoted, rows[:0], ids[:0], table, b"")) == {}


def test_empty_and_absent_lists() -> None:
    ext, _ = _cluster(1, 5)
    for names in ([], None, ["ghost"]):
        body = json.dumps({"Pod": _pod("p", 1), "NodeNames": names}).encode()
        for verb in ("filter", "prioritize"):
            slow, fast = _both(ext, verb, body)
            assert fast == slow


def test_memories_follow_the_cache() -> None:
    """The same request bytes, sent again after the cache changed, see the change."""
    ext, names = _cluster(2, 3)
    cands = [*names, "late"]
    body = json.dumps({"Pod": _pod("p", 8), "NodeNames": cands}).encode()
    first = json.loads(ext.filter_json(_wire.decode(body)))
    assert "late" in first["FailedNodes"]
    ext.cache.node_event("ADDED", _node("late", 8))
    second = json.loads(ext.filter_json(_wire.decode(body)))
    assert "late" in second["NodeNames"]
    scores = json.loads(ext.prioritize_json(_wire.decode(body)))
    assert "late" in {h["Host"] for h in scores}
    # a pod bound to the new node (no node added: only usage changes) makes it fail
    ext.cache.pod_event("ADDED", _pod("hog", 8, "late"))
    third = json.loads(ext.filter_json(_wire.decode(body)))
    assert "late" not in third["NodeNames"] and "late" in third["FailedNodes"]


def test_wrong_types_raise_validation_errors() -> None:
    ext, _ = _cluster(3, 2)
    with pytest.raises(msgspec.ValidationError):
        ext.filter_json(_wire.decode(b'{"Pod": 5, "NodeNames": []}'))
    with pytest.raises(msgspec.ValidationError):
        ext.prioritize_json(_wire.decode(b'{"NodeNames": ["a", 3]}'))


@pytest.mark.parametrize("seed", range(4))
def test_filter_picks_the_feasible_node_scored_first(seed: int) -> None:
    """With pick_node, filter answers one node: the feasible one the profile scores
    highest, and no failure maps (kube-scheduler reads them only when no node is
    feasible); the decision log says what they would have."""
    every, names = _cluster(seed, 60)
    picking, _ = _cluster(seed, 60, pick=True)
    for gpus in (0, 1, 2, 4):
        body = json.dumps({"Pod": _pod("p", gpus), "NodeNames": [*names, "ghost"]}).encode()
        full = json.loads(every.filter_json(_wire.decode(body)))
        one = json.loads(picking.filter_json(_wire.decode(body)))
        assert full["FailedNodes"]["ghost"] and one["Error"] == ""
        assert one["FailedNodes"] == {} and one["FailedAndUnresolvableNodes"] == {}
        said = [d for d in picking.decisions if d["verb"] == "filter"][-1]
        full_said = [d for d in every.decisions if d["verb"] == "filter"][-1]
        for key in ("feasible", "failed", "unresolvable", "reasons"):
            assert said[key] == full_said[key], key
        assert said["failed"] == len(full["FailedNodes"])
        assert said["unresolvable"] == len(full["FailedAndUnresolvableNodes"])
        feasible = full["NodeNames"]
        assert len(feasible) > 1
        (best,) = one["NodeNames"]
        pod = every._pod(_pod("p", gpus))
        rows, _, _ = every.cache.state.rows_of(feasible)
        scores = every.profile.score(every._context(pod), rows)
        top = [feasible[i] for i in np.flatnonzero(scores == scores.max())]
        top_rows, _, _ = every.cache.state.rows_of(top)
        idle = every.cache.state.gpu.idle(top_rows)
        in_use = [nm for nm, i in zip(top, idle.tolist(), strict=True) if not i]
        assert best == min(in_use or top, key=tie_rank)
        picked = [d for d in picking.decisions if d["verb"] == "pick"][-1]
        assert picked["best"] == best and picked["nodes"] == len(feasible)


def test_equally_scored_nodes_go_in_one_fixed_order_whatever_order_they_are_listed_in() -> None:
    """Of nodes the plugins score alike, the pick is the one of lowest tie_rank (a hash
    of its name), however kube-scheduler lists them: its parallel filter lists feasible
    nodes in an order that changes from pod to pod, and an order that changes spreads
    pods that FGD would have packed (the replay lost 5 pp of GPU allocation to it)."""
    ext, _ = _cluster(0, 0, pick=True)
    names = [f"node-{i}" for i in range(40)]
    ext.cache.replace_nodes([_node(nm, 8) for nm in names])  # all alike: every score ties
    first = min(names, key=tie_rank)
    assert first not in (names[0], names[-1])  # neither end of the listing
    rng = np.random.default_rng(7)
    picks = set()
    for _ in range(10):
        listed = [names[int(i)] for i in rng.permutation(len(names))]
        body = json.dumps({"Pod": _pod("p", 1), "NodeNames": listed}).encode()
        (best,) = json.loads(ext.filter_json(_wire.decode(body)))["NodeNames"]
        picks.add(best)
    assert picks == {first}
    # the hash, not the order the cache met the nodes in: the same in every replica
    # and after a restart
    again, _ = _cluster(0, 0, pick=True)
    again.cache.replace_nodes([_node(nm, 8) for nm in reversed(names)])
    body = json.dumps({"Pod": _pod("p", 1), "NodeNames": names}).encode()
    assert json.loads(again.filter_json(_wire.decode(body)))["NodeNames"] == [first]


def test_of_equally_scored_nodes_one_in_use_goes_before_one_with_all_gpus_free() -> None:
    """The pick keeps wholly free GPU nodes for last among equals: a 1-GPU pod scores
    alike on every 8-GPU node when the only class seen is 1-GPU pods, and it goes
    beside the pod already running, on the node last in tie_rank order, not onto the
    first idle node. With every node idle, tie_rank alone decides."""
    ext, _ = _cluster(0, 0, pick=True)
    names = sorted((f"node-{i}" for i in range(6)), key=tie_rank)
    ext.cache.replace_nodes([_node(nm, 8) for nm in names])
    body = json.dumps({"Pod": _pod("p", 1), "NodeNames": names}).encode()
    assert json.loads(ext.filter_json(_wire.decode(body)))["NodeNames"] == [names[0]]
    ext.cache.replace_pods([_pod("r", 1, names[-1])])
    pod = ext._pod(_pod("p", 1))
    rows, _, _ = ext.cache.state.rows_of(names)
    scores = ext.profile.score(ext._context(pod), rows)
    assert np.all(scores == scores[0])  # a tie: only the order of equals decides
    assert json.loads(ext.filter_json(_wire.decode(body)))["NodeNames"] == [names[-1]]
    picked = [d for d in ext.decisions if d["verb"] == "pick"][-1]
    assert picked["best"] == names[-1]


def test_tie_rank_is_stable_and_fits_int64() -> None:
    assert tie_rank("node-1") == tie_rank("node-1") != tie_rank("node-2")
    ranks = [tie_rank(f"n{i}") for i in range(1000)]
    assert all(0 <= r < 2**63 for r in ranks) and len(set(ranks)) == 1000


def test_no_pick_without_score_plugins_or_with_one_node() -> None:
    ext, names = _cluster(4, 12, pick=True)
    body = json.dumps({"Pod": _pod("p", 0), "NodeNames": names}).encode()
    assert len(json.loads(ext.filter_json(_wire.decode(body)))["NodeNames"]) == 1
    ext.profile = replace(ext.profile, scorers=())
    assert len(json.loads(ext.filter_json(_wire.decode(body)))["NodeNames"]) > 1
    one = json.dumps({"Pod": _pod("p", 0), "NodeNames": names[:1]}).encode()
    assert json.loads(ext.filter_json(_wire.decode(one)))["NodeNames"] == names[:1]


_PREFERENCES: list[dict[str, Any]] = [
    {
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 50,
                        "preference": {
                            "matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]
                        },
                    }
                ]
            }
        }
    },
    {
        "affinity": {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 10, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"}}
                ]
            }
        }
    },
    {
        "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}
        ]
    },
]


@pytest.mark.parametrize("preference", _PREFERENCES)
def test_no_pick_for_a_pod_with_soft_preferences(preference: dict[str, Any]) -> None:
    """Only kube-scheduler's score plugins weigh preferred affinity and ScheduleAnyway
    spread: filter answers every feasible node so that they can (and says why)."""
    ext, names = _cluster(4, 12, pick=True)
    plain = _pod("p", 0)
    prefers = _pod("q", 0)
    prefers["spec"].update(preference)
    one = json.loads(
        ext.filter_json(_wire.decode(json.dumps({"Pod": plain, "NodeNames": names}).encode()))
    )
    every = json.loads(
        ext.filter_json(_wire.decode(json.dumps({"Pod": prefers, "NodeNames": names}).encode()))
    )
    assert len(one["NodeNames"]) == 1 and len(every["NodeNames"]) > 1
    skipped = [d for d in ext.decisions if d["verb"] == "pick" and d["pod"] == "ns/q"]
    assert skipped and "soft preferences" in str(skipped[-1]["skipped"]), skipped


def test_required_terms_and_hard_spread_keep_the_pick() -> None:
    ext, names = _cluster(4, 12, pick=True)
    pod = _pod("r", 0)
    pod["spec"]["topologySpreadConstraints"] = [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
    ]
    pod["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "x", "operator": "DoesNotExist"}]}
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [],
        }
    }
    got = json.loads(
        ext.filter_json(_wire.decode(json.dumps({"Pod": pod, "NodeNames": names}).encode()))
    )
    assert len(got["NodeNames"]) == 1


def _taint(ext: Extender, name: str, *taints: dict[str, str]) -> None:
    """Node ``name`` with these taints (replaces its cached object)."""
    doc = _node(name, 8)
    doc["spec"]["taints"] = list(taints)
    ext.cache.node_event("MODIFIED", doc)


@pytest.mark.parametrize(
    ("toleration", "picked"),
    [
        (None, False),  # no toleration: kube-scheduler's TaintToleration must weigh it
        ({"key": "gpu", "operator": "Exists"}, True),
        ({"key": "gpu", "operator": "Equal", "value": "yes", "effect": "PreferNoSchedule"}, True),
        ({"key": "gpu", "operator": "Equal", "value": "no"}, False),
        ({"operator": "Exists"}, True),  # an empty key with Exists tolerates every taint
        ({"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}, False),
    ],
)
def test_no_pick_while_a_feasible_node_has_a_prefer_no_schedule_taint_the_pod_minds(
    toleration: dict[str, str] | None, picked: bool
) -> None:
    ext, names = _cluster(4, 12, pick=True)
    _taint(ext, names[0], {"key": "gpu", "value": "yes", "effect": "PreferNoSchedule"})
    pod = _pod("t", 0)
    if toleration is not None:
        pod["spec"]["tolerations"] = [toleration]
    got = json.loads(
        ext.filter_json(_wire.decode(json.dumps({"Pod": pod, "NodeNames": names}).encode()))
    )
    assert (len(got["NodeNames"]) == 1) == picked, got["NodeNames"]
    # untainted again: the pick is back
    _taint(ext, names[0])
    again = json.loads(
        ext.filter_json(_wire.decode(json.dumps({"Pod": pod, "NodeNames": names}).encode()))
    )
    assert len(again["NodeNames"]) == 1
    # pyextender_picks_total counts both answers
    counts = {r: ext.metrics.picks.labels(r)._value.get() for r in ("picked", "prefer_no_schedule")}
    assert counts == (
        {"picked": 2.0, "prefer_no_schedule": 0.0}
        if picked
        else {"picked": 1.0, "prefer_no_schedule": 1.0}
    )


def test_no_schedule_taints_are_not_prefer_no_schedule() -> None:
    ext, names = _cluster(4, 12, pick=True)
    _taint(ext, names[1], {"key": "gpu", "value": "yes", "effect": "NoSchedule"})
    got = json.loads(
        ext.filter_json(
            _wire.decode(json.dumps({"Pod": _pod("u", 0), "NodeNames": names}).encode())
        )
    )
    assert len(got["NodeNames"]) == 1


def test_nodes_with_the_same_taints_share_one_set_checked_once() -> None:
    ext, names = _cluster(4, 12, pick=True)
    same = {"key": "gpu", "value": "yes", "effect": "PreferNoSchedule"}
    for name in names[:3]:
        _taint(ext, name, same)
    _taint(ext, names[3], {"key": "spot", "value": "", "effect": "PreferNoSchedule"})
    state = ext.cache.state
    ids = [int(state.prefer_taints[state.index[n]]) for n in names[:5]]
    assert ids[0] == ids[1] == ids[2] != ids[3] and ids[4] == 0, ids
    assert len(state.taint_sets) == 3  # none, gpu=yes, spot
    # tolerating one set is not enough while a feasible node carries the other
    pod = _pod("v", 0)
    pod["spec"]["tolerations"] = [{"key": "gpu", "operator": "Exists"}]
    body = json.dumps({"Pod": pod, "NodeNames": names}).encode()
    assert len(json.loads(ext.filter_json(_wire.decode(body)))["NodeNames"]) > 1
    pod["spec"]["tolerations"].append({"key": "spot", "operator": "Exists"})
    body = json.dumps({"Pod": pod, "NodeNames": names}).encode()
    assert len(json.loads(ext.filter_json(_wire.decode(body)))["NodeNames"]) == 1


def test_ill_typed_preference_fields_are_ignored_not_fatal() -> None:
    """The API server would refuse these; a hand-written request may carry them. They
    only steer scoring, so the filter answers as for a pod without them."""
    ext, names = _cluster(4, 12, pick=True)
    pod = _pod("w", 0)
    pod["spec"].update(tolerations=5, topologySpreadConstraints="x", affinity={"podAffinity": 3})
    got = json.loads(
        ext.filter_json(_wire.decode(json.dumps({"Pod": pod, "NodeNames": names}).encode()))
    )
    assert len(got["NodeNames"]) == 1
    bad_node = _node(names[0], 8)
    bad_node["spec"]["taints"] = {"key": "gpu"}
    ext.cache.node_event("MODIFIED", bad_node)
    assert int(ext.cache.state.prefer_taints[ext.cache.state.index[names[0]]]) == 0
