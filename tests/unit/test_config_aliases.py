"""A GPU vendor's plugin names load as ours; `pyextender validate-config` names every problem."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pyextender.cli import main
from pyextender.framework.config import ConfigError, load_config
from pyextender.plugins import gpu_topology, supernode
from pyextender.plugins.defaults import plugins_of
from pyextender.plugins.registry import REGISTRY

VENDOR_CONFIG = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: gpu-aware
    arguments:
      weight: 1
      loss.weight: 0.5
  - name: gpu-podaffinity
    arguments: {weight: 2}
"""

BAD_CONFIG = """
actions: "enqueue, alocate"
tiers:
- plugins:
  - name: gang
    enablePreemptible: true
  - name: gpu-aware
    arguments: {weight: "x", loss.wieght: 1}
  - name: gpu-topology
  - name: supernod
"""


def test_vendor_names_load_as_our_plugins_with_their_arguments() -> None:
    config = load_config(VENDOR_CONFIG, REGISTRY)
    assert config.plugin_names == ("priority", "gang", "predicates", "gpu-topology", "supernode")
    topo = config.plugin("gpu-topology")
    assert topo is not None and topo.written_as == "gpu-aware"
    assert topo.args == gpu_topology.Args(weight=1.0, loss_weight=0.5)
    sn = config.plugin("supernode")
    assert sn is not None and sn.written_as == "gpu-podaffinity"
    assert sn.args == supernode.Args(weight=2.0)
    # the profile is built from the real plugin kinds, so the alias runs our code
    specs = [spec.name for spec, _ in plugins_of(config)]
    assert specs[-2:] == ["gpu-topology", "supernode"]


def test_alias_also_takes_our_own_argument_keys() -> None:
    config = load_config(
        """
actions: allocate
tiers:
- plugins:
  - name: gpu-aware
    arguments: {single.domain: true, gpu-topology.weight: 3}
""",
        REGISTRY,
    )
    topo = config.plugin("gpu-topology")
    assert topo is not None
    assert topo.args == gpu_topology.Args(weight=3.0, single_domain=True)


def test_our_name_has_no_written_as() -> None:
    text = "actions: allocate\ntiers:\n- plugins:\n  - name: gpu-topology\n"
    config = load_config(text, REGISTRY)
    plugin = config.plugin("gpu-topology")
    assert plugin is not None and plugin.written_as == ""


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("gpu-aware", "gpu-topology"),
        ("gpu-topology", "gpu-aware"),
        ("supernode", "gpu-podaffinity"),
    ],
)
def test_alias_and_own_name_together_is_a_duplicate(first: str, second: str) -> None:
    text = (
        f"actions: allocate\ntiers:\n- plugins:\n  - name: {first}\n"
        f"- plugins:\n  - name: {second}\n"
    )
    with pytest.raises(ConfigError) as info:
        load_config(text, REGISTRY)
    [problem] = info.value.problems
    assert problem.startswith("tiers[1].plugins[0]: plugin ")
    assert "is already listed at tiers[0].plugins[0]" in problem


def test_every_problem_is_reported_with_alias_named() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(BAD_CONFIG, REGISTRY)
    problems = info.value.problems
    assert problems == [
        'actions: unknown action "alocate" (did you mean "allocate"?) '
        "(known: enqueue, allocate, preempt, reclaim, backfill, reservation)",
        'tiers[0].plugins[0] (gang): unknown option "enablePreemptible" '
        '(did you mean "enablePreemptable"?)',
        'tiers[0].plugins[1] (gpu-aware = gpu-topology): argument "weight": '
        'must be a number, got "x"',
        'tiers[0].plugins[1] (gpu-aware = gpu-topology): unknown argument "loss.wieght" '
        '(did you mean "loss.weight"?)',
        'tiers[0].plugins[2]: plugin "gpu-topology" is already listed at '
        "tiers[0].plugins[1] (as gpu-aware)",
        problems[5],
    ]
    assert problems[5].startswith(
        'tiers[0].plugins[3]: unknown plugin "supernod" (did you mean "supernode"?)'
    )
    # the list of known names offers the aliases too
    assert "gpu-aware" in problems[5] and "gpu-podaffinity" in problems[5]


# ---------------------------------------------------------------- the command


def test_validate_config_ok_prints_a_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "sched.yaml"
    path.write_text(VENDOR_CONFIG)
    assert main(["validate-config", str(path)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert out.splitlines() == [
        f"{path}: ok",
        "  actions: enqueue, allocate, backfill",
        "  tier 1: priority, gang",
        "  tier 2: predicates, gpu-topology (written gpu-aware), "
        "supernode (written gpu-podaffinity)",
    ]


def test_validate_config_bad_names_every_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "sched.yaml"
    path.write_text(BAD_CONFIG)
    assert main(["validate-config", str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 7
    assert all(line.startswith(f"{path}: ") for line in lines)
    assert lines[-1] == f"{path}: 6 problems"
    for fragment in ('"alocate"', '"enablePreemptible"', '"weight"', '"loss.wieght"', '"supernod"'):
        assert sum(fragment in line for line in lines) == 1, fragment


def test_validate_config_unreadable_and_not_yaml(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate-config", str(tmp_path / "missing.yaml")]) == 1
    _, err = capsys.readouterr()
    assert "cannot read" in err and err.rstrip().endswith("1 problem")
    bad = tmp_path / "bad.yaml"
    bad.write_text("actions: [\n")
    assert main(["validate-config", str(bad)]) == 1
    _, err = capsys.readouterr()
    assert "not valid YAML" in err


def test_validate_config_as_a_process(tmp_path: Path) -> None:
    """The installed entry point: exit codes and streams as an operator's script sees them."""
    good = tmp_path / "good.yaml"
    good.write_text(VENDOR_CONFIG)
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD_CONFIG)
    cmd = [sys.executable, "-m", "pyextender.cli", "validate-config"]
    ok = subprocess.run([*cmd, str(good)], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert "supernode (written gpu-podaffinity)" in ok.stdout
    failed = subprocess.run([*cmd, str(bad)], capture_output=True, text=True, timeout=120)
    assert failed.returncode == 1
    assert failed.stdout == ""
    assert failed.stderr.splitlines()[-1] == f"{bad}: 6 problems"


def test_shipped_example_passes_validate_config(capsys: pytest.CaptureFixture[str]) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "volcano-scheduler.conf"
    assert main(["validate-config", str(example)]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "tier 2: overcommit, drf, predicates, proportion, nodeorder, binpack, sla" in out
