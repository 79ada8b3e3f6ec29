"""nodeorder's weights for what kube-scheduler scores itself load only as 0."""

from __future__ import annotations

import pytest

from pyextender.framework.config import ConfigError, load_config
from pyextender.plugins.nodeorder import KUBE_SCHEDULER_SCORES
from pyextender.plugins.registry import REGISTRY


def _config(arguments: str) -> str:
    return f"""
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: gang
  - name: nodeorder
    arguments: {arguments}
"""


@pytest.mark.parametrize(("key", "plugin"), sorted(KUBE_SCHEDULER_SCORES.items()))
def test_a_weight_kube_scheduler_owns_is_refused_naming_its_plugin(key: str, plugin: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(_config(f"{{{key}: 2, leastrequested.weight: 1}}"), REGISTRY)
    (problem,) = info.value.problems
    assert problem.startswith(f"tiers[0].plugins[1] (nodeorder): {key} 2: "), problem
    assert f"its {plugin} plugin" in problem, problem


def test_zero_weights_and_our_own_weights_load() -> None:
    text = _config("{nodeaffinity.weight: 0, leastrequested.weight: 2, balancedresource.weight: 1}")
    assert load_config(text, REGISTRY).actions
