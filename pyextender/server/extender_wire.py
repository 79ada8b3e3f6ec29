"""Filter and prioritize replies written from arrays, for the HTTP path.

kube-scheduler sends thousands of node names per call and reads back as many.
Decoding them into str objects, mapping them to rows and building one reply
object per node cost more than the plugins' array work (profile at 5,000
nodes: the reply lists and their encoding were most of a filter call). So:

- the request keeps ``Pod`` and ``NodeNames`` as raw JSON bytes; a call whose
  bytes equal the previous call's reuses its decoded pod and row mapping. A new
  list (kube-scheduler's parallel filters append the nodes as they pass, so every
  cycle's order differs) is mapped to rows straight from its bytes by a kernel
  (``kernels.name_rows``) over a table of the cache's names, with no Python string
  per name;
- every node row has its name pre-encoded once (per node-set generation) in a
  fixed-width byte matrix; a reply is the matrix rows selected by the verdict
  arrays, copied out with ``tobytes``. Records are padded with JSON whitespace,
  which every JSON reader skips, so no per-node Python work remains.

The reply decodes to exactly what the struct path (``Extender.filter`` /
``Extender.prioritize`` encoded by msgspec) produces; tests pin that.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, overload

import msgspec
import numpy as np
import numpy.typing as npt

from pyextender.cache.state import ClusterState
from pyextender.kernels.name_rows import NameTable

U8 = npt.NDArray[np.uint8]

_encode = msgspec.json.Encoder().encode
_names_decoder = msgspec.json.Decoder(list[str] | None)
_pod_decoder = msgspec.json.Decoder(dict[str, Any] | None)

_SCORE_HEAD = b'{"Score":'
SCORE_AT = len(_SCORE_HEAD)
"""Column of a score's two characters in a host record (same for every node)."""
DIGITS: U8 = np.frombuffer(b"".join(f"{s:>2}".encode() for s in range(11)), np.uint8).reshape(11, 2)
"""Row s: the two characters of score s (0..10), space-padded on the left."""
_TENS: U8 = np.ascontiguousarray(DIGITS[:, 0])
_UNITS: U8 = np.ascontiguousarray(DIGITS[:, 1])


class ExtenderArgsWire(msgspec.Struct):
    """Body of filter and prioritize with ``Pod`` and ``NodeNames`` left undecoded
    (JSON ``null`` when absent). Their types are checked when they are decoded."""

    Pod: msgspec.Raw = msgspec.Raw(b"null")
    Nodes: dict[str, Any] | None = None
    NodeNames: msgspec.Raw = msgspec.Raw(b"null")


def _matrix(records: list[bytes]) -> U8:
    """Records padded with spaces to one width, as a (len, width) byte matrix."""
    width = max(map(len, records), default=0)
    flat = b"".join(r.ljust(width) for r in records)
    return np.frombuffer(flat, dtype=np.uint8).reshape(len(records), width)


@dataclass(slots=True)
class RowRecords:
    """Pre-encoded JSON per node row of one node set (one ``node_generation``)."""

    state: ClusterState
    generation: int
    quoted: U8
    """Row r: the node name as a JSON string, padded."""
    named: U8
    """Row r: ``quoted`` then ``,`` (a list entry)."""
    hosts: U8
    """Row r: ``{"Score":NN,"Host":"<name>"}`` padded, then ``,`` (score columns
    at SCORE_AT, filled per call)."""
    names: NameTable
    """The live nodes' names, for mapping a request's raw NodeNames to rows."""

    @classmethod
    def build(cls, state: ClusterState) -> RowRecords:
        quoted = [_encode(n) for n in state.node_names]
        hosts = [_SCORE_HEAD + b' 0,"Host":' + q + b"}" for q in quoted]
        host_m = _matrix(hosts)
        quoted_m = _matrix(quoted)
        comma = np.full((host_m.shape[0], 1), ord(","), dtype=np.uint8)
        live = np.fromiter(state.index.values(), np.int64, len(state.index))
        return cls(
            state=state,
            generation=state.node_generation,
            quoted=quoted_m,
            named=np.hstack([quoted_m, comma]),
            hosts=np.hstack([host_m, comma]),
            names=NameTable(quoted_m, live),
        )

    def current(self, state: ClusterState) -> bool:
        return self.state is state and self.generation == state.node_generation


class RowNames(Sequence[str]):
    """The names of ``rows`` (``node_names[rows[i]]``), read when asked: a request
    mapped from its bytes needs one or two of them (the decision log), not all."""

    __slots__ = ("_names", "_rows")

    def __init__(self, node_names: list[str], rows: npt.NDArray[np.int64]) -> None:
        self._names = node_names
        self._rows = rows

    def __len__(self) -> int:
        return int(self._rows.shape[0])

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self._names[r] for r in self._rows[i].tolist()]
        return self._names[int(self._rows[i])]


def decode_names(raw: bytes) -> list[str] | None:
    """``NodeNames`` (raises msgspec.ValidationError on a wrong type)."""
    names: list[str] | None = _names_decoder.decode(raw)
    return names


def decode_pod(raw: bytes) -> dict[str, Any] | None:
    """``Pod`` (raises msgspec.ValidationError on a wrong type)."""
    pod: dict[str, Any] | None = _pod_decoder.decode(raw)
    return pod


def name_list(named: U8, rows: npt.NDArray[np.int64]) -> bytes:
    """A JSON list of the names of ``rows`` (``named``: RowRecords.named), written once
    into one buffer."""
    n = rows.shape[0]
    if n == 0:
        return b"[]"
    width = named.shape[1]
    out = np.empty(1 + n * width, dtype=np.uint8)
    out[0] = ord("[")
    # in range (rows_of); "clip" gathers straight into the buffer (see host_scores)
    np.take(named, rows, axis=0, out=out[1:].reshape(n, width), mode="clip")
    out[-1] = ord("]")  # over the last name's comma
    return out.tobytes()


def reason_map(
    quoted: U8,
    rows: npt.NDArray[np.int64],
    reason_ids: npt.NDArray[np.int32],
    table: list[str],
    extra: bytes,
) -> bytes:
    """A JSON object {name: table[reason]} for the names of ``rows``; ``extra`` holds
    entries already encoded (``"name":"reason",`` each), placed first.

    Entries come grouped by reason (a JSON object's order carries nothing): each group
    is its names gathered as fixed-width items with one ``:"reason",`` tail broadcast
    after them, so no entry is padded to the longest reason, and a row costs one
    gather rather than the 2-D copies of a padded matrix (1,860 failed nodes of 5,000:
    100 -> 55 us, with the gather of their names the caller used to make)."""
    n = rows.shape[0]
    if n == 0:
        return b"{" + extra[:-1] + b"}"
    width = quoted.shape[1]
    names = quoted.view(f"V{width}").reshape(-1)
    present = np.flatnonzero(np.bincount(reason_ids, minlength=len(table))).tolist()
    groups = [(b":" + _encode(table[r]) + b",", rows[reason_ids == r]) for r in present]
    size = 1 + len(extra) + sum(sel.shape[0] * (width + len(t)) for t, sel in groups)
    out = np.empty(size, dtype=np.uint8)
    out[0] = ord("{")
    at = 1 + len(extra)
    out[1:at] = np.frombuffer(extra, dtype=np.uint8)
    for tail, sel in groups:
        item = width + len(tail)
        entries = out[at : at + sel.shape[0] * item].view(
            np.dtype({"names": ["name", "tail"], "formats": [f"V{width}", f"V{len(tail)}"],
                      "offsets": [0, width], "itemsize": item})
        )  # fmt: skip
        entries["name"] = np.take(names, sel, mode="clip")
        entries["tail"] = np.frombuffer(tail, dtype=f"V{len(tail)}")[0]
        at += sel.shape[0] * item
    out[-1] = ord("}")  # over the last entry's comma
    return out.tobytes()


def unknown_failed(names: list[str], reason: str) -> bytes:
    """``"name":"reason",`` for each name (nodes the cache does not hold)."""
    r = _encode(reason)
    return b"".join(_encode(n) + b":" + r + b"," for n in names)


def unknown_scores(names: list[str]) -> bytes:
    """``,{"Host":"name","Score":0}`` for each name (appended after the known ones)."""
    return b"".join(b',{"Host":' + _encode(n) + b',"Score":0}' for n in names)


def host_scores(
    hosts: U8, rows: npt.NDArray[np.int64], scores: npt.NDArray[np.int64], tail: bytes
) -> bytes:
    """The prioritize reply: the host record of each of ``rows`` with its score
    (0..10), then ``tail`` (``,``-led records), written once into one buffer. The
    score's two characters go in as two columns: assigning the (n, 2) block from a
    gathered (n, 2) array took 4x as long at 5,000 nodes (83 against 21 us)."""
    n = rows.shape[0]
    if n == 0:
        return b"[" + tail[1:] + b"]"
    width = hosts.shape[1]
    end = n * width  # the last record's trailing comma: the tail starts there
    out = np.empty(end + len(tail) + 1, dtype=np.uint8)
    out[0] = ord("[")
    records = out[1 : end + 1].reshape(n, width)
    # rows are the state's own (rows_of): in range. "clip" writes straight into
    # ``records``; the default "raise" gathers into a temporary first (24 -> 15 us)
    np.take(hosts, rows, axis=0, out=records, mode="clip")
    digits = np.clip(scores, 0, 10)
    records[:, SCORE_AT] = _TENS[digits]
    records[:, SCORE_AT + 1] = _UNITS[digits]
    out[end : end + len(tail)] = np.frombuffer(tail, dtype=np.uint8)
    out[-1] = ord("]")
    return out.tobytes()
