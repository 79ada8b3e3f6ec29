"""In-memory copies of the objects we watch, with secondary indexes.

One Store per kind, fed by a list+watch Informer on the event loop thread.
Handlers see ``(key, old, new)`` (``new`` is None on deletion) so controllers
can react to transitions (a pod that just failed), not only to states. Our own
writes are remembered at once (``remember``, handlers included) so the next
reconcile does not act on a copy older than what we just wrote; the watch's
echo of the same version is then dropped.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

from pyextender.api.informer import Informer, ListFn

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Handler = Callable[[str, Obj | None, Obj | None], None]
IndexFn = Callable[[Obj], Iterable[str]]

MAX_TOMBSTONES = 10_000
"""Uids of deleted objects remembered (oldest forgotten first); uids never come back,
so a remembered one only ever stops a stale copy."""


def meta(obj: Obj) -> dict[str, Any]:
    m = obj.get("metadata")
    return m if isinstance(m, dict) else {}


def key_of(obj: Obj) -> str:
    m = meta(obj)
    ns = m.get("namespace")
    return f"{ns}/{m.get('name')}" if ns else str(m.get("name"))


def split_key(key: str) -> tuple[str, str]:
    ns, _, name = key.rpartition("/")
    return ns, name


def _newer(candidate: Obj, current: Obj) -> bool:
    """Whether ``candidate`` is a later version than ``current``.

    resourceVersions are opaque by contract but integers (etcd revisions) in
    practice; when they are not, any different version counts as newer
    (arrival order).
    """
    a = str(meta(candidate).get("resourceVersion") or "")
    b = str(meta(current).get("resourceVersion") or "")
    if a.isdigit() and b.isdigit():
        return int(a) > int(b)
    return a != b


class Store:
    """Objects of one kind by ``namespace/name`` (or ``name`` for cluster-scoped kinds)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.objects: dict[str, Obj] = {}
        self.synced = False
        self._handlers: list[Handler] = []
        self._index_fns: dict[str, IndexFn] = {}
        self._indexes: dict[str, dict[str, set[str]]] = {}
        self.informer: Informer | None = None
        self._deleted_uids: dict[str, None] = {}
        """Uids deleted (by us, or seen deleted by the watch), in deletion order: an
        update or a write's reply still in flight for one must not bring it back."""

    # -- wiring -----------------------------------------------------------------
    def add_handler(self, handler: Handler) -> None:
        self._handlers.append(handler)

    def add_index(self, name: str, fn: IndexFn) -> None:
        self._index_fns[name] = fn
        self._indexes[name] = {}

    def start(self, list_fn: ListFn, loop: asyncio.AbstractEventLoop) -> None:
        self.informer = Informer(self.kind, list_fn, loop, self.replace, self.event)
        self.informer.start()

    def stop(self) -> None:
        if self.informer is not None:
            self.informer.stop.set()

    # -- reads ------------------------------------------------------------------
    def get(self, key: str) -> Obj | None:
        return self.objects.get(key)

    def values(self) -> list[Obj]:
        return list(self.objects.values())

    def by_index(self, index: str, value: str) -> list[Obj]:
        keys = self._indexes[index].get(value, ())
        return [self.objects[k] for k in sorted(keys) if k in self.objects]

    # -- writes -----------------------------------------------------------------
    def _index(self, key: str, obj: Obj | None, add: bool) -> None:
        if obj is None:
            return
        for name, fn in self._index_fns.items():
            idx = self._indexes[name]
            for value in fn(obj):
                if add:
                    idx.setdefault(value, set()).add(key)
                else:
                    keys = idx.get(value)
                    if keys is not None:
                        keys.discard(key)
                        if not keys:
                            del idx[value]

    def _put(self, key: str, obj: Obj | None) -> Obj | None:
        old = self.objects.get(key)
        self._index(key, old, add=False)
        if obj is None:
            self.objects.pop(key, None)
        else:
            self.objects[key] = obj
            self._index(key, obj, add=True)
        return old

    def _notify(self, key: str, old: Obj | None, new: Obj | None) -> None:
        for handler in self._handlers:
            try:
                handler(key, old, new)
            except Exception:  # one bad object must not stop the watch
                log.exception("%s handler failed for %s", self.kind, key)

    def replace(self, items: list[Obj]) -> None:
        """A full (re-)list: objects missing from it were deleted meanwhile."""
        fresh = {key_of(o): o for o in items}
        for obj in items:  # listed: still there (a deletion we asked for is pending)
            self._deleted_uids.pop(str(meta(obj).get("uid") or ""), None)
        for key in [k for k in self.objects if k not in fresh]:
            self._notify(key, self._put(key, None), None)
        for key, obj in fresh.items():
            self._notify(key, self._put(key, obj), obj)
        self.synced = True

    def event(self, kind: str, obj: Obj) -> None:
        key = key_of(obj)
        current = self.objects.get(key)
        uid = str(meta(obj).get("uid") or "")
        if kind == "DELETED":
            self._tombstone(uid)
            if current is None or meta(current).get("uid") != meta(obj).get("uid"):
                return  # gone already, or a new object of the same name replaced it
            self._notify(key, self._put(key, None), None)
            return
        if uid in self._deleted_uids:
            return  # an update to an object already deleted (in flight when it went)
        if current is not None and not _newer(obj, current):
            return  # not newer than what we hold (e.g. the echo of our own write)
        self._notify(key, self._put(key, obj), obj)

    def remember(self, obj: Obj, only_if_present: bool = False) -> None:
        """Record the result of our own write at once, and tell the handlers.

        The watch will echo the same version later; ``event`` drops it.
        ``only_if_present`` is for deletions: if the watch already delivered
        the DELETED event, the object must not come back.
        """
        if not obj:
            return
        if str(meta(obj).get("uid") or "") in self._deleted_uids:
            # the reply of a write that was in flight when the object was deleted (a
            # status patch racing a job's restart): holding it again would show a
            # deleted PodGroup as alive, and the next run's pods would be created for
            # it, ungated, with no PodGroup behind them
            return
        key = key_of(obj)
        current = self.objects.get(key)
        if current is None and only_if_present:
            return
        if current is not None and not _newer(obj, current):
            return
        self._notify(key, self._put(key, obj), obj)

    def forget(self, key: str) -> None:
        """Drop an object we deleted, and tell the handlers."""
        old = self._put(key, None)
        if old is not None:
            self._tombstone(str(meta(old).get("uid") or ""))
            self._notify(key, old, None)

    def _tombstone(self, uid: str) -> None:
        if not uid:
            return
        self._deleted_uids[uid] = None
        if len(self._deleted_uids) > MAX_TOMBSTONES:
            del self._deleted_uids[next(iter(self._deleted_uids))]
