"""FGD fragmentation and the fragmentation gradient of placing one pod.

Fragmentation (Weng et al., USENIX ATC'23; REPLAY.md §4). For a node with
free CPU c (milli) and free milli-GPU g[j] per GPU, and a task class m
(c_m CPU, u_m milli on each of k_m GPUs):

    F_n(m) = Σ_j g[j]            if m is CPU-only, or the node's model is not
                                 accepted by m, or c < c_m, or fewer than k_m
                                 GPUs have g[j] ≥ u_m
           = Σ_{j: g[j] < u_m} g[j]   otherwise

    W_n = Σ_m w_m F_n(m)         (w_m = class count; F_n = W_n / Σ w_m)

Placing a pod on node n (and for a sharing pod on GPU j) gives the gradient
Δ = W_n(before) − W_n(after), in weighted milli-GPU; larger is better. A
whole-GPU pod takes k wholly free GPUs (which ones does not change W_n). All
arithmetic is int64, so kernel, numpy reference and pure-Python reference
agree exactly; callers turn Δ into a score (sigmoid) outside.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from pyextender.api.task_classes import TaskClasses
from pyextender.kernels.jit import LoopKernel, compile_kernel, compiled_as_is

I8 = npt.NDArray[np.int8]
I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int32] | npt.NDArray[np.int64]

MILLI = 1000
NO_FIT = -(2**62)
"""Δ of a node the pod does not fit (weighted milli-GPU)."""


def weighted_frag(
    c: Any, total: Any, gpu: Any, at: Any, n_u: Any, per_u: Any, m_count: Any, cls_num: Any,
    cls_cpu: Any, cls_mask: Any, cls_milli: Any, cls_w: Any, mid: Any, cpu_fed: Any,
) -> Any:  # fmt: skip
    """W of a row whose GPUs leave ``gpu[at + q]`` fitting and ``gpu[at + n_u + q]`` milli
    on the others for the classes of distinct milli q (``per_u[m]``), with ``c``
    milli-cores free: Σ_m w_m F(m), where F(m) is all ``total`` free milli when m cannot
    run there, else the milli on GPUs too small for it (plus, with cpu_fed, what the free
    CPU cannot feed). In a kernel: compiled (overload below)."""
    w = 0
    for m in range(m_count):
        q = at + per_u[m]
        ok = cls_num[m] > 0 and c >= cls_cpu[m] and gpu[q] >= cls_num[m]
        if ok and cls_mask[m] != 0:
            ok = mid >= 0 and ((cls_mask[m] >> mid) & 1) == 1
        v = total
        if ok:
            v = gpu[q + n_u]
            if cpu_fed == 1 and cls_cpu[m] > 0:
                starved = total - v - (c // cls_cpu[m]) * cls_milli[m] * cls_num[m]
                if starved > 0:
                    v += starved
        w += cls_w[m] * v
    return w


compiled_as_is(weighted_frag)


DEDUP_WINDOW = 256
DEDUP_MIN_SHARE = 8
DEDUP_PAUSE = 4
"""Where rows rarely repeat, finding a changed row's state id costs more than the ids
save: a lookup and an entry take ~40 ns, computing a row's W before and Δ ~330 ns
(10,000 rows, 35 classes), so they pay from one row in eight found. Each window of
DEDUP_WINDOW lookups in a call that found fewer than 1 / DEDUP_MIN_SHARE pauses them
for DEDUP_PAUSE windows' rows (computed without an id, and left without one until
they change), then they are tried again (clusters list node pools in blocks: busy
rows, then idle ones)."""
HASH_MASK = (1 << 61) - 1
HASH_MUL = 0x9E3779B97F4A7C1
KEY_HEAD = 2
"""Key words before a row's free milli per GPU: free CPU, then (model, GPUs, pod milli)."""


def row_key(mid: Any, ng: Any, u_key: Any) -> Any:
    """(GPU model id ≥ -1, usable GPUs < 2**16, pod milli key ≤ MILLI + 1) in one int."""
    return ((int(mid) + 1) << 32) | (int(ng) << 16) | int(u_key)


def row_hash(c: Any, key: Any, free_milli: Any, base: Any, ng: Any) -> Any:
    """A 61-bit hash of what a row's W before and Δ are computed from: free CPU,
    row_key, each GPU's free milli in order. Masked at every step, so that the
    interpreter's unbounded ints stay small (the kernel's int64 products wrap)."""
    h = ((int(c) * HASH_MUL) ^ key) & HASH_MASK
    for j in range(ng):
        h = (h * HASH_MUL + int(free_milli[base + j])) & HASH_MASK
    return (h ^ (h >> 29)) * HASH_MUL & HASH_MASK


def same_key(
    keys: Any, at: Any, c: Any, key: Any, free_milli: Any, base: Any, ng: Any
) -> Any:  # fmt: skip
    """Whether the entry of ``keys`` at ``at`` is this row's: every word of it equal
    (the count of GPUs is in ``key``, so the rows read as many milli values)."""
    same = keys[at] == c and keys[at + 1] == key
    j = 0
    while same and j < ng:  # a loop numba compiles (not all() over a generator)
        same = keys[at + KEY_HEAD + j] == free_milli[base + j]
        j += 1
    return same


compiled_as_is(row_key)
compiled_as_is(row_hash)
compiled_as_is(same_key)


def fgd_loops(
    n: int,
    rows: I64,  # [n] the rows (of the per-row arrays below) asked about
    stride: int,
    alloc: I64,  # [cap*n_res] free CPU of row r: alloc[r*n_res+cpu_col] − used[...] milli-cores
    used: I64,  # [cap*n_res]
    n_res: int,
    cpu_col: int,
    free_milli: I32,  # [cap*stride] milli-GPU, row-major
    count: I32,  # [cap] GPUs on the node
    usable: npt.NDArray[np.bool_],  # [cap] False: the node's GPUs count as none
    model: I32,  # [cap] model id, -1 unknown
    row_version: I64,  # [cap] changes whenever a row's GPUs change (GpuState.row_version)
    m_count: int,
    cls_cpu: I64,  # [M] milli-cores
    cls_milli: I64,  # [M] milli-GPU per GPU
    cls_num: I64,  # [M] GPUs
    cls_mask: I64,  # [M] accepted model ids as bits, 0 = any
    cls_w: I64,  # [M] integer weights
    w_sum: int,  # Σ w_m
    req_cpu: int,  # milli-cores
    req_milli: I64,  # [n] milli-GPU per GPU on each asked row (memory shares differ per node)
    req_num: int,  # GPUs; 0 = CPU-only pod
    cpu_fed: int,  # 1: count the GPU milli the free CPU cannot feed as fragmented (see doc)
    width: int,  # entries per row of base_gpu: 2 × distinct class milli values
    base_valid: npt.NDArray[np.bool_],  # [cap] per-row GPU state of any pod shape (below)
    base_w_valid: npt.NDArray[np.bool_],  # [cap] W before of this class model (below)
    base_version: I64,  # [cap] row_version the GPU state was computed at
    base_cpu: I64,  # [cap] free CPU W before was computed with
    base_total: I64,  # [cap] free milli-GPU of the row
    base_before: I64,  # [cap] W_n before
    base_gpu: I64,  # [cap*width] per distinct milli (ascending): GPUs that fit it, free
    # milli on the others
    memo_valid: npt.NDArray[np.bool_],  # [cap] this pod shape's Δ per row (below)
    memo_version: I64,  # [cap]
    memo_cpu: I64,  # [cap]
    memo_milli: I32,  # [cap] the pod's milli-GPU on the row when computed (≤ MILLI + 1)
    memo_delta: I64,  # [cap] best Δ, NO_FIT when the pod does not fit
    memo_gpu: I8,  # [cap] GPU of the best Δ for a sharing pod, else -1
    memo_score: F64,  # [cap] Δ / w_sum (milli-GPU), -inf for NO_FIT
    cnt: I64,  # scratch [M]
    low: I64,  # scratch [M]
    per_u: I64,  # scratch [2M]: class -> distinct milli index, distinct milli values
    sid: I64,  # [cap] the row's state id (rows of one id are identical: see below)
    sid_version: I64,  # [cap] row_version the id was found at
    sid_cpu: I64,  # [cap] free CPU it was found with
    sid_valid: npt.NDArray[np.bool_],  # [cap] False: no id (none found yet, or paused)
    id_table: I64,  # [2**b ≥ 2 ids] key -> id + 1, 0 = empty
    id_keys: I64,  # [ids * (KEY_HEAD + stride)] per id: its key words
    id_done: I64,  # [ids] stamp of the call that computed a row of this id
    id_rep: I64,  # [ids] that row's index in rows
    id_milli: I64,  # [ids] and the pod's milli key there
    id_meta: I64,  # [2]: ids given out, the last call's stamp
    out_before: I64,  # [n] W_n before
    out_delta: I64,  # [n]
    out_gpu: I32,  # [n]
    out_score: F64,  # [n]
    out_count: I64,  # [4]: rows whose Δ, W before, GPU state was computed; rows given
    # the results of an identical row of this call (dedup; none computed for them)
) -> None:
    # Two caches, both valid for a row while its row_version and free CPU are those
    # they were computed with: the base state (W before, and the per-class counts
    # every pod shape's Δ starts from) is shared by all pod shapes, the Δ is per shape.
    # A shape's first call thus computes only the placement on each row (the base
    # part was ~60 % of a full scan at 10k nodes); rows a cache delta touched are
    # recomputed, nothing else. The caller passes fresh caches for a full scan.
    #
    # The GPU state (per distinct class milli: GPUs that fit it, free milli on the
    # others) does not depend on the class weights or CPU, so it outlives a class
    # model rebuilt with the same milli values (FgdBase.for_classes): only W before is
    # recomputed then, and only W before when a row's free CPU alone changed.
    #
    # classes share few distinct milli values (35 openb-like classes: ~9): the GPU
    # scan below runs once per distinct value, not once per class; ascending, so the
    # columns of base_gpu mean the same for every model with those values
    n_u = 0
    for m in range(m_count):
        seen_u = False
        for q in range(n_u):
            if per_u[m_count + q] == cls_milli[m]:
                seen_u = True
                break
        if not seen_u:
            q = n_u
            while q > 0 and per_u[m_count + q - 1] > cls_milli[m]:
                per_u[m_count + q] = per_u[m_count + q - 1]
                q -= 1
            per_u[m_count + q] = cls_milli[m]
            n_u += 1
    for m in range(m_count):
        for q in range(n_u):
            if per_u[m_count + q] == cls_milli[m]:
                per_u[m] = q
                break
    n_delta = 0
    n_base = 0
    n_gpu = 0
    # identical rows (same free CPU, model and free milli per GPU) have the same W
    # before, and the same Δ for the same pod milli. Clusters are a few node types
    # filled by a few pod shapes: at 10,000 nodes half full, 60-87 % of rows repeat
    # another (bench/gpu_share_calls.py with and without --trace). Each row keeps a
    # state id, found (hash table of key words) only when the row changes; a row whose
    # id a row computed earlier in this call has, for the same pod milli, takes that
    # row's state and Δ: two array reads instead of a pass over the classes
    n_copied = 0
    id_meta[1] += 1
    stamp = id_meta[1]
    ids = len(id_done)
    slots = len(id_table)
    shift = 61
    while (1 << (61 - shift)) < slots:
        shift -= 1
    kw = KEY_HEAD + stride
    tried = 0  # id lookups in this window
    hits = 0  # of them, ids found
    paused = 0  # changed rows left without an id lookup
    for i in range(n):
        r = rows[i]
        c = alloc[r * n_res + cpu_col] - used[r * n_res + cpu_col]
        u_req = req_milli[i]
        # every share past one GPU fits nowhere (NO_FIT): one memo key for all of them
        u_key = u_req if u_req <= MILLI else MILLI + 1
        version = row_version[r]
        if (
            memo_valid[r]
            and memo_version[r] == version
            and memo_cpu[r] == c
            and memo_milli[r] == u_key
        ):
            out_before[i] = base_before[r]
            out_delta[i] = memo_delta[r]
            out_gpu[i] = memo_gpu[r]
            out_score[i] = memo_score[r]
            continue
        n_delta += 1
        base = r * stride
        ng = count[r] if usable[r] else 0
        mid = model[r]
        at = r * width
        if not (sid_version[r] == version and sid_cpu[r] == c):
            sid_version[r] = version
            sid_cpu[r] = c
            sid_valid[r] = False
            if paused > 0:
                paused -= 1
            else:
                if id_meta[0] == ids:  # every id given out: start over, this call anew
                    for q in range(slots):  # loops: the interpreted reference's are lists
                        id_table[q] = 0
                    for q in range(len(sid_version)):
                        sid_version[q] = -1
                        sid_valid[q] = False
                    sid_version[r] = version
                    id_meta[0] = 0
                    id_meta[1] += 1
                    stamp = id_meta[1]
                key = row_key(mid, ng, 0)
                slot = row_hash(c, key, free_milli, base, ng) >> shift
                found = -1
                while id_table[slot] != 0:
                    e = id_table[slot] - 1
                    if same_key(id_keys, e * kw, c, key, free_milli, base, ng):
                        found = e
                        break
                    slot = (slot + 1) & (slots - 1)
                if found < 0:
                    found = id_meta[0]
                    id_meta[0] += 1
                    id_table[slot] = found + 1
                    id_keys[found * kw] = c
                    id_keys[found * kw + 1] = key
                    for j in range(ng):
                        id_keys[found * kw + KEY_HEAD + j] = free_milli[base + j]
                else:
                    hits += 1
                sid[r] = found
                sid_valid[r] = True
                tried += 1
                if tried == DEDUP_WINDOW:
                    if hits * DEDUP_MIN_SHARE < DEDUP_WINDOW:
                        paused = DEDUP_PAUSE * DEDUP_WINDOW
                    tried = 0
                    hits = 0
        state_id = sid[r] if sid_valid[r] else -1
        if state_id >= 0 and id_done[state_id] == stamp and id_milli[state_id] == u_key:
            k = id_rep[state_id]
            r2 = rows[k]
            if not (
                base_valid[r]
                and base_version[r] == version
                and base_w_valid[r]
                and base_cpu[r] == c
            ):
                for q in range(width):
                    base_gpu[at + q] = base_gpu[r2 * width + q]
                base_total[r] = base_total[r2]
                base_version[r] = version
                base_valid[r] = True
                base_before[r] = base_before[r2]
                base_cpu[r] = c
                base_w_valid[r] = True
            memo_valid[r] = True
            memo_version[r] = version
            memo_cpu[r] = c
            memo_milli[r] = u_key
            memo_delta[r] = out_delta[k]
            memo_gpu[r] = out_gpu[k]
            memo_score[r] = out_score[k]
            out_before[i] = out_before[k]
            out_delta[i] = out_delta[k]
            out_gpu[i] = out_gpu[k]
            out_score[i] = out_score[k]
            n_copied += 1
            continue
        if state_id >= 0 and id_done[state_id] != stamp:
            id_done[state_id] = stamp
            id_rep[state_id] = i
            id_milli[state_id] = u_key
        if not (base_valid[r] and base_version[r] == version):
            n_gpu += 1
            base_w_valid[r] = False
            total = 0
            for j in range(ng):
                total += free_milli[base + j]
            # per distinct class milli: GPUs that fit it, and free milli on the others
            for q in range(n_u):
                u = per_u[m_count + q]
                a = 0
                b = 0
                for j in range(ng):
                    g = free_milli[base + j]
                    if g >= u:
                        a += 1
                    else:
                        b += g
                base_gpu[at + q] = a
                base_gpu[at + n_u + q] = b
            base_total[r] = total
            base_version[r] = version
            base_valid[r] = True
        total = base_total[r]
        # the classes read the row's GPU state in place (per_u[m]: their column of
        # base_gpu); only a sharing pod's Δ, which reads it once per GPU value, copies
        # it to cnt/low first. Copying every row, as before, cost more than the
        # indirection saves on a row read once: the first call of a pod shape at 10k
        # nodes 1.05 -> 0.88 ms (bench/gpu_share_calls.py --trace, openb default),
        # at +0.2 ms when the class model is rebuilt (W before and Δ read it twice)
        if not (base_w_valid[r] and base_cpu[r] == c):
            n_base += 1
            base_before[r] = weighted_frag(
                c, total, base_gpu, at, n_u, per_u, m_count, cls_num, cls_cpu, cls_mask,
                cls_milli, cls_w, mid, cpu_fed,
            )  # fmt: skip
            base_cpu[r] = c
            base_w_valid[r] = True
        before = base_before[r]
        c2 = c - req_cpu
        best = NO_FIT
        best_gpu = -1
        if req_num == 0:
            after = weighted_frag(
                c2, total, base_gpu, at, n_u, per_u, m_count, cls_num, cls_cpu, cls_mask,
                cls_milli, cls_w, mid, cpu_fed,
            )  # fmt: skip
            best = before - after
        elif req_num == 1 and u_req < MILLI:
            copied = False
            for j in range(ng):
                g = free_milli[base + j]
                if g < u_req:
                    continue
                # a GPU with the same free milli as an earlier one gives the same Δ, and
                # ties keep the lowest index: most nodes hold 2-3 distinct values of 8
                seen = False
                for jj in range(j):
                    if free_milli[base + jj] == g:
                        seen = True
                        break
                if seen:
                    continue
                if not copied:
                    for m in range(m_count):
                        q = per_u[m]
                        cnt[m] = base_gpu[at + q]
                        low[m] = base_gpu[at + n_u + q]
                    copied = True
                g2 = g - u_req
                after = 0
                for m in range(m_count):
                    u = cls_milli[m]
                    a = cnt[m]
                    b = low[m]
                    if g >= u:
                        a -= 1
                    else:
                        b -= g
                    if g2 >= u:
                        a += 1
                    else:
                        b += g2
                    ok = cls_num[m] > 0 and c2 >= cls_cpu[m] and a >= cls_num[m]
                    if ok and cls_mask[m] != 0:
                        ok = mid >= 0 and ((cls_mask[m] >> mid) & 1) == 1
                    v = total - u_req
                    if ok:
                        v = b
                        if cpu_fed == 1 and cls_cpu[m] > 0:
                            fed = (c2 // cls_cpu[m]) * cls_milli[m] * cls_num[m]
                            starved = total - u_req - b - fed
                            if starved > 0:
                                v += starved
                    after += cls_w[m] * v
                delta = before - after
                if delta > best:
                    best = delta
                    best_gpu = j
        else:
            whole = 0
            for j in range(ng):
                if free_milli[base + j] >= MILLI:
                    whole += 1
            if whole >= req_num and u_req <= MILLI:
                # wholly free GPUs count as fitting for every class (u_m ≤ MILLI) and
                # are not in its low milli; afterwards they hold 0 milli
                after = 0
                for m in range(m_count):
                    q = at + per_u[m]
                    ok = cls_num[m] > 0 and c2 >= cls_cpu[m] and base_gpu[q] - req_num >= cls_num[m]
                    if ok and cls_mask[m] != 0:
                        ok = mid >= 0 and ((cls_mask[m] >> mid) & 1) == 1
                    v = total - req_num * MILLI
                    if ok:
                        v = base_gpu[q + n_u]
                        if cpu_fed == 1 and cls_cpu[m] > 0:
                            fed = (c2 // cls_cpu[m]) * cls_milli[m] * cls_num[m]
                            starved = total - req_num * MILLI - v - fed
                            if starved > 0:
                                v += starved
                    after += cls_w[m] * v
                best = before - after
        score = -np.inf
        if best != NO_FIT:
            score = best / w_sum
        memo_valid[r] = True
        memo_version[r] = version
        memo_cpu[r] = c
        memo_milli[r] = u_key
        memo_delta[r] = best
        memo_gpu[r] = best_gpu
        memo_score[r] = score
        out_before[i] = before
        out_delta[i] = best
        out_gpu[i] = best_gpu
        out_score[i] = score
    out_count[0] = n_delta - n_copied
    out_count[1] = n_base
    out_count[2] = n_gpu
    out_count[3] = n_copied


_fgd_jit = compile_kernel(fgd_loops)
_fgd_loops_python: LoopKernel = fgd_loops
"""The same loops, interpreted: the pure-Python reference (called with lists)."""


@dataclass(frozen=True, slots=True)
class FgdResult:
    """Per node: W before (weighted milli-GPU), best Δ (NO_FIT if none), GPU (-1 if n/a)."""

    before: I64
    delta: I64
    gpu: I32


@dataclass(frozen=True, slots=True)
class FgdInput:
    """Node rows for the kernel: all arrays have one entry (or row) per node."""

    free_cpu: I64
    free_milli: I32  # [n, G]
    count: I32
    model: I32


def _milli_values(classes: TaskClasses) -> tuple[int, ...]:
    """The distinct milli values of the classes, ascending: the columns of FgdBase.gpu."""
    return tuple(sorted(set(classes.milli.tolist())))


def _width(classes: TaskClasses) -> int:
    return 2 * len(_milli_values(classes))


class DedupScratch:
    """The rows' state ids (fgd_loops), kept with a base: per row its id and what it
    was found at, per id its key words, the call that last computed a row of it, that
    row and its pod milli; the hash table from key to id; ids given out and the last
    call's stamp. 2 ids per row before the table starts over. At 10,000 rows of 8
    GPUs, 3.3 MB."""

    __slots__ = ("arrays", "rows", "stride")

    def __init__(self) -> None:
        self.rows = -1
        self.stride = -1
        self.arrays: tuple[npt.NDArray[np.generic], ...] = ()

    def fit(self, rows: int, stride: int) -> tuple[npt.NDArray[np.generic], ...]:
        """The ten arrays for ``rows`` rows of ``stride`` GPUs (new ones, all ids
        forgotten, when either differs from the last call's)."""
        if (rows, stride) != (self.rows, self.stride):
            ids = max(2 * rows, 64)
            slots = 64
            while slots < 2 * ids:
                slots *= 2
            self.rows, self.stride = rows, stride
            self.arrays = (
                np.zeros(rows, dtype=np.int64), np.full(rows, -1, dtype=np.int64),
                np.zeros(rows, dtype=np.int64), np.zeros(rows, dtype=np.bool_),
                np.zeros(slots, dtype=np.int64), np.empty(ids * (KEY_HEAD + stride), np.int64),
                np.zeros(ids, dtype=np.int64), np.empty(ids, dtype=np.int64),
                np.empty(ids, dtype=np.int64), np.zeros(2, dtype=np.int64),
            )  # fmt: skip
        return self.arrays


@dataclass(frozen=True, slots=True)
class FgdBase:
    """Per row, for one class model and measure: the part of Δ every pod shape shares
    and what it was computed from. Two parts: the GPU state (free milli, and per
    distinct class milli the GPUs that fit it and the free milli on the others; valid
    while the row's GPUs are unchanged) and W before (valid while, besides, its free
    CPU and the class model are unchanged)."""

    classes: TaskClasses
    cpu_fed: bool
    valid: npt.NDArray[np.bool_]
    version: I64
    cpu: I64
    total: I64
    before: I64
    gpu: I64  # [rows * width]
    w_valid: npt.NDArray[np.bool_]
    dedup: DedupScratch

    @staticmethod
    def empty(classes: TaskClasses, cpu_fed: bool, rows: int) -> FgdBase:
        # only ``valid`` and ``w_valid`` are read before written
        return FgdBase(
            classes, cpu_fed, np.zeros(rows, dtype=np.bool_), np.empty(rows, dtype=np.int64),
            np.empty(rows, dtype=np.int64), np.empty(rows, dtype=np.int64),
            np.empty(rows, dtype=np.int64), np.empty(rows * _width(classes), dtype=np.int64),
            np.zeros(rows, dtype=np.bool_), DedupScratch(),
        )  # fmt: skip

    def for_classes(self, classes: TaskClasses, cpu_fed: bool, rows: int) -> FgdBase:
        """The state for another class model: this one's GPU state carried over when
        the models' milli values are the same (a learned model rebuilt as its weights
        move keeps them), with every W before to compute again; else empty. This one
        must not be used afterwards: the two share arrays."""
        if (
            cpu_fed != self.cpu_fed
            or rows != self.valid.shape[0]
            or _milli_values(classes) != _milli_values(self.classes)
        ):
            return FgdBase.empty(classes, cpu_fed, rows)
        return FgdBase(
            classes, cpu_fed, self.valid, self.version, self.cpu, self.total, self.before,
            self.gpu, np.zeros(rows, dtype=np.bool_), self.dedup,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class FgdMemo:
    """Per row, for one pod shape: its best Δ (and GPU, score) and what it was computed from."""

    valid: npt.NDArray[np.bool_]
    version: I64
    cpu: I64
    milli: I32
    delta: I64
    gpu: I8
    score: F64

    ROW_BYTES: ClassVar[int] = 1 + 8 + 8 + 4 + 8 + 1 + 8
    """Bytes per row of the seven arrays: the milli and GPU index in the narrowest
    types that hold them, so a cluster's memo budget keeps more pod shapes
    (plugins.gpu_share.memo_shapes)."""

    @staticmethod
    def empty(rows: int) -> FgdMemo:
        # only ``valid`` is read before written
        return FgdMemo(
            np.zeros(rows, dtype=np.bool_), np.empty(rows, dtype=np.int64),
            np.empty(rows, dtype=np.int64), np.empty(rows, dtype=np.int32),
            np.empty(rows, dtype=np.int64), np.empty(rows, dtype=np.int8),
            np.empty(rows, dtype=np.float64),
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class FgdRows:
    """The cluster's per-row arrays the kernel reads (GpuState's and ClusterState's)."""

    alloc: I64  # [cap, n_res] milli-cores in column cpu_col
    used: I64  # [cap, n_res]
    cpu_col: int
    free_milli: I32  # [cap, G]
    count: I32  # [cap]
    usable: npt.NDArray[np.bool_]  # [cap]
    model: I32  # [cap]
    row_version: I64  # [cap]


@dataclass(frozen=True, slots=True)
class FgdOut:
    """Per asked row: FgdResult's fields, Δ / Σ w as a score (-inf: no fit), and how many
    rows had their Δ, their W before and their GPU state computed, and how many were
    given an identical row's results, computed in the same call (the rest came from the
    caches)."""

    before: I64
    delta: I64
    gpu: I32
    score: F64
    computed: int
    computed_base: int
    computed_gpus: int
    copied: int


def _listed(a: Any) -> Any:
    """An array as a list (the interpreted loops' input), anything else as it is."""
    return a.tolist() if isinstance(a, np.ndarray) else a


def fgd_rows(
    state: FgdRows,
    rows: I64,
    classes: TaskClasses,
    req_cpu: int,
    req_milli: I64,
    req_num: int,
    base: FgdBase,
    memo: FgdMemo,
    interpreted: bool = False,
) -> FgdOut:
    """The kernel over ``rows`` of the cluster, through the caches (updated in place).

    ``base`` must be for these classes and measure, both caches sized to the row
    arrays. ``interpreted``: the pure-Python reference (the same loops over lists).
    """
    n = int(rows.shape[0])
    m = classes.size
    stride = int(state.free_milli.shape[1])
    args = (
        n, np.ascontiguousarray(rows, dtype=np.int64), stride,
        np.ascontiguousarray(state.alloc).reshape(-1), np.ascontiguousarray(state.used).reshape(-1),
        int(state.alloc.shape[1]), int(state.cpu_col),
        np.ascontiguousarray(state.free_milli, dtype=np.int32).reshape(-1),
        state.count, state.usable, state.model, state.row_version,
        m, classes.cpu, classes.milli, classes.num, classes.model_mask, classes.weight,
        classes.weight_sum, int(req_cpu), np.ascontiguousarray(req_milli, dtype=np.int64),
        int(req_num), int(base.cpu_fed), _width(classes),
    )  # fmt: skip
    caches: tuple[npt.NDArray[np.generic], ...] = (
        base.valid, base.w_valid, base.version, base.cpu, base.total, base.before, base.gpu,
        memo.valid, memo.version, memo.cpu, memo.milli, memo.delta, memo.gpu, memo.score,
    )  # fmt: skip
    scratch = (
        np.empty(m, dtype=np.int64), np.empty(m, dtype=np.int64), np.empty(2 * m, np.int64),
        *base.dedup.fit(int(base.valid.shape[0]), stride),
    )  # fmt: skip
    if interpreted:
        lists = [_listed(a) for a in args]
        cached = [a.tolist() for a in caches]
        outs: list[list[int] | list[float]] = [[0] * n, [0] * n, [0] * n, [0.0] * n, [0] * 4]
        _fgd_loops_python(*lists, *cached, *[_listed(a) for a in scratch], *outs)
        for arr, vals in zip(caches, cached, strict=True):  # the caches were lists
            arr[:] = vals
        return FgdOut(
            np.asarray(outs[0], dtype=np.int64), np.asarray(outs[1], dtype=np.int64),
            np.asarray(outs[2], dtype=np.int32), np.asarray(outs[3], dtype=np.float64),
            int(outs[4][0]), int(outs[4][1]), int(outs[4][2]), int(outs[4][3]),
        )  # fmt: skip
    before = np.empty(n, dtype=np.int64)
    delta = np.empty(n, dtype=np.int64)
    gpu = np.empty(n, dtype=np.int32)
    score = np.empty(n, dtype=np.float64)
    counts = np.zeros(4, dtype=np.int64)
    _fgd_jit(*args, *caches, *scratch, before, delta, gpu, score, counts)
    return FgdOut(
        before, delta, gpu, score, int(counts[0]), int(counts[1]), int(counts[2]), int(counts[3])
    )


def _run(
    interpreted: bool,
    nodes: FgdInput,
    classes: TaskClasses,
    req_cpu: int,
    req_milli: I64,
    req_num: int,
    cpu_fed: bool,
) -> FgdResult:
    """A full scan: every node computed, through caches that start empty."""
    n = int(nodes.free_milli.shape[0])
    state = FgdRows(
        alloc=np.ascontiguousarray(nodes.free_cpu, dtype=np.int64).reshape(n, 1),
        used=np.zeros((n, 1), dtype=np.int64),
        cpu_col=0,
        free_milli=nodes.free_milli,
        count=np.ascontiguousarray(nodes.count, dtype=np.int32),
        usable=np.ones(n, dtype=np.bool_),
        model=np.ascontiguousarray(nodes.model, dtype=np.int32),
        row_version=np.zeros(n, dtype=np.int64),
    )
    out = fgd_rows(
        state, np.arange(n, dtype=np.int64), classes, req_cpu, req_milli, req_num,
        FgdBase.empty(classes, cpu_fed, n), FgdMemo.empty(n), interpreted,
    )  # fmt: skip
    return FgdResult(out.before, out.delta, out.gpu)


def fgd_scores(
    nodes: FgdInput,
    classes: TaskClasses,
    req_cpu: int,
    req_milli: I64,
    req_num: int,
    cpu_fed: bool = False,
) -> FgdResult:
    """numba kernel: W before and the best Δ of placing the pod on each node."""
    return _run(False, nodes, classes, req_cpu, req_milli, req_num, cpu_fed)


def fgd_scores_python(
    nodes: FgdInput,
    classes: TaskClasses,
    req_cpu: int,
    req_milli: I64,
    req_num: int,
    cpu_fed: bool = False,
) -> FgdResult:
    """Pure-Python reference: the same loops run by the interpreter over lists."""
    return _run(True, nodes, classes, req_cpu, req_milli, req_num, cpu_fed)


def _class_state(
    free: I64, real: npt.NDArray[np.bool_], classes: TaskClasses
) -> tuple[I64, I64, I64]:
    """Per node and class: GPUs that fit u_m, free milli on the others; and total free.

    ``free`` [n, G] (0 beyond the node's GPUs, which ``real`` marks) -> cnt, low [n, M], total [n].
    """
    fits = (free[:, :, None] >= classes.milli) & real[:, :, None]  # [n, G, M]
    cnt: I64 = fits.sum(axis=1)
    low: I64 = np.where(fits, 0, free[:, :, None]).sum(axis=1)
    total: I64 = free.sum(axis=1)
    return cnt, low, total


def _model_ok(model: I32, classes: TaskClasses) -> npt.NDArray[np.bool_]:
    """[n, M]: class m accepts the node's model (mask 0 = any; unknown model only then)."""
    bit = (classes.model_mask >> np.maximum(model, 0)[:, None].astype(np.int64)) & 1
    ok: npt.NDArray[np.bool_] = (classes.model_mask == 0) | ((model[:, None] >= 0) & (bit == 1))
    return ok


def _frag_of(
    cnt: Ints,
    low: Ints,
    total: Ints,
    cpu: I64,
    model_ok: npt.NDArray[np.bool_],
    classes: TaskClasses,
    cpu_fed: bool,
) -> I64:
    """W = Σ_m w_m·(low if m fits else total); leading shapes of cnt/low/total/cpu broadcast.

    With ``cpu_fed``, a class that fits also strands the milli on fitting GPUs beyond
    what ⌊cpu / c_m⌋ of its tasks can take.
    """
    ok = (classes.num > 0) & (cpu[..., None] >= classes.cpu) & (cnt >= classes.num) & model_ok
    value = low
    if cpu_fed:
        tasks = cpu[..., None] // np.maximum(classes.cpu, 1)
        fed = np.where(classes.cpu > 0, tasks * classes.milli * classes.num, total[..., None])
        value = low + np.maximum(total[..., None] - low - fed, 0)
    per_class = np.where(ok, value, total[..., None]).astype(np.float64)
    # a BLAS dot product; exact, as every partial sum is an integer below 2**53
    result: I64 = (per_class @ classes.weight.astype(np.float64)).astype(np.int64)
    return result


def _prepare_numpy(nodes: FgdInput) -> tuple[I64, npt.NDArray[np.bool_], I64]:
    """Free milli [n, G] cut to the widest node (0 beyond each node's GPUs), mask, CPU."""
    count = nodes.count.astype(np.int64)
    width = max(int(count.max(initial=0)), 1)
    real = np.arange(width) < count[:, None]
    free = np.where(real, nodes.free_milli[:, :width].astype(np.int64), 0)
    return free, real, nodes.free_cpu.astype(np.int64)


def fgd_scores_numpy(
    nodes: FgdInput,
    classes: TaskClasses,
    req_cpu: int,
    req_milli: I64,
    req_num: int,
    cpu_fed: bool = False,
) -> FgdResult:
    """Vectorised numpy reference: per-class state [n, M] once, then the change each
    placement makes to it (one GPU for a share: [n, G, M]), as the kernel does."""
    free, real, cpu = _prepare_numpy(nodes)
    n = free.shape[0]
    ok_model = _model_ok(nodes.model, classes)
    cnt, low, total = _class_state(free, real, classes)
    before = _frag_of(cnt, low, total, cpu, ok_model, classes, cpu_fed)
    cpu2 = cpu - req_cpu
    u = req_milli.astype(np.int64)
    gpu = np.full(n, -1, dtype=np.int32)
    if req_num == 0:
        delta = before - _frag_of(cnt, low, total, cpu2, ok_model, classes, cpu_fed)
        return FgdResult(before, delta.astype(np.int64), gpu)
    if req_num == 1:
        per_gpu = _per_gpu(free, real, cnt, low, total, cpu2, ok_model, classes, before, u, cpu_fed)
        best_j = per_gpu.argmax(axis=1)  # first maximum: lowest index on ties, as the kernel
        best = per_gpu[np.arange(n), best_j]
        gpu = np.where(best > NO_FIT, best_j, -1).astype(np.int32)
    else:
        best = np.full(n, NO_FIT, dtype=np.int64)
    # whole GPUs (k ≥ 2, or one GPU share of a full GPU): k wholly free GPUs leave the
    # count of every class (u_m ≤ MILLI) and add nothing to low
    whole = (free >= MILLI).sum(axis=1)
    after = _frag_of(cnt - req_num, low, total - req_num * MILLI, cpu2, ok_model, classes, cpu_fed)
    whole_delta = np.where((whole >= req_num) & (u <= MILLI), before - after, NO_FIT)
    sharing = (req_num == 1) & (u < MILLI)
    delta = np.where(sharing, best, whole_delta)
    gpu = np.where(sharing, gpu, -1).astype(np.int32)
    return FgdResult(before, delta.astype(np.int64), gpu)


def fgd_scores_numpy_dedup(
    nodes: FgdInput,
    classes: TaskClasses,
    req_cpu: int,
    req_milli: I64,
    req_num: int,
    cpu_fed: bool = False,
) -> FgdResult:
    """fgd_scores_numpy over the distinct rows only (free CPU, GPU count, model, the
    pod's milli, free milli per GPU: np.unique), scattered back: the deduplication the
    kernel makes in each call (its rows' state ids), so that the two compare as compiled
    vs vectorised."""
    free, _, cpu = _prepare_numpy(nodes)
    key = np.column_stack(
        [cpu, nodes.count.astype(np.int64), nodes.model.astype(np.int64),
         np.asarray(req_milli, dtype=np.int64), free]
    )  # fmt: skip
    _, first, back = np.unique(key, axis=0, return_index=True, return_inverse=True)
    distinct = FgdInput(
        nodes.free_cpu[first], nodes.free_milli[first], nodes.count[first], nodes.model[first]
    )
    res = fgd_scores_numpy(distinct, classes, req_cpu, req_milli[first], req_num, cpu_fed)
    back = back.reshape(-1)
    return FgdResult(res.before[back], res.delta[back], res.gpu[back])


def _per_gpu(
    free: I64,
    real: npt.NDArray[np.bool_],
    cnt: I64,
    low: I64,
    total: I64,
    cpu2: I64,
    ok_model: npt.NDArray[np.bool_],
    classes: TaskClasses,
    before: I64,
    u: I64,
    cpu_fed: bool,
) -> I64:
    """Δ of a u-milli share on each GPU [n, G] (NO_FIT where it does not fit): moving GPU
    j from g to g − u changes only that GPU's term in cnt and low of each class."""
    # int32 is exact here (milli-GPU of one node, GPU counts) and halves memory traffic
    g = free[:, :, None].astype(np.int32)  # [n, G, 1]
    g2 = g - u[:, None, None].astype(np.int32)
    um = classes.milli.astype(np.int32)
    fit_g, fit_g2 = g >= um, g2 >= um  # [n, G, M]
    a = cnt[:, None, :].astype(np.int32) - fit_g + fit_g2
    b = low[:, None, :].astype(np.int32) - np.where(fit_g, 0, g) + np.where(fit_g2, 0, g2)
    after = _frag_of(
        a, b, (total - u)[:, None], cpu2[:, None], ok_model[:, None, :], classes, cpu_fed
    )
    fits = (free >= u[:, None]) & real
    result: I64 = np.where(fits, before[:, None] - after, NO_FIT)
    return result


def fgd_gpu_deltas(
    nodes: FgdInput, classes: TaskClasses, req_cpu: int, req_milli: I64, cpu_fed: bool = False
) -> I64:
    """Δ of a sharing pod on every GPU slot of every node ([n, stride], NO_FIT beyond the
    node's GPUs and where it does not fit); used to pick the GPU at bind."""
    free, real, cpu = _prepare_numpy(nodes)
    ok_model = _model_ok(nodes.model, classes)
    cnt, low, total = _class_state(free, real, classes)
    before = _frag_of(cnt, low, total, cpu, ok_model, classes, cpu_fed)
    u = req_milli.astype(np.int64)
    per_gpu = _per_gpu(
        free, real, cnt, low, total, cpu - req_cpu, ok_model, classes, before, u, cpu_fed
    )
    out = np.full(nodes.free_milli.shape, NO_FIT, dtype=np.int64)
    out[:, : per_gpu.shape[1]] = per_gpu
    return out
