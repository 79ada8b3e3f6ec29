"""Names Volcano's scheduler config may use that pyextender does not run.

A config written for Volcano (its Helm chart's ``volcano-scheduler.conf``, the
CI variants, the user guides) lists actions, plugins, switches and arguments
of Volcano's own scheduler. Where one of ours does the same thing the name is
mapped (``ACTION_MAP``; plugin aliases live on the plugin's ``PluginSpec``);
the rest is accepted and ignored with a warning that says why, instead of
failing the whole file. A name that is *close* to one of ours or to one of
these is still an error (a typo must not silently switch a feature off).

Facts from Volcano's source (``pkg/scheduler/actions/factory.go``,
``pkg/scheduler/plugins/factory.go`` and each plugin's ``PluginName`` and
argument key constants, design docs for ``group-topology-affinity``,
``pkg/scheduler/conf/scheduler_conf.go``), v1.10 to master; the reasons are ours.
"""

from __future__ import annotations

from collections.abc import Mapping

ACTION_MAP: Mapping[str, tuple[str, str]] = {
    "reserve": (
        "reservation",
        "Volcano's reserve action holds nodes for a starving target job; ours does the "
        "same for the gang waiting past its sla-waiting-time",
    ),
}
"""Volcano action -> (our action, how the meaning maps)."""

ACTIONS_IGNORED: Mapping[str, str] = {
    "shuffle": "evicts running pods for the rescheduling plugin's strategies; not implemented",
    "elect": "elects the reservation target job; our reservation action picks it itself",
    "gangpreempt": "Volcano's alpha gang-aware preempt; list preempt for ours",
    "gangreclaim": "Volcano's alpha gang-aware reclaim; list reclaim for ours",
}
"""Volcano actions that do nothing here."""

PLUGINS_IGNORED: Mapping[str, str] = {
    "network-topology-aware": (
        "HyperNode scoring is not implemented; the supernode plugin keeps GPU gangs "
        "within a PodGroup's networkTopology tier"
    ),
    "resource-strategy-fit": "per-resource scoring strategies are not implemented",
    "capacity-card": "card-based queue capacity is not implemented; use capacity or proportion",
    "extender": "calls an HTTP extender from Volcano's scheduler; pyextender is the extender",
    "pdb": "PodDisruptionBudgets are honoured by the Eviction API our evictions go through",
    "rescheduling": "runs only with the shuffle action, which is not implemented",
    "deviceshare": "vGPU/GPU-share device plugins are not implemented; see gpu-share",
    "numa-aware": "NUMA topology (Numatopology CRD) is not implemented",
    "cdp": "cooldown protection for elastic pods is not implemented",
    "tdm": "time-division multiplexing of revocable nodes is not implemented",
    "task-topology": "task affinity within a job is not implemented",
    "usage": "scheduling by measured node load (Prometheus) is not implemented",
    "resourcequota": "kube-apiserver enforces ResourceQuota when the pods are created",
    "nodegroup": "queue-to-node-group affinity is not implemented",
    "reservation": "elects the target job of Volcano's reserve action; ours needs no election",
    "group-topology-affinity": "HyperNode affinity between PodGroups is not implemented",
}
"""Volcano plugins without a counterpart here: accepted, not run."""

OPTIONS_IGNORED: Mapping[str, str] = {
    "enablePreemptive": "not consulted by our actions",
    "enabledOverused": "not consulted by our actions",
    "enabledAllocatable": "not consulted by our actions",
    "enabledHyperNodeOrder": "HyperNode scoring is not implemented",
    "enabledHyperNodeGradient": "HyperNode scoring is not implemented",
    "enabledSubJobReady": "sub-jobs are not implemented",
    "enabledSubJobPipelined": "sub-jobs are not implemented",
    "enabledSubJobOrder": "sub-jobs are not implemented",
}
"""Volcano's per-plugin switches that nothing here reads."""

TOP_KEYS_IGNORED: Mapping[str, str] = {
    "metrics": "the usage plugin's metrics source; the usage plugin is not implemented",
}
"""Top-level keys of Volcano's config besides actions, tiers and configurations."""

_KUBE_FILTER = "kube-scheduler runs this filter itself, before it calls us"
_KUBE_SCORE = "kube-scheduler scores this itself; weight its plugin in the scheduler profile"

ARGUMENTS_IGNORED: Mapping[str, Mapping[str, str]] = {
    "predicates": {
        "predicate.NodeAffinityEnable": _KUBE_FILTER,
        "predicate.NodePortsEnable": _KUBE_FILTER,
        "predicate.TaintTolerationEnable": _KUBE_FILTER,
        "predicate.PodAffinityEnable": _KUBE_FILTER,
        "predicate.NodeVolumeLimitsEnable": _KUBE_FILTER,
        "predicate.VolumeZoneEnable": _KUBE_FILTER,
        "predicate.PodTopologySpreadEnable": _KUBE_FILTER,
        "predicate.VolumeBindingEnable": _KUBE_FILTER,
        "predicate.DynamicResourceAllocationEnable": _KUBE_FILTER,
        "predicate.CacheEnable": "a cache of Volcano's own predicate results",
        "predicate.ProportionalEnable": "proportional CPU/memory per GPU is not implemented",
        "predicate.resources": "proportional CPU/memory per GPU is not implemented",
        "predicate.resources.": "proportional CPU/memory per GPU is not implemented",
        "predicate.GPUSharingEnable": "GPU sharing is scored by the gpu-share plugin",
        "predicate.GPUNumberEnable": "whole GPUs are checked by predicates in any case",
    },
    "nodeorder": {
        "podtopologyspread.weight": _KUBE_SCORE,
        "volumebinding.weight": _KUBE_SCORE,
    },
}
"""Per plugin: Volcano argument keys ours does not use (a key ending in "." is a prefix)."""


ACTION_ARGUMENTS_IGNORED: Mapping[str, Mapping[str, str]] = {
    "enqueue": {
        "enqueue-action-idleres-mul": (
            "the idle-resource multiplier of Volcano's older enqueue; the overcommit "
            "plugin's overcommit-factor is ours"
        ),
    },
}
"""Per action (``configurations``): Volcano argument keys ours does not use."""


def ignored_argument(
    plugin: str, key: str, tables: Mapping[str, Mapping[str, str]] = ARGUMENTS_IGNORED
) -> str | None:
    """Why ``key`` of Volcano's ``plugin`` (or action, with ``ACTION_ARGUMENTS_IGNORED``)
    is ignored here, or None when it is not one."""
    table = tables.get(plugin, {})
    if key in table:
        return table[key]
    for prefix, why in table.items():
        if prefix.endswith(".") and key.startswith(prefix) and len(key) > len(prefix):
            return why
    return None
