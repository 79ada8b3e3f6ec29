"""Small readers over Pod JSON, shared by the controllers."""

from __future__ import annotations

from typing import Any

from controllers.store import Obj, meta
from pyextender.api import names
from pyextender.api.objects import pod_requests

TERMINATED = ("Succeeded", "Failed")


def phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def deleting(obj: Obj) -> bool:
    return meta(obj).get("deletionTimestamp") is not None


def node_name(pod: Obj) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def annotations_of(obj: Obj) -> dict[str, str]:
    a = meta(obj).get("annotations")
    return a if isinstance(a, dict) else {}


def labels_of(obj: Obj) -> dict[str, str]:
    a = meta(obj).get("labels")
    return a if isinstance(a, dict) else {}


def group_name(pod: Obj) -> str:
    return annotations_of(pod).get(names.GROUP_NAME_ANNOTATION, "")


def scheduler_name(pod: Obj) -> str:
    return str((pod.get("spec") or {}).get("schedulerName") or "default-scheduler")


def holds_resources(pod: Obj) -> bool:
    """Bound and not terminated: its requests count against its node and queue."""
    return bool(node_name(pod)) and phase(pod) not in TERMINATED


def requests(pod: Obj) -> dict[str, int]:
    """Effective requests in pyextender.api.resources units; {} for a malformed spec."""
    try:
        return pod_requests(pod.get("spec") or {})
    except (ValueError, TypeError, AttributeError):
        return {}


def controller_ref(obj: Obj) -> dict[str, Any] | None:
    for ref in meta(obj).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller"):
            return ref
    return None


def exit_code(pod: Obj) -> int | None:
    """Exit code of the first terminated container (Volcano looks at the first only)."""
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        term = ((cs or {}).get("state") or {}).get("terminated")
        if isinstance(term, dict) and isinstance(term.get("exitCode"), int):
            return int(term["exitCode"])
        return None
    return None


def _container_statuses(pod: Obj) -> list[dict[str, Any]]:
    status = pod.get("status") or {}
    found = [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]
    return [cs for cs in found if isinstance(cs, dict)]


def restart_count(pod: Obj) -> int:
    """Container restarts of the pod, init containers included."""
    return sum(int(cs.get("restartCount") or 0) for cs in _container_statuses(pod))


def containers_ready(pod: Obj) -> bool:
    """Every (non-init) container reports ready."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return all(isinstance(cs, dict) and cs.get("ready") for cs in statuses)
