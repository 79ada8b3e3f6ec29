"""Task classes: the whole-GPU size mix gpu-topology weighs its loss with."""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np

from pyextender.api.task_classes import MAX_CLASSES, LearnedClasses, TaskClass, select_classes


def test_whole_gpu_sizes_merge_by_gpu_count_and_leave_shares_and_cpu_pods_out() -> None:
    classes = select_classes(
        Counter(
            {
                TaskClass(4000, 1000, 1): 5,
                TaskClass(8000, 1000, 1): 3,  # another CPU size, the same one-GPU pods
                TaskClass(16000, 1000, 4): 2,
                TaskClass(2000, 500, 1): 7,  # a share: not a whole GPU
                TaskClass(1000, 0, 0): 4,  # CPU only
            }
        ),
        coverage=1.0,
    )
    sizes, weights = classes.whole_gpu_sizes()
    assert sizes.tolist() == [1, 4]
    assert weights.tolist() == [8, 2]


def test_whole_gpu_sizes_are_computed_once_per_model() -> None:
    """A model is rebuilt, never changed, so its answer is kept: gpu-topology asks for it
    in filter, score and the GPU choice of every pod."""
    first = select_classes(Counter({TaskClass(4000, 1000, 2): 1}))
    again = first.whole_gpu_sizes()
    assert first.whole_gpu_sizes() is again
    assert again[0].tolist() == [2]
    rebuilt = select_classes(Counter({TaskClass(4000, 1000, 2): 1, TaskClass(4000, 1000, 8): 1}))
    assert rebuilt.whole_gpu_sizes()[0].tolist() == [2, 8]
    # a copy with other classes answers for its own, not from the original's answer
    copy = dataclasses.replace(first, num=np.asarray([4], dtype=np.int64))
    assert copy.whole_gpu_sizes()[0].tolist() == [4]
    assert first.whole_gpu_sizes()[0].tolist() == [2]


def test_an_empty_model_assumes_the_usual_power_of_two_sizes() -> None:
    sizes, weights = select_classes(Counter()).whole_gpu_sizes()
    assert sizes.tolist() == [1, 2, 4, 8]
    assert weights.tolist() == [1, 1, 1, 1]


def test_the_learned_model_keeps_at_most_max_classes_the_most_frequent() -> None:
    """A cluster whose pods ask for many CPU sizes has a class per (CPU, GPU share)
    pair; the FGD kernel's work grows with them, so the learned model is capped."""
    learned = LearnedClasses(rebuild_s=0.0)
    shapes = [TaskClass(1000 + 100 * i, 500, 1) for i in range(3 * MAX_CLASSES)]
    for i, cls in enumerate(shapes):
        for _ in range(1 + i % 5):  # counts 1..5: a quarter of the classes weigh 4 or 5
            learned.observe(cls)
    model = learned.classes()
    assert model.size == MAX_CLASSES
    kept = set(zip(model.cpu.tolist(), model.weight.tolist(), strict=True))
    heaviest = sorted(
        ((c.cpu_milli, 1 + i % 5) for i, c in enumerate(shapes)), key=lambda x: (-x[1], x[0])
    )[:MAX_CLASSES]
    assert kept == set(heaviest)
    # the protocol's measure (the replay's metric, FGD's classes) is never capped
    counts = {c: 1 + i % 5 for i, c in enumerate(shapes)}
    assert select_classes(counts, coverage=1.0).size == len(shapes)


def test_cpu_only_classes_are_counted_as_one() -> None:
    classes = select_classes(
        Counter(
            {
                TaskClass(4000, 0, 0): 5,
                TaskClass(16000, 0, 0): 3,
                TaskClass(2000, 500, 1): 7,
                TaskClass(1000, 0, 0, model_mask=2): 1,
            }
        ),
        coverage=1.0,
    )
    assert sorted(zip(classes.num.tolist(), classes.weight.tolist(), strict=True)) == [
        (0, 9),
        (1, 7),
    ]
    # the cut is still taken over the classes as seen: 95 % of 20 pods is 19, so
    # the 1-pod CPU-only class is left out and the other two make one class of 8
    cut = select_classes(
        Counter({TaskClass(2000, 500, 1): 11, TaskClass(4000, 0, 0): 5,
                 TaskClass(16000, 0, 0): 3, TaskClass(1000, 0, 0): 1})
    )  # fmt: skip
    assert sorted(zip(cut.num.tolist(), cut.weight.tolist(), strict=True)) == [(0, 8), (1, 11)]
