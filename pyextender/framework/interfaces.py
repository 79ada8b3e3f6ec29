"""One Protocol per extension point. Plugins work on arrays of node rows.

Every call gets a PodContext (the pod, the cluster state, the pod's request
vector and a scratch dict shared by all plugins in this pod's cycle) and the
candidate rows as an int64 array. Results are arrays aligned with the rows,
so a cycle over 5,000 nodes costs a few numpy operations, not 5,000 calls.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from pyextender.api.objects import PodInfo
from pyextender.cache.batch import GroupView
from pyextender.cache.state import ClusterState

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
CodeArray = npt.NDArray[np.int8]

MAX_NODE_SCORE = 100.0
"""Plugin scores are in [0, MAX_NODE_SCORE], as in kube-scheduler."""


@dataclass(slots=True)
class PodContext:
    """Everything a plugin may read about the pod being scheduled."""

    pod: PodInfo
    state: ClusterState
    request: IntArray
    scratch: dict[str, object] = field(default_factory=dict)
    group: GroupView | None = None
    """The pod's PodGroup, when it has one the cache knows."""


@dataclass(slots=True)
class FilterResult:
    """Per-candidate verdicts.

    ``codes[i]`` is a Code value (SUCCESS, UNSCHEDULABLE, UNRESOLVABLE) for row
    ``rows[i]``; ``reason_ids[i]`` indexes ``reasons`` for failed rows.
    """

    codes: CodeArray
    reason_ids: npt.NDArray[np.int32]
    reasons: list[str]

    @staticmethod
    def all_pass(n: int) -> FilterResult:
        return FilterResult(np.zeros(n, dtype=np.int8), np.zeros(n, dtype=np.int32), [""])


@runtime_checkable
class Plugin(Protocol):
    """Every plugin has a registry name."""

    name: str


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    """Which candidate nodes can run the pod, and why the others cannot."""

    def filter(self, ctx: PodContext, rows: IntArray) -> FilterResult: ...


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    """How good each feasible node is: float64 scores in [0, MAX_NODE_SCORE]."""

    def score(self, ctx: PodContext, rows: IntArray) -> FloatArray: ...
