"""Per-GPU state of every node: how many GPUs, and free milli-GPU on each.

Row i matches ClusterState row i. Whole-GPU pods (``nvidia.com/gpu: k``) take
k GPUs; the indices come from the pod's ``pyextender.io/gpu-index``
annotation when we bound it, otherwise the lowest fully free GPUs.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from pyextender.api.names import GPU_INDEX_ANNOTATION
from pyextender.api.objects import NodeInfo, PodInfo
from pyextender.api.resources import GPU

MAX_GPUS = 16
"""GPUs per node we model (wider nodes are capped)."""

MILLI = 1000
"""milli-GPU in one whole GPU."""


def gpu_indices(pod: PodInfo) -> tuple[int, ...]:
    """GPU indices recorded on a pod at bind, or () when none/invalid."""
    raw = pod.annotations.get(GPU_INDEX_ANNOTATION, "")
    out: list[int] = []
    for part in raw.split(","):
        part = part.strip()
        if not part.isdigit() or int(part) >= MAX_GPUS:
            return ()
        out.append(int(part))
    return tuple(out)


class GpuState:
    """numpy arrays over nodes × GPUs."""

    def __init__(self, capacity: int) -> None:
        self.count: npt.NDArray[np.int32] = np.zeros(capacity, dtype=np.int32)
        # free milli-GPU per GPU; GPUs beyond count are 0
        self.free_milli: npt.NDArray[np.int32] = np.zeros((capacity, MAX_GPUS), dtype=np.int32)
        self.placed: dict[str, tuple[int, tuple[int, ...], int]] = {}

    def grow(self, capacity: int) -> None:
        old = self.count.shape[0]
        if capacity <= old:
            return
        count = np.zeros(capacity, dtype=np.int32)
        count[:old] = self.count
        free = np.zeros((capacity, MAX_GPUS), dtype=np.int32)
        free[:old] = self.free_milli
        self.count, self.free_milli = count, free

    def set_node(self, row: int, node: NodeInfo) -> list[str]:
        n = min(node.allocatable.get(GPU, 0), MAX_GPUS)
        if self.count[row] != n:
            self.count[row] = n
            self.free_milli[row, :] = 0
            self.free_milli[row, :n] = MILLI
            for r, gpus, milli in self.placed.values():
                if r == row:
                    for g in gpus:
                        if g < n:
                            self.free_milli[row, g] -= milli
        return []

    def clear_node(self, row: int) -> None:
        self.count[row] = 0
        self.free_milli[row, :] = 0
        for uid in [u for u, (r, _, _) in self.placed.items() if r == row]:
            del self.placed[uid]

    def add_pod(self, row: int, pod: PodInfo) -> None:
        whole = pod.requests.get(GPU, 0)
        share = pod.gpu_milli
        if whole <= 0 and share <= 0:
            return
        want, milli = (whole, MILLI) if whole > 0 else (1, share)
        gpus = gpu_indices(pod)
        if len(gpus) != want:
            free = self.free_milli[row, : self.count[row]]
            gpus = tuple(int(g) for g in np.flatnonzero(free >= milli)[:want])
        for g in gpus:
            self.free_milli[row, g] -= milli
        self.placed[pod.uid] = (row, gpus, milli)

    def remove_pod(self, row: int, pod: PodInfo) -> None:
        entry = self.placed.pop(pod.uid, None)
        if entry is None:
            return
        r, gpus, milli = entry
        for g in gpus:
            self.free_milli[r, g] += milli
