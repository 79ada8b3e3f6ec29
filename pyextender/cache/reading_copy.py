"""Copies of the cache that another thread may read while the original changes.

The scheduling cycle (and the preempt verb's session) takes hundreds of
milliseconds at scale. Run on the event loop, it stalled every filter and
prioritize call behind it. It now runs on a worker thread over a copy taken
on the loop: numpy arrays copied, containers copied one level deep (two for
dicts of containers), objects shared. Objects the cache only ever replaces
(PodInfo, views of PodGroups and Queues) are safe to share; containers and
arrays the loop changes in place are not.

The copy is taken on the loop, every cycle (10 a second under churn), so what it
costs is time every verb may wait for: at 5,000 nodes the whole-object copy held
the loop 1.9 ms (p50, 3.8 ms p99) and freeing the previous one another 0.5 ms,
the churn p99 of bench/verbs.py. So a copy leaves out what the cycle never reads
(``left_out``: touching it raises ``NotInCopy``) and shares, until either side
writes them, the fields only node events change (``SharedUntilWritten``).
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
    copy_for_reading = getattr(value, "copy_for_reading", None)
    if copy_for_reading is not None:  # a container of our own (GroupMembers)
        return copy_for_reading()
    return value


def _fields(obj: object) -> list[str]:
    names: list[str] = []
    for cls in type(obj).__mro__:
        names.extend(getattr(cls, "__slots__", ()))
    names.extend(getattr(obj, "__dict__", {}))
    return [n for n in names if n not in ("__dict__", "__weakref__") and hasattr(obj, n)]


class NotInCopy:
    """Stands, in a reading copy, for a container the copy left out: the cycle never
    reads it, and any use says so instead of reading a stale or a shared one."""

    __slots__ = ("_what",)

    def __init__(self, what: str) -> None:
        self._what = what

    def _refuse(self, *args: object, **kwargs: object) -> Any:
        raise RuntimeError(f"{self._what} is not part of a reading copy of the cache")

    __getitem__ = __setitem__ = __delitem__ = __contains__ = __iter__ = __len__ = _refuse
    get = pop = items = keys = values = add = discard = append = uids = count = _refuse


class SharedUntilWritten:
    """Fields (``SHARED``) that a reading copy shares with its original until one of
    the two is about to change them in place: the writer calls ``own_shared()``
    first and gets copies of its own. For what only node events change (topology,
    allocatable, names): rare next to the cycles that copy the state."""

    SHARED: tuple[str, ...] = ()
    _shared = False

    def own_shared(self) -> None:
        if self._shared:
            for name in self.SHARED:
                setattr(self, name, copy_value(getattr(self, name)))
            self._shared = False

    def share_with(self, copy_: SharedUntilWritten) -> None:
        """``copy_`` (a reading copy of self) holds self's fields: both must copy
        before they write them."""
        for name in self.SHARED:
            setattr(copy_, name, getattr(self, name))
        copy_._shared = self._shared = True


def reading_copy(obj: T, deep: tuple[str, ...] = (), left_out: tuple[str, ...] = ()) -> T:
    """A shallow copy of ``obj`` whose arrays and containers are copies too;
    attributes named in ``deep`` are copied the same way (one object level), those
    in ``left_out`` are ``NotInCopy``, and a SharedUntilWritten's SHARED fields are
    shared."""
    new = copy.copy(obj)
    shared = obj.SHARED if isinstance(obj, SharedUntilWritten) else ()
    for name in _fields(obj):
        if name in shared:
            continue
        if name in left_out:
            setattr(new, name, NotInCopy(f"{type(obj).__name__}.{name}"))
            continue
        value = getattr(obj, name)
        if name in deep:
            setattr(new, name, reading_copy(value))
        else:
            setattr(new, name, copy_value(value))
    if isinstance(obj, SharedUntilWritten):
        assert isinstance(new, SharedUntilWritten)
        obj.share_with(new)
    return new
