"""Node names in a request's raw JSON list -> cache rows, without Python strings.

kube-scheduler sends filter and prioritize the names of the nodes its own filters
passed, in the order its parallel filter workers finished them: a list that is new
on every call. Decoding 5,000 names into Python strings and looking each up in a
dict took 0.38 ms per call (msgspec 0.13, dict lookups 0.25). This kernel reads the
list's bytes once, hashes each name and finds its row in an open-addressing table of
the cache's names (built once per node set), checking the name against that row's:
0.10 ms for 5,000 names (``python bench/verbs.py``'s churn scenario sends such lists).

Anything unusual makes the caller take the decoder's path instead (``status`` -1): a
backslash (an escaped character: node names never need one), an element that is not
a string, a name the table does not hold (a node the cache has not seen: the reply
names it), or bytes that are not a JSON list. The decoder then validates and reports
exactly as before.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from pyextender.kernels.jit import LoopKernel, compile_kernel, unsigned

U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]

WORD = 7
"""Name bytes per word: a name is read as 7-byte little-endian words (56 bits, so every
word is the same non-negative int64 in the kernel and in the interpreter), hashed and
compared a word at a time. A multiply per byte for the hash, and a byte-by-byte check
of the match, took 170 µs for 5,000 names; words 154, and unsigned indices 103."""
HASH_MASK = 2**31 - 1
"""The hash is kept to 31 bits, so ``h * HASH_MUL`` never overflows int64."""
HASH_MUL = 1000003
ROW_MASK = (1 << 24) - 1
"""A table entry holds its row in 24 bits and its name's length in 8 (DNS subdomain
names, as node names are, have at most 253 bytes): past either, no table is built."""
MAX_LENGTH = 255


def name_rows_loops(
    raw: U8,  # the JSON list's bytes
    n_raw: int,
    words: I64,  # [rows * n_words] each row's name as 7-byte words, zero-padded
    n_words: int,
    table: I64,  # [mask + 1] per slot hash << 32 | length << 24 | row, -1 empty (build_loops)
    mask: int,
    scratch: I64,  # [n_words + 1] the name being read, as words
    out_rows: I64,  # [>= names in raw] the rows, in the list's order
    status: I64,  # [1] names found, or -1: take the decoder's path
) -> None:
    # indices as unsigned (jit.unsigned): no wrap-around check per access (-28 %)
    status[0] = -1
    i = 0
    while i < n_raw and (raw[i] == 32 or raw[i] == 10 or raw[i] == 13 or raw[i] == 9):
        i += 1
    if i >= n_raw or raw[unsigned(i)] != 91:  # [
        return
    i += 1
    n = 0
    while True:
        while i < n_raw and (raw[i] == 32 or raw[i] == 10 or raw[i] == 13 or raw[i] == 9):
            i += 1
        if i >= n_raw:
            return
        if n == 0 and raw[unsigned(i)] == 93:  # ] of an empty list
            i += 1
            break
        if raw[unsigned(i)] != 34:  # not a string
            return
        start = i + 1
        j = start
        h = 0
        w = 0
        shift = 0
        m = 0
        while j < n_raw and raw[unsigned(j)] != 34:
            if raw[unsigned(j)] == 92:  # \: an escape
                return
            w |= raw[unsigned(j)] << shift
            shift += 8
            if shift == 8 * WORD:
                if m == n_words:  # longer than every name held
                    return
                scratch[m] = w
                m += 1
                h = ((h ^ (w & HASH_MASK) ^ (w >> 31)) * HASH_MUL) & HASH_MASK
                w = 0
                shift = 0
            j += 1
        if j >= n_raw:
            return
        if shift:
            if m == n_words:
                return
            scratch[m] = w
            m += 1
            h = ((h ^ (w & HASH_MASK) ^ (w >> 31)) * HASH_MUL) & HASH_MASK
        size = j - start
        slot = (h ^ (h >> 15)) & mask
        row = -1
        # one read per slot gives its name's hash, length and row (three arrays were
        # three cache misses per name): another name's slot is passed over unread
        want = (h << 32) | (size << 24)
        while table[unsigned(slot)] >= 0:
            entry = table[unsigned(slot)]
            if entry >> 24 == want >> 24:
                r = entry & ROW_MASK
                base = r * n_words
                k = 0
                while k < m and words[unsigned(base + k)] == scratch[unsigned(k)]:
                    k += 1
                if k == m:
                    row = r
                    break
            slot = (slot + 1) & mask
        if row < 0:  # not a node the cache holds
            return
        out_rows[n] = row
        n += 1
        i = j + 1
        while i < n_raw and (raw[i] == 32 or raw[i] == 10 or raw[i] == 13 or raw[i] == 9):
            i += 1
        if i >= n_raw:
            return
        if raw[unsigned(i)] == 44:  # ,
            i += 1
            continue
        if raw[unsigned(i)] != 93:  # ]
            return
        i += 1
        break
    while i < n_raw and (raw[i] == 32 or raw[i] == 10 or raw[i] == 13 or raw[i] == 9):
        i += 1
    if i == n_raw:
        status[0] = n


def build_loops(
    quoted: U8,  # [rows * width] each row's name as a JSON string ("name"), space-padded
    width: int,
    qlen: I64,  # [rows] bytes of each row's "name" (quotes included)
    rows: I64,  # [n_rows] the live rows
    n_rows: int,
    words: I64,  # [rows * n_words] out: each row's name as words (as name_rows_loops)
    n_words: int,
    table: I64,  # [mask + 1] filled with -1 by the caller
    mask: int,
) -> None:
    for e in range(n_rows):
        r = rows[e]
        base = r * width + 1
        size = qlen[r] - 2
        h = 0
        w = 0
        shift = 0
        m = 0
        for k in range(size):
            w |= quoted[base + k] << shift
            shift += 8
            if shift == 8 * WORD:
                words[r * n_words + m] = w
                m += 1
                h = ((h ^ (w & HASH_MASK) ^ (w >> 31)) * HASH_MUL) & HASH_MASK
                w = 0
                shift = 0
        if shift:
            words[r * n_words + m] = w
            h = ((h ^ (w & HASH_MASK) ^ (w >> 31)) * HASH_MUL) & HASH_MASK
        slot = (h ^ (h >> 15)) & mask
        while table[slot] >= 0:
            slot = (slot + 1) & mask
        table[slot] = (h << 32) | (size << 24) | r


_name_rows_jit = compile_kernel(name_rows_loops)
_build_jit = compile_kernel(build_loops)
name_rows_python: LoopKernel = name_rows_loops
"""The same loops, interpreted (the reference the tests compare with)."""


class NameTable:
    """The cache's live node names by row, for ``rows``: one per node set."""

    __slots__ = ("_mask", "_n_words", "_table", "_usable", "_words")

    def __init__(self, quoted: U8, live_rows: I64) -> None:
        """``quoted``: (rows, width) each row's ``"name"`` padded with spaces (after the
        closing quote); ``live_rows``: the rows of the nodes the cache holds."""
        rows, width = quoted.shape
        flat = np.ascontiguousarray(quoted).reshape(-1)
        # a row's "name" ends at its last byte that is not padding
        qlen: I64 = np.zeros(rows, dtype=np.int64)
        if width:
            filled = quoted != ord(" ")
            last = width - 1 - np.argmax(filled[:, ::-1], axis=1)
            qlen = np.where(filled.any(axis=1), last + 1, 0).astype(np.int64)
        self._n_words = max(1, -(-max(int(width) - 2, 0) // WORD))
        self._words: I64 = np.zeros(rows * self._n_words, dtype=np.int64)
        live = np.ascontiguousarray(live_rows, dtype=np.int64)
        size = 1 << max(4, int(2 * live.shape[0] - 1).bit_length())  # load <= 1/2
        self._mask = size - 1
        self._table: I64 = np.full(size, -1, dtype=np.int64)
        # rows and name lengths must fit their bits of a table entry (see ROW_MASK)
        self._usable = rows <= ROW_MASK + 1 and int(qlen.max(initial=0)) - 2 <= MAX_LENGTH
        if self._usable:
            _build_jit(flat, int(width), qlen, live, int(live.shape[0]), self._words,
                       self._n_words, self._table, self._mask)  # fmt: skip

    def rows(self, raw: bytes, python: bool = False) -> I64 | None:
        """Rows of the names in the JSON list ``raw``, in its order; None when the
        decoder must read it (see the module docstring)."""
        if not self._usable:
            return None
        out = np.empty(len(raw) // 3 + 1, dtype=np.int64)  # a name takes >= 3 bytes: "",
        if python:  # the interpreter reads lists (numpy scalars would wrap at uint8)
            outs: list[int] = out.tolist()
            got = [0]
            name_rows_python(list(raw), len(raw), self._words.tolist(), self._n_words,
                             self._table.tolist(), self._mask, [0] * (self._n_words + 1),
                             outs, got)  # fmt: skip
            return None if got[0] < 0 else np.asarray(outs[: got[0]], dtype=np.int64)
        status = np.zeros(1, dtype=np.int64)
        scratch = np.empty(self._n_words + 1, dtype=np.int64)
        _name_rows_jit(np.frombuffer(raw, dtype=np.uint8), len(raw), self._words,
                       self._n_words, self._table, self._mask, scratch, out,
                       status)  # fmt: skip
        found = int(status[0])
        return None if found < 0 else out[:found]
