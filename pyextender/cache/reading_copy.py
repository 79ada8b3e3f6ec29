"""Copies of the cache that another thread may read while the original changes.

The scheduling cycle (and the preempt verb's session) takes hundreds of
milliseconds at scale. Run on the event loop, it stalled every filter and
prioritize call behind it. It now runs on a worker thread over a copy taken
on the loop: numpy arrays copied, containers copied one level deep (two for
dicts of containers), objects shared. Objects the cache only ever replaces
(PodInfo, views of PodGroups and Queues) are safe to share; containers and
arrays the loop changes in place are not.
"""

from __future__ import annotations

import copy
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T")


def copy_value(value: Any) -> Any:
    """An array or container copied so in-place changes to the original do not show."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, dict):
        out = value.copy()  # keeps the type (Counter, defaultdict)
        first = next(iter(out.values()), None)
        if isinstance(first, dict | set | list):
            for k, v in out.items():
                out[k] = v.copy()
        return out
    if isinstance(value, list | set):
        return value.copy()
    return value


def _fields(obj: object) -> list[str]:
    names: list[str] = []
    for cls in type(obj).__mro__:
        names.extend(getattr(cls, "__slots__", ()))
    names.extend(getattr(obj, "__dict__", {}))
    return [n for n in names if n not in ("__dict__", "__weakref__") and hasattr(obj, n)]


def reading_copy(obj: T, deep: tuple[str, ...] = ()) -> T:
    """A shallow copy of ``obj`` whose arrays and containers are copies too;
    attributes named in ``deep`` are copied the same way (one object level)."""
    new = copy.copy(obj)
    for name in _fields(obj):
        value = getattr(obj, name)
        if name in deep:
            setattr(new, name, reading_copy(value))
        else:
            setattr(new, name, copy_value(value))
    return new
