"""Volcano's Helm-chart scheduler config loads against our real plugin registry."""

from __future__ import annotations

import pytest

from pyextender.framework.config import load_config
from pyextender.framework.runtime import build_profile
from pyextender.plugins.defaults import plugins_of
from pyextender.plugins.registry import REGISTRY

HELM_DEFAULT = """
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
  - name: {queue_plugin}
  - name: nodeorder
  - name: binpack
"""


@pytest.mark.parametrize("queue_plugin", ["proportion", "capacity"])
def test_volcano_helm_default_loads_and_builds(queue_plugin: str) -> None:
    config = load_config(HELM_DEFAULT.format(queue_plugin=queue_plugin), REGISTRY)
    assert config.actions == ("enqueue", "allocate", "backfill")
    names = config.plugin_names
    assert names[:3] == ("priority", "gang", "conformance") and queue_plugin in names
    gang = config.plugin("gang")
    assert gang is not None and not gang.enabled("enablePreemptable")
    profile = build_profile(plugins_of(config), lambda *a: None)
    assert {p.name for p in profile.filters} == {"predicates"}
    assert {p.name for p, _ in profile.scorers} == {"nodeorder", "binpack"}
