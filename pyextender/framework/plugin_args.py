"""Typed plugin arguments: Volcano's string-keyed ``arguments`` -> a frozen dataclass.

A plugin's ``PluginSpec.args_type`` is a frozen dataclass; every field should
have a default (Volcano plugins run with no arguments at all).

How argument keys map onto dataclass fields, for a plugin named ``p`` and a
field named ``f`` (all keys exact, case-sensitive):

* derived keys: ``f``, ``f`` with ``_`` read as ``.``, and both again behind
  ``p.`` -- so field ``leastrequested_weight`` takes Volcano's
  ``leastrequested.weight`` and field ``weight`` of binpack takes
  ``binpack.weight`` with no extra declaration;
* ``field.metadata["aliases"]``: further exact keys for keys that do not
  follow that rule, e.g. ``("predicate.GPUSharingEnable",)``;
* prefixes, for ``dict[str, X]`` fields only: ``p.f.`` (derived) and
  ``field.metadata["prefix"]``; every key starting with the prefix lands in
  the dict under the rest of the key, e.g. prefix ``"binpack.resources."``
  sends ``binpack.resources.nvidia.com/gpu: 8`` to ``{"nvidia.com/gpu": 8}``.

An exact key wins over a prefix, the longest prefix wins among prefixes, and
an alias wins over a derived key. Any other key is an error.

``arg()`` builds such a field and ``@arguments`` makes the frozen dataclass::

    @arguments
    class BinpackArgs:
        weight: int = arg("Score weight.", default=1, aliases=("binpack.weight",))
        resource_weights: dict[str, int] = arg(
            "Per-resource weights.", default_factory=dict, prefix="binpack.resources."
        )

Value types: int, float (ints accepted), bool,
str, ``datetime.timedelta`` (Go duration "5m" or seconds), ``Literal`` of
strings, ``X | None``, ``list[X]`` / ``tuple[X, ...]`` (a comma-separated
string is accepted, as Volcano writes ``binpack.resources``), ``dict[str, X]``
and nested dataclasses. Errors name the plugin and the key.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import difflib
import types
from collections.abc import Callable, Mapping, Sequence
from typing import (
    Any,
    Literal,
    TypeVar,
    Union,
    dataclass_transform,
    get_args,
    get_origin,
    get_type_hints,
)

from pyextender.api.volcano.codec import duration_seconds, show

ALIASES = "aliases"
"""Field metadata key: tuple of extra exact argument keys for the field."""
PREFIX = "prefix"
"""Field metadata key: key prefix collected into a dict field."""
DOC = "doc"
"""Field metadata key: what the argument does (for docs and ``vcctl explain``)."""


def arg(
    doc: str,
    *,
    default: Any = dataclasses.MISSING,
    default_factory: Any = dataclasses.MISSING,
    aliases: tuple[str, ...] = (),
    prefix: str | None = None,
) -> Any:
    """Declare a plugin argument field (see the module docstring for key mapping)."""
    meta: dict[str, Any] = {DOC: doc, ALIASES: aliases}
    if prefix is not None:
        meta[PREFIX] = prefix
    return dataclasses.field(default=default, default_factory=default_factory, metadata=meta)


T = TypeVar("T")


@dataclass_transform(frozen_default=True, kw_only_default=True, field_specifiers=(arg,))
def arguments(cls: type[T]) -> type[T]:
    """Make ``cls`` a frozen, keyword-only dataclass whose fields are declared with ``arg()``.

    (A plain ``@dataclass(frozen=True)`` with ``field(metadata={"aliases": ...})``
    works as well; this spelling keeps linters from flagging ``arg()`` defaults.)
    """
    return dataclasses.dataclass(frozen=True, kw_only=True)(cls)


def suggest(word: str, choices: Sequence[str]) -> str:
    """' (did you mean "x"?)' for the closest choice, or "" when none is close."""
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f' (did you mean "{close[0]}"?)' if close else ""


def argument_keys(args_type: type[Any], plugin: str = "") -> dict[str, str]:
    """Exact argument key -> field name, for every key the args type accepts."""
    derived: dict[str, str] = {}
    aliases: dict[str, str] = {}
    for f in dataclasses.fields(args_type):
        for key in {f.name, f.name.replace("_", ".")}:
            derived[key] = f.name
            if plugin:
                derived[f"{plugin}.{key}"] = f.name
        for alias in f.metadata.get(ALIASES, ()):
            aliases[alias] = f.name
    return {**derived, **aliases}


def argument_prefixes(args_type: type[Any], plugin: str = "") -> list[tuple[str, str]]:
    """(key prefix, field name) for dict fields, longest prefix first."""
    hints = get_type_hints(args_type)
    out: list[tuple[str, str]] = []
    for f in dataclasses.fields(args_type):
        if not _is_dict(hints[f.name]):
            continue
        if PREFIX in f.metadata:
            out.append((f.metadata[PREFIX], f.name))
        if plugin:
            out.append((f"{plugin}.{f.name}.", f.name))
    return sorted(out, key=lambda p: -len(p[0]))


def _is_dict(tp: Any) -> bool:
    if _is_union(tp):
        return any(_is_dict(a) for a in get_args(tp) if a is not type(None))
    return get_origin(tp) in (dict, Mapping)


@dataclasses.dataclass(slots=True)
class Lenient:
    """How build_args treats an argument key the args type does not know.

    ``ignored(key)`` gives the reason a key of the other distribution's plugin
    is not used here (or None); such a key, and any key not close to a known
    one (``close_to`` adds names to compare with), is skipped with a warning
    ``(key, message)`` in ``warnings``. A key close to a known one stays a
    problem: it is most likely a typo of an argument that would then be lost.
    """

    ignored: Callable[[str], str | None] = lambda key: None
    close_to: Sequence[str] = ()
    warnings: list[tuple[str, str]] = dataclasses.field(default_factory=list)

    def skip(self, key: str, where: str, known: Sequence[str]) -> bool:
        why = self.ignored(key)
        if why is not None:
            self.warnings.append((key, f'{where}: argument "{key}" ignored: {why}'))
            return True
        if suggest(key, [*known, *self.close_to]):
            return False
        self.warnings.append(
            (key, f'{where}: unknown argument "{key}" ignored (not close to any we know)')
        )
        return True


def build_args(
    args_type: type[Any],
    raw: Any,
    where: str,
    problems: list[str],
    plugin: str = "",
    *,
    lenient: Lenient | None = None,
) -> Any:
    """Turn an ``arguments`` mapping into an ``args_type`` instance, appending problems.

    ``plugin`` is the plugin name used for derived keys (``binpack.weight``).
    Returns None when there were problems. Without ``lenient`` every unknown key
    is a problem; with it, see ``Lenient``.
    """
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        problems.append(f"{where}: arguments must be a mapping, got {show(raw)}")
        return None
    hints = get_type_hints(args_type)
    fields = {f.name: f for f in dataclasses.fields(args_type)}
    exact = argument_keys(args_type, plugin)
    prefixes = argument_prefixes(args_type, plugin)
    values: dict[str, Any] = {}
    collected: dict[str, dict[str, Any]] = {}
    count = len(problems)
    for key, value in raw.items():
        key = str(key)
        if key in exact:
            name = exact[key]
            if name in values:
                problems.append(f'{where}: argument "{key}" sets {name} again')
                continue
            values[name] = _convert(hints[name], value, f'{where}: argument "{key}"', problems)
            continue
        match = next(((p, n) for p, n in prefixes if key.startswith(p) and len(key) > len(p)), None)
        if match is None:
            if lenient is None or not lenient.skip(key, where, list(exact)):
                names = [*exact, *(lenient.close_to if lenient else ())]
                problems.append(f'{where}: unknown argument "{key}"{suggest(key, names)}')
            continue
        prefix, name = match
        item_type = _dict_value_type(hints[name])
        collected.setdefault(name, {})[key[len(prefix) :]] = _convert(
            item_type, value, f'{where}: argument "{key}"', problems
        )
    for name, items in collected.items():
        merged = dict(values.get(name) or {})
        merged.update(items)
        values[name] = merged
    missing = [
        n
        for n, f in fields.items()
        if n not in values
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    for name in missing:
        problems.append(f'{where}: required argument "{name}" is missing')
    if len(problems) > count:
        return None
    try:
        return args_type(**values)
    except (TypeError, ValueError) as exc:  # __post_init__ checks of the args type
        problems.append(f"{where}: {exc}")
        return None


def _dict_value_type(tp: Any) -> Any:
    args = [a for a in get_args(tp) if a is not type(None)] if _is_union(tp) else [tp]
    inner = args[0]
    if get_origin(inner) in (dict, Mapping):
        return get_args(inner)[1]
    raise TypeError(f"a prefix field must be a dict[str, X], got {tp!r}")


def _is_union(tp: Any) -> bool:
    return get_origin(tp) in (Union, types.UnionType)


def _type_name(tp: Any) -> str:
    if tp is bool:
        return "true or false"
    if tp is int:
        return "an integer"
    if tp is float:
        return "a number"
    if tp is str:
        return "a string"
    if tp is dt.timedelta:
        return 'a duration such as "90s" or "5m"'
    return getattr(tp, "__name__", str(tp))


def _convert(tp: Any, value: Any, where: str, problems: list[str]) -> Any:
    """Convert one YAML value to ``tp``; on failure append a problem and return None."""
    if _is_union(tp):
        inner = [a for a in get_args(tp) if a is not type(None)]
        if value is None:
            return None
        if len(inner) == 1:
            return _convert(inner[0], value, where, problems)
        problems.append(f"{where}: unsupported argument type {tp!r}")
        return None
    origin = get_origin(tp)
    if tp is Any:
        return value
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif tp is str:
        if isinstance(value, str):
            return value
    elif tp is dt.timedelta:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return dt.timedelta(seconds=value)
        if isinstance(value, str):
            try:
                return dt.timedelta(seconds=duration_seconds(value.strip()))
            except ValueError:
                pass
    elif origin is Literal:
        allowed = get_args(tp)
        if value in allowed:
            return value
        problems.append(
            f"{where}: must be one of {', '.join(map(show, allowed))}, got {show(value)}"
        )
        return None
    elif origin in (list, tuple, Sequence):
        item = get_args(tp)[0]
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if isinstance(value, list):
            items = [_convert(item, v, f"{where}[{i}]", problems) for i, v in enumerate(value)]
            return tuple(items) if origin is not list else items
        problems.append(f"{where}: must be a list, got {show(value)}")
        return None
    elif origin in (dict, Mapping):
        item = get_args(tp)[1]
        if isinstance(value, Mapping):
            return {str(k): _convert(item, v, f"{where}[{k}]", problems) for k, v in value.items()}
        problems.append(f"{where}: must be a mapping, got {show(value)}")
        return None
    elif dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return build_args(tp, value, where, problems)
    else:
        problems.append(f"{where}: unsupported argument type {tp!r}")
        return None
    problems.append(f"{where}: must be {_type_name(tp)}, got {show(value)}")
    return None
