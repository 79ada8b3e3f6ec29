"""Task classes: the whole-GPU size mix gpu-topology weighs its loss with."""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np

from pyextender.api.task_classes import TaskClass, select_classes


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
