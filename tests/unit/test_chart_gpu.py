"""The chart's values reach the sidecar's flags: gpuResourceNames as --gpu-resource (every one
of them), scheduler.sidecar.filterPicksNode as --[no-]filter-picks-node."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from pyextender.api.resources import (
    KNOWN_GPU_RESOURCES,
    configure_gpu_resources,
    gpu_resources,
)
from pyextender.cli import build_parser
from tests.unit.test_chart import CHART, helm_template, render


def _sidecar_args(*values: str) -> list[str]:
    docs = render(*values)
    [sched] = [d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"].endswith(
        "-scheduler")]  # fmt: skip
    [sidecar] = [
        c for c in sched["spec"]["template"]["spec"]["containers"] if c["name"] == "sidecar"
    ]
    args: list[str] = sidecar["args"]
    return args


def _gpu_flags(args: list[str]) -> list[str]:
    return [a.removeprefix("--gpu-resource=") for a in args if a.startswith("--gpu-resource=")]


def test_shipped_list_is_the_known_list_and_reaches_the_sidecar() -> None:
    values: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text())
    assert tuple(values["gpuResourceNames"]) == KNOWN_GPU_RESOURCES
    for vendor in ("nvidia.com/gpu", "metax-tech.com/gpu", "amd.com/gpu", "huawei.com/Ascend910"):
        assert vendor in KNOWN_GPU_RESOURCES
    args = _sidecar_args()
    assert _gpu_flags(args) == list(KNOWN_GPU_RESOURCES)
    # the sidecar's own parser and validation take them as the chart renders them
    parsed = build_parser().parse_args(args)
    previous = configure_gpu_resources(parsed.gpu_resource)
    try:
        assert gpu_resources() == KNOWN_GPU_RESOURCES
    finally:
        configure_gpu_resources(previous)


@pytest.mark.parametrize("mode", [(), ("--set", "mode=existing")])
def test_a_single_other_vendor_is_the_only_gpu(mode: tuple[str, ...]) -> None:
    args = _sidecar_args(*mode, "--set", "gpuResourceNames={amd.com/gpu}")
    assert _gpu_flags(args) == ["amd.com/gpu"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("gpuResourceNames={gpu}", '"gpu" is not an extended resource name'),
        ("gpuResourceNames={nvidia.com/gpu,a b/c}", '"a b/c" is not an extended resource name'),
        ("gpuResourceNames=null", "must list at least one GPU resource name"),
    ],
)
def test_bad_names_fail_the_install(value: str, message: str) -> None:
    proc = helm_template("--set", value)
    assert proc.returncode != 0
    assert message in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("value", "picks"), [((), True), (("--set", "scheduler.sidecar.filterPicksNode=false"), False)]
)
def test_filter_picks_node_reaches_the_sidecar(value: tuple[str, ...], picks: bool) -> None:
    parsed = build_parser().parse_args(_sidecar_args(*value))
    assert parsed.filter_picks_node is picks
