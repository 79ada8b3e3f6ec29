"""Volcano's shipped scheduler configs load: names we do not run are warnings, typos errors.

Volcano's facts read: ``pkg/scheduler/util.go`` (UnmarshalSchedulerConf: an
unknown action fails the config), ``pkg/scheduler/framework/framework.go``
(OpenSession: a plugin without a builder is logged and skipped),
``pkg/scheduler/conf/scheduler_conf.go`` (top-level ``metrics``, the plugin
switches), ``pkg/scheduler/plugins/predicates/predicates.go`` (the
``predicate.*Enable`` argument keys).
"""

from __future__ import annotations

import argparse
import io

import pytest

from pyextender.framework.config import ConfigError, load_config
from pyextender.framework.plugin_args import arg, arguments
from pyextender.plugins.defaults import load
from pyextender.plugins.registry import REGISTRY
from pyextender.server import validate_cli
from tests.fixtures.volcano_configs import FOLDER, IGNORED


def test_the_fixture_table_lists_every_file() -> None:
    assert sorted(p.name for p in FOLDER.glob("*.conf")) == sorted(IGNORED)


@pytest.mark.parametrize("name", sorted(IGNORED))
def test_each_shipped_config_loads_and_names_what_it_ignores(name: str) -> None:
    config = load(str(FOLDER / name))
    assert {(w.kind, w.name) for w in config.ignored} == IGNORED[name]
    assert "gang" in config.plugin_names and "allocate" in config.actions


def test_mapped_and_ignored_names() -> None:
    config = load(str(FOLDER / "chart-volcano-scheduler-reserve.conf"))
    # Volcano's reserve action is our reservation action, in the same place
    assert config.actions == ("enqueue", "reservation", "allocate", "backfill")
    (note,) = [w for w in config.warnings if w.mapped_to]
    assert (note.kind, note.name, note.mapped_to) == ("action", "reserve", "reservation")
    config = load(str(FOLDER / "docs-rescheduling.conf"))
    assert config.actions == ("enqueue", "allocate", "backfill")
    assert config.plugin("rescheduling") is None


def test_actions_written_as_a_list_keep_their_arguments() -> None:
    text = (FOLDER / "chart-volcano-scheduler-ci-action-list.conf").read_text()
    config = load_config(text, REGISTRY)  # no typed action arguments: kept as written
    assert config.actions == ("enqueue", "allocate", "backfill", "reclaim", "preempt")
    assert config.configurations["enqueue"] == {"enqueue-action-idleres-mul": 1.2}


@arguments
class EnqueueLike:
    overcommit_factor: float = arg("", default=1.0, aliases=("overcommit-factor",))


def test_typed_action_arguments_ignore_volcanos_and_refuse_typos() -> None:
    text = (FOLDER / "chart-volcano-scheduler-ci-action-list.conf").read_text()
    config = load_config(text, REGISTRY, action_args={"enqueue": EnqueueLike})
    assert config.configurations["enqueue"] == EnqueueLike()
    assert [(w.kind, w.name) for w in config.ignored] == [
        ("argument", "enqueue-action-idleres-mul")
    ]
    typo = text.replace("idleres-mul", "idleres-mull")
    with pytest.raises(ConfigError, match='did you mean "enqueue-action-idleres-mul"'):
        load_config(typo, REGISTRY, action_args={"enqueue": EnqueueLike})


TYPOS = [
    (
        "plugin close to Volcano's",
        "  - name: network-topology-awar\n",
        'unknown plugin "network-topology-awar" (did you mean "network-topology-aware"?)',
    ),
    (
        "plugin close to ours",
        "  - name: proportoin\n",
        'unknown plugin "proportoin" (did you mean "proportion"?)',
    ),
    (
        "argument close to Volcano's",
        "  - {name: predicates, arguments: {predicate.DynamicResourceAllocationEnabl: true}}\n",
        'unknown argument "predicate.DynamicResourceAllocationEnabl" '
        '(did you mean "predicate.DynamicResourceAllocationEnable"?)',
    ),
    (
        "argument close to ours",
        "  - {name: binpack, arguments: {binpack.wieght: 2}}\n",
        'unknown argument "binpack.wieght" (did you mean "binpack.weight"?)',
    ),
    (
        "switch close to Volcano's",
        "  - {name: gang, enabledHyperNodeOrdr: true}\n",
        'unknown option "enabledHyperNodeOrdr" (did you mean "enabledHyperNodeOrder"?)',
    ),
]


@pytest.mark.parametrize(("what", "plugin", "expected"), TYPOS, ids=[t[0] for t in TYPOS])
def test_a_name_close_to_a_known_one_is_still_an_error(
    what: str, plugin: str, expected: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(f"actions: allocate\ntiers:\n- plugins:\n{plugin}", REGISTRY)
    assert expected in str(info.value)


def test_unknown_actions_and_top_level_typos_stay_errors() -> None:
    with pytest.raises(ConfigError, match=r'unknown action "shufle" \(did you mean "shuffle"'):
        load_config('actions: "allocate, shufle"\n', REGISTRY)
    # an action Volcano does not have either fails the config, as in Volcano
    with pytest.raises(ConfigError, match='unknown action "teleport"'):
        load_config('actions: "allocate, teleport"\n', REGISTRY)
    with pytest.raises(ConfigError, match=r'top-level key "metric" \(did you mean "metrics"'):
        load_config("actions: allocate\nmetric: {}\n", REGISTRY)


def test_names_far_from_any_known_one_are_ignored_with_a_warning() -> None:
    config = load_config(
        "actions: allocate\ntiers:\n- plugins:\n  - name: my-vendor-scorer\n"
        "  - {name: gang, arguments: {vendor.knob: 3}, someSwitch: true}\n",
        REGISTRY,
    )
    assert config.plugin_names == ("gang",)
    assert {(w.kind, w.name) for w in config.ignored} == {
        ("plugin", "my-vendor-scorer"),
        ("argument", "vendor.knob"),
        ("option", "someSwitch"),
    }


def run_validate(path: str, strict: bool = False) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = validate_cli.run(argparse.Namespace(file=path, strict=strict), out, err)
    return code, out.getvalue(), err.getvalue()


def test_validate_config_prints_each_ignored_name() -> None:
    path = str(FOLDER / "chart-volcano-scheduler-capacity-card-ci.conf")
    code, out, err = run_validate(path)
    assert code == 0 and err == ""
    lines = [line.strip() for line in out.splitlines() if "warning:" in line]
    assert len(lines) == 3, out
    assert any('plugin "network-topology-aware" ignored' in line for line in lines)
    assert any('"predicate.DynamicResourceAllocationEnable" ignored' in line for line in lines)
    assert out.rstrip().endswith("3 names ignored")
    assert run_validate(path, strict=True)[0] == 1
    assert run_validate(str(FOLDER / "chart-volcano-scheduler.conf"), strict=True)[0] == 0
