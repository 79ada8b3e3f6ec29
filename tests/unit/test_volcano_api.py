"""Volcano CRD models: Volcano's YAML loads, bad fields are named by path, round trips hold."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from pyextender.api.volcano import (
    Command,
    FieldError,
    HyperNode,
    Job,
    PodGroup,
    Queue,
    Resource,
    default_queues,
    duration_seconds,
    load,
    resolve_nodes,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

PG = {
    "apiVersion": "scheduling.volcano.sh/v1beta1",
    "kind": "PodGroup",
    "metadata": {"name": "g", "namespace": "ns"},
    "spec": {"minMember": 2, "queue": "q", "minResources": {"cpu": "2", "nvidia.com/gpu": 2}},
}
QUEUE = {
    "apiVersion": "scheduling.volcano.sh/v1beta1",
    "kind": "Queue",
    "metadata": {"name": "q"},
    "spec": {"weight": 2, "capability": {"nvidia.com/gpu": 16}},
}
JOB = {
    "apiVersion": "batch.volcano.sh/v1alpha1",
    "kind": "Job",
    "metadata": {"name": "j", "namespace": "ns"},
    "spec": {
        "minAvailable": 2,
        "tasks": [{"name": "w", "replicas": 2, "template": {"spec": {"containers": []}}}],
    },
}
HN = {
    "apiVersion": "topology.volcano.sh/v1alpha1",
    "kind": "HyperNode",
    "metadata": {"name": "s0"},
    "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": "n0"}}}]},
}
CMD = {
    "apiVersion": "bus.volcano.sh/v1alpha1",
    "kind": "Command",
    "metadata": {"name": "c", "namespace": "ns"},
    "action": "AbortJob",
    "target": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "j", "uid": "1"},
}


def with_(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of doc with the dotted path set (list indices as numbers); value None deletes."""
    out = copy.deepcopy(doc)
    node: Any = out
    keys = path.split(".")
    for key in keys[:-1]:
        node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
    last = keys[-1]
    if value is None:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return out


def example_docs() -> list[tuple[str, dict[str, Any]]]:
    docs = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for i, doc in enumerate(yaml.safe_load_all(path.read_text())):
            docs.append((f"{path.name}#{i}", doc))
    return docs


# ---------------------------------------------------------------- loading


@pytest.mark.parametrize(("name", "doc"), example_docs(), ids=[n for n, _ in example_docs()])
def test_examples_load_and_round_trip(name: str, doc: dict[str, Any]) -> None:
    obj = load(doc)
    assert load(obj.to_dict()) == obj
    assert obj.to_dict()["kind"] == doc["kind"]


@pytest.mark.parametrize(
    ("cls", "doc"), [(PodGroup, PG), (Queue, QUEUE), (Job, JOB), (HyperNode, HN), (Command, CMD)]
)
def test_minimal_documents_round_trip(cls: type[Resource], doc: dict[str, Any]) -> None:
    obj = cls.from_dict(doc)
    again = obj.to_dict()
    assert cls.from_dict(again) == obj
    assert again["apiVersion"] == doc["apiVersion"]


def test_example_values_are_typed() -> None:
    job = load(yaml.safe_load((EXAMPLES / "job-8gpu.yaml").read_text()))
    assert isinstance(job, Job)
    assert job.spec.gang_size == 8
    assert job.spec.tasks[0].replicas == 8
    assert job.spec.policies[0].event == "PodEvicted"
    assert duration_seconds(job.spec.running_estimate or "") == 4 * 3600
    q = load(yaml.safe_load((EXAMPLES / "queue.yaml").read_text()))
    assert isinstance(q, Queue)
    assert q.spec.capability["nvidia.com/gpu"] == "32"  # numbers are kept as quantity text
    assert q.spec.guarantee.resource == {"nvidia.com/gpu": "8"}
    assert q.spec.is_reclaimable


def test_volcano_defaults_apply() -> None:
    job = Job.from_dict({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job"})
    assert job.spec.queue == "default"
    assert job.spec.max_retry == 3
    pg = PodGroup.from_dict({"spec": {"minMember": 1}})
    assert pg.spec.queue_name == "default"
    q = Queue.from_dict({"metadata": {"name": "a"}, "spec": {}})
    assert q.spec.weight == q.spec.effective_weight == 1
    assert q.parent_name == "root"


def test_unquoted_yaml_timestamps_become_rfc3339_text() -> None:
    doc = yaml.safe_load(
        "metadata: {name: g, creationTimestamp: 2024-05-01T12:00:00Z}\n"
        "status:\n  conditions:\n  - {type: Scheduled, status: 'True', "
        "lastTransitionTime: 2024-05-01T12:00:05Z}\n"
    )
    pg = PodGroup.from_dict(doc)
    assert pg.metadata.creation_timestamp == "2024-05-01T12:00:00Z"
    assert pg.status.conditions[0].last_transition_time == "2024-05-01T12:00:05Z"
    assert pg.status.condition("Scheduled") is pg.status.conditions[0]


def test_encoding_follows_go_omitempty() -> None:
    q = Queue.from_dict({"metadata": {"name": "a"}, "spec": {"reclaimable": False}})
    assert q.to_dict()["spec"]["reclaimable"] is False  # pointer: False is kept
    pg = PodGroup.from_dict({"metadata": {"name": "a"}, "spec": {"minMember": 0}})
    assert "spec" not in pg.to_dict() and "status" not in pg.to_dict()  # zero values dropped
    job = Job.from_dict({"spec": {"ttlSecondsAfterFinished": 0}})
    assert job.to_dict()["spec"]["ttlSecondsAfterFinished"] == 0


# ---------------------------------------------------------------- bad input


BAD: list[tuple[str, dict[str, Any], str]] = [
    # PodGroup
    (
        "minMember not int",
        with_(PG, "spec.minMember", "x"),
        'spec.minMember: must be an integer >= 0, got "x"',
    ),
    (
        "minMember negative",
        with_(PG, "spec.minMember", -1),
        "spec.minMember: must be an integer >= 0, got -1",
    ),
    (
        "minMember bool",
        with_(PG, "spec.minMember", True),
        "spec.minMember: must be an integer >= 0, got true",
    ),
    (
        "minMember overflows int32",
        with_(PG, "spec.minMember", 2**31),
        "spec.minMember: must fit in int32",
    ),
    ("unknown spec field", with_(PG, "spec.minMembers", 3), "spec.minMembers: unknown field"),
    ("unknown top field", with_(PG, "extra", 1), "extra: unknown field"),
    (
        "bad quantity",
        with_(PG, "spec.minResources.cpu", "lots"),
        "spec.minResources[cpu]: must be a quantity",
    ),
    (
        "minTaskMember negative",
        with_(PG, "spec.minTaskMember", {"w": -2}),
        "spec.minTaskMember[w]: must be an integer >= 0, got -2",
    ),
    (
        "bad phase",
        with_(PG, "status.phase", "Runing"),
        'status.phase: must be one of "Pending", "Inqueue", "Running", "Unknown", "Completed", '
        'got "Runing"',
    ),
    (
        "bad condition type",
        with_(PG, "status.conditions", [{"type": "Ready"}]),
        "status.conditions[0].type: must be one of",
    ),
    (
        "both tier limits",
        with_(PG, "spec.networkTopology", {"highestTierAllowed": 1, "highestTierName": "rack"}),
        "spec.networkTopology: highestTierAllowed and highestTierName must not both be set",
    ),
    (
        "bad topology mode",
        with_(PG, "spec.networkTopology", {"mode": "strict"}),
        'spec.networkTopology.mode: must be one of "hard", "soft", got "strict"',
    ),
    ("spec not object", with_(PG, "spec", [1]), "spec: must be an object, got a list"),
    (
        "bad label value",
        with_(PG, "metadata.labels", {"a": 1}),
        "metadata.labels[a]: must be a string, got 1",
    ),
    (
        "bad timestamp",
        with_(PG, "metadata.creationTimestamp", "yesterday"),
        "metadata.creationTimestamp: must be an RFC 3339 time",
    ),
    # Queue
    (
        "reclaimable not bool",
        with_(QUEUE, "spec.reclaimable", "yes"),
        'spec.reclaimable: must be true or false, got "yes"',
    ),
    (
        "weight not int",
        with_(QUEUE, "spec.weight", 1.5),
        "spec.weight: must be an integer >= 1, got 1.5",
    ),
    (
        "bad capability",
        with_(QUEUE, "spec.capability", {"cpu": "1x"}),
        "spec.capability[cpu]: must be a quantity",
    ),
    (
        "guarantee shape",
        with_(QUEUE, "spec.guarantee", {"cpu": 1}),
        "spec.guarantee.cpu: unknown field",
    ),
    ("bad state", with_(QUEUE, "status.state", "Opened"), "status.state: must be one of"),
    (
        "bad dequeue",
        with_(QUEUE, "spec.dequeueStrategy", "lifo"),
        "spec.dequeueStrategy: must be one of",
    ),
    # Job
    (
        "replicas negative",
        with_(JOB, "spec.tasks.0.replicas", -1),
        "spec.tasks[0].replicas: must be an integer >= 0, got -1",
    ),
    (
        "minAvailable over replicas",
        with_(JOB, "spec.minAvailable", 3),
        "spec.minAvailable: must be <= the sum of task replicas (2), got 3",
    ),
    (
        "task minAvailable over replicas",
        with_(JOB, "spec.tasks.0.minAvailable", 5),
        "spec.tasks[0].minAvailable: must be <= replicas (2), got 5",
    ),
    (
        "duplicate task",
        with_(JOB, "spec.tasks", [{"name": "w", "replicas": 1}] * 2),
        "spec.tasks[1].name: duplicate task name 'w'",
    ),
    (
        "bad task name",
        with_(JOB, "spec.tasks.0.name", "Worker_1"),
        "spec.tasks[0].name: must match",
    ),
    (
        "event and exitCode",
        with_(
            JOB, "spec.policies", [{"event": "PodFailed", "exitCode": 3, "action": "RestartJob"}]
        ),
        "spec.policies[0]: set either event/events or exitCode, not both",
    ),
    (
        "exitCode zero",
        with_(JOB, "spec.policies", [{"exitCode": 0, "action": "RestartJob"}]),
        "spec.policies[0].exitCode: must not be 0",
    ),
    (
        "no trigger",
        with_(JOB, "spec.policies", [{"action": "RestartJob"}]),
        "spec.policies[0]: one of event, events or exitCode is required",
    ),
    (
        "bad event",
        with_(JOB, "spec.policies", [{"event": "PodCrashed", "action": "RestartJob"}]),
        "spec.policies[0].event: must be one of",
    ),
    (
        "bad action",
        with_(JOB, "spec.policies", [{"event": "PodFailed", "action": "Retry"}]),
        "spec.policies[0].action: must be one of",
    ),
    (
        "bad duration",
        with_(JOB, "spec.runningEstimate", "2 hours"),
        'spec.runningEstimate: must be a duration such as "90s" or "1h30m", got "2 hours"',
    ),
    (
        "template not object",
        with_(JOB, "spec.tasks.0.template", "pod"),
        'spec.tasks[0].template: must be an object, got "pod"',
    ),
    (
        "plugins shape",
        with_(JOB, "spec.plugins", {"ssh": "yes"}),
        'spec.plugins[ssh]: must be a list, got "yes"',
    ),
    (
        "minSuccess zero",
        with_(JOB, "spec.minSuccess", 0),
        "spec.minSuccess: must be an integer >= 1, got 0",
    ),
    (
        "volume without mountPath",
        with_(JOB, "spec.volumes", [{"volumeClaimName": "data"}]),
        "spec.volumes[0].mountPath: required field is missing",
    ),
    # HyperNode
    ("missing tier", with_(HN, "spec.tier", None), "spec.tier: required field is missing"),
    (
        "bad member type",
        with_(HN, "spec.members.0.type", "Switch"),
        'spec.members[0].type: must be one of "Node", "HyperNode", got "Switch"',
    ),
    (
        "missing member type",
        with_(HN, "spec.members.0", {"selector": {"exactMatch": {"name": "a"}}}),
        "spec.members[0].type: required field is missing",
    ),
    (
        "no selector",
        with_(HN, "spec.members.0.selector", {}),
        "spec.members[0].selector: one of exactMatch, regexMatch or labelMatch is required",
    ),
    (
        "two selectors",
        with_(
            HN,
            "spec.members.0.selector",
            {"exactMatch": {"name": "a"}, "regexMatch": {"pattern": "a"}},
        ),
        "spec.members[0].selector: only one of exactMatch, regexMatch or labelMatch may be set",
    ),
    (
        "bad regex",
        with_(HN, "spec.members.0.selector", {"regexMatch": {"pattern": "(["}}),
        "spec.members[0].selector.regexMatch.pattern: invalid regular expression",
    ),
    (
        "labelMatch on HyperNode",
        with_(
            HN,
            "spec.members.0",
            {"type": "HyperNode", "selector": {"labelMatch": {"matchLabels": {"a": "b"}}}},
        ),
        "spec.members[0].selector.labelMatch: applies only to members of type Node",
    ),
    (
        "bad label operator",
        with_(
            HN,
            "spec.members.0.selector",
            {"labelMatch": {"matchExpressions": [{"key": "a", "operator": "In"}]}},
        ),
        "spec.members[0].selector.labelMatch.matchExpressions[0].values: must not be empty",
    ),
    # Command
    ("target without uid", with_(CMD, "target.uid", None), "target.uid: required field is missing"),
    ("bad command action", with_(CMD, "action", "Pause"), "action: must be one of"),
]


@pytest.mark.parametrize(("name", "doc", "expected"), BAD, ids=[b[0] for b in BAD])
def test_bad_documents_name_the_field(name: str, doc: dict[str, Any], expected: str) -> None:
    with pytest.raises(FieldError) as info:
        load(doc)
    assert expected in str(info.value)


def test_every_problem_is_reported_at_once() -> None:
    doc = with_(with_(PG, "spec.minMember", "x"), "spec.queue", 7)
    doc = with_(doc, "status.bogus", 1)
    with pytest.raises(FieldError) as info:
        PodGroup.from_dict(doc)
    paths = {p for p, _ in info.value.problems}
    assert paths == {"spec.minMember", "spec.queue", "status.bogus"}


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (
            with_(PG, "apiVersion", "scheduling.volcano.sh/v1alpha1"),
            'apiVersion: must be "scheduling.volcano.sh/v1beta1", '
            'got "scheduling.volcano.sh/v1alpha1"',
        ),
        (with_(PG, "kind", "Queue"), 'kind: must be "PodGroup", got "Queue"'),
    ],
)
def test_type_meta_must_match_the_model(doc: dict[str, Any], expected: str) -> None:
    with pytest.raises(FieldError) as info:
        PodGroup.from_dict(doc)
    assert expected in str(info.value)


def test_load_rejects_unknown_kinds() -> None:
    with pytest.raises(FieldError, match="unknown apiVersion/kind v1/Pod"):
        load({"apiVersion": "v1", "kind": "Pod"})


# ---------------------------------------------------------------- default queues


def test_default_queues() -> None:
    root, default = default_queues()
    assert (root.metadata.name, default.metadata.name) == ("root", "default")
    assert root.parent_name == "" and default.parent_name == "root"
    assert default.spec.is_reclaimable and not root.spec.is_reclaimable
    assert {q.status.state for q in (root, default)} == {"Open"}
    for q in (root, default):
        assert Queue.from_dict(q.to_dict()) == q
    assert default_queues()[0] is not root  # fresh objects each call


# ---------------------------------------------------------------- HyperNode members


NODES = {
    "gpu-0": {"rack": "a"},
    "gpu-1": {"rack": "a"},
    "gpu-2": {"rack": "b", "gpu": "h100"},
    "gpu-3": {"rack": "b"},
    "cpu-0": {},
}


def hypernode(name: str, *members: dict[str, Any], tier: int = 1) -> HyperNode:
    return HyperNode.from_dict(
        {"metadata": {"name": name}, "spec": {"tier": tier, "members": list(members)}}
    )


def node(selector: dict[str, Any]) -> dict[str, Any]:
    return {"type": "Node", "selector": selector}


def child(selector: dict[str, Any]) -> dict[str, Any]:
    return {"type": "HyperNode", "selector": selector}


RESOLVE: list[tuple[str, HyperNode, set[str]]] = [
    ("exact", hypernode("h", node({"exactMatch": {"name": "gpu-0"}})), {"gpu-0"}),
    ("exact missing node", hypernode("h", node({"exactMatch": {"name": "gone"}})), set()),
    (
        "regex unanchored",
        hypernode("h", node({"regexMatch": {"pattern": "pu-[01]"}})),
        {"gpu-0", "gpu-1", "cpu-0"},
    ),
    (
        "regex anchored",
        hypernode("h", node({"regexMatch": {"pattern": "^gpu-[23]$"}})),
        {"gpu-2", "gpu-3"},
    ),
    (
        "labels",
        hypernode("h", node({"labelMatch": {"matchLabels": {"rack": "b"}}})),
        {"gpu-2", "gpu-3"},
    ),
    (
        "label expression",
        hypernode(
            "h",
            node(
                {
                    "labelMatch": {
                        "matchExpressions": [
                            {"key": "gpu", "operator": "DoesNotExist"},
                            {"key": "rack", "operator": "Exists"},
                        ]
                    }
                }
            ),
        ),
        {"gpu-0", "gpu-1", "gpu-3"},
    ),
    (
        "several members",
        hypernode(
            "h", node({"exactMatch": {"name": "gpu-0"}}), node({"exactMatch": {"name": "cpu-0"}})
        ),
        {"gpu-0", "cpu-0"},
    ),
    (
        "nested",
        hypernode("spine", child({"regexMatch": {"pattern": "^rack-"}}), tier=2),
        {"gpu-0", "gpu-1", "gpu-2", "gpu-3"},
    ),
    (
        "nested exact",
        hypernode("spine", child({"exactMatch": {"name": "rack-b"}}), tier=2),
        {"gpu-2", "gpu-3"},
    ),
]
RACKS = {
    "rack-a": hypernode("rack-a", node({"labelMatch": {"matchLabels": {"rack": "a"}}})),
    "rack-b": hypernode("rack-b", node({"labelMatch": {"matchLabels": {"rack": "b"}}})),
}


@pytest.mark.parametrize(("name", "hn", "expected"), RESOLVE, ids=[r[0] for r in RESOLVE])
def test_resolve_nodes(name: str, hn: HyperNode, expected: set[str]) -> None:
    assert resolve_nodes(hn, NODES, RACKS) == expected


def test_resolve_nodes_survives_cycles() -> None:
    a = hypernode(
        "a", child({"exactMatch": {"name": "b"}}), node({"exactMatch": {"name": "gpu-0"}})
    )
    b = hypernode(
        "b", child({"exactMatch": {"name": "a"}}), node({"exactMatch": {"name": "gpu-1"}})
    )
    assert resolve_nodes(a, NODES, {"a": a, "b": b}) == {"gpu-0", "gpu-1"}


# ---------------------------------------------------------------- durations


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0.0),
        ("90s", 90.0),
        ("1h30m", 5400.0),
        ("1.5h", 5400.0),
        ("300ms", 0.3),
        ("2m3s", 123.0),
    ],
)
def test_duration_seconds(text: str, seconds: float) -> None:
    assert duration_seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5", "1d", "h", "1h 30m", "-5s"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        duration_seconds(text)
