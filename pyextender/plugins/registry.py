"""Every plugin the scheduler can run, by the name used in the tiers config.

Reading this dict tells you everything pyextender can do.
"""

from __future__ import annotations

from pyextender.framework.registry import PluginSpec
from pyextender.plugins import (
    binpack,
    conformance,
    drf,
    gang,
    gpu_share,
    gpu_topology,
    nodeorder,
    overcommit,
    predicates,
    priority,
    proportion,
    sla,
    supernode,
)

REGISTRY: dict[str, PluginSpec] = {
    # job, queue and victim policy (session hooks)
    priority.SPEC.name: priority.SPEC,
    gang.SPEC.name: gang.SPEC,
    conformance.SPEC.name: conformance.SPEC,
    drf.SPEC.name: drf.SPEC,
    proportion.SPEC.name: proportion.SPEC,
    proportion.CAPACITY_SPEC.name: proportion.CAPACITY_SPEC,
    overcommit.SPEC.name: overcommit.SPEC,
    sla.SPEC.name: sla.SPEC,
    # node filters and scores (extender verbs)
    predicates.SPEC.name: predicates.SPEC,
    binpack.SPEC.name: binpack.SPEC,
    nodeorder.SPEC.name: nodeorder.SPEC,
    # GPU placement
    gpu_share.SPEC.name: gpu_share.SPEC,
    gpu_topology.SPEC.name: gpu_topology.SPEC,
    supernode.SPEC.name: supernode.SPEC,
}
