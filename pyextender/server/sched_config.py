"""The sidecar's scheduler configuration: the built-in default, or a file.

Validation (unknown plugin, unknown key, wrong type) is done by
``pyextender.framework.config`` against the plugin registry.
"""

from __future__ import annotations

from typing import Any

from pyextender.framework.config import SchedulerConfig, load_config, load_config_file
from pyextender.framework.registry import PluginSpec
from pyextender.plugins.registry import REGISTRY

DEFAULT_CONFIG = """
actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
  - name: sla
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: binpack
    arguments:
      # GPU batch work: pack nodes so whole nodes stay free for large jobs
      binpack.weight: 3
  - name: nodeorder
    arguments:
      nodeorder.weight: 1
      leastrequested.weight: 0
      balancedresource.weight: 1
  # GPU placement: fewest NVLink domains and least fragmentation (FGD), gangs
  # packed into supernodes
  - name: gpu-share
    arguments:
      weight: 4
  - name: gpu-topology
    arguments:
      weight: 4
  - name: supernode
    arguments:
      weight: 10
"""


def load(path: str | None) -> SchedulerConfig:
    """The config in ``path``, or the default. Raises ConfigError naming every problem."""
    if path is None:
        return load_config(DEFAULT_CONFIG, REGISTRY)
    return load_config_file(path, REGISTRY)


def plugins_of(config: SchedulerConfig) -> list[tuple[PluginSpec, Any]]:
    """(spec, typed args) for every configured plugin, in tier order."""
    return [(REGISTRY[p.name], p.args) for tier in config.tiers for p in tier.plugins]
