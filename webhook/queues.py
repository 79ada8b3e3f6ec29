"""Reading Queues for validation: does it exist, is it open, where does it hang.

Validation needs only a queue's name, parent and state, read leniently from
the stored JSON (a Queue written by a newer Volcano with extra fields must
still answer these questions). ``root`` and ``default`` exist from the start
(the controllers create them); until they are in the API server we answer
for them from ``default_queues()``, so jobs for the default queue are never
refused during start-up.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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


class QueueSource(Protocol):
    """Where validation reads queues from."""

    def get(self, name: str) -> QueueInfo | None:
        """The queue, or None when it does not exist. Raises QueueLookupError."""
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

    def get(self, name: str) -> QueueInfo | None:
        return self._queues.get(name) if is_object_name(name) else None

    def children(self, name: str) -> list[str]:
        return sorted(q.name for q in self._queues.values() if q.parent == name)

    def hierarchies(self) -> dict[str, str]:
        return {q.name: q.hierarchy for q in self._queues.values() if q.hierarchy}


class ApiQueues:
    """Queues read from the API server on every call (validation is rare; no cache to go stale)."""

    def __init__(self, api: Any, timeout: float = 2.0) -> None:
        from kubernetes import client

        self._objects = client.CustomObjectsApi(api)
        self._exception = client.ApiException
        self._timeout = timeout  # seconds per API call; the webhook itself has 5
        kind = Queue.KIND
        self._where = (kind.group, kind.version, kind.plural)

    def get(self, name: str) -> QueueInfo | None:
        if not is_object_name(name):
            return None  # no queue can have it: asking would get a 400, not a 404
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
