"""Cluster state as numpy arrays: one row per node, one column per resource.

Mutated only from one thread (the sidecar's event loop, or the simulator's
loop), so readers on that thread see a consistent view without locks. Rows
are never reordered: a removed node's row is marked invalid and reused.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pyextender.api.objects import NodeInfo, PodInfo, Taint
from pyextender.api.resources import CORE_RESOURCES, PODS, is_tracked, with_gpu_number_folded
from pyextender.cache.gpu import GpuState
from pyextender.cache.reading_copy import SharedUntilWritten, reading_copy
from pyextender.cache.reservations import Reservations

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


CHANGE_LOG = 1 << 16
"""Row changes ClusterState.changed_rows keeps at most (0.5 MB; a memo older than the
oldest kept recomputes every row)."""

VECTOR_MEMO = 4096
"""Distinct pod requests whose vectors ClusterState keeps."""


def tie_rank(name: str) -> int:
    """A node's place among nodes the score plugins rank equal: lower goes first.

    A hash of the name, so every pod of a cluster meets the same order, in every
    replica and after restarts. Fragmentation scoring relies on it: FGD's integer
    scores leave many nodes equal (an empty node and a partly used one often score
    alike), and a fixed order among them fills some nodes before it touches others,
    where an order that changes from pod to pod spreads pods over every node. In
    the trace replay, breaking ties at random per pod instead of by a fixed order
    cost 5 pp of GPU allocation (README, The sidecar). Not a random permutation drawn
    at start: that would change with every restart and differ between replicas."""
    digest = hashlib.blake2b(name.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1  # fits int64


@dataclass(slots=True)
class PodRecord:
    """A pod that holds resources on a node (bound, or assumed by a bind in flight)."""

    pod: PodInfo
    node: int
    assumed: bool


class ClusterState(SharedUntilWritten):
    """Allocatable and used amounts per node, plus the pods that use them."""

    SHARED = (
        "resources", "column", "node_names", "index", "nodes", "_free_rows", "alloc",
        "alloc_by_col", "live", "schedulable", "prefer_taints", "taint_sets", "_taint_ids",
        "tie_rank",
    )  # fmt: skip
    """What only node events (and a newly seen resource) change: a snapshot shares it
    until one side writes (see reading_copy)."""

    def __init__(self, capacity: int = 64) -> None:
        self.resources: list[str] = list(CORE_RESOURCES)
        self.column: dict[str, int] = {r: i for i, r in enumerate(self.resources)}
        self.node_names: list[str] = []
        self.index: dict[str, int] = {}
        self.nodes: list[NodeInfo | None] = []
        self._free_rows: list[int] = []
        cap = max(capacity, 1)
        self.alloc: IntArray = np.zeros((cap, len(self.resources)), dtype=np.int64)
        self.used: IntArray = np.zeros((cap, len(self.resources)), dtype=np.int64)
        self.alloc_by_col: IntArray = np.zeros((len(self.resources), cap), dtype=np.int64)
        """alloc transposed, kept in step with it: one resource's amounts over many rows
        are one contiguous 1-D gather here (5 µs for 5,000 rows), where a column of
        ``alloc`` is a strided one and a row-then-column gather copies every column."""
        self.free_by_col: IntArray = np.zeros((len(self.resources), cap), dtype=np.int64)
        """alloc - used, transposed, kept in step on every node and pod change (a few
        elements each): the predicates filter reads it per verb call instead of
        gathering and subtracting both matrices (bench/verbs.py pick)."""
        # schedulable: row holds a live, Ready, not cordoned node
        self.schedulable: BoolArray = np.zeros(cap, dtype=np.bool_)
        self.live: BoolArray = np.zeros(cap, dtype=np.bool_)
        # prefer_taints: index into taint_sets of the node's PreferNoSchedule taints
        # (0: none); nodes share few distinct sets, so a check runs once per set
        self.prefer_taints: IntArray = np.zeros(cap, dtype=np.int64)
        # tie_rank: order among equally scored nodes (see tie_rank)
        self.tie_rank: IntArray = np.zeros(cap, dtype=np.int64)
        self.taint_sets: list[tuple[Taint, ...]] = [()]
        self._taint_ids: dict[tuple[Taint, ...], int] = {(): 0}
        self.pods: dict[str, PodRecord] = {}
        self.gpu = GpuState(cap)
        self.reservations = Reservations()
        self.gang_plans: dict[str, object] = {}
        """PodGroup key -> placement plan made at admission (e.g. supernodes), read by
        filters on every replica."""
        self._vectors: dict[tuple[tuple[str, int], ...], IntArray] = {}
        """requests -> vector (at the current width): the cycle's session asks for the
        vector of every pod, most of them alike (~5 µs each computed, ~0.5 µs looked up)."""
        self.changed_rows: list[int] = []
        """Rows in the order they changed, one entry per change of anything a plugin may
        read of a row (the node, the pods counted on it and so its free amounts and GPUs,
        its supernodes), from change number ``changed_from`` on: answers computed per
        row at change number c stay valid but for the rows listed since c
        (framework.row_memo). The oldest half goes when it reaches CHANGE_LOG."""
        self.changed_from = 0
        self.row_memos: dict[object, object] = {}
        """framework.row_memo's memos of this state (a reading copy starts with none)."""
        self.generation = 0  # bumped on every change; lets callers cache derived data
        self.node_generation = 0  # bumped when rows are added, removed or renamed
        self._rows_cache: tuple[int, list[str], tuple[IntArray, list[str], list[str]]] | None = None

    # -- shape -------------------------------------------------------------
    @property
    def size(self) -> int:
        """Number of rows in use (live or reusable)."""
        return len(self.node_names)

    def _ensure_rows(self, rows: int) -> None:
        cap = self.alloc.shape[0]
        if rows <= cap:
            return
        new_cap = max(rows, cap * 2)
        self.own_shared()
        for attr in ("alloc", "used"):
            old = getattr(self, attr)
            grown = np.zeros((new_cap, old.shape[1]), dtype=np.int64)
            grown[:cap] = old
            setattr(self, attr, grown)
        for attr in ("alloc_by_col", "free_by_col"):
            old = getattr(self, attr)
            grown = np.zeros((old.shape[0], new_cap), dtype=np.int64)
            grown[:, :cap] = old
            setattr(self, attr, grown)
        for attr in ("schedulable", "live", "prefer_taints", "tie_rank"):
            old_b = getattr(self, attr)
            grown_b = np.zeros(new_cap, dtype=old_b.dtype)
            grown_b[:cap] = old_b
            setattr(self, attr, grown_b)
        self.gpu.grow(new_cap)

    def column_of(self, resource: str) -> int:
        """Column of a resource, adding one for a newly seen extended resource."""
        col = self.column.get(resource)
        if col is not None:
            return col
        self.own_shared()
        self.resources.append(resource)
        col = len(self.resources) - 1
        self.column[resource] = col
        pad = np.zeros((self.alloc.shape[0], 1), dtype=np.int64)
        self.alloc = np.hstack([self.alloc, pad])
        self.used = np.hstack([self.used, pad.copy()])
        pad_row = np.zeros((1, self.alloc.shape[0]), dtype=np.int64)
        self.alloc_by_col = np.vstack([self.alloc_by_col, pad_row])
        self.free_by_col = np.vstack([self.free_by_col, pad_row])
        return col

    def vector(self, requests: Mapping[str, int]) -> IntArray:
        """Request vector over the columns; a pod always asks for one pod slot."""
        return self.shared_vector(requests).copy()  # callers may add to theirs

    def shared_vector(self, requests: Mapping[str, int]) -> IntArray:
        """The same vector, read-only and shared by every caller with these requests
        (the session's Tasks: pods ask for a few hundred distinct amounts at most, so
        100,000 Tasks need not hold 100,000 arrays)."""
        key = tuple(requests.items())
        known = self._vectors.get(key)
        if known is not None and known.shape[0] == len(self.resources):
            return known
        vec = self._vector(requests)
        vec.flags.writeable = False
        if len(self._vectors) >= VECTOR_MEMO:
            self._vectors.clear()  # a few thousand distinct requests: start over
        self._vectors[key] = vec
        return vec

    def _vector(self, requests: Mapping[str, int]) -> IntArray:
        requests = with_gpu_number_folded(requests)
        for name in requests:
            if is_tracked(name):
                self.column_of(name)
        vec = np.zeros(len(self.resources), dtype=np.int64)
        for name, value in requests.items():
            col = self.column.get(name)
            if col is not None:
                vec[col] = value
        vec[self.column[PODS]] = 1
        return vec

    # -- nodes -------------------------------------------------------------
    def set_node(self, node: NodeInfo) -> list[str]:
        """Add or update a node. Returns warnings (e.g. a bad GPU annotation)."""
        self.own_shared()
        allocatable = with_gpu_number_folded(node.allocatable)
        for name in allocatable:
            if is_tracked(name):
                self.column_of(name)
        row = self.index.get(node.name)
        if row is None:
            if self._free_rows:
                row = self._free_rows.pop()
                self.node_names[row] = node.name
                self.nodes[row] = node
            else:
                row = len(self.node_names)
                self._ensure_rows(row + 1)
                self.node_names.append(node.name)
                self.nodes.append(node)
            self.index[node.name] = row
            self.tie_rank[row] = tie_rank(node.name)
            self.node_generation += 1
        self.nodes[row] = node
        self.alloc[row, :] = 0
        for name, value in allocatable.items():
            col = self.column.get(name)
            if col is not None:
                self.alloc[row, col] = value
        self.alloc_by_col[:, row] = self.alloc[row]
        self.free_by_col[:, row] = self.alloc[row] - self.used[row]
        self.live[row] = True
        self.schedulable[row] = node.ready and not node.unschedulable
        self.prefer_taints[row] = self._taint_set_id(node.prefer_no_schedule)
        self._changed(row)
        self.generation += 1
        return self.gpu.set_node(row, node)

    def set_tiers(self, row: int, domains: list[str]) -> None:
        """A node's supernode domains, tier 1 first (GpuState.set_tiers)."""
        self.gpu.set_tiers(row, domains)
        self._changed(row)
        self.generation += 1

    @property
    def change_count(self) -> int:
        """Row changes so far (see changed_rows)."""
        return self.changed_from + len(self.changed_rows)

    def _changed(self, row: int) -> None:
        log = self.changed_rows
        log.append(row)
        if len(log) >= CHANGE_LOG:
            half = len(log) // 2
            del log[:half]
            self.changed_from += half

    def _taint_set_id(self, taints: tuple[Taint, ...]) -> int:
        found = self._taint_ids.get(taints)
        if found is None:
            found = self._taint_ids[taints] = len(self.taint_sets)
            self.taint_sets.append(taints)
        return found

    def remove_node(self, name: str) -> None:
        if name not in self.index:
            return
        self.own_shared()
        row = self.index.pop(name)
        self.live[row] = False
        self.schedulable[row] = False
        self.prefer_taints[row] = 0
        self.alloc[row, :] = 0
        self.used[row, :] = 0
        self.alloc_by_col[:, row] = 0
        self.free_by_col[:, row] = 0
        self.nodes[row] = None
        self.gpu.clear_node(row)
        self._changed(row)
        self._free_rows.append(row)
        self.node_generation += 1
        for uid, rec in list(self.pods.items()):
            if rec.node == row:
                del self.pods[uid]
        self.generation += 1

    # -- pods --------------------------------------------------------------
    def add_pod(self, pod: PodInfo, node_name: str, assumed: bool = False) -> bool:
        """Count a pod on a node (idempotent per uid). False if the node is unknown."""
        row = self.index.get(node_name)
        if row is None:
            return False
        old = self.pods.get(pod.uid)
        if old is not None:
            if old.node == row:
                old.pod = pod
                old.assumed = old.assumed and assumed
                return True
            self.remove_pod(pod.uid)
        vec = self.vector(pod.requests)
        self.used[row] += vec
        self.free_by_col[:, row] -= vec
        # The request vector is not kept per pod (50,000 small arrays cost megabytes);
        # removal recomputes it from the requests, which never change.
        self.pods[pod.uid] = PodRecord(pod=pod, node=row, assumed=assumed)
        self.gpu.add_pod(row, pod)
        self._changed(row)
        self.generation += 1
        return True

    def remove_pod(self, uid: str) -> PodRecord | None:
        rec = self.pods.pop(uid, None)
        if rec is None:
            return None
        if self.live[rec.node]:
            vec = self.vector(rec.pod.requests)
            self.used[rec.node] -= vec
            self.free_by_col[:, rec.node] += vec
            self.gpu.remove_pod(rec.node, rec.pod)
        self._changed(rec.node)
        self.generation += 1
        return rec

    def free(self, rows: IntArray) -> IntArray:
        """Free amounts (allocatable - used) for the given rows."""
        return self.alloc[rows] - self.used[rows]

    def rows_of(self, names: list[str]) -> tuple[IntArray, list[str], list[str]]:
        """(rows of the known names, those names in the same order, unknown names).

        The last answer is kept while no node was added or removed: the shim
        (framework mode) sends its snapshot's node list call after call, and
        comparing two lists of names is several times cheaper than mapping them
        again. kube-scheduler's extender calls carry the nodes its filters passed,
        in the order its parallel workers finished them, so each of those lists is
        new (the HTTP verbs map them from their bytes: kernels.name_rows).
        """
        cached = self._rows_cache
        if cached is not None and cached[0] == self.node_generation and cached[1] == names:
            return cached[2]
        result: tuple[IntArray, list[str], list[str]]
        try:
            # every name known (the usual case): straight into the array, no list of
            # ints between (230 names: 15 -> 9 µs)
            rows = np.fromiter(map(self.index.__getitem__, names), np.int64, len(names))
            result = (rows, names, [])
        except KeyError:
            found = list(map(self.index.get, names))
            known = [n for n, r in zip(names, found, strict=True) if r is not None]
            unknown = [n for n, r in zip(names, found, strict=True) if r is None]
            rows = np.asarray([r for r in found if r is not None], dtype=np.int64)
            result = (rows, known, unknown)
        self._rows_cache = (self.node_generation, names, result)
        return result

    def snapshot(self) -> ClusterState:
        """A copy another thread may read while this state keeps changing (see
        reading_copy); reservations are shared (they are replaced, never edited)."""
        # the row memos and their change log are the original's own (a copy's memos
        # would start from its own changes)
        snap = reading_copy(self, left_out=("row_memos", "changed_rows"))
        snap.row_memos = {}
        snap.changed_rows = []
        snap.changed_from = self.change_count
        snap.gpu = reading_copy(self.gpu, deep=("learned",), left_out=GpuState.PER_POD)
        # The FGD caches are objects whose arrays the gpu-share kernel rewrites in place,
        # without the GIL: shared, the cycle's thread (scoring this copy's older rows)
        # and the verbs (scoring the live rows) could leave a row's cached Δ stamped
        # with the other's row version. The copy starts its own (the cycle recomputes
        # what it scores: ~1 ms at 10,000 nodes, bench/gpu_share_calls.py 'rebuild').
        snap.gpu.fgd_memo = {}
        snap.gpu.fgd_base = {}
        snap.reservations = self.reservations
        return snap

    def live_rows(self) -> IntArray:
        return np.flatnonzero(self.live[: self.size]).astype(np.int64)
