"""binpack: prefer nodes that are already full, so whole nodes stay free.

score = 100 × Σ_r w_r·(used_r + req_r)/alloc_r / Σ_r w_r over the resources
the pod requests that have a weight (Volcano's binpack formula). The plugin's
own ``weight`` is applied by the profile, as for every plugin.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pyextender.api.resources import CPU, GPU, MEMORY
from pyextender.framework.interfaces import MAX_NODE_SCORE, FloatArray, IntArray, PodContext
from pyextender.framework.registry import PluginSpec
from pyextender.plugins.usage import utilisation_after


@dataclass(frozen=True, slots=True)
class Args:
    weight: float = 1.0
    """Weight of the binpack score among all score plugins."""
    cpu: float = 1.0
    """Weight of CPU in the binpack formula."""
    memory: float = 1.0
    """Weight of memory in the binpack formula."""
    resources: dict[str, float] = field(default_factory=lambda: {GPU: 1.0})
    """Weights of extended resources, e.g. {"nvidia.com/gpu": 2}."""


class Binpack:
    name = "binpack"

    def __init__(self, args: Args) -> None:
        self.args = args
        self.weights = {CPU: args.cpu, MEMORY: args.memory, **args.resources}

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
