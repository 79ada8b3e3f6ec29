"""Lenient views of PodGroups and Queues, as the scheduler needs them.

The API server's objects are trusted here: a field we do not know is
ignored (a newer Volcano may add some) and a malformed value falls back to
its default with a warning, instead of dropping the object. Strict
validation of user input is the webhook's job (pyextender.api.volcano).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pyextender.api.resources import is_quota_name, parse_resource_list

log = logging.getLogger(__name__)

DEFAULT_QUEUE = "default"
ROOT_QUEUE = "root"


def _map(obj: Any) -> Mapping[str, Any]:
    return obj if isinstance(obj, Mapping) else {}


def _int(value: Any, default: int, what: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if value is not None:
        log.warning("%s: expected an integer, got %r; using %d", what, value, default)
    return default


def _node_resources(value: Any) -> dict[str, Any]:
    """A minResources without its quota names (requests.cpu, limits.memory, count/pods),
    which Volcano's scheduler ignores too: only node resources are compared."""
    return {k: v for k, v in _map(value).items() if not is_quota_name(str(k))}


def _resources(value: Any, what: str) -> dict[str, int]:
    try:
        return parse_resource_list(_map(value))
    except ValueError as exc:
        log.warning("%s: %s; ignored", what, exc)
        return {}


@dataclass(slots=True)
class GroupView:
    """A PodGroup: a gang of at least ``min_member`` pods placed all-or-nothing."""

    namespace: str
    name: str
    uid: str
    queue: str = DEFAULT_QUEUE
    min_member: int = 1
    min_task_member: dict[str, int] = field(default_factory=dict)
    min_resources: dict[str, int] = field(default_factory=dict)
    priority_class: str = ""
    phase: str = "Pending"
    phase_written: bool = True
    """False while the PodGroup has no status.phase at all (``phase`` then reads
    Pending): the scheduler writes Pending for it, as Volcano's does."""
    created: str = ""
    conditions: list[dict[str, Any]] = field(default_factory=list)
    annotations: dict[str, str] = field(default_factory=dict)
    topology_mode: str = ""
    """networkTopology.mode: "hard", "soft" or "" (none)."""
    topology_highest_tier: int = 0
    owner_kind: str = ""
    resource_version: str = ""
    """metadata.resourceVersion: status writes carry it, so a write based on a stale
    view fails (409) instead of erasing what another writer just set."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def condition(self, kind: str) -> dict[str, Any] | None:
        for c in self.conditions:
            if c.get("type") == kind:
                return c
        return None


def group_from_dict(obj: Mapping[str, Any]) -> GroupView:
    meta = _map(obj.get("metadata"))
    spec = _map(obj.get("spec"))
    status = _map(obj.get("status"))
    ns = str(meta.get("namespace") or "default")
    name = str(meta.get("name") or "")
    what = f"podgroup {ns}/{name}"
    topo = _map(spec.get("networkTopology"))
    owners = [o for o in meta.get("ownerReferences") or [] if isinstance(o, Mapping)]
    mtm = _map(spec.get("minTaskMember"))
    return GroupView(
        namespace=ns,
        name=name,
        uid=str(meta.get("uid") or ""),
        queue=str(spec.get("queue") or DEFAULT_QUEUE),
        min_member=max(_int(spec.get("minMember"), 1, f"{what} spec.minMember"), 0),
        min_task_member={str(k): v for k, v in mtm.items() if isinstance(v, int)},
        min_resources=_resources(
            _node_resources(spec.get("minResources")), f"{what} spec.minResources"
        ),
        priority_class=str(spec.get("priorityClassName") or ""),
        phase=str(status.get("phase") or "Pending"),
        phase_written=bool(status.get("phase")),
        created=str(meta.get("creationTimestamp") or ""),
        conditions=[dict(c) for c in status.get("conditions") or [] if isinstance(c, Mapping)],
        annotations={str(k): str(v) for k, v in _map(meta.get("annotations")).items()},
        topology_mode=str(topo.get("mode") or ""),
        topology_highest_tier=_int(topo.get("highestTierAllowed"), 0, f"{what} highestTierAllowed"),
        owner_kind=str(owners[0].get("kind", "")) if owners else "",
        resource_version=str(meta.get("resourceVersion") or ""),
    )


@dataclass(slots=True)
class QueueView:
    """A Queue: a share of the cluster (weight), with limits and a guarantee."""

    name: str
    weight: int = 1
    capability: dict[str, int] = field(default_factory=dict)
    """Hard upper bound of what the queue may use; empty = unlimited."""
    deserved: dict[str, int] = field(default_factory=dict)
    """Explicit deserved share (capacity-style); empty = computed from weight."""
    guarantee: dict[str, int] = field(default_factory=dict)
    """Reserved for this queue even when idle."""
    reclaimable: bool = True
    parent: str = ""
    priority: int = 0
    state: str = "Open"

    @property
    def open(self) -> bool:
        return self.state in ("Open", "")


def queue_from_dict(obj: Mapping[str, Any]) -> QueueView:
    meta = _map(obj.get("metadata"))
    spec = _map(obj.get("spec"))
    status = _map(obj.get("status"))
    name = str(meta.get("name") or "")
    what = f"queue {name}"
    reclaimable = spec.get("reclaimable")
    parent = str(spec.get("parent") or "")
    if not parent and name != ROOT_QUEUE:
        parent = ROOT_QUEUE
    return QueueView(
        name=name,
        weight=max(_int(spec.get("weight"), 1, f"{what} spec.weight"), 1),
        capability=_resources(spec.get("capability"), f"{what} spec.capability"),
        deserved=_resources(spec.get("deserved"), f"{what} spec.deserved"),
        guarantee=_resources(_map(spec.get("guarantee")).get("resource"), f"{what} guarantee"),
        reclaimable=reclaimable if isinstance(reclaimable, bool) else True,
        parent=parent,
        priority=_int(spec.get("priority"), 0, f"{what} spec.priority"),
        state=str(status.get("state") or "Open"),
    )
