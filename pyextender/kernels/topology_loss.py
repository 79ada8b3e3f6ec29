"""Topology loss: where a k-GPU (whole-GPU) request fits a node's free GPUs best.

Per node, from its free-GPU bitmask and its NVLink/NVSwitch domain layout:

* **best set**: k free GPUs crossing the fewest domains. If one domain holds
  k free GPUs, the one with the fewest free GPUs (best fit, lowest id on ties)
  gives its lowest-indexed GPUs. Otherwise whole domains are taken largest
  first until the remainder fits one domain, which is chosen best-fit.
* **quality** = 1 / domains crossed (1.0 inside one domain).
* **loss** = fragmentation after − before, where for request sizes s with
  weights w_s (the whole-GPU sizes the cluster sees)::

      frag = Σ_s w_s · (free − s · P_s),  P_s = Σ_d ⌊free_d / s⌋  (s ≤ largest domain)
                                          P_s = ⌊free / s⌋        (s > largest domain)

  i.e. the free GPUs left over once as many s-requests as possible are placed
  without crossing domains needlessly (weighted GPUs; negative = the request
  fills a hole).
* **score** = weight · quality − loss_weight · loss / (Σ w_s · GPUs on node).

Nodes with fewer than k free GPUs get mask 0, 0 domains and score −inf.
Nodes sharing a layout and a free mask have identical results, so the kernel
computes each distinct (layout, mask) once per request and keeps it for the
next calls of that request (memo tagged by a stamp per request, so a buffer
never needs clearing). Of those pairs, the ones with the same free GPUs per domain
(not the same GPUs) cross as many domains, lose as much and score the same: a second
memo keyed by (layout, free counts) computes that once, and each pair only picks its
GPUs. Loss is exact int64; every
implementation evaluates the score with the same float expression.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from pyextender.kernels.jit import (
    LoopKernel,
    compile_kernel,
    index_slots,
    popcount,
    signed,
    unsigned,
)

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]

LAY_FIELDS = 6
"""Per-layout fields in the kernel's ``lay`` array: GPUs, domains, GPUs in the largest
domain, mask of all the layout's GPUs, start of its memo block (2**GPUs entries), start
of its block in the counts memo (2**(Σ_d bit length of domain d's GPUs) entries)."""

COUNT_FIELDS = 4
"""int64 fields per counts-memo entry: stamp, domains crossed, loss, GPUs taken per
domain (packed as the entry's index packs the free counts)."""

SCAN_BLOCK = 4096
"""Memo blocks (2**GPUs entries) up to this size are scanned in mask order for the pairs
a call must compute (~1 ns per entry); larger ones (13-16 GPUs) by a pass over the nodes."""


def topology_loops(
    n: int,
    stride: int,  # GPU slots per layout row (MAX_GPUS)
    free_mask: I64,  # [n] bit j = GPU j wholly free
    layout: I32,  # [n] layout id
    n_lay: int,  # L layouts
    lay_count: I32,  # [L] GPUs in the layout
    lay_domain: I32,  # [L*stride] domain of each GPU, renumbered 0..count-1
    k: int,  # GPUs requested
    s_count: int,
    sizes: I64,  # [S] request sizes (GPUs)
    size_w: I64,  # [S] integer weights
    w_sum: int,
    weight: float,
    loss_weight: float,
    stamp: int,  # unique per request; memo entries with another stamp are stale
    memo_stamp: I64,
    memo_mask: I64,
    memo_dom: I32,
    memo_loss: I64,
    memo_score: F64,
    count_memo: I64,  # [COUNT_FIELDS * Layouts.count_memo_size]: see the pair loop
    count_score: F64,  # [Layouts.count_memo_size]
    scratch: I64,  # [scratch_size(L, S, stride, n)], see the layout below
    full: int,  # 0: only out_dom and out_score are written (what filter and score read)
    out_mask: I64,  # [n] chosen GPUs as a bitmask (when full)
    out_dom: I32,  # [n] domains crossed, 0 = does not fit
    out_loss: I64,  # [n] weighted GPUs (when full)
    out_score: F64,  # [n]
) -> None:
    # scratch: per layout LAY_FIELDS fields (GPUs, domains, GPUs in the largest
    # domain, mask of all its GPUs, start of its memo block of 2**GPUs entries), the
    # GPUs of each domain as bitmasks, each domain's shift and width in a counts
    # memo index, c // s for c in 0..stride (a lookup instead
    # of an integer division per size and domain), free and taken GPUs per domain,
    # per layout the loss tables, then per node its memo key and the work list of pairs
    # to compute.
    # Derived here, per call: L and S are small (< 2 µs)
    sq = (stride + 1) * (stride + 1)
    dm = n_lay * LAY_FIELDS
    sh = dm + n_lay * stride
    wd = sh + n_lay * stride
    div = wd + n_lay * stride
    cnt = div + s_count * (stride + 1)
    tk = cnt + stride
    lt = tk + stride
    lb = lt + n_lay * sq
    ky = lb + n_lay * (stride + 1)
    work = ky + n  # the keys' slots are seen as unsigned (index_slots)
    offset = 0
    count_offset = 0
    for lid in range(n_lay):
        at = lid * LAY_FIELDS
        base = lid * stride
        c = lay_count[lid]
        nd = 0
        for d in range(stride):
            scratch[dm + base + d] = 0
        for j in range(c):
            d = lay_domain[base + j]
            scratch[dm + base + d] |= 1 << j
            if d >= nd:
                nd = d + 1
        biggest = 0
        shift = 0
        for d in range(nd):
            x = scratch[dm + base + d]
            m = 0
            while x:  # popcount: ≤ stride iterations
                x &= x - 1
                m += 1
            if m > biggest:
                biggest = m
            bits = 0
            while (1 << bits) <= m:  # bit length of m: a count 0..m fits in it
                bits += 1
            scratch[sh + base + d] = shift
            scratch[wd + base + d] = (1 << bits) - 1
            shift += bits
        scratch[at] = c
        scratch[at + 1] = nd
        scratch[at + 2] = biggest
        scratch[at + 3] = (1 << c) - 1
        scratch[at + 4] = offset
        scratch[at + 5] = count_offset
        offset += 1 << c
        count_offset += 1 << shift
    # pass 1: each node's memo key, in a loop of its own with no branch (the compiler
    # vectorises it); keys are unsigned, so indexing the memo with them needs no
    # negative-index wrap-around (a compare and select per access). Bits past the
    # layout's GPUs mean nothing (as in the references) and would index past the
    # layout's memo block. Together: −8 µs of a cold call at 10k nodes, −6 µs warm.
    keys = index_slots(scratch, ky, ky + n)
    for i in range(n):
        at = layout[i] * LAY_FIELDS
        keys[i] = unsigned(scratch[at + 4] + (free_mask[i] & scratch[at + 3]))
    # a (layout, mask) pair not yet computed for this request is marked (stamp
    # negated), to be computed after the pass: stores of a work list in this loop
    # cost ~15 ns per pair (cold call at 10k nodes: +12 µs)
    missing = 0
    for i in range(n):
        key = keys[i]
        if memo_stamp[key] != stamp:
            memo_stamp[key] = -stamp
            missing += 1
    todo = missing
    if todo > 0:  # tables only for a call with pairs to compute (~1 µs)
        for s_i in range(s_count):
            for c in range(stride + 1):
                scratch[div + s_i * (stride + 1) + c] = c // sizes[s_i]
        # loss = Σ_s w_s·(s·lost_s − k) with lost_s the s-placements the choice destroys:
        # Σ_d of a table over (free c, taken t) of domain d for sizes that fit a domain,
        # plus a table over the node's free total for the larger sizes. Tabled per layout
        # (≤ (largest domain + 1)² entries) so a pair costs one lookup per domain, with no
        # branch on the layout's sizes (those mispredicted: pairs come in random layouts)
        for lid in range(n_lay):
            at = lid * LAY_FIELDS
            biggest = scratch[at + 2]
            row = lt + lid * sq
            for c in range(biggest + 1):
                for t in range(c + 1):
                    v = 0
                    for s_i in range(s_count):
                        s = sizes[s_i]
                        if s <= biggest:
                            q = div + s_i * (stride + 1)
                            v += size_w[s_i] * s * (scratch[q + c] - scratch[q + c - t])
                    scratch[row + c * (stride + 1) + t] = v
            for tot in range(scratch[at] + 1):
                v = -k * w_sum
                if tot >= k:
                    for s_i in range(s_count):
                        s = sizes[s_i]
                        if s > biggest:
                            q = div + s_i * (stride + 1)
                            v += size_w[s_i] * s * (scratch[q + tot] - scratch[q + tot - k])
                scratch[lb + lid * (stride + 1) + tot] = v
    # the marked pairs as a work list, layout by layout and in mask order where the
    # layout's memo block is small (≤ SCAN_BLOCK entries, scanned): consecutive pairs
    # then take the same branches (a cold call at 10k nodes: −8 µs). Larger blocks
    # (up to 2**16 entries) are found by a pass over the nodes instead
    missing = 0
    listed = False
    for lid in range(n_lay):
        if missing == todo:
            break
        at = lid * LAY_FIELDS
        off = scratch[at + 4]
        if scratch[at + 3] >= SCAN_BLOCK:
            listed = True
            continue
        for free in range(scratch[at + 3] + 1):
            if memo_stamp[off + free] == -stamp:
                memo_stamp[off + free] = stamp
                scratch[work + missing] = (lid << 32) | free
                missing += 1
    if listed and missing < todo:
        for i in range(n):
            key = keys[i]
            if memo_stamp[key] == -stamp:
                memo_stamp[key] = stamp
                lid = layout[i]
                free = signed(key) - scratch[lid * LAY_FIELDS + 4]
                scratch[work + missing] = (lid << 32) | free
                missing += 1
    for e in range(missing):
        lid = scratch[work + e] >> 32
        free = scratch[work + e] & 0xFFFFFFFF
        at = lid * LAY_FIELDS
        key = scratch[at + 4] + free
        base = lid * stride
        tot = popcount(free)  # no data-dependent loop: branch misses dominated
        chosen = 0
        ndom = 0
        loss = 0
        score = -np.inf
        if k > 0 and tot >= k:
            nd = scratch[at + 1]
            # Domains crossed, loss and score depend on the free GPUs per domain only,
            # not on which GPUs they are: masks with the same counts (e.g. 25 count
            # pairs for 256 masks of two islands of 4) share one entry of the counts
            # memo, indexed by the counts packed at each domain's shift
            ckey = scratch[at + 5]
            for d in range(nd):
                c = popcount(free & scratch[dm + base + d])  # free GPUs
                scratch[cnt + d] = c
                ckey += c << scratch[sh + base + d]
            ce = COUNT_FIELDS * ckey
            if count_memo[ce] == stamp:
                ndom = count_memo[ce + 1]
                loss = count_memo[ce + 2]
                taken = count_memo[ce + 3]
                score = count_score[ckey]
            else:
                for d in range(nd):
                    scratch[tk + d] = 0  # GPUs taken from domain d
                # best fit into one domain, else whole domains largest first (lowest id
                # on ties)
                remaining = k
                while remaining > 0:
                    fit = -1
                    for d in range(nd):
                        c = scratch[cnt + d]
                        if (
                            scratch[tk + d] == 0
                            and c >= remaining
                            and (fit < 0 or c < scratch[cnt + fit])
                        ):
                            fit = d
                    if fit >= 0:
                        scratch[tk + fit] = remaining
                        remaining = 0
                    else:
                        big = -1
                        for d in range(nd):
                            c = scratch[cnt + d]
                            if (
                                scratch[tk + d] == 0
                                and c > 0
                                and (big < 0 or c > scratch[cnt + big])
                            ):
                                big = d
                        scratch[tk + big] = scratch[cnt + big]
                        remaining -= scratch[cnt + big]
                    ndom += 1
                # after − before, from the tables (only the domains taken from change)
                loss = scratch[lb + lid * (stride + 1) + tot]
                row = lt + lid * sq
                taken = 0
                for d in range(nd):
                    t = scratch[tk + d]
                    loss += scratch[row + scratch[cnt + d] * (stride + 1) + t]
                    taken |= t << scratch[sh + base + d]
                quality = 1.0 / ndom
                score = weight * quality - loss_weight * (loss / (w_sum * scratch[at]))
                count_memo[ce] = stamp
                count_memo[ce + 1] = ndom
                count_memo[ce + 2] = loss
                count_memo[ce + 3] = taken
                count_score[ckey] = score
            # the lowest-indexed free GPUs of each domain taken from
            for d in range(nd):
                t = (taken >> scratch[sh + base + d]) & scratch[wd + base + d]
                x = free & scratch[dm + base + d]
                while t > 0:
                    low = x & -x
                    chosen |= low
                    x ^= low
                    t -= 1
        memo_mask[key] = chosen
        memo_dom[key] = ndom
        memo_loss[key] = loss
        memo_score[key] = score
    # pass 2: one gather per output (simple loops the compiler vectorises; a fused
    # loop with four stores was ~40 % slower at 10k nodes), ~3.3 µs each at 10k nodes:
    # the chosen sets and losses only when asked for (the verbs read neither)
    for i in range(n):
        out_dom[i] = memo_dom[keys[i]]
    for i in range(n):
        out_score[i] = memo_score[keys[i]]
    if full:
        for i in range(n):
            out_mask[i] = memo_mask[keys[i]]
        for i in range(n):
            out_loss[i] = memo_loss[keys[i]]


_topology_jit = compile_kernel(topology_loops)
_topology_loops_python: LoopKernel = topology_loops
"""The same loops, interpreted: the pure-Python reference (called with lists)."""


@dataclass(frozen=True, slots=True)
class Layouts:
    """Domain layouts shared by many nodes: GPU count and domain per GPU slot."""

    count: I32  # [L]
    domain: I32  # [L, stride], renumbered 0..count-1 per layout

    @property
    def offsets(self) -> I64:
        sizes = np.left_shift(1, self.count.astype(np.int64))
        out: I64 = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        return out

    @property
    def memo_size(self) -> int:
        # Python ints: a numpy shift and sum cost ~1.5 µs of a cold call, this ~0.3 µs
        return sum(1 << c for c in self.count.tolist())

    @property
    def count_memo_size(self) -> int:
        """Entries of the counts memo: per layout 2**(Σ_d bit length of domain d's GPUs),
        never more than its 2**GPUs masks (a bit length is at most the count)."""
        total = 0
        for lid, c in enumerate(self.count.tolist()):
            per_domain = np.bincount(self.domain[lid, :c]).tolist()
            total += 1 << sum(int(m).bit_length() for m in per_domain)
        return total


class TopologyResult(NamedTuple):
    """Per node: chosen GPU bitmask, domains crossed (0 = no fit), loss, score.
    (A named tuple: built in ~0.2 µs, a frozen dataclass in ~0.6 µs.)"""

    mask: I64
    domains: I32
    loss: I64
    score: F64


_NO_I64: I64 = np.empty(0, dtype=np.int64)
"""The outputs a call without ``full`` does not write (never written to: empty)."""

MEMO_BANKS = 8
"""Requests (k, sizes, weights, layouts) whose memo is kept at once: pods of a few GPU
counts alternate, and each keeps its (layout, mask) results between calls."""

Memo = tuple[I64, I64, I32, I64, F64]
BankKey = tuple[int, bytes, bytes, float, float, bytes, bytes]
"""k, sizes, weights, weight, loss weight, layout GPU counts, layout domains."""


@dataclass(slots=True)
class _Bank:
    """The memo of one request: its stamp, buffers and the kernel arguments that depend
    only on the request (prepared once, not per call)."""

    stamp: int
    memo: Memo
    prepared: tuple[object, ...]


def _new_memo(size: int) -> Memo:
    return (
        np.zeros(size, dtype=np.int64),
        np.zeros(size, dtype=np.int64),
        np.zeros(size, dtype=np.int32),
        np.zeros(size, dtype=np.int64),
        np.zeros(size, dtype=np.float64),
    )


def _prepare(
    layouts: Layouts, k: int, sizes: I64, size_w: I64, weight: float, loss_weight: float
) -> tuple[object, ...]:
    """The request's arguments after ``free_mask`` and ``layout``, up to ``stamp``."""
    sizes = np.ascontiguousarray(sizes, dtype=np.int64)
    size_w = np.ascontiguousarray(size_w, dtype=np.int64)
    return (
        int(layouts.count.shape[0]), np.ascontiguousarray(layouts.count, dtype=np.int32),
        np.ascontiguousarray(layouts.domain, dtype=np.int32).reshape(-1),
        int(k), int(sizes.shape[0]), sizes, size_w, sum(size_w.tolist()),
        float(weight), float(loss_weight),
    )  # fmt: skip


def scratch_size(n_lay: int, s_count: int, stride: int, n: int) -> int:
    """int64 entries of the kernel's scratch (see ``topology_loops``)."""
    per_layout = LAY_FIELDS + 3 * stride + (stride + 1) * (stride + 2)
    return n_lay * per_layout + s_count * (stride + 1) + 2 * stride + 2 * n


class TopologyKernel:
    """Holds the memos between calls. One instance per thread (the memo is scratch).

    A (layout, mask) result depends only on the request (k, sizes, weights,
    layouts), so each of the last MEMO_BANKS requests keeps its own memo bank:
    consecutive calls reuse every pair computed before for the same request,
    also when other requests came in between. Entries are tagged with the
    bank's stamp (unique per bank, never reused), so a reused buffer never
    needs clearing; ``forget()`` drops every bank (the next call is cold) and
    keeps the buffers for the next banks.
    """

    def __init__(self) -> None:
        self._stamp = 0
        self._banks: dict[BankKey, _Bank] = {}
        # memo buffers of dropped banks, for the next banks: by layout GPU counts (which
        # fix a memo's size), those of the latest layout set only, at most MEMO_BANKS
        self._spare: dict[bytes, list[Memo]] = {}
        self._scratch: I64 = np.empty(0, dtype=np.int64)
        # the counts memo, shared by the banks (entries tagged with their bank's stamp;
        # zeros, as no stamp is 0) and sized for the layouts of the last call
        self._counts: tuple[bytes, I64, F64] = (b"", np.zeros(0, np.int64), np.zeros(0))
        self._counts_of: Layouts | None = None

    def forget(self) -> None:
        for key, bank in self._banks.items():
            self._keep(key[5], bank.memo)
        self._banks.clear()

    def _keep(self, counts: bytes, memo: Memo) -> None:
        spares = self._spare.get(counts)
        if spares is None:
            # another layout set: the old one's buffers are dropped (a set changes
            # when a new kind of node joins, and rarely comes back)
            spares = []
            self._spare = {counts: spares}
        if len(spares) < MEMO_BANKS:
            spares.append(memo)

    def _bank(
        self,
        layouts: Layouts,
        k: int,
        sizes: I64,
        size_w: I64,
        weight: float,
        loss_weight: float,
    ) -> _Bank:
        key: BankKey = (
            int(k), sizes.tobytes(), size_w.tobytes(), float(weight), float(loss_weight),
            layouts.count.tobytes(), layouts.domain.tobytes(),
        )  # fmt: skip
        bank = self._banks.pop(key, None)
        if bank is None:
            self._stamp += 1
            if len(self._banks) >= MEMO_BANKS:
                oldest = next(iter(self._banks))
                self._keep(oldest[5], self._banks.pop(oldest).memo)
            # a spare of the same layout counts has the right size (its stale entries
            # carry an older stamp); a dict lookup, not a search (~0.9 µs of a cold call)
            spares = self._spare.get(key[5])
            memo = spares.pop() if spares else _new_memo(layouts.memo_size)
            prepared = _prepare(layouts, k, sizes, size_w, weight, loss_weight)
            bank = _Bank(self._stamp, memo, prepared)
        self._banks[key] = bank  # most recently used last
        return bank

    def _counts_for(self, layouts: Layouts) -> tuple[I64, F64]:
        if layouts is not self._counts_of:  # the same object: no bytes compared (~0.5 µs)
            self._counts_of = layouts
            key = layouts.count.tobytes() + layouts.domain.tobytes()
            if self._counts[0] != key:
                size = layouts.count_memo_size
                self._counts = (key, np.zeros(COUNT_FIELDS * size, np.int64), np.zeros(size))
        return self._counts[1], self._counts[2]

    def _scratch_for(self, layouts: Layouts, s_count: int, n: int) -> I64:
        n_lay, stride = layouts.domain.shape
        size = scratch_size(n_lay, s_count, stride, n)
        if self._scratch.shape[0] < size:
            self._scratch = np.empty(size + 1024, dtype=np.int64)
        return self._scratch

    def run(
        self,
        free_mask: I64,
        layout: I32,
        layouts: Layouts,
        k: int,
        sizes: I64,
        size_w: I64,
        weight: float = 1.0,
        loss_weight: float = 1.0,
        full: bool = True,
    ) -> TopologyResult:
        """numba kernel over all given nodes. ``full=False`` writes only domains and
        score (what filter and score read): two gathers over the nodes instead of four,
        and ``mask`` and ``loss`` come back empty."""
        bank = self._bank(layouts, k, sizes, size_w, weight, loss_weight)
        n = int(free_mask.shape[0])
        stride = int(layouts.domain.shape[1])
        out = TopologyResult(
            np.empty(n, dtype=np.int64) if full else _NO_I64,
            np.empty(n, dtype=np.int32),
            np.empty(n, dtype=np.int64) if full else _NO_I64,
            np.empty(n, dtype=np.float64),
        )
        _topology_jit(
            n, stride,
            np.ascontiguousarray(free_mask, dtype=np.int64),
            np.ascontiguousarray(layout, dtype=np.int32),
            *bank.prepared, bank.stamp, *bank.memo, *self._counts_for(layouts),
            self._scratch_for(layouts, int(sizes.shape[0]), n),
            int(full), out.mask, out.domains, out.loss, out.score,
        )  # fmt: skip
        return out

    def run_python(
        self,
        free_mask: I64,
        layout: I32,
        layouts: Layouts,
        k: int,
        sizes: I64,
        size_w: I64,
        weight: float = 1.0,
        loss_weight: float = 1.0,
    ) -> TopologyResult:
        """Pure-Python reference: the same loops run by the interpreter over lists."""
        bank = self._bank(layouts, k, sizes, size_w, weight, loss_weight)
        prepared = [a.tolist() if isinstance(a, np.ndarray) else a for a in bank.prepared]
        n = int(free_mask.shape[0])
        stride = int(layouts.domain.shape[1])
        size = layouts.memo_size
        memo: list[list[int] | list[float]] = [[0] * size for _ in range(4)]
        memo.append([0.0] * size)
        counts = layouts.count_memo_size
        memo += [[0] * (COUNT_FIELDS * counts), [0.0] * counts]
        scratch = [0] * scratch_size(int(layouts.count.shape[0]), int(sizes.shape[0]), stride, n)
        outs: list[list[int] | list[float]] = [[0] * n, [0] * n, [0] * n, [0.0] * n]
        _topology_loops_python(
            n, stride, free_mask.tolist(), layout.tolist(), *prepared, 1, *memo, scratch, 1, *outs
        )
        return TopologyResult(
            np.asarray(outs[0], dtype=np.int64),
            np.asarray(outs[1], dtype=np.int32),
            np.asarray(outs[2], dtype=np.int64),
            np.asarray(outs[3], dtype=np.float64),
        )


def _domain_counts(
    free_mask: I64, layout: I32, layouts: Layouts
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_], I64]:
    """Per node: its free GPU slots [n, G], GPU-in-domain one-hot [n, G(gpu), G(domain)]
    and free GPUs per domain [n, D=G]."""
    stride = layouts.domain.shape[1]
    count = layouts.count[layout].astype(np.int64)  # [n]
    dom = layouts.domain[layout]  # [n, G]
    slots = np.arange(stride)
    real = slots < count[:, None]
    bits = ((free_mask[:, None] >> slots) & 1).astype(bool) & real
    onehot = (dom[:, :, None] == slots) & real[:, :, None]  # [n, G(gpu), G(domain)]
    cnt = (onehot & bits[:, :, None]).sum(axis=1).astype(np.int64)  # [n, D]
    return bits, onehot, cnt


def _solve(
    cnt: I64,
    layout: I32,
    layouts: Layouts,
    k: int,
    sizes: I64,
    size_w: I64,
    weight: float,
    loss_weight: float,
) -> tuple[I64, I32, I64, F64]:
    """From free GPUs per domain [n, D]: GPUs taken per domain, domains crossed, loss and
    score (none of them depends on which GPUs of a domain are free)."""
    n, stride = cnt.shape
    count = layouts.count[layout].astype(np.int64)
    slots = np.arange(stride)
    # GPUs in each layout's largest domain (per layout: [L, G, G] for a handful of
    # layouts, where per node it was [n, G, G] again)
    real = slots < layouts.count[:, None]
    biggest = ((layouts.domain[:, :, None] == slots) & real[:, :, None]).sum(axis=1).max(axis=1)
    biggest = biggest[layout]
    tot = cnt.sum(axis=1)
    fits = (tot >= k) & (k > 0)
    big = np.int64(1) << 40
    # domains taken whole, largest first (ties: lowest id), until the rest fits one
    order = np.argsort(-cnt, axis=1, kind="stable")
    sorted_cnt = np.take_along_axis(cnt, order, axis=1)
    prefix = np.cumsum(sorted_cnt, axis=1) - sorted_cnt  # taken before step t
    rest = k - prefix
    # step t works when some untaken domain holds `rest`; the largest untaken is sorted[t]
    can = (sorted_cnt >= rest) & (rest > 0)
    t_star = np.where(can.any(axis=1), can.argmax(axis=1), 0)
    r = rest[np.arange(n), t_star]
    taken_whole = np.zeros((n, stride), dtype=bool)
    pos = np.arange(stride)
    np.put_along_axis(taken_whole, order, pos[None, :] < t_star[:, None], axis=1)
    cand = ~taken_whole & (cnt >= r[:, None]) & (slots < count[:, None])
    key = np.where(cand, cnt * stride + slots, big)
    fit = key.argmin(axis=1)
    take = np.where(taken_whole, cnt, 0)
    take[np.arange(n), fit] = r
    take = np.where(fits[:, None], take, 0)
    ndom = np.where(fits, t_star + 1, 0).astype(np.int32)
    after_cnt = cnt - take
    before = np.zeros(n, dtype=np.int64)
    after = np.zeros(n, dtype=np.int64)
    for s, w in zip(sizes.tolist(), size_w.tolist(), strict=True):
        inside = s <= biggest
        p_b = np.where(inside, (cnt // s).sum(axis=1), tot // s)
        p_a = np.where(inside, (after_cnt // s).sum(axis=1), (tot - k) // s)
        before += w * (tot - s * p_b)
        after += w * (tot - k - s * p_a)
    loss = np.where(fits, after - before, 0).astype(np.int64)
    w_sum = int(size_w.sum())
    with np.errstate(divide="ignore"):
        quality = 1.0 / ndom
    score = np.where(fits, weight * quality - loss_weight * (loss / (w_sum * count)), -np.inf)
    return take, ndom, loss, score


def _chosen(
    bits: npt.NDArray[np.bool_],
    onehot: npt.NDArray[np.bool_],
    layout: I32,
    layouts: Layouts,
    take: I64,
) -> I64:
    """The lowest-indexed free GPUs of each domain, ``take[d]`` of them, as a bitmask."""
    dom = layouts.domain[layout]
    slots = np.arange(layouts.domain.shape[1])
    rank = np.cumsum(onehot & bits[:, :, None], axis=1)  # [n, G, D]
    gpu_rank = (rank * onehot).sum(axis=2)  # 1-based rank of a free GPU in its domain
    gpu_take = np.take_along_axis(take, dom.astype(np.int64), axis=1)
    chosen_bits = bits & (gpu_rank <= gpu_take)
    out: I64 = (chosen_bits.astype(np.int64) << slots).sum(axis=1).astype(np.int64)
    return out


def topology_numpy(
    free_mask: I64,
    layout: I32,
    layouts: Layouts,
    k: int,
    sizes: I64,
    size_w: I64,
    weight: float = 1.0,
    loss_weight: float = 1.0,
) -> TopologyResult:
    """Vectorised numpy reference (no memo): nodes × GPU slots × domains."""
    bits, onehot, cnt = _domain_counts(free_mask, layout, layouts)
    take, ndom, loss, score = _solve(cnt, layout, layouts, k, sizes, size_w, weight, loss_weight)
    return TopologyResult(_chosen(bits, onehot, layout, layouts, take), ndom, loss, score)


def topology_numpy_dedup(
    free_mask: I64,
    layout: I32,
    layouts: Layouts,
    k: int,
    sizes: I64,
    size_w: I64,
    weight: float = 1.0,
    loss_weight: float = 1.0,
) -> TopologyResult:
    """The numpy reference with the kernel's two deduplications, done the numpy way
    (np.unique): distinct (layout, free mask) pairs, and among those the distinct
    (layout, free GPUs per domain), which decide all but the chosen GPUs."""
    key = (layout.astype(np.int64) << 32) | free_mask.astype(np.int64)
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    p_mask, p_layout = free_mask[first], layout[first]
    bits, onehot, cnt = _domain_counts(p_mask, p_layout, layouts)
    by_counts = np.concatenate([p_layout.astype(np.int64)[:, None], cnt], axis=1)
    _, c_first, c_inverse = np.unique(by_counts, axis=0, return_index=True, return_inverse=True)
    c_inverse = c_inverse.reshape(-1)
    take, ndom, loss, score = _solve(
        cnt[c_first], p_layout[c_first], layouts, k, sizes, size_w, weight, loss_weight
    )
    chosen = _chosen(bits, onehot, p_layout, layouts, take[c_inverse])
    pair = c_inverse[inverse]
    return TopologyResult(chosen[inverse], ndom[pair], loss[pair], score[pair])
