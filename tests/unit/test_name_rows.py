"""kernels.name_rows: a request's raw NodeNames mapped to rows from its bytes."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pyextender.kernels.name_rows import NameTable
from pyextender.server.extender_wire import _encode, _matrix

DNS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789.-", min_size=1, max_size=40)


def _table(names: list[str], live: list[int]) -> NameTable:
    return NameTable(_matrix([_encode(n) for n in names]), np.asarray(live, dtype=np.int64))


@settings(max_examples=150, deadline=None)
@given(
    st.lists(DNS, min_size=1, max_size=60, unique=True),
    st.data(),
    st.sampled_from([None, 0, 2]),
    st.booleans(),
)
def test_rows_equal_a_dict_lookup_or_none_when_a_name_is_not_held(
    names: list[str], data: st.DataObject, indent: int | None, tight: bool
) -> None:
    """Any list (repeats, any order, JSON whitespace anywhere json.dumps puts it): the
    rows a dict of the live names gives, or None (the decoder's path) when a name is
    not live: removed from the cache, or never seen."""
    live = sorted(data.draw(st.sets(st.integers(0, len(names) - 1), min_size=1)))
    index = {names[r]: r for r in live}
    pool = [*names, "never-seen", "node-x"]
    asked = data.draw(st.lists(st.sampled_from(pool), max_size=80))
    sep = (",", ":") if tight else (", ", ": ")
    raw = json.dumps(asked, indent=indent, separators=sep).encode()
    table = _table(names, live)
    want = None
    if all(n in index for n in asked):
        want = [index[n] for n in asked]
    for python in (False, True):
        got = table.rows(raw, python=python)
        assert (got if got is None else got.tolist()) == want


def test_escapes_other_values_and_broken_lists_go_to_the_decoder() -> None:
    names = ["a", "b.c", 'q"uote', "back\\slash", "é"]
    table = _table(names, list(range(len(names))))
    assert table.rows(b'["a","b.c"]').tolist() == [0, 1]  # type: ignore[union-attr]
    assert table.rows(b"[]").tolist() == []  # type: ignore[union-attr]
    for raw in (
        json.dumps(['q"uote']).encode(),  # escaped quote
        json.dumps(["back\\slash"]).encode(),
        json.dumps(["é"]).encode(),  # \u00e9
        b'["\\u0061"]',  # "a", escaped
        b"null",
        b'"a"',
        b'["a", 1]',
        b'["a",]',
        b'["a"',
        b'["a"] ["b"]',
        b"",
    ):
        assert table.rows(raw) is None, raw
        assert table.rows(raw, python=True) is None, raw
    # the UTF-8 bytes themselves are a name it holds
    assert table.rows(json.dumps(["é"], ensure_ascii=False).encode()).tolist() == [4]  # type: ignore[union-attr]


def test_an_empty_cache_holds_no_name() -> None:
    table = NameTable(np.zeros((0, 0), dtype=np.uint8), np.zeros(0, dtype=np.int64))
    assert table.rows(b'["a"]') is None
    assert table.rows(b"[]").tolist() == []  # type: ignore[union-attr]


def test_a_cache_holding_a_name_longer_than_a_table_entry_counts_maps_nothing() -> None:
    """A table entry keeps a name's length in 8 bits: with a longer name held (no node
    can have one: DNS subdomains have at most 253 bytes) every list goes to the decoder,
    which still answers right, instead of a table that could confuse two lengths."""
    names = ["a", "b" * 255, "c" * 256]
    assert _table(names[:2], [0, 1]).rows(b'["a"]').tolist() == [0]  # type: ignore[union-attr]
    table = _table(names, [0, 1, 2])
    assert table.rows(b'["a"]') is None
    assert table.rows(b'["a"]', python=True) is None
