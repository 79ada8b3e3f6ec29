"""Reading Queues for validation: does it exist, is it open, where does it hang.

Validation needs only a queue's name, parent and state, read leniently from
the stored JSON (a Queue written by a newer Volcano with extra fields must
still answer these questions). ``root`` and ``default`` exist from the start
(the controllers create them); until they are in the API server we answer
for them from ``default_queues()``, so jobs for the default queue are never
refused during start-up.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pyextender.api.object_names import NAME_RULE, is_object_name
from pyextender.api.volcano import Queue, default_queues
from pyextender.api.volcano.codec import show
from pyextender.api.volcano.queue import HIERARCHY, ROOT_QUEUE


def absent(name: str, what: str = "queue") -> str:
    """The message for a queue reference that names no queue."""
    if is_object_name(name):
        return f"{what} {show(name)} does not exist"
    return f"{what} {show(name)} does not exist: a queue name is {NAME_RULE}"


MAX_REMEMBERED = 10_000
"""Open queues ApiQueues keeps an answer for at most."""


class QueueLookupError(RuntimeError):
    """The API server could not be asked (not: the queue does not exist)."""


@dataclass(frozen=True, slots=True)
class QueueInfo:
    """What validation needs to know about one queue."""

    name: str
    parent: str
    """Parent queue ("" only for root; an unset parent means root)."""
    state: str = ""
    """status.state; "" while no controller has written it (a new queue is open)."""
    hierarchy: str = ""
    """The ``volcano.sh/hierarchy`` annotation ("" when unset)."""

    @property
    def is_open(self) -> bool:
        return self.state in ("", "Open")


def queue_info(obj: Mapping[str, Any]) -> QueueInfo:
    """Read name, parent and state from a stored Queue, ignoring everything else."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    status = obj.get("status") if isinstance(obj.get("status"), Mapping) else {}
    name = str((meta or {}).get("name") or "")
    annotations = (meta or {}).get("annotations")
    hierarchy = annotations.get(HIERARCHY) if isinstance(annotations, Mapping) else None
    parent = str((spec or {}).get("parent") or "")
    state = str((status or {}).get("state") or "")
    if name == ROOT_QUEUE:
        parent = ""
    elif not parent:
        parent = ROOT_QUEUE
    return QueueInfo(
        name=name,
        parent=parent,
        state=state,
        hierarchy=hierarchy if isinstance(hierarchy, str) else "",
    )


def _builtin() -> dict[str, QueueInfo]:
    return {q.metadata.name: queue_info(q.to_dict()) for q in default_queues()}


OPEN_ANSWER_S = 1.0
"""How long ApiQueues.get(recent=True) reuses a queue it read as existing and Open
(seconds): the burst of PodGroups that standalone pods bring (one per pod, each
validated) costs one GET per queue and second instead of one per PodGroup. Only an
Open answer is reused, so a queue created or opened a moment ago is never refused
from memory; one closed or deleted less than this ago may still take a new gang, the
same race a GET just before the close already has. Queue validation itself (parents,
cycles) always reads afresh."""


class QueueSource(Protocol):
    """Where validation reads queues from."""

    def get(self, name: str, recent: bool = False) -> QueueInfo | None:
        """The queue, or None when it does not exist. Raises QueueLookupError.
        ``recent``: an Open answer up to OPEN_ANSWER_S old will do (whether a queue
        takes new gangs; not for the queue tree's rules)."""
        ...

    def children(self, name: str) -> list[str]:
        """Names of the queues whose parent is ``name``. Raises QueueLookupError."""
        ...

    def hierarchies(self) -> dict[str, str]:
        """Queue name -> its volcano.sh/hierarchy, for queues that set one.
        Raises QueueLookupError."""
        ...


class MemoryQueues:
    """Queues held in memory (tests, and dry runs without an API server)."""

    def __init__(self, queues: Iterable[Queue | Mapping[str, Any]] = ()) -> None:
        self._queues = _builtin()
        for q in queues:
            info = queue_info(q.to_dict() if isinstance(q, Queue) else q)
            self._queues[info.name] = info

    def get(self, name: str, recent: bool = False) -> QueueInfo | None:
        return self._queues.get(name) if is_object_name(name) else None

    def children(self, name: str) -> list[str]:
        return sorted(q.name for q in self._queues.values() if q.parent == name)

    def hierarchies(self) -> dict[str, str]:
        return {q.name: q.hierarchy for q in self._queues.values() if q.hierarchy}


class ApiQueues:
    """Queues read from the API server on every call, except that whether a queue takes
    a new gang may reuse an Open answer up to OPEN_ANSWER_S old (``get(recent=True)``):
    no watch, and nothing remembered longer than that."""

    def __init__(
        self, api: Any, timeout: float = 2.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        from kubernetes import client

        self._objects = client.CustomObjectsApi(api)
        self._exception = client.ApiException
        self._timeout = timeout  # seconds per API call; the webhook itself has 5
        kind = Queue.KIND
        self._where = (kind.group, kind.version, kind.plural)
        self._clock = clock
        self._open: dict[str, tuple[float, QueueInfo]] = {}
        """Queue name -> (when read, its info): the queues last read as Open."""

    def get(self, name: str, recent: bool = False) -> QueueInfo | None:
        if not is_object_name(name):
            return None  # no queue can have it: asking would get a 400, not a 404
        now = self._clock()
        if recent and (seen := self._open.get(name)) and now - seen[0] < OPEN_ANSWER_S:
            return seen[1]
        info = self._read(name)
        if info is not None and info.is_open:
            if len(self._open) >= MAX_REMEMBERED and name not in self._open:
                self._open.clear()  # many queues: start over rather than grow
            self._open[name] = (now, info)
        else:
            self._open.pop(name, None)
        return info

    def _read(self, name: str) -> QueueInfo | None:
        try:
            obj = self._objects.get_cluster_custom_object(
                *self._where, name, _request_timeout=self._timeout
            )
        except self._exception as exc:
            if exc.status == 404:
                return _builtin().get(name)
            raise QueueLookupError(
                f"cannot read queue {name!r}: {exc.status} {exc.reason}"
            ) from exc
        except Exception as exc:  # connection refused, timeout, TLS ...
            raise QueueLookupError(f"cannot read queue {name!r}: {exc}") from exc
        return queue_info(obj)

    def _list(self) -> list[QueueInfo]:
        try:
            listed = self._objects.list_cluster_custom_object(
                *self._where, _request_timeout=self._timeout
            )
        except Exception as exc:
            raise QueueLookupError(f"cannot list queues: {exc}") from exc
        return [queue_info(o) for o in listed.get("items", []) if isinstance(o, Mapping)]

    def children(self, name: str) -> list[str]:
        return sorted(q.name for q in self._list() if q.parent == name)

    def hierarchies(self) -> dict[str, str]:
        return {q.name: q.hierarchy for q in self._list() if q.hierarchy}
