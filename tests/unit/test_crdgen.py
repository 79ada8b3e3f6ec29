"""Generated CRDs: current on disk, structural, and carrying Volcano's names and fields."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from pyextender.api.volcano import RESOURCES
from pyextender.api.volcano.crdgen import DEFAULT_OUT, crd, file_name, main, render, stale_files

CRDS = {cls.KIND.plural: crd(cls) for cls in RESOURCES}

# Keys a node of a structural schema may carry (what we generate; all allowed by apiextensions/v1).
ALLOWED_KEYS = {
    "type",
    "format",
    "description",
    "properties",
    "required",
    "items",
    "additionalProperties",
    "enum",
    "minimum",
    "maximum",
    "maxLength",
    "pattern",
    "default",
    "anyOf",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-validations",
}
TYPES = {"object", "array", "string", "integer", "number", "boolean"}


def structural_problems(node: Any, path: str) -> list[str]:
    """Why ``node`` is not a structural schema (empty when it is)."""
    if not isinstance(node, dict):
        return [f"{path}: not a mapping"]
    problems = [f"{path}: unknown key {k!r}" for k in node if k not in ALLOWED_KEYS]
    if node.get("x-kubernetes-int-or-string") is True:
        if "type" in node or node.get("anyOf") != [{"type": "integer"}, {"type": "string"}]:
            problems.append(f"{path}: int-or-string must be exactly anyOf integer/string, no type")
        return problems
    if "anyOf" in node:
        problems.append(f"{path}: anyOf only allowed for int-or-string")
    kind = node.get("type")
    if kind not in TYPES:
        return [*problems, f"{path}: missing or bad type {kind!r}"]
    if kind == "object":
        props = node.get("properties", {})
        extra = node.get("additionalProperties")
        if props and extra is not None:
            problems.append(f"{path}: both properties and additionalProperties")
        for name, sub in props.items():
            problems += structural_problems(sub, f"{path}.{name}")
        if extra is not None:
            problems += structural_problems(extra, f"{path}[*]")
        for name in node.get("required", []):
            if name not in props:
                problems.append(f"{path}: required {name!r} is not a property")
    elif kind == "array":
        problems += structural_problems(node.get("items"), f"{path}[]")
    elif any(k in node for k in ("properties", "items", "additionalProperties")):
        problems.append(f"{path}: scalar with children")
    return problems


def schema(plural: str) -> dict[str, Any]:
    version = CRDS[plural]["spec"]["versions"][0]
    out: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return out


def lookup(node: dict[str, Any], path: str) -> dict[str, Any]:
    """Schema node at a dotted path; ``[]`` steps into array items."""
    for step in path.split("."):
        if step.endswith("[]"):
            node = node["properties"][step[:-2]]["items"]
        else:
            node = node["properties"][step]
    return node


# ---------------------------------------------------------------- currency


def test_committed_files_are_current() -> None:
    assert stale_files(DEFAULT_OUT) == [], "run: python -m pyextender.api.volcano.crdgen"


def test_check_names_stale_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--out", str(tmp_path), "--check"]) == 1
    err = capsys.readouterr().err
    assert all(file_name(cls) in err for cls in RESOURCES)
    assert main(["--out", str(tmp_path)]) == 0
    assert main(["--out", str(tmp_path), "--check"]) == 0
    (tmp_path / file_name(RESOURCES[0])).write_text("edited\n")
    assert main(["--out", str(tmp_path), "--check"]) == 1
    assert file_name(RESOURCES[0]) in capsys.readouterr().err


def test_rendered_yaml_parses_back_to_the_crd() -> None:
    for cls in RESOURCES:
        assert yaml.safe_load(render()[file_name(cls)]) == crd(cls)


# ---------------------------------------------------------------- structure


@pytest.mark.parametrize("plural", sorted(CRDS))
def test_schemas_are_structural(plural: str) -> None:
    root = schema(plural)
    assert structural_problems(root, plural) == []
    assert root["properties"]["metadata"] == {"type": "object"}


def test_structural_checker_catches_problems() -> None:
    assert structural_problems({"properties": {}}, "x") == ["x: missing or bad type None"]
    assert structural_problems({"type": "string", "oneOf": []}, "x") == ["x: unknown key 'oneOf'"]
    bad = {"type": "object", "properties": {"a": {"type": "array"}}}
    assert structural_problems(bad, "x") == ["x.a[]: not a mapping"]


# ---------------------------------------------------------------- Volcano compatibility


NAMES = [
    ("podgroups", "scheduling.volcano.sh", "PodGroup", "Namespaced", ["pg", "podgroup-v1beta1"]),
    ("queues", "scheduling.volcano.sh", "Queue", "Cluster", ["q", "queue-v1beta1"]),
    ("jobs", "batch.volcano.sh", "Job", "Namespaced", ["vcjob", "vj"]),
    ("commands", "bus.volcano.sh", "Command", "Namespaced", None),
    ("hypernodes", "topology.volcano.sh", "HyperNode", "Cluster", ["hn"]),
]


@pytest.mark.parametrize(("plural", "group", "kind", "scope", "short"), NAMES)
def test_names_match_volcano(
    plural: str, group: str, kind: str, scope: str, short: list[str] | None
) -> None:
    spec = CRDS[plural]["spec"]
    assert CRDS[plural]["metadata"]["name"] == f"{plural}.{group}"
    assert spec["group"] == group
    assert spec["scope"] == scope
    assert spec["names"]["kind"] == kind
    assert spec["names"]["listKind"] == f"{kind}List"
    assert spec["names"]["singular"] == kind.lower()
    assert spec["names"].get("shortNames") == short
    version = spec["versions"][0]
    assert version["served"] and version["storage"]
    # as Volcano's: PodGroup and Command status is written through the object itself
    assert ("subresources" in version) == (plural not in ("commands", "podgroups"))


@pytest.mark.parametrize(
    ("plural", "columns"),
    [
        (
            "podgroups",
            [
                ("STATUS", ".status.phase"),
                ("minMember", ".spec.minMember"),
                ("RUNNINGS", ".status.running"),
                ("AGE", ".metadata.creationTimestamp"),
                ("QUEUE", ".spec.queue"),
            ],
        ),
        (
            "jobs",
            [
                ("STATUS", ".status.state.phase"),
                ("minAvailable", ".status.minAvailable"),
                ("RUNNINGS", ".status.running"),
                ("AGE", ".metadata.creationTimestamp"),
                ("QUEUE", ".spec.queue"),
            ],
        ),
        (
            "hypernodes",
            [
                ("Tier", ".spec.tier"),
                ("NodeCount", ".status.nodeCount"),
                ("Age", ".metadata.creationTimestamp"),
            ],
        ),
    ],
)
def test_printer_columns_match_volcano(plural: str, columns: list[tuple[str, str]]) -> None:
    got = CRDS[plural]["spec"]["versions"][0]["additionalPrinterColumns"]
    assert [(c["name"], c["jsonPath"]) for c in got] == columns


FIELDS = [
    ("podgroups", "spec.minMember", "integer"),
    ("podgroups", "spec.minTaskMember", "object"),
    ("podgroups", "spec.queue", "string"),
    ("podgroups", "spec.priorityClassName", "string"),
    ("podgroups", "spec.minResources", "object"),
    ("podgroups", "spec.networkTopology.mode", "string"),
    ("podgroups", "spec.networkTopology.highestTierAllowed", "integer"),
    ("podgroups", "status.phase", "string"),
    ("podgroups", "status.conditions[].transitionID", "string"),
    ("podgroups", "status.conditions[].lastTransitionTime", "string"),
    ("podgroups", "status.running", "integer"),
    ("podgroups", "status.succeeded", "integer"),
    ("podgroups", "status.failed", "integer"),
    ("queues", "spec.weight", "integer"),
    ("queues", "spec.capability", "object"),
    ("queues", "spec.deserved", "object"),
    ("queues", "spec.guarantee.resource", "object"),
    ("queues", "spec.reclaimable", "boolean"),
    ("queues", "spec.parent", "string"),
    ("queues", "spec.priority", "integer"),
    ("queues", "spec.extendClusters[].capacity", "object"),
    (
        "queues",
        "spec.affinity.nodeGroupAffinity.requiredDuringSchedulingIgnoredDuringExecution",
        "array",
    ),
    ("queues", "status.state", "string"),
    ("queues", "status.allocated", "object"),
    ("queues", "status.reservation.nodes", "array"),
    ("queues", "status.inqueue", "integer"),
    ("queues", "status.completed", "integer"),
    ("jobs", "spec.schedulerName", "string"),
    ("jobs", "spec.minAvailable", "integer"),
    ("jobs", "spec.tasks[].template", "object"),
    ("jobs", "spec.tasks[].minAvailable", "integer"),
    ("jobs", "spec.tasks[].policies[].exitCode", "integer"),
    ("jobs", "spec.tasks[].dependsOn.iteration", "string"),
    ("jobs", "spec.policies[].events", "array"),
    ("jobs", "spec.policies[].timeout", "string"),
    ("jobs", "spec.plugins", "object"),
    ("jobs", "spec.runningEstimate", "string"),
    ("jobs", "spec.ttlSecondsAfterFinished", "integer"),
    ("jobs", "spec.networkTopology.highestTierName", "string"),
    ("jobs", "spec.volumes[].volumeClaim", "object"),
    ("jobs", "status.state.phase", "string"),
    ("jobs", "status.taskStatusCount", "object"),
    ("jobs", "status.conditions[].status", "string"),
    ("commands", "action", "string"),
    ("commands", "target.uid", "string"),
    ("commands", "reason", "string"),
    ("hypernodes", "spec.tier", "integer"),
    ("hypernodes", "spec.members[].type", "string"),
    ("hypernodes", "spec.members[].selector.exactMatch.name", "string"),
    ("hypernodes", "spec.members[].selector.regexMatch.pattern", "string"),
    ("hypernodes", "spec.members[].selector.labelMatch.matchLabels", "object"),
    ("hypernodes", "status.nodeCount", "integer"),
    ("hypernodes", "status.unhealthyNodes[].reason", "string"),
]


@pytest.mark.parametrize(("plural", "path", "type_"), FIELDS)
def test_volcano_fields_present(plural: str, path: str, type_: str) -> None:
    assert lookup(schema(plural), path)["type"] == type_


def test_quantities_are_int_or_string() -> None:
    node = lookup(schema("queues"), "spec.capability")["additionalProperties"]
    assert node["x-kubernetes-int-or-string"] is True
    assert "type" not in node


def test_enums_defaults_and_required_match_volcano() -> None:
    members = lookup(schema("hypernodes"), "spec.members")["items"]
    assert members["required"] == ["type"]
    assert members["properties"]["type"]["enum"] == ["Node", "HyperNode"]
    assert len(members["properties"]["selector"]["x-kubernetes-validations"]) == 2
    assert lookup(schema("hypernodes"), "spec")["required"] == ["tier"]
    assert lookup(schema("jobs"), "spec.queue")["default"] == "default"
    assert lookup(schema("jobs"), "spec.maxRetry")["default"] == 3
    assert lookup(schema("podgroups"), "spec.networkTopology.mode")["default"] == "hard"
    assert "*" in lookup(schema("jobs"), "spec.policies[].event")["enum"]
    target = lookup(schema("commands"), "target")
    assert target["required"] == ["apiVersion", "kind", "name", "uid"]
