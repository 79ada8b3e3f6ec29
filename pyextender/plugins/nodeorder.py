"""nodeorder: least-allocated, most-allocated and balanced-allocation scores.

Node affinity, pod affinity, taints and image locality are scored by
kube-scheduler's own plugins, so they are not repeated here; a non-zero Volcano
weight for one of them is refused at config load, naming the kube-scheduler
plugin whose weight to set instead. (Extender mode's filter picks no node for a
pod with soft preferences, or while a feasible node has a PreferNoSchedule taint
the pod does not tolerate, so that this scoring happens.)

least:    100 × Σ w_r·(1 − u_r) / Σ w_r
most:     100 × Σ w_r·u_r / Σ w_r
balanced: 100 × (1 − std(u_r))       (u_r: fraction used after placement)
"""

from __future__ import annotations

import numpy as np

from pyextender.api.resources import CPU, MEMORY, gpu_resources
from pyextender.framework.interfaces import MAX_NODE_SCORE, FloatArray, IntArray, PodContext
from pyextender.framework.plugin_args import arg, arguments
from pyextender.framework.registry import PluginSpec
from pyextender.plugins.usage import utilisation_after

KUBE_SCHEDULER_SCORES = {
    "nodeaffinity.weight": "NodeAffinity",
    "podaffinity.weight": "InterPodAffinity",
    "tainttoleration.weight": "TaintToleration",
    "imagelocality.weight": "ImageLocality",
}
"""Volcano's nodeorder weights for scores kube-scheduler computes itself: only 0 loads."""


@arguments
class Args:
    weight: float = arg("Weight of the nodeorder score among all score plugins.", default=1.0)
    leastrequested_weight: float = arg("Weight of the least-allocated part.", default=1.0)
    mostrequested_weight: float = arg("Weight of the most-allocated part.", default=0.0)
    balancedresource_weight: float = arg("Weight of the balanced-allocation part.", default=1.0)
    nodeaffinity_weight: float = arg(
        "Must be 0: kube-scheduler's NodeAffinity plugin scores node affinity.", default=0.0
    )
    podaffinity_weight: float = arg(
        "Must be 0: kube-scheduler's InterPodAffinity plugin scores pod affinity.", default=0.0
    )
    tainttoleration_weight: float = arg(
        "Must be 0: kube-scheduler's TaintToleration plugin scores taints.", default=0.0
    )
    imagelocality_weight: float = arg(
        "Must be 0: kube-scheduler's ImageLocality plugin scores image locality.", default=0.0
    )

    def __post_init__(self) -> None:
        # Volcano scores these itself; here kube-scheduler does, before it calls us, with
        # the weights of its own profile. A weight set here would silently do nothing.
        for key, plugin in KUBE_SCHEDULER_SCORES.items():
            value = getattr(self, key.replace(".", "_"))
            if value:
                raise ValueError(
                    f"{key} {value:g}: kube-scheduler scores this itself (its {plugin} "
                    f"plugin); set that plugin's weight in the kube-scheduler profile "
                    f"(KubeSchedulerConfiguration plugins.score) and remove {key} here"
                )


class NodeOrder:
    name = "nodeorder"

    def __init__(self, args: Args) -> None:
        self.args = args
        # cpu, memory and every GPU resource, equally weighted
        self.resources = {CPU: 1.0, MEMORY: 1.0, **dict.fromkeys(gpu_resources(), 1.0)}

    def score(self, ctx: PodContext, rows: IntArray) -> FloatArray:
        a = self.args
        frac, w = utilisation_after(ctx, rows, self.resources)
        n = rows.shape[0]
        total_w = a.leastrequested_weight + a.mostrequested_weight + a.balancedresource_weight
        if w.shape[0] == 0 or total_w <= 0:
            return np.zeros(n)
        mean_used = (frac @ w) / w.sum()
        balanced = 1.0 - frac.std(axis=1) if frac.shape[1] > 1 else np.ones(n)
        mix = (
            a.leastrequested_weight * (1.0 - mean_used)
            + a.mostrequested_weight * mean_used
            + a.balancedresource_weight * balanced
        )
        result: FloatArray = MAX_NODE_SCORE * mix / total_w
        return result


SPEC = PluginSpec(
    name="nodeorder",
    args_type=Args,
    factory=NodeOrder,
    summary="Least-allocated, most-allocated and balanced-allocation node scores.",
)
