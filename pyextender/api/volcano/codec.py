"""Typed Kubernetes documents: dataclass models decoded from and encoded to JSON.

One declaration drives three things: decoding with errors that name the field
path (``spec.minMember: must be an integer >= 0, got "x"``), encoding back to
JSON with Go's ``omitempty`` rules, and the CRD openAPIV3Schema
(``pyextender.api.volcano.crdgen``). A model is a class decorated with
``@model`` whose fields are declared with ``attr(...)``.

Type vocabulary of model fields: ``str``, ``int``, ``float``, ``bool``,
``Literal[...]`` of strings (an enum), ``X | None`` (a Go pointer: absent is
None, zero is kept), ``list[X]``, ``dict[str, X]``, another model, and the
annotated strings below (``Quantity``, ``Duration``, ``Timestamp``) plus
``RawObject`` for embedded Kubernetes types we pass through untouched (pod
templates, PVC specs).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
import types
from collections.abc import Callable, Mapping, Sequence
from typing import (
    Annotated,
    Any,
    ClassVar,
    Literal,
    Self,
    TypeVar,
    Union,
    dataclass_transform,
    get_args,
    get_origin,
    get_type_hints,
)

from pyextender.api.quantity import QuantityError, parse_quantity

Problem = tuple[str, str]
"""(field path, message)."""


class FieldError(ValueError):
    """A document that does not match its model; every problem names its field path."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems: list[Problem] = list(problems)
        super().__init__("; ".join(f"{p}: {m}" if p else m for p, m in self.problems))


@dataclasses.dataclass(frozen=True, slots=True)
class _Format:
    name: str


QUANTITY = _Format("quantity")
DURATION = _Format("duration")
DATE_TIME = _Format("date-time")
PRESERVE = _Format("preserve")

Quantity = Annotated[str, QUANTITY]
"""A resource quantity ("500m", "4Gi", 8); numbers are kept as their decimal text."""
Duration = Annotated[str, DURATION]
"""A Go duration string ("90s", "1h30m"); see duration_seconds()."""
Timestamp = Annotated[str, DATE_TIME]
"""An RFC 3339 time ("2024-05-01T12:00:00Z")."""
RawObject = Annotated[dict[str, Any], PRESERVE]
"""An embedded object we keep as JSON (the API server validates it elsewhere)."""
ResourceList = dict[str, Quantity]

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

_DURATION_RE = re.compile(r"^(?:0|(?:[0-9]+(?:\.[0-9]*)?(?:ns|us|µs|ms|s|m|h))+)$")
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?)(ns|us|µs|ms|s|m|h)")
_DURATION_UNIT = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_TIMESTAMP_RE = re.compile(
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?"
    r"(?:[Zz]|[+-][0-9]{2}:[0-9]{2})$"
)


def duration_seconds(text: str) -> float:
    """Seconds in a Go duration string ("1h30m" -> 5400.0). Raises ValueError."""
    if not _DURATION_RE.match(text):
        raise ValueError(f"invalid duration {text!r}")
    return sum(float(n) * _DURATION_UNIT[u] for n, u in _DURATION_PART.findall(text))


# ---------------------------------------------------------------- declaring


def attr(
    doc: str,
    *,
    default: Any = dataclasses.MISSING,
    default_factory: Callable[[], Any] | Any = dataclasses.MISSING,
    json_name: str = "",
    minimum: int | None = None,
    maximum: int | None = None,
    int64: bool = False,
    pattern: str | None = None,
    max_length: int | None = None,
    required: bool = False,
    schema_default: bool = False,
) -> Any:
    """Declare a model field.

    ``doc`` becomes the schema description. ``json_name`` overrides the
    camelCase name derived from the Python name. ``required`` means the key
    must be present in JSON (and is always written). ``schema_default`` puts
    the Python default into the CRD schema so the API server applies it too.
    Integers are int32 unless ``int64``.
    """
    meta = {
        "doc": doc,
        "json": json_name,
        "minimum": minimum,
        "maximum": maximum,
        "int64": int64,
        "pattern": pattern,
        "max_length": max_length,
        "required": required,
        "schema_default": schema_default,
    }
    return dataclasses.field(default=default, default_factory=default_factory, metadata=meta)


T = TypeVar("T")


@dataclass_transform(kw_only_default=True, field_specifiers=(attr,))
def model(cls: type[T]) -> type[T]:
    """Make ``cls`` a keyword-only, slotted dataclass model."""
    return dataclasses.dataclass(kw_only=True, slots=True)(cls)


class Model:
    """Base of every model: decoding, encoding and cross-field checks."""

    __slots__ = ()
    CEL_RULES: ClassVar[tuple[tuple[str, str], ...]] = ()
    """(rule, message) pairs the API server checks on this object (x-kubernetes-validations);
    ``check()`` enforces the same rules in Python."""

    @classmethod
    def from_dict(cls, data: Any, path: str = "") -> Self:
        """Decode a JSON/YAML document. Raises FieldError listing every problem."""
        return decode(cls, data, path)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict, omitting empty values as Go's ``omitempty`` would."""
        out = encode(self)
        assert isinstance(out, dict)
        return out

    def check(self) -> list[Problem]:
        """Cross-field rules; paths are relative to this object. Override as needed."""
        return []


# ---------------------------------------------------------------- type shapes


@dataclasses.dataclass(frozen=True, slots=True)
class Shape:
    """A field type reduced to what decoding and schema generation need.

    ``kind`` is one of: str, int, float, bool, enum, list, map, model, raw,
    quantity, duration, date-time, any.
    """

    kind: str
    optional: bool = False
    item: Shape | None = None
    model: type[Model] | None = None
    values: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class FieldInfo:
    """One model field: Python name, JSON name, shape, metadata, default."""

    name: str
    json: str
    shape: Shape
    doc: str
    minimum: int | None
    maximum: int | None
    int64: bool
    pattern: str | None
    max_length: int | None
    required: bool
    schema_default: bool
    default: Any


def camel(name: str) -> str:
    """snake_case -> camelCase."""
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def shape_of(tp: Any) -> Shape:
    """Reduce a (resolved) type hint to a Shape. Raises TypeError on unsupported types."""
    origin = get_origin(tp)
    if origin is Annotated:
        base, *extras = get_args(tp)
        for extra in extras:
            if isinstance(extra, _Format):
                return Shape("raw" if extra is PRESERVE else extra.name)
        return shape_of(base)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"unsupported union {tp!r}")
        return dataclasses.replace(shape_of(args[0]), optional=True)
    if origin is Literal:
        values = get_args(tp)
        if not all(isinstance(v, str) for v in values):
            raise TypeError(f"only string literals are supported, got {tp!r}")
        return Shape("enum", values=tuple(values))
    if origin is list:
        return Shape("list", item=shape_of(get_args(tp)[0]))
    if origin is dict:
        key, value = get_args(tp)
        if key is not str:
            raise TypeError(f"map keys must be str, got {tp!r}")
        return Shape("map", item=shape_of(value))
    if tp is Any:
        return Shape("any")
    if isinstance(tp, type) and issubclass(tp, Model):
        return Shape("model", model=tp)
    if tp in (str, int, float, bool):
        return Shape(tp.__name__)
    raise TypeError(f"unsupported field type {tp!r}")


_FIELDS: dict[type[Model], tuple[FieldInfo, ...]] = {}


def fields_of(cls: type[Model]) -> tuple[FieldInfo, ...]:
    """The fields of a model class, in declaration order (cached)."""
    cached = _FIELDS.get(cls)
    if cached is None:
        cached = _FIELDS[cls] = _collect_fields(cls)
    return cached


def _collect_fields(cls: type[Model]) -> tuple[FieldInfo, ...]:
    hints = get_type_hints(cls, include_extras=True)
    out = []
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        meta = f.metadata
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = dataclasses.MISSING
        out.append(
            FieldInfo(
                name=f.name,
                json=meta.get("json") or camel(f.name),
                shape=shape_of(hints[f.name]),
                doc=meta.get("doc", ""),
                minimum=meta.get("minimum"),
                maximum=meta.get("maximum"),
                int64=bool(meta.get("int64")),
                pattern=meta.get("pattern"),
                max_length=meta.get("max_length"),
                required=bool(meta.get("required")),
                schema_default=bool(meta.get("schema_default")),
                default=default,
            )
        )
    return tuple(out)


# ---------------------------------------------------------------- decoding

_BAD = object()
M = TypeVar("M", bound=Model)


def show(value: Any) -> str:
    """A value as users typed it, for error messages."""
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    try:
        return json.dumps(value, default=str)
    except (TypeError, ValueError):
        return repr(value)


def join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def decode(cls: type[M], data: Any, path: str = "") -> M:
    """Decode ``data`` into ``cls``. Raises FieldError naming every bad field."""
    problems: list[Problem] = []
    value = _decode_model(cls, data, path, problems)
    if problems or value is _BAD:
        raise FieldError(problems or [(path, "invalid")])
    assert isinstance(value, cls)
    return value


def _int_rule(info: FieldInfo | None) -> str:
    lo = info.minimum if info else None
    hi = info.maximum if info else None
    if lo is not None and hi is not None:
        return f"an integer in [{lo}, {hi}]"
    if lo is not None:
        return f"an integer >= {lo}"
    if hi is not None:
        return f"an integer <= {hi}"
    return "an integer"


def _decode_model(cls: type[Model], data: Any, path: str, problems: list[Problem]) -> Any:
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        problems.append((path, f"must be an object, got {show(data)}"))
        return _BAD
    infos = fields_of(cls)
    by_json = {f.json: f for f in infos}
    for key in data:
        if key not in by_json:
            problems.append((join(path, str(key)), "unknown field"))
    kwargs: dict[str, Any] = {}
    before = len(problems)
    for f in infos:
        sub = join(path, f.json)
        if f.json not in data or (data[f.json] is None and not f.required):
            if f.required:
                problems.append((sub, "required field is missing"))
            continue
        value = _decode_value(f.shape, data[f.json], sub, problems, f)
        if value is not _BAD:
            kwargs[f.name] = value
    if len(problems) > before:
        return _BAD
    try:
        obj = cls(**kwargs)
    except TypeError as exc:  # a required Python argument with no JSON value
        problems.append((path, str(exc)))
        return _BAD
    for sub, message in obj.check():
        problems.append((join(path, sub) if sub else path, message))
    return obj


def _decode_value(
    shape: Shape, data: Any, path: str, problems: list[Problem], info: FieldInfo | None = None
) -> Any:
    if data is None:
        if shape.optional:
            return None
        problems.append((path, "must not be null"))
        return _BAD
    kind = shape.kind
    if kind == "str":
        if not isinstance(data, str):
            problems.append((path, f"must be a string, got {show(data)}"))
            return _BAD
        return _check_string(data, path, problems, info)
    if kind == "int":
        return _decode_int(data, path, problems, info)
    if kind == "float":
        if isinstance(data, bool) or not isinstance(data, int | float):
            problems.append((path, f"must be a number, got {show(data)}"))
            return _BAD
        return float(data)
    if kind == "bool":
        if not isinstance(data, bool):
            problems.append((path, f"must be true or false, got {show(data)}"))
            return _BAD
        return data
    if kind == "enum":
        if data not in shape.values:
            allowed = ", ".join(f'"{v}"' for v in shape.values)
            problems.append((path, f"must be one of {allowed}, got {show(data)}"))
            return _BAD
        return data
    if kind == "quantity":
        if isinstance(data, bool) or not isinstance(data, str | int | float):
            problems.append((path, f'must be a quantity such as "2" or "500m", got {show(data)}'))
            return _BAD
        try:
            parse_quantity(data)
        except QuantityError:
            problems.append((path, f'must be a quantity such as "2" or "500m", got {show(data)}'))
            return _BAD
        return data if isinstance(data, str) else str(data)
    if kind == "duration":
        if not isinstance(data, str) or not _DURATION_RE.match(data):
            problems.append(
                (path, f'must be a duration such as "90s" or "1h30m", got {show(data)}')
            )
            return _BAD
        return data
    if kind == "date-time":
        return _decode_time(data, path, problems)
    if kind == "list":
        if not isinstance(data, list | tuple):
            problems.append((path, f"must be a list, got {show(data)}"))
            return _BAD
        assert shape.item is not None
        items = [_decode_value(shape.item, v, f"{path}[{i}]", problems) for i, v in enumerate(data)]
        return _BAD if any(v is _BAD for v in items) else items
    if kind == "map":
        if not isinstance(data, Mapping):
            problems.append((path, f"must be an object, got {show(data)}"))
            return _BAD
        assert shape.item is not None
        out = {
            str(k): _decode_value(shape.item, v, f"{path}[{k}]", problems) for k, v in data.items()
        }
        return _BAD if any(v is _BAD for v in out.values()) else out
    if kind == "model":
        assert shape.model is not None
        return _decode_model(shape.model, data, path, problems)
    if kind == "raw":
        if not isinstance(data, Mapping):
            problems.append((path, f"must be an object, got {show(data)}"))
            return _BAD
        return _plain(data)
    return _plain(data)  # "any"


def _check_string(data: str, path: str, problems: list[Problem], info: FieldInfo | None) -> Any:
    if info is None:
        return data
    if info.max_length is not None and len(data) > info.max_length:
        problems.append((path, f"must be at most {info.max_length} characters, got {len(data)}"))
        return _BAD
    if info.pattern is not None and data and not re.fullmatch(info.pattern, data):
        problems.append((path, f"must match {info.pattern}, got {show(data)}"))
        return _BAD
    return data


def _decode_int(data: Any, path: str, problems: list[Problem], info: FieldInfo | None) -> Any:
    if isinstance(data, float) and data.is_integer():
        data = int(data)
    if isinstance(data, bool) or not isinstance(data, int):
        problems.append((path, f"must be {_int_rule(info)}, got {show(data)}"))
        return _BAD
    limit = INT64_MAX if info is not None and info.int64 else INT32_MAX
    lo = info.minimum if info is not None else None
    hi = info.maximum if info is not None else None
    if (lo is not None and data < lo) or (hi is not None and data > hi):
        problems.append((path, f"must be {_int_rule(info)}, got {data}"))
        return _BAD
    if not -limit - 1 <= data <= limit:
        problems.append(
            (path, f"must fit in {'int64' if limit == INT64_MAX else 'int32'}, got {data}")
        )
        return _BAD
    return data


def _decode_time(data: Any, path: str, problems: list[Problem]) -> Any:
    # PyYAML turns unquoted timestamps into datetime objects.
    if isinstance(data, dt.datetime):
        if data.tzinfo is None:
            data = data.replace(tzinfo=dt.UTC)
        return data.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
    if isinstance(data, str) and _TIMESTAMP_RE.match(data):
        return data
    problems.append(
        (path, f'must be an RFC 3339 time such as "2024-05-01T12:00:00Z", got {show(data)}')
    )
    return _BAD


def _plain(value: Any) -> Any:
    """Deep-copy JSON-like data into plain dicts/lists (YAML times become strings)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, dt.date):
        return value.isoformat()
    return value


# ---------------------------------------------------------------- encoding


def _is_zero(value: Any) -> bool:
    """Go's notion of an empty value for ``omitempty`` (a model counts if it encodes to {})."""
    if value is None:
        return True
    if isinstance(value, bool):
        return value is False
    if isinstance(value, int | float):
        return value == 0
    if isinstance(value, str | list | dict | tuple):
        return len(value) == 0
    if isinstance(value, Model):
        return not encode(value)
    return False


def encode(value: Any) -> Any:
    """A model (or value inside one) as JSON-ready data."""
    if isinstance(value, Model):
        out: dict[str, Any] = {}
        for f in fields_of(type(value)):
            v = getattr(value, f.name)
            if v is None:
                continue
            if not f.required and not f.shape.optional and _is_zero(v):
                continue
            out[f.json] = encode(v)
        return out
    if isinstance(value, dict):
        return {k: encode(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [encode(v) for v in value]
    return value


# ---------------------------------------------------------------- resources


@dataclasses.dataclass(frozen=True, slots=True)
class PrinterColumn:
    """A ``kubectl get`` column."""

    name: str
    type: str
    json_path: str
    priority: int = 0
    description: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class Kind:
    """How a top-level model is served by the API server."""

    group: str
    version: str
    kind: str
    plural: str
    scope: Literal["Namespaced", "Cluster"]
    description: str
    short_names: tuple[str, ...] = ()
    status_subresource: bool = True
    printer_columns: tuple[PrinterColumn, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{self.group}"


class Resource(Model):
    """A top-level object: ``apiVersion`` and ``kind`` are implied by ``KIND``.

    Subclasses declare ``metadata`` plus their own fields (usually ``spec``
    and ``status``).
    """

    __slots__ = ()
    KIND: ClassVar[Kind]

    @classmethod
    def from_dict(cls, data: Any, path: str = "") -> Self:
        if not isinstance(data, Mapping):
            raise FieldError([(path, f"must be an object, got {show(data)}")])
        problems: list[Problem] = []
        body = dict(data)
        api_version = body.pop("apiVersion", None)
        kind = body.pop("kind", None)
        if api_version is not None and api_version != cls.KIND.api_version:
            problems.append(
                (
                    join(path, "apiVersion"),
                    f'must be "{cls.KIND.api_version}", got {show(api_version)}',
                )
            )
        if kind is not None and kind != cls.KIND.kind:
            problems.append((join(path, "kind"), f'must be "{cls.KIND.kind}", got {show(kind)}'))
        try:
            obj = decode(cls, body, path)
        except FieldError as exc:
            raise FieldError(problems + exc.problems) from None
        if problems:
            raise FieldError(problems)
        return obj

    def to_dict(self) -> dict[str, Any]:
        body = super().to_dict()
        return {"apiVersion": self.KIND.api_version, "kind": self.KIND.kind, **body}
