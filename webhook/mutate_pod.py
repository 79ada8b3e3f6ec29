"""Pod mutation: send the gang members of an adopted namespace to us, gated.

A pod is a gang member when it carries Volcano's ``scheduling.k8s.io/group-name``
annotation. At creation, before any node is chosen, the webhook

- sets ``schedulerName: volcano`` when the pod asked for no scheduler in
  particular (empty or ``default-scheduler``), and
- adds the scheduling gate ``pyextender.io/gang``, which the sidecar's enqueue
  action lifts on all members at once when the whole gang fits
  (DESIGN.md §3).

A pod that names another scheduler is left alone entirely: its scheduler
would never see our gate lifted. Only CREATE is mutated, because the API
server refuses new scheduling gates on an existing pod.

``plan_pod`` decides, ``pod_patch`` writes the JSONPatch; both are pure so
shadow mode can log exactly what enforcement would have done.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyextender.api.names import GANG_GATE, GROUP_NAME_ANNOTATION, SCHEDULER_NAME

DEFAULT_SCHEDULER = "default-scheduler"


@dataclass(frozen=True, slots=True)
class PodPlan:
    """What the webhook does (or, in shadow mode, would do) to one pod."""

    group: str = ""
    """PodGroup the pod belongs to ("" when it is no gang member)."""
    set_scheduler: bool = False
    add_gate: bool = False
    skipped: str = ""
    """Why the pod is left as it is ("" when there is something to do)."""

    @property
    def changes(self) -> tuple[str, ...]:
        """Names of the changes, for logs and the ``change`` metric label."""
        return (("scheduler_name",) if self.set_scheduler else ()) + (
            ("scheduling_gate",) if self.add_gate else ()
        )


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def plan_pod(pod: Mapping[str, Any] | None, operation: str) -> PodPlan:
    """Decide what to change on ``pod`` (the AdmissionRequest object)."""
    if operation != "CREATE":
        return PodPlan(skipped=f"operation {operation}: only pod creation is mutated")
    if pod is None:
        return PodPlan(skipped="no pod in the request")
    annotations = _mapping(_mapping(pod.get("metadata")).get("annotations"))
    group = annotations.get(GROUP_NAME_ANNOTATION)
    if not isinstance(group, str) or not group:
        return PodPlan(skipped=f"no {GROUP_NAME_ANNOTATION} annotation: not a gang member")
    spec = pod.get("spec")
    if not isinstance(spec, Mapping):
        return PodPlan(group=group, skipped="pod has no spec")
    node = spec.get("nodeName")
    if node:
        return PodPlan(group=group, skipped=f"already bound to node {node}")
    requested = spec.get("schedulerName") or ""
    set_scheduler = requested in ("", DEFAULT_SCHEDULER)
    if not set_scheduler and requested != SCHEDULER_NAME:
        return PodPlan(
            group=group, skipped=f"schedulerName {requested!r}: another scheduler owns the pod"
        )
    gates = spec.get("schedulingGates")
    has_gate = isinstance(gates, list) and any(
        isinstance(g, Mapping) and g.get("name") == GANG_GATE for g in gates
    )
    if not set_scheduler and has_gate:
        return PodPlan(group=group, skipped="already scheduled by us and gated")
    return PodPlan(group=group, set_scheduler=set_scheduler, add_gate=not has_gate)


def pod_patch(pod: Mapping[str, Any], plan: PodPlan) -> list[dict[str, Any]]:
    """RFC 6902 operations carrying out ``plan``.

    ``add`` replaces an existing member (RFC 6902 §4.1), so it also covers
    the ``default-scheduler`` the API server fills in before admission.
    """
    ops: list[dict[str, Any]] = []
    if plan.set_scheduler:
        ops.append({"op": "add", "path": "/spec/schedulerName", "value": SCHEDULER_NAME})
    if plan.add_gate:
        gate = {"name": GANG_GATE}
        if isinstance(_mapping(pod.get("spec")).get("schedulingGates"), list):
            ops.append({"op": "add", "path": "/spec/schedulingGates/-", "value": gate})
        else:
            ops.append({"op": "add", "path": "/spec/schedulingGates", "value": [gate]})
    return ops
