"""Small readers over Pod JSON, shared by the controllers."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from controllers.store import Obj, meta
from pyextender.api import names
from pyextender.api.objects import pod_requests
from pyextender.api.resources import CPU, EPHEMERAL, MEMORY, PODS, format_amount

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


COUNT_PODS = "count/pods"
REQUESTS_PREFIX = "requests."
LIMITS_PREFIX = "limits."
HUGEPAGES_PREFIX = "hugepages-"


def _limits_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the pod spec whose containers request what they limit (no overhead)."""
    out = copy.deepcopy(dict(spec))
    out.pop("overhead", None)
    for key in ("containers", "initContainers"):
        for c in out.get(key) or []:
            res = dict(c.get("resources") or {})
            res["requests"] = dict(res.get("limits") or {})
            c["resources"] = res
    return out


def _extended(name: str) -> bool:
    """An extended resource (``example.com/fpga``): a domain, not kubernetes.io's, and not
    a quota name itself."""
    return (
        "/" in name
        and "kubernetes.io/" not in name
        and not name.startswith((REQUESTS_PREFIX, LIMITS_PREFIX, "count/"))
    )


def quota_usage(spec: Mapping[str, Any]) -> dict[str, int]:
    """What one pod of this spec counts for in a ResourceQuota, as Volcano's
    ``GetPodQuotaUsage`` (Kubernetes' pod quota evaluator) computes it, amounts in
    pyextender.api.resources units (milli-CPU, bytes, counts):

    ``count/pods`` and ``pods`` 1; ``cpu``, ``memory``, ``ephemeral-storage`` and their
    ``requests.*`` twins from the pod's effective requests, ``limits.*`` from its
    limits; hugepages as themselves and ``requests.*``; extended resources as
    ``requests.<name>`` and, as Volcano adds back, ``<name>``. Raises ValueError for a
    malformed quantity.
    """
    requests = pod_requests(spec)
    limits = pod_requests(_limits_spec(spec))
    out = {COUNT_PODS: 1, PODS: 1}
    for name in (CPU, MEMORY, EPHEMERAL):
        if name in requests:
            out[name] = out[REQUESTS_PREFIX + name] = requests[name]
        if name in limits:
            out[LIMITS_PREFIX + name] = limits[name]
    for name, value in requests.items():
        if name.startswith(HUGEPAGES_PREFIX) or _extended(name):
            out[name] = out[REQUESTS_PREFIX + name] = value
    return out


def format_quota(usage: Mapping[str, int]) -> dict[str, str]:
    """Quantities for a ResourceList (``requests.cpu`` formatted as ``cpu``); zero amounts
    are left out."""
    out: dict[str, str] = {}
    for name, value in sorted(usage.items()):
        if not value:
            continue
        base = name
        for prefix in (REQUESTS_PREFIX, LIMITS_PREFIX):
            if name.startswith(prefix):
                base = name[len(prefix) :]
        out[name] = format_amount(base, value)
    return out


def priority_values(classes: Iterable[Obj]) -> dict[str, int]:
    """PriorityClass name -> value."""
    out: dict[str, int] = {}
    for pc in classes:
        value = pc.get("value")
        if isinstance(value, int):
            out[str(meta(pc).get("name"))] = value
    return out


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
