"""binpack: prefer nodes that are already full, so whole nodes stay free.

score = 100 × Σ_r w_r·(used_r + req_r)/alloc_r / Σ_r w_r over the resources
the pod requests that have a weight (Volcano's binpack formula). The plugin's
own ``weight`` is applied by the profile, as for every plugin.
"""

from __future__ import annotations

import numpy as np

from pyextender.api.resources import CPU, MEMORY, gpu_resources
from pyextender.framework.interfaces import MAX_NODE_SCORE, FloatArray, IntArray, PodContext
from pyextender.framework.plugin_args import arg, arguments
from pyextender.framework.registry import PluginSpec
from pyextender.plugins.usage import utilisation_after


@arguments
class Args:
    weight: float = arg("Weight of the binpack score among all score plugins.", default=1.0)
    cpu: float = arg("Weight of CPU in the binpack formula.", default=1.0)
    memory: float = arg("Weight of memory in the binpack formula.", default=1.0)
    resources: tuple[str, ...] = arg(
        "Extended resources scored (Volcano: comma-separated binpack.resources); "
        "empty: the GPU resources (pyextender serve --gpu-resource).",
        default=(),
    )
    resource_weights: dict[str, float] = arg(
        "Weight per extended resource (binpack.resources.<name>); 1 when not given.",
        default_factory=dict,
        prefix="binpack.resources.",
    )


class Binpack:
    name = "binpack"

    def __init__(self, args: Args) -> None:
        self.args = args
        self.weights = {CPU: args.cpu, MEMORY: args.memory}
        for r in args.resources or gpu_resources():
            self.weights[r] = args.resource_weights.get(r, 1.0)

    def score(self, ctx: PodContext, rows: IntArray) -> FloatArray:
        frac, w = utilisation_after(ctx, rows, self.weights)
        if w.shape[0] == 0:
            return np.zeros(rows.shape[0])
        result: FloatArray = MAX_NODE_SCORE * (frac @ w) / w.sum()
        return result


SPEC = PluginSpec(
    name="binpack",
    args_type=Args,
    factory=Binpack,
    summary="Score nodes higher the fuller they are after placement (per-resource weights).",
)
