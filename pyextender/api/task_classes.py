"""The task classes a cluster sees: the workload that fragmentation is measured against.

FGD (Weng et al., USENIX ATC'23) measures a node's fragmentation as the GPU
milli that the *typical* tasks could not use. A class is (cpu milli, milli-GPU
per GPU, GPU count, accepted GPU models); its weight is how often it occurs.
Weights are integers (pod counts) so that every kernel and reference sums
them in exact integer arithmetic and returns bit-identical results.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]

COVERAGE = 0.95
"""Keep the most frequent classes until they cover this share of pods (FGD's choice)."""


@dataclass(frozen=True, slots=True)
class TaskClass:
    """One kind of task. ``model_mask`` has bit i set per accepted model id; 0 = any."""

    cpu_milli: int
    gpu_milli: int
    num_gpu: int
    model_mask: int = 0


def by_frequency(counts: Mapping[TaskClass, int]) -> list[TaskClass]:
    """The classes, most frequent first; ties by GPU count, milli and CPU, then as given
    (a stable sort), so that every selection and model is the same for the same counts."""
    return sorted(counts, key=lambda c: (-counts[c], c.num_gpu, c.gpu_milli, c.cpu_milli))


@dataclass(frozen=True, slots=True)
class TaskClasses:
    """Classes as parallel int64 arrays, ready for the kernels."""

    cpu: I64
    milli: I64
    num: I64
    model_mask: I64
    weight: I64
    _whole: list[tuple[I64, I64]] = field(
        default_factory=list, init=False, compare=False, repr=False
    )
    """whole_gpu_sizes' answer, once computed: a model is rebuilt, never changed, and
    gpu-topology asks for it two or three times per pod (filter, score, GPU choice).
    Not an init field, so ``dataclasses.replace`` starts a copy with its own."""

    @property
    def size(self) -> int:
        return int(self.cpu.shape[0])

    @property
    def weight_sum(self) -> int:
        return int(self.weight.sum())

    @staticmethod
    def build(counts: Mapping[TaskClass, int]) -> TaskClasses:
        """Arrays from class -> count, most frequent first (ties by class for determinism)."""
        items = [(c, counts[c]) for c in by_frequency(counts)]

        def col(get: Iterable[int]) -> I64:
            return np.fromiter(get, dtype=np.int64, count=len(items))

        return TaskClasses(
            cpu=col(c.cpu_milli for c, _ in items),
            milli=col(c.gpu_milli for c, _ in items),
            num=col(c.num_gpu for c, _ in items),
            model_mask=col(c.model_mask for c, _ in items),
            weight=col(n for _, n in items),
        )

    def whole_gpu_sizes(self) -> tuple[I64, I64]:
        """(sizes, weights) of whole-GPU classes, merged by GPU count; for topology loss.
        The arrays are shared between callers: read them, never write them."""
        if not self._whole:
            self._whole.append(self._merge_whole_gpu_sizes())
        return self._whole[0]

    def _merge_whole_gpu_sizes(self) -> tuple[I64, I64]:
        merged: Counter[int] = Counter()
        for milli, num, weight in zip(
            self.milli.tolist(), self.num.tolist(), self.weight.tolist(), strict=True
        ):
            if num > 0 and milli >= 1000:
                merged[num] += weight
        if not merged:
            # nothing seen yet: the usual power-of-two job sizes, equally likely
            merged = Counter({1: 1, 2: 1, 4: 1, 8: 1})
        sizes = sorted(merged)
        return (
            np.asarray(sizes, dtype=np.int64),
            np.asarray([merged[s] for s in sizes], dtype=np.int64),
        )


CPU_ONLY = TaskClass(0, 0, 0)
"""The one class every CPU-only class becomes once selected: a task without GPUs can
use no free GPU milli, whatever its CPU, so each such class counts a node's whole free
GPU milli as fragmented (FGD's F_n(m)) and they differ only in weight."""

MAX_CLASSES = 64
"""The learned model keeps at most this many classes, the most frequent first. The
FGD kernel's work per row grows with the classes (bench/gpu_share_calls.py
--classes): at 10,000 nodes a model of 300 classes took 33 ms to fill emptied caches
and 12 ms for each new pod shape, where 10 classes take about 1.2 and 0.5 ms. A
cluster whose pods ask for many CPU sizes would reach that many: every (CPU, GPU
share) pair is a class."""


def select_classes(
    counts: Mapping[TaskClass, int], coverage: float = COVERAGE, limit: int | None = None
) -> TaskClasses:
    """The most frequent classes covering ``coverage`` of all pods, with their counts;
    the CPU-only ones among them as one class (``CPU_ONLY``: the same measure, fewer
    classes); then at most ``limit`` classes, the most frequent first."""
    total = sum(counts.values())
    kept: dict[TaskClass, int] = {}
    covered = 0
    for cls in by_frequency(counts):
        if total and covered >= coverage * total:
            break
        n = counts[cls]
        covered += n
        if cls.num_gpu <= 0:  # as the kernels read a class: no GPUs, nothing fits
            cls = CPU_ONLY
        kept[cls] = kept.get(cls, 0) + n
    if limit is not None and len(kept) > limit:
        kept = {c: kept[c] for c in by_frequency(kept)[:limit]}
    return TaskClasses.build(kept)


REBUILD_GROWTH = 0.01
"""The learned model is rebuilt once the pods seen have grown by this fraction since
the last build (and by at least one pod): often while the sample is small and the
model still moves, rarely once it has settled."""


class LearnedClasses:
    """Task classes learned online from the pods the cache sees.

    Counts are halved when their total passes ``horizon`` so that the model
    follows a changing workload. ``classes()`` is rebuilt after changes once the
    pods seen have grown by ``growth`` since the last build, or once ``rebuild_s``
    seconds have passed: a settled workload's size mix moves slowly, and a stable
    model lets scorers reuse per-node results between pods instead of starting
    over after every bind; a young one (a sidecar started on an empty cluster)
    must not place its first minutes of pods with the model of its first pod.
    The trace replay rebuilds on growth alone (``rebuild_s`` infinite), so that
    it does not depend on the machine's speed.
    """

    def __init__(
        self, horizon: int = 20_000, rebuild_s: float = 10.0, growth: float = REBUILD_GROWTH
    ) -> None:
        self.horizon = horizon
        self.rebuild_s = rebuild_s
        self.growth = growth
        self.counts: Counter[TaskClass] = Counter()
        self.version = 0
        self._built: TaskClasses | None = None
        self._built_at = 0.0
        self._built_version = 0
        self._stale = False

    def observe(self, cls: TaskClass) -> None:
        self.counts[cls] += 1
        if self.counts.total() > self.horizon:
            self.counts = Counter({c: n // 2 for c, n in self.counts.items() if n // 2})
        self.version += 1
        self._stale = True

    def classes(self) -> TaskClasses:
        if self._built is None or (self._stale and self._due()):
            self._built = select_classes(self.counts, limit=MAX_CLASSES)
            self._built_at, self._built_version = time.monotonic(), self.version
            self._stale = False
        return self._built

    @property
    def kept(self) -> int:
        """Classes of the model as last built (0 before the first build)."""
        return 0 if self._built is None else self._built.size

    def _due(self) -> bool:
        if self.version >= self._built_version * (1.0 + self.growth) + 1:
            return True
        return time.monotonic() - self._built_at >= self.rebuild_s
