"""Hypothesis strategies for request bodies: a valid envelope with one field replaced
by something odd (wrong type, huge number, deep nesting, unicode, null), whole
random JSON documents, and raw bytes."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import strategies as st

JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.integers(min_value=-(2**200), max_value=2**200),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
    st.sampled_from(["", "0", "-1", "1e400", "9" * 40, "1Ki", "100m", "1.5", "\u0000", "💥"]),
)

JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)


def nested(depth: int, opener: str) -> Any:
    """A list or dict nested ``depth`` deep (as a Python value)."""
    value: Any = None
    for _ in range(depth):
        value = [value] if opener == "[" else {"a": value}
    return value


DEEP = st.builds(nested, st.integers(min_value=1, max_value=200), st.sampled_from(["[", "{"]))

ODD_VALUES = st.one_of(JSON_VALUES, DEEP)


def paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path (keys and indexes) into a JSON document, the root included."""
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += paths(v, (*prefix, i))
    return out


def replaced(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    out = copy.deepcopy(doc)
    parent = out
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return out


@st.composite
def mutated(draw: st.DrawFn, base: dict[str, Any]) -> bytes:
    """``base`` with one to three fields (anywhere, the root included) replaced, or
    one key added or removed."""
    doc: Any = copy.deepcopy(base)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        choices = paths(doc)
        path = draw(st.sampled_from(choices))
        op = draw(st.sampled_from(["replace", "replace", "add", "drop"]))
        if op == "replace":
            doc = replaced(doc, path, draw(ODD_VALUES))
            continue
        target: Any = doc
        for key in path:
            target = target[key]
        if op == "add" and isinstance(target, dict):
            target[draw(st.text(max_size=12))] = draw(ODD_VALUES)
        elif op == "drop" and isinstance(target, dict) and target:
            del target[draw(st.sampled_from(sorted(target)))]
    return json.dumps(doc).encode()


def deep_text(depth: int, opener: str) -> bytes:
    """Nesting far beyond any recursion limit, as text (never a Python value)."""
    closer = "]" if opener == "[" else "}"
    head = opener if opener == "[" else '{"a":'
    return (head * depth + "null" + closer * depth).encode()


RAW = st.one_of(
    st.binary(max_size=300),
    st.builds(
        deep_text, st.integers(min_value=500, max_value=100_000), st.sampled_from(["[", "{"])
    ),
    st.text(max_size=200).map(lambda s: s.encode("utf-8", "surrogatepass")),
    JSON_VALUES.map(lambda v: json.dumps(v).encode()),
)


def bodies(bases: list[dict[str, Any]]) -> st.SearchStrategy[bytes]:
    """Structured mutations of one of ``bases`` (3 in 4) and raw bytes (1 in 4)."""
    structured = st.sampled_from(bases).flatmap(mutated)
    return st.one_of(structured, structured, structured, RAW)
