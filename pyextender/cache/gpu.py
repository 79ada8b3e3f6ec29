"""Per-GPU state of every node as numpy arrays (row i matches ClusterState row i).

What a node has comes from the ``pyextender.io/gpu-topology`` annotation
(pyextender.api.gpu), or, without it, from the allocatable of the configured GPU
resources (``nvidia.com/gpu`` by default; pyextender.api.resources) and
the GPU feature discovery labels (one flat domain). A bad annotation never
raises: that node's GPUs become unusable and ``set_node`` returns a warning.

Pods take GPUs at the indices in their ``pyextender.io/gpu-index`` annotation
(written at bind); without it, whole-GPU pods take the lowest fully free GPUs
and sharing pods the best-fitting GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from pyextender.api import names
from pyextender.api.gpu import (
    MILLI,
    GpuTopology,
    GpuTopologyError,
    flat_topology,
    gpu_demand,
    parse_gpu_topology,
)
from pyextender.api.objects import NodeInfo, PodInfo
from pyextender.api.resources import CPU, gpu_count, gpu_resource_in
from pyextender.api.task_classes import LearnedClasses, TaskClass, TaskClasses
from pyextender.cache.reading_copy import SharedUntilWritten

MAX_GPUS = 16
"""GPUs per node we model (wider nodes are capped)."""

MAX_TIERS = 4
"""Supernode tiers we model; column t holds the tier-(t+1) domain id, -1 = none."""

MASK_BITS = 62
"""GPU model ids a TaskClass.model_mask can name (an int64; the kernel shifts by the id)."""

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]


def gpu_indices(pod: PodInfo) -> tuple[int, ...]:
    """GPU indices recorded on a pod at bind, or () when none/invalid."""
    raw = pod.annotations.get(names.GPU_INDEX_ANNOTATION, "")
    out: list[int] = []
    for part in raw.split(","):
        part = part.strip()
        if not part.isdigit() or int(part) >= MAX_GPUS:
            return ()
        out.append(int(part))
    return tuple(out)


def _label_int(node: NodeInfo, key: str) -> int:
    raw = node.labels.get(key, "")
    return int(raw) if raw.isdigit() else 0


class GpuState(SharedUntilWritten):
    """numpy arrays over nodes × GPUs, plus interned names (models, layouts, supernodes)."""

    SHARED = (
        "count", "usable", "model", "memory_mib", "nvlink", "pcie", "numa", "layout",
        "tiers", "layout_count", "layout_domain", "models", "_model_ids", "layouts",
        "_layout_ids", "supernodes", "_supernode_ids", "_topology", "_hypernode_rows",
    )  # fmt: skip
    """What only node and HyperNode events change (set_node, set_tiers, clear_node):
    a snapshot shares it until one side writes (see reading_copy)."""
    PER_POD = ("placed", "_pod_gpus", "_row_pods")
    """Which GPUs each pod holds: the bind path's bookkeeping, never read by the cycle,
    so left out of snapshots."""

    def __init__(self, capacity: int) -> None:
        cap = max(capacity, 1)
        self.count: I32 = np.zeros(cap, dtype=np.int32)
        self.usable = np.zeros(cap, dtype=np.bool_)
        # free milli-GPU per GPU (0 beyond count and on unusable nodes)
        self.free_milli: I32 = np.zeros((cap, MAX_GPUS), dtype=np.int32)
        # milli-GPU taken by pods, per GPU (may exceed MILLI for pods bound by others)
        self.used_milli: I32 = np.zeros((cap, MAX_GPUS), dtype=np.int32)
        self.free_mask: I64 = np.zeros(cap, dtype=np.int64)
        """bit j set when GPU j is wholly free"""
        self.model: I32 = np.full(cap, -1, dtype=np.int32)
        self.memory_mib: I32 = np.zeros(cap, dtype=np.int32)
        self.nvlink: I32 = np.zeros((cap, MAX_GPUS), dtype=np.int32)
        self.pcie: I32 = np.zeros((cap, MAX_GPUS), dtype=np.int32)
        self.numa: I32 = np.zeros((cap, MAX_GPUS), dtype=np.int32)
        self.layout: I32 = np.zeros(cap, dtype=np.int32)
        self.tiers: I32 = np.full((cap, MAX_TIERS), -1, dtype=np.int32)
        self.row_version: I64 = np.zeros(cap, dtype=np.int64)
        """bumped whenever a row's GPUs or pods change (lets plugins cache per row)"""

        self.models: list[str] = []
        self._model_ids: dict[str, int] = {}
        # layout = (count, NVLink domain per GPU renumbered 0..): nodes of one layout
        # share topology-kernel work
        self.layouts: list[tuple[int, tuple[int, ...]]] = []
        self._layout_ids: dict[tuple[int, tuple[int, ...]], int] = {}
        self.layout_count: I32 = np.zeros(0, dtype=np.int32)
        self.layout_domain: I32 = np.zeros((0, MAX_GPUS), dtype=np.int32)
        self.supernodes: list[str] = []
        self._supernode_ids: dict[str, int] = {}
        self._topology: dict[int, GpuTopology | None] = {}
        self._hypernode_rows: set[int] = set()
        # row -> uids of its GPU pods, and uid -> (GPU indices, milli per GPU). The
        # per-row value is a tuple replaced on every change, never edited, so that a
        # snapshot (reading_copy) shares the values and copies one flat dict: the
        # dict-of-dicts this replaces cost 3 ms per snapshot at 5,000 nodes, on the
        # event loop that serves filter and prioritize.
        self._row_pods: dict[int, tuple[str, ...]] = {}
        self._pod_gpus: dict[str, tuple[tuple[int, ...], int]] = {}
        self.placed: dict[str, int] = {}
        """pod uid -> row"""
        self.learned = LearnedClasses()
        self.fgd_memo: dict[tuple[int, int, int, int, bool], Any] = {}
        """gpu-share's per-pod-shape Δ memo (pyextender.plugins.gpu_share)."""
        self.fgd_base: dict[bool, Any] = {}
        """gpu-share's per-row state shared by every pod shape, per measure (cpu_fed)."""
        self.fixed_classes: TaskClasses | None = None
        self.learn_on_bind = True
        """Learn task classes from the pods placed here. False when the owner feeds
        ``learned`` with every pod that asks for a place instead (the simulator): a
        model of placed pods only loses the large pods a full cluster turns away."""

    # -- shape ---------------------------------------------------------------
    def grow(self, capacity: int) -> None:
        old = self.count.shape[0]
        if capacity <= old:
            return
        for attr in (
            "count", "usable", "free_milli", "used_milli", "free_mask", "model",
            "memory_mib", "nvlink", "pcie", "numa", "layout", "tiers", "row_version",
        ):  # fmt: skip
            arr = getattr(self, attr)
            fill = -1 if attr in ("model", "tiers") else 0
            grown = np.full((capacity, *arr.shape[1:]), fill, dtype=arr.dtype)
            grown[:old] = arr
            setattr(self, attr, grown)

    # -- workload model --------------------------------------------------------
    def classes(self) -> TaskClasses:
        """Task classes for fragmentation: fixed (simulator, config) or learned online."""
        if self.fixed_classes is not None:
            return self.fixed_classes
        return self.learned.classes()

    def classes_kept(self) -> int:
        """Classes of the model in use, without rebuilding it (a metrics scrape reads
        this): the fixed model's, or the learned model's as last built (0 before)."""
        if self.fixed_classes is not None:
            return self.fixed_classes.size
        return self.learned.kept

    def model_id(self, model: str) -> int:
        """Interned id of a GPU model name (bit position in TaskClass.model_mask)."""
        mid = self._model_ids.get(model)
        if mid is None:
            self.own_shared()
            mid = len(self.models)
            self.models.append(model)
            self._model_ids[model] = mid
        return mid

    def model_mask(self, models: tuple[str, ...]) -> int:
        """TaskClass.model_mask of a pod accepting ``models`` (PodInfo.gpu_models): a bit
        per model some node has (the others cannot take it anyway); 0 (any) for none,
        or when one lies past the mask's width."""
        mask = 0
        for model in models:
            mid = self._model_ids.get(model)
            if mid is None:
                continue
            if mid >= MASK_BITS:
                return 0
            mask |= 1 << mid
        return mask

    def learn(self, cpu_milli: int, milli: int, count: int, models: tuple[str, ...]) -> None:
        """Count one pod in the learned workload model: its CPU, GPU share (whole GPUs
        as 1,000), GPU count and, as the protocol's classes (REPLAY.md §4), the GPU
        models it accepts. Without them a model only some pods may use looked like any
        other, and was filled by pods that could have gone anywhere."""
        self.learned.observe(
            TaskClass(cpu_milli, min(milli, MILLI), count, self.model_mask(models))
        )

    # -- supernodes ------------------------------------------------------------
    def supernode_id(self, name: str) -> int:
        sid = self._supernode_ids.get(name)
        if sid is None:
            self.own_shared()
            sid = len(self.supernodes)
            self.supernodes.append(name)
            self._supernode_ids[name] = sid
        return sid

    def set_tiers(self, row: int, domains: list[str]) -> None:
        """Supernode domains of a node, tier 1 first (HyperNode assignment uses this)."""
        self.own_shared()
        self._hypernode_rows.add(row)
        self.tiers[row, :] = -1
        for t, name in enumerate(domains[:MAX_TIERS]):
            self.tiers[row, t] = self.supernode_id(f"{t + 1}/{name}")
        self.row_version[row] += 1

    @property
    def supernode(self) -> I32:
        """Tier-1 supernode id per row, -1 when the node is in none."""
        col: I32 = self.tiers[:, 0]
        return col

    # -- nodes -----------------------------------------------------------------
    def _layout_of(self, topo: GpuTopology) -> int:
        renumber: dict[int, int] = {}
        domains = tuple(renumber.setdefault(d, len(renumber)) for d in topo.nvlink_domain)
        key = (topo.count, domains)
        lid = self._layout_ids.get(key)
        if lid is None:
            lid = len(self.layouts)
            self.layouts.append(key)
            self._layout_ids[key] = lid
            row = np.zeros((1, MAX_GPUS), dtype=np.int32)
            row[0, : topo.count] = domains
            self.layout_domain = np.vstack([self.layout_domain, row])
            self.layout_count = np.append(self.layout_count, np.int32(topo.count))
        return lid

    def set_node(self, row: int, node: NodeInfo) -> list[str]:
        """(Re)read a node's GPUs. Returns warnings; never raises."""
        self.own_shared()
        warnings: list[str] = []
        allocatable = gpu_count(node.allocatable)
        raw = node.annotations.get(names.GPU_TOPOLOGY_ANNOTATION)
        topo: GpuTopology | None
        if raw is None:
            count = min(allocatable, MAX_GPUS)
            model = node.labels.get(names.GPU_MODEL_LABEL, "")
            topo = flat_topology(count, model, _label_int(node, names.GPU_MEMORY_LABEL))
            if count == 0:
                topo = None
        else:
            try:
                topo = parse_gpu_topology(raw)
                if allocatable and allocatable != topo.count:
                    raise GpuTopologyError(
                        "count",
                        f"is {topo.count} but allocatable {gpu_resource_in(node.allocatable)} "
                        f"is {allocatable}",
                    )
            except GpuTopologyError as exc:
                warnings.append(
                    f"node {node.name}: annotation {names.GPU_TOPOLOGY_ANNOTATION}: {exc}; "
                    "its GPUs are unusable until it is fixed"
                )
                topo = None
        if row not in self._hypernode_rows:
            # the label is the fallback; HyperNode membership (set_tiers) wins
            sn = node.labels.get(names.SUPERNODE_LABEL, "")
            tier1 = self.supernode_id(f"1/{sn}") if sn else -1
            if self.tiers[row, 0] != tier1:
                self.tiers[row, 0] = tier1
                self.row_version[row] += 1
        if (
            row in self._topology
            and self._topology[row] == topo
            and (bool(self.usable[row]) == (topo is not None))
        ):
            return warnings
        self._topology[row] = topo
        if topo is None:
            self.count[row] = min(allocatable, MAX_GPUS)
            self.usable[row] = False
            self.model[row] = -1
            self.memory_mib[row] = 0
            self.nvlink[row] = self.pcie[row] = self.numa[row] = 0
            self.layout[row] = self._layout_of(flat_topology(int(self.count[row])))
        else:
            self.count[row] = topo.count
            self.usable[row] = True
            self.model[row] = self.model_id(topo.model) if topo.model else -1
            self.memory_mib[row] = topo.memory_mib
            for arr, values in (
                (self.nvlink, topo.nvlink_domain),
                (self.pcie, topo.pcie_switch),
                (self.numa, topo.numa_node),
            ):
                arr[row, :] = 0
                arr[row, : topo.count] = values
            self.layout[row] = self._layout_of(topo)
        self._refresh(row)
        return warnings

    def clear_node(self, row: int) -> None:
        self.own_shared()
        for uid in self._row_pods.pop(row, ()):
            self.placed.pop(uid, None)
            self._pod_gpus.pop(uid, None)
        self._topology.pop(row, None)
        self._hypernode_rows.discard(row)
        self.count[row] = 0
        self.usable[row] = False
        self.model[row] = -1
        self.memory_mib[row] = 0
        self.tiers[row, :] = -1
        self.used_milli[row, :] = 0
        self._refresh(row)

    def _refresh(self, row: int) -> None:
        """Recompute free milli and the free bitmask of one row from its pods."""
        n = int(self.count[row]) if self.usable[row] else 0
        cap = np.zeros(MAX_GPUS, dtype=np.int32)
        cap[:n] = MILLI
        free = np.maximum(cap - self.used_milli[row], 0).astype(np.int32)
        self.free_milli[row] = free
        bits = np.flatnonzero(free >= MILLI)
        self.free_mask[row] = int(np.sum(np.left_shift(1, bits, dtype=np.int64)))
        self.row_version[row] += 1

    def idle(self, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        """Per row: a usable GPU node whose GPUs are all wholly free (nodes without
        GPUs are never idle: there is no whole GPU node to keep)."""
        count = self.count[rows].astype(np.int64)
        whole = np.left_shift(np.int64(1), count) - 1
        result: npt.NDArray[np.bool_] = (count > 0) & (self.free_mask[rows] == whole)
        return result

    def idle_among(
        self, rows: npt.NDArray[np.int64]
    ) -> Callable[[npt.NDArray[np.int64]], npt.NDArray[np.bool_]]:
        """framework.runtime.first_of_best's ``idle`` for candidate ``rows``: it asks
        with indices into them, and only when scores tie."""
        return lambda at: self.idle(rows[at])

    # -- pods ------------------------------------------------------------------
    def demand_milli(self, row: int, pod: PodInfo) -> tuple[int, int]:
        """(GPU count, milli per GPU) of a pod on this row; (0, 0) for no GPUs."""
        demand = gpu_demand(pod)
        if demand.none:
            return 0, 0
        return demand.count, demand.milli_on(int(self.memory_mib[row]))

    def add_pod(self, row: int, pod: PodInfo) -> None:
        if pod.uid in self.placed:
            return
        want, milli = self.demand_milli(row, pod)
        if self.fixed_classes is None and self.learn_on_bind:
            # learn the workload from the pods placed (bound pods replayed at start-up too)
            self.learn(pod.requests.get(CPU, 0), milli, want, pod.gpu_models)
        if want <= 0:
            return
        n = int(self.count[row])
        gpus = tuple(g for g in gpu_indices(pod) if g < n)
        if len(gpus) != want:
            free = self.free_milli[row, :n]
            if milli >= MILLI:
                gpus = tuple(int(g) for g in np.flatnonzero(free >= MILLI)[:want])
            else:
                fits = np.flatnonzero(free >= milli)
                order = fits[np.argsort(free[fits], kind="stable")]
                gpus = tuple(int(g) for g in order[:want])
        for g in gpus:
            self.used_milli[row, g] += milli
        self._row_pods[row] = (*self._row_pods.get(row, ()), pod.uid)
        self._pod_gpus[pod.uid] = (gpus, milli)
        self.placed[pod.uid] = row
        self._refresh(row)

    def remove_pod(self, row: int, pod: PodInfo) -> None:
        r = self.placed.pop(pod.uid, None)
        if r is None:
            return
        gpus, milli = self._pod_gpus.pop(pod.uid, ((), 0))
        rest = tuple(u for u in self._row_pods.get(r, ()) if u != pod.uid)
        if rest:
            self._row_pods[r] = rest
        else:
            self._row_pods.pop(r, None)
        for g in gpus:
            self.used_milli[r, g] -= milli
        self._refresh(r)

    def pod_gpus(self, uid: str) -> tuple[int, ...]:
        """GPU indices a placed pod holds (what the bind step annotated, or our guess)."""
        row = self.placed.get(uid)
        if row is None:
            return ()
        return self._pod_gpus.get(uid, ((), 0))[0]
