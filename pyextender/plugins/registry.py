"""Every plugin the scheduler can run, by the name used in the tiers config.

Reading this dict tells you everything pyextender can do.
"""

from __future__ import annotations

from pyextender.framework.registry import PluginSpec
from pyextender.plugins import binpack, nodeorder, predicates

REGISTRY: dict[str, PluginSpec] = {
    predicates.SPEC.name: predicates.SPEC,
    binpack.SPEC.name: binpack.SPEC,
    nodeorder.SPEC.name: nodeorder.SPEC,
}
