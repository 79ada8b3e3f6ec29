"""Scheduler configuration: Volcano's YAML loads, arguments are typed, errors name the key."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import os
from pathlib import Path
from typing import Any, Literal

import pytest

from pyextender.framework.config import (
    ConfigError,
    ConfigWatcher,
    SchedulerConfig,
    load_config,
    load_config_file,
)
from pyextender.framework.plugin_args import arg, arguments, build_args
from pyextender.framework.registry import PluginSpec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# ---------------------------------------------------------------- fake plugin kinds


@dataclasses.dataclass(frozen=True)
class NoArgs:
    """A plugin without arguments."""


@arguments
class BinpackArgs:
    weight: int = arg("Weight of the binpack score.", default=1, aliases=("binpack.weight",))
    cpu: int = arg("CPU weight.", default=1, aliases=("binpack.cpu",))
    memory: int = arg("Memory weight.", default=1, aliases=("binpack.memory",))
    resources: tuple[str, ...] = arg(
        "Extra resources scored.", default=(), aliases=("binpack.resources",)
    )
    resource_weights: dict[str, int] = arg(
        "Weight per extra resource.", default_factory=dict, prefix="binpack.resources."
    )


@arguments
class NodeOrderArgs:
    least_requested: int = arg("", default=1, aliases=("leastrequested.weight",))
    most_requested: int = arg("", default=0, aliases=("mostrequested.weight",))
    balanced: int = arg("", default=1, aliases=("balancedresource.weight",))


@arguments
class PredicatesArgs:
    gpu_sharing: bool = arg("", default=False, aliases=("predicate.GPUSharingEnable",))


@arguments
class OvercommitArgs:
    factor: float = arg("", default=1.2, aliases=("overcommit-factor",))


@arguments
class SlaArgs:
    waiting_time: dt.timedelta | None = arg("", default=None, aliases=("sla-waiting-time",))


@dataclasses.dataclass(frozen=True)
class Window:
    start: int = 0
    end: int = 24


@dataclasses.dataclass(frozen=True)
class RichArgs:
    mode: Literal["spread", "pack"] = "pack"
    windows: list[Window] = dataclasses.field(default_factory=list)
    limits: dict[str, float] = dataclasses.field(default_factory=dict)
    required_number: int = dataclasses.field(default=0, metadata={"aliases": ("rich.n",)})

    def __post_init__(self) -> None:
        if self.required_number < 0:
            raise ValueError("rich.n must be >= 0")


@dataclasses.dataclass(frozen=True)
class PlainArgs:
    """Plain dataclass, no metadata: keys are derived from the field names."""

    weight: float = 1.0
    leastrequested_weight: float = 1.0
    resources: dict[str, float] = dataclasses.field(default_factory=dict)


class FakePlugin:
    def __init__(self, name: str) -> None:
        self.name = name


def spec(name: str, args_type: type[Any] = NoArgs) -> PluginSpec:
    return PluginSpec(
        name=name, args_type=args_type, factory=lambda a: FakePlugin(name), summary=name
    )


SPECS = {
    s.name: s
    for s in [
        spec("priority"),
        spec("gang"),
        spec("conformance"),
        spec("overcommit", OvercommitArgs),
        spec("drf"),
        spec("predicates", PredicatesArgs),
        spec("proportion"),
        spec("capacity"),
        spec("nodeorder", NodeOrderArgs),
        spec("binpack", BinpackArgs),
        spec("sla", SlaArgs),
        spec("rich", RichArgs),
        spec("plain", PlainArgs),
    ]
}

# Volcano's Helm chart default, when it used proportion (the set issue 3 names) ...
HELM_PROPORTION = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""
# ... and today's chart, which lists capacity instead of proportion.
HELM_CAPACITY = HELM_PROPORTION.replace("name: proportion", "name: capacity")


# ---------------------------------------------------------------- loading


@pytest.mark.parametrize("text", [HELM_PROPORTION, HELM_CAPACITY], ids=["proportion", "capacity"])
def test_volcano_helm_default_loads(text: str) -> None:
    config = load_config(text, SPECS)
    assert config.actions == ("enqueue", "allocate", "backfill")
    assert [len(t.plugins) for t in config.tiers] == [3, 6]
    gang = config.plugin("gang")
    assert gang is not None and not gang.enabled("enablePreemptable")
    assert gang.enabled("enableJobReady")
    binpack = config.plugin("binpack")
    assert binpack is not None and binpack.args == BinpackArgs()


def test_example_config_loads_with_typed_arguments() -> None:
    config = load_config_file(EXAMPLES / "volcano-scheduler.conf", SPECS)
    assert config.actions == ("enqueue", "allocate", "preempt", "reclaim", "backfill")

    def args(name: str) -> Any:
        p = config.plugin(name)
        assert p is not None
        return p.args

    assert args("binpack") == BinpackArgs(
        weight=10,
        cpu=1,
        memory=1,
        resources=("nvidia.com/gpu",),
        resource_weights={"nvidia.com/gpu": 8},
    )
    assert args("nodeorder") == NodeOrderArgs(least_requested=1, balanced=1)
    assert args("predicates").gpu_sharing is False  # see the example's comment
    assert args("overcommit").factor == 1.2
    assert args("sla").waiting_time == dt.timedelta(minutes=30)
    drf = config.plugin("drf")
    assert drf is not None and drf.enabled("enableHierarchy")


ARGS_OK: list[tuple[str, type[Any], dict[str, Any], Any]] = [
    ("defaults", BinpackArgs, {}, BinpackArgs()),
    ("field name works too", BinpackArgs, {"weight": 3}, BinpackArgs(weight=3)),
    (
        "comma list",
        BinpackArgs,
        {"binpack.resources": "a.com/x, b.com/y"},
        BinpackArgs(resources=("a.com/x", "b.com/y")),
    ),
    (
        "yaml list",
        BinpackArgs,
        {"binpack.resources": ["a.com/x"]},
        BinpackArgs(resources=("a.com/x",)),
    ),
    (
        "exact beats prefix",
        BinpackArgs,
        {"binpack.resources": "nvidia.com/gpu", "binpack.resources.nvidia.com/gpu": 5},
        BinpackArgs(resources=("nvidia.com/gpu",), resource_weights={"nvidia.com/gpu": 5}),
    ),
    ("int accepted as float", OvercommitArgs, {"overcommit-factor": 2}, OvercommitArgs(factor=2.0)),
    (
        "duration in seconds",
        SlaArgs,
        {"sla-waiting-time": 90},
        SlaArgs(waiting_time=dt.timedelta(seconds=90)),
    ),
    ("null optional", SlaArgs, {"sla-waiting-time": None}, SlaArgs()),
    (
        "literal, nested, dict",
        RichArgs,
        {"mode": "spread", "windows": [{"start": 1}], "limits": {"gpu": 2}, "rich.n": 4},
        RichArgs(mode="spread", windows=[Window(start=1)], limits={"gpu": 2.0}, required_number=4),
    ),
]


@pytest.mark.parametrize(
    ("name", "args_type", "raw", "expected"), ARGS_OK, ids=[a[0] for a in ARGS_OK]
)
def test_arguments_convert(
    name: str, args_type: type[Any], raw: dict[str, Any], expected: Any
) -> None:
    problems: list[str] = []
    assert build_args(args_type, raw, "p", problems) == expected
    assert problems == []


DERIVED: list[tuple[str, dict[str, Any], PlainArgs]] = [
    ("field name", {"weight": 2}, PlainArgs(weight=2.0)),
    ("plugin prefix", {"plain.weight": 2}, PlainArgs(weight=2.0)),
    ("dots for underscores", {"leastrequested.weight": 3}, PlainArgs(leastrequested_weight=3.0)),
    (
        "dict prefix",
        {"plain.resources.nvidia.com/gpu": 2, "plain.resources.x.io/y": 1},
        PlainArgs(resources={"nvidia.com/gpu": 2.0, "x.io/y": 1.0}),
    ),
    (
        "dict and prefix merge",
        {"resources": {"a/b": 1}, "plain.resources.c/d": 2},
        PlainArgs(resources={"a/b": 1.0, "c/d": 2.0}),
    ),
]


@pytest.mark.parametrize(("name", "raw", "expected"), DERIVED, ids=[d[0] for d in DERIVED])
def test_derived_keys(name: str, raw: dict[str, Any], expected: PlainArgs) -> None:
    problems: list[str] = []
    assert build_args(PlainArgs, raw, "plain", problems, plugin="plain") == expected
    assert problems == []


# ---------------------------------------------------------------- errors


def one_plugin(entry: str) -> str:
    return f'actions: "allocate"\ntiers:\n- plugins:\n  - {entry}\n'


BAD: list[tuple[str, str, str]] = [
    (
        "unknown plugin",
        one_plugin("name: binpak"),
        'tiers[0].plugins[0]: unknown plugin "binpak" (did you mean "binpack"?)',
    ),
    (
        "unknown action",
        'actions: "enqueue, alocate"\ntiers: []\n',
        'actions: unknown action "alocate" (did you mean "allocate"?)',
    ),
    ("missing actions", "tiers: []\n", "actions: required"),
    ("duplicate action", 'actions: "allocate, allocate"\n', 'actions: "allocate" is listed twice'),
    ("actions not a string", "actions: 3\n", "actions: must be a comma-separated string, got 3"),
    (
        "unknown argument",
        one_plugin("{name: binpack, arguments: {binpack.wieght: 10}}"),
        'tiers[0].plugins[0] (binpack): unknown argument "binpack.wieght" '
        '(did you mean "binpack.weight"?)',
    ),
    (
        "wrong type int",
        one_plugin("{name: binpack, arguments: {binpack.weight: ten}}"),
        'tiers[0].plugins[0] (binpack): argument "binpack.weight": must be an integer, got "ten"',
    ),
    (
        "wrong type bool",
        one_plugin("{name: predicates, arguments: {predicate.GPUSharingEnable: 1}}"),
        'argument "predicate.GPUSharingEnable": must be true or false, got 1',
    ),
    (
        "bool is not int",
        one_plugin("{name: binpack, arguments: {binpack.weight: true}}"),
        'argument "binpack.weight": must be an integer, got true',
    ),
    (
        "wrong prefix value",
        one_plugin("{name: binpack, arguments: {binpack.resources.x/y: big}}"),
        'argument "binpack.resources.x/y": must be an integer, got "big"',
    ),
    (
        "bad duration",
        one_plugin("{name: sla, arguments: {sla-waiting-time: soon}}"),
        'argument "sla-waiting-time": must be a duration such as "90s" or "5m", got "soon"',
    ),
    (
        "bad literal",
        one_plugin("{name: rich, arguments: {mode: scatter}}"),
        'argument "mode": must be one of "spread", "pack", got "scatter"',
    ),
    (
        "nested unknown",
        one_plugin("{name: rich, arguments: {windows: [{begin: 1}]}}"),
        'unknown argument "begin"',
    ),
    (
        "post_init check",
        one_plugin("{name: rich, arguments: {rich.n: -1}}"),
        "tiers[0].plugins[0] (rich): rich.n must be >= 0",
    ),
    (
        "same field twice",
        one_plugin("{name: binpack, arguments: {weight: 1, binpack.weight: 2}}"),
        'argument "binpack.weight" sets weight again',
    ),
    (
        "arguments not a mapping",
        one_plugin("{name: binpack, arguments: [1]}"),
        "arguments must be a mapping, got a list",
    ),
    (
        "unknown option",
        one_plugin("{name: gang, enablePremptable: false}"),
        'tiers[0].plugins[0] (gang): unknown option "enablePremptable" '
        '(did you mean "enablePreemptable"?)',
    ),
    (
        "option not bool",
        one_plugin("{name: gang, enableJobReady: 'no'}"),
        'option "enableJobReady" must be true or false, got "no"',
    ),
    (
        "plugin twice",
        "actions: allocate\ntiers:\n- plugins: [{name: gang}]\n- plugins: [{name: gang}]\n",
        'tiers[1].plugins[0]: plugin "gang" is already listed at tiers[0].plugins[0]',
    ),
    ("plugin without name", one_plugin("{enableJobReady: true}"), "must be a mapping with a name"),
    (
        "tier shape",
        "actions: allocate\ntiers:\n- {plugin: []}\n",
        "tiers[0]: must be a mapping with only a plugins list",
    ),
    ("unknown top-level key", "actions: allocate\ntier: []\n", 'unknown top-level key "tier"'),
    (
        "configuration of unknown action",
        "actions: allocate\nconfigurations:\n- name: alocate\n",
        'configurations[0]: unknown action "alocate" (did you mean "allocate"?)',
    ),
    ("not yaml", "actions: [\n", "not valid YAML"),
    (
        "other plugin's prefix",
        one_plugin("{name: plain, arguments: {binpack.weight: 1}}"),
        'tiers[0].plugins[0] (plain): unknown argument "binpack.weight"',
    ),
    ("not a mapping", "- a\n", "config must be a mapping"),
]


@pytest.mark.parametrize(("name", "text", "expected"), BAD, ids=[b[0] for b in BAD])
def test_bad_config_names_the_problem(name: str, text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(text, SPECS)
    assert expected in str(info.value)


def test_all_problems_reported_together() -> None:
    text = (
        'actions: "allocat"\ntiers:\n- plugins:\n  - name: binpak\n  - {name: binpack, '
        "arguments: {binpack.weight: x}}\n"
    )
    with pytest.raises(ConfigError) as info:
        load_config(text, SPECS)
    assert len(info.value.problems) == 3


def test_configurations_are_kept_per_action() -> None:
    text = (
        'actions: "enqueue, allocate"\nconfigurations:\n- name: enqueue\n  arguments:\n'
        "    overcommit-factor: 1.5\n"
    )
    config = load_config(text, SPECS)
    assert config.configurations == {"enqueue": {"overcommit-factor": 1.5}}
    typed = load_config(text, SPECS, action_args={"enqueue": OvercommitArgs})
    assert typed.configurations["enqueue"] == OvercommitArgs(factor=1.5)


def test_unreadable_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config_file(tmp_path / "missing.conf", SPECS)


# ---------------------------------------------------------------- reloading


def write(path: Path, text: str, bump_ns: int) -> None:
    """Write and move mtime forward, so a change is seen even on coarse-mtime filesystems."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text)
    stamp = max(before + bump_ns, path.stat().st_mtime_ns)
    os.utime(path, ns=(stamp, stamp))


@pytest.fixture
def conf(tmp_path: Path) -> Path:
    path = tmp_path / "scheduler.conf"
    write(path, HELM_PROPORTION, 0)
    return path


def test_watcher_reloads_and_keeps_last_good(conf: Path) -> None:
    seen: list[SchedulerConfig] = []
    errors: list[ConfigError] = []
    watcher = ConfigWatcher(conf, SPECS, on_change=seen.append, on_error=errors.append)
    first = watcher.current
    assert watcher.poll() is False  # unchanged

    write(conf, HELM_PROPORTION.replace("enqueue, allocate, backfill", "enqueue, allocate"), 10**9)
    assert watcher.poll() is True
    assert watcher.current.actions == ("enqueue", "allocate")
    assert seen == [watcher.current] and watcher.generation == 2

    good = watcher.current
    write(conf, HELM_PROPORTION.replace("name: binpack", "name: binpak"), 10**9)
    assert watcher.poll() is False
    assert watcher.current is good  # bad edit: last good config stays
    assert watcher.last_error is not None and "binpak" in str(watcher.last_error)
    assert str(conf) in str(errors[0])
    assert watcher.poll() is False and len(errors) == 1  # reported once per change

    write(conf, HELM_PROPORTION, 10**9)
    assert watcher.poll() is True
    assert watcher.current == first and watcher.last_error is None


def test_watcher_survives_file_removal(conf: Path) -> None:
    watcher = ConfigWatcher(conf, SPECS)
    good = watcher.current
    conf.unlink()
    assert watcher.poll() is False
    assert watcher.current is good and "cannot read" in str(watcher.last_error)


def test_watcher_first_load_must_succeed(tmp_path: Path) -> None:
    path = tmp_path / "bad.conf"
    write(path, "actions: nope\n", 0)
    with pytest.raises(ConfigError, match='unknown action "nope"'):
        ConfigWatcher(path, SPECS)


def test_watcher_run_polls_until_stopped(conf: Path) -> None:
    async def scenario() -> tuple[str, ...]:
        changed = asyncio.Event()
        watcher = ConfigWatcher(conf, SPECS, on_change=lambda c: changed.set())
        stop = asyncio.Event()
        task = asyncio.create_task(watcher.run(interval=0.01, stop=stop))
        write(conf, HELM_PROPORTION.replace(", backfill", ""), 10**9)
        await asyncio.wait_for(changed.wait(), timeout=5)
        stop.set()
        await asyncio.wait_for(task, timeout=5)
        return watcher.current.actions

    assert asyncio.run(scenario()) == ("enqueue", "allocate")
