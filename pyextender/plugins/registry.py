"""Every plugin the scheduler can run, by the name used in the tiers config.

Reading this dict tells you everything pyextender can do.
"""

from __future__ import annotations

from pyextender.framework.registry import PluginSpec
from pyextender.plugins import binpack, gpu_share, gpu_topology, nodeorder, predicates, supernode

REGISTRY: dict[str, PluginSpec] = {
    predicates.SPEC.name: predicates.SPEC,
    binpack.SPEC.name: binpack.SPEC,
    nodeorder.SPEC.name: nodeorder.SPEC,
    gpu_share.SPEC.name: gpu_share.SPEC,
    gpu_topology.SPEC.name: gpu_topology.SPEC,
    supernode.SPEC.name: supernode.SPEC,
}
