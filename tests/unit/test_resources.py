"""Quantities and effective pod requests."""

from __future__ import annotations

import pytest

from pyextender.api.objects import ObjectError, node_from_dict, pod_from_dict, pod_requests
from pyextender.api.quantity import QuantityError, to_int, to_milli
from pyextender.api.resources import amount, parse_resource_list


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        ("1", 1000),
        ("500m", 500),
        ("0.1", 100),
        ("2.5", 2500),
        ("1k", 1_000_000),
        ("1e3", 1_000_000),
        ("1u", 1),
    ],
)
def test_cpu_in_milli(text: str, milli: int) -> None:
    assert to_milli(text) == milli


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1Gi", 2**30),
        ("512Mi", 2**29),
        ("1G", 10**9),
        ("128974848", 128974848),
        ("129e6", 129_000_000),
        ("8", 8),
    ],
)
def test_bytes_and_counts(text: str, value: int) -> None:
    assert to_int(text) == value


@pytest.mark.parametrize("bad", ["", "lots", "1Zi", "--1", "1..2", "Gi"])
def test_bad_quantity_names_it(bad: str) -> None:
    with pytest.raises(QuantityError, match="quantity"):
        to_milli(bad)


@pytest.mark.parametrize(
    "huge", ["1E30", "9223372036854775808", "8Ei", 1e300, float("inf"), float("nan")]
)
def test_quantities_beyond_int64_are_errors_not_overflows(huge: str | float) -> None:
    with pytest.raises(QuantityError, match=r"too large|not a finite"):
        to_int(huge)
    with pytest.raises(QuantityError):
        to_milli(huge)


def test_largest_quantities_still_fit() -> None:
    assert to_int("9223372036854775807") == 2**63 - 1
    assert to_milli("9223372036854775807m") == 2**63 - 1


def _c(**req: str) -> dict[str, object]:
    return {"name": "c", "resources": {"requests": req}}


def test_pod_request_sums_containers_and_takes_init_peak() -> None:
    spec = {
        "containers": [_c(cpu="1", memory="1Gi"), _c(cpu="500m", **{"nvidia.com/gpu": "2"})],
        "initContainers": [_c(cpu="4")],
        "overhead": {"cpu": "100m"},
    }
    req = pod_requests(spec)
    assert req["cpu"] == 4100  # init peak 4 cores beats 1.5, plus overhead
    assert req["memory"] == 2**30
    assert req["nvidia.com/gpu"] == 2


def test_sidecar_init_containers_add_to_the_whole_pod() -> None:
    sidecar = {**_c(cpu="1"), "restartPolicy": "Always"}
    spec = {"containers": [_c(cpu="2")], "initContainers": [sidecar, _c(cpu="2")]}
    assert pod_requests(spec)["cpu"] == 3000


def test_pod_from_dict_reads_what_the_scheduler_needs() -> None:
    p = pod_from_dict(
        {
            "metadata": {
                "name": "a",
                "namespace": "ns",
                "uid": "u1",
                "annotations": {"scheduling.k8s.io/group-name": "pg"},
            },
            "spec": {
                "schedulerName": "volcano",
                "priority": 7,
                "schedulingGates": [{"name": "pyextender.io/gang"}],
                "containers": [_c(cpu="1")],
            },
        }
    )
    assert (p.key, p.uid, p.priority, p.group_name, p.gates) == (
        "ns/a",
        "u1",
        7,
        "pg",
        ("pyextender.io/gang",),
    )
    assert not p.node_name and p.phase == "Pending"


@pytest.mark.parametrize(
    ("doc", "needle"),
    [
        ({}, "metadata.name"),
        ({"metadata": {"name": "a"}, "spec": {"containers": [_c(cpu="x")]}}, "cpu"),
        ({"metadata": "nope"}, "metadata must be an object"),
    ],
)
def test_bad_pod_documents(doc: dict[str, object], needle: str) -> None:
    with pytest.raises(ObjectError, match=needle):
        pod_from_dict(doc)


def test_node_readiness_and_allocatable() -> None:
    n = node_from_dict(
        {
            "metadata": {"name": "n"},
            "spec": {"unschedulable": True},
            "status": {
                "allocatable": {"cpu": "8", "nvidia.com/gpu": "4"},
                "conditions": [{"type": "Ready", "status": "False"}],
            },
        }
    )
    assert n.allocatable == {"cpu": 8000, "nvidia.com/gpu": 4}
    assert n.unschedulable and not n.ready


def test_remembered_quantity_strings_give_the_same_amounts_and_errors() -> None:
    """amount() remembers parsed strings: a repeat gives the same integer in the
    column's unit (milli for cpu only), a malformed string fails every time, and a
    non-string never shares an entry with an equal string or number (True == 1)."""
    for _ in range(2):
        assert amount("cpu", "500m") == 500
        assert amount("memory", "1") == 1 and amount("cpu", "1") == 1000
        with pytest.raises(QuantityError, match="invalid quantity 'lots'"):
            amount("cpu", "lots")
    assert amount("cpu", 1) == 1000
    with pytest.raises(QuantityError, match="string or number"):
        amount("cpu", True)
    with pytest.raises(ValueError, match="resource 'cpu'"):
        parse_resource_list({"cpu": "1x"})
