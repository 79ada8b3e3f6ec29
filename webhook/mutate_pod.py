"""Pod mutation: send the pods of an adopted namespace that are ours to us, gated.

A pod is ours when it carries Volcano's ``scheduling.k8s.io/group-name``
annotation (a gang member), or names no PodGroup but names our scheduler (a bare
pod: the PodGroup controller gives it a PodGroup of its own, as Volcano's does).
At creation, before any node is chosen, the webhook

- sets ``schedulerName: volcano`` when the pod asked for no scheduler in
  particular (empty or ``default-scheduler``), and
- adds the scheduling gate ``pyextender.io/gang``, which the sidecar's enqueue
  action lifts on all members at once when the whole gang fits
  (DESIGN.md §3), and
- names the PodGroup of an owned pod that names none (a Deployment's or
  StatefulSet's): ``podgroup-<owner uid>``, the one the PodGroup controller
  creates for the owner's pods. Volcano's controller writes that annotation on
  each pod after it is created; here it comes with the pod, so the controller
  writes nothing to the pod, and replicas of an owner whose PodGroup exists wait
  for no one. A bare pod without an owner gets ``podgroup-<a fresh uuid>`` and
  ``pyextender.io/own-podgroup: "true"``, which tells the controller that this
  PodGroup is the pod's own to create: Volcano names it for the pod's uid, which
  the API server assigns only after admission, and so has to write the name onto
  the pod afterwards (one more write, and one more update of the pod for every
  watcher, per bare pod).

With ``Adoption.barrier`` (``--gang-barrier=scheduler``, for a kube-scheduler
built with our framework shim) the pod gets the annotation
``pyextender.io/gang-barrier`` instead of the gate: the shim's PreEnqueue holds
it until the sidecar releases its gang, with no write to the pod.

A bare pod is held like a gang member so that it, too, waits for its queue: with
Volcano a pod runs only once its PodGroup is admitted (Inqueue), and a pod that
reached kube-scheduler ungated would be placed before the PodGroup controller had
even made its PodGroup, whatever its queue's capability. Bare pods that name
another scheduler (``default-scheduler`` included) are not ours and pass unchanged.

A pod that names another scheduler is left alone entirely: its scheduler
would never see our gate lifted. Only CREATE is mutated, because the API
server refuses new scheduling gates on an existing pod.

``Adoption`` chooses the install mode (charts/pyextender values ``mode``):

- ``scheduler`` (default): a second kube-scheduler serves profile ``volcano``;
  adopted pods get that schedulerName.
- ``existing``: the cluster's own kube-scheduler calls our extender, which is
  configured with ``managedResources: [{name: pyextender.io/batch,
  ignoredByScheduler: true}]`` (manifests/extender/). Adopted pods keep (or get)
  the cluster's scheduler name and request one ``pyextender.io/batch`` in their
  first container, so kube-scheduler calls the extender for them and only them.
  No node advertises the resource: kube-scheduler's fit check skips it
  (ignoredByScheduler) and kubelet's admission drops extended resources its node
  does not know (see manifests/extender/README.md).

``plan_pod`` decides, ``pod_patch`` writes the JSONPatch; both are pure so
shadow mode can log exactly what enforcement would have done.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pyextender.api.names import (
    BARRIER_ANNOTATION,
    BATCH_RESOURCE,
    GANG_GATE,
    GATED_BY_WEBHOOK_ANNOTATION,
    GROUP_NAME_ANNOTATION,
    OWN_PODGROUP_ANNOTATION,
    SCHEDULER_NAME,
    fresh_podgroup_name,
    own_podgroup_name,
)

DEFAULT_SCHEDULER = "default-scheduler"
SCHEDULER_MODE, EXISTING_MODE = "scheduler", "existing"


@dataclass(frozen=True, slots=True)
class Adoption:
    """Where adopted gang pods go."""

    mode: str = SCHEDULER_MODE
    """``scheduler`` (our own kube-scheduler profile) or ``existing`` (marker resource)."""
    scheduler_name: str = SCHEDULER_NAME
    """The schedulerName adopted pods end up with."""
    barrier: bool = False
    """Hold gang pods with the pyextender.io/gang-barrier annotation (the framework
    shim's PreEnqueue) instead of the scheduling gate."""

    @property
    def marker(self) -> bool:
        return self.mode == EXISTING_MODE

    @property
    def bare_name(self) -> str:
        """The schedulerName that makes a pod naming no PodGroup ours: the name of our
        profile, or (existing mode, which has no profile) Volcano's."""
        return SCHEDULER_NAME if self.marker else self.scheduler_name

    @property
    def accepted(self) -> tuple[str, ...]:
        """schedulerNames we take over: none in particular, ours, and (existing mode)
        Volcano's, which has no profile there."""
        names = ("", DEFAULT_SCHEDULER, self.scheduler_name)
        return (*names, SCHEDULER_NAME) if self.marker else names


@dataclass(frozen=True, slots=True)
class PodPlan:
    """What the webhook does (or, in shadow mode, would do) to one pod."""

    group: str = ""
    """PodGroup the pod belongs to ("" when it is no gang member)."""
    set_scheduler: bool = False
    add_gate: bool = False
    add_marker: bool = False
    barrier: bool = False
    """add_gate holds the pod with the barrier annotation, not the scheduling gate."""
    name_group: str = ""
    """The PodGroup to name in the pod's group-name annotation: an owned pod that names
    none shares ``podgroup-<its owner's uid>`` (what the PodGroup controller creates
    for it), known at creation; a pod without an owner gets a fresh name (own_group);
    "" for none (a gang member names its own)."""
    own_group: bool = False
    """name_group is the pod's own, freshly named: marked so (OWN_PODGROUP_ANNOTATION)."""
    skipped: str = ""
    """Why the pod is left as it is ("" when there is something to do)."""

    @property
    def changes(self) -> tuple[str, ...]:
        """Names of the changes, for logs and the ``change`` metric label."""
        return (
            (("scheduler_name",) if self.set_scheduler else ())
            + ((("gang_barrier" if self.barrier else "scheduling_gate"),) if self.add_gate else ())
            + (("batch_marker",) if self.add_marker else ())
            + (("group_name",) if self.name_group else ())
        )


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _has_marker(spec: Mapping[str, Any]) -> bool:
    containers = spec.get("containers")
    if not isinstance(containers, list):
        return False
    for c in containers:
        res = _mapping(_mapping(c).get("resources"))
        if BATCH_RESOURCE in _mapping(res.get("requests")):
            return True
    return False


def plan_pod(
    pod: Mapping[str, Any] | None,
    operation: str,
    adoption: Adoption | None = None,
    fresh_name: Callable[[], str] = fresh_podgroup_name,
) -> PodPlan:
    """Decide what to change on ``pod`` (the AdmissionRequest object); ``fresh_name``
    names the PodGroup of a bare pod without an owner."""
    adoption = adoption or Adoption()
    if operation != "CREATE":
        return PodPlan(skipped=f"operation {operation}: only pod creation is mutated")
    if pod is None:
        return PodPlan(skipped="no pod in the request")
    metadata = _mapping(pod.get("metadata"))
    annotations = _mapping(metadata.get("annotations"))
    group = annotations.get(GROUP_NAME_ANNOTATION)
    spec = pod.get("spec")
    bare = not isinstance(group, str) or not group
    group = "" if bare else str(group)
    if not isinstance(spec, Mapping):
        return PodPlan(group=group, skipped="pod has no spec")
    requested = spec.get("schedulerName") or ""
    if bare and requested != adoption.bare_name:
        return PodPlan(
            skipped=f"no {GROUP_NAME_ANNOTATION} annotation and schedulerName "
            f"{requested!r}: neither a gang member nor a pod of ours"
        )
    node = spec.get("nodeName")
    if node:
        return PodPlan(group=group, skipped=f"already bound to node {node}")
    if requested not in adoption.accepted:
        return PodPlan(
            group=group, skipped=f"schedulerName {requested!r}: another scheduler owns the pod"
        )
    set_scheduler = requested != adoption.scheduler_name
    gates = spec.get("schedulingGates")
    has_gate = isinstance(gates, list) and any(
        isinstance(g, Mapping) and g.get("name") == GANG_GATE for g in gates
    )
    # held either way already (e.g. the Job controller's pods): never held twice
    has_gate = has_gate or bool(annotations.get(BARRIER_ANNOTATION))
    add_marker = adoption.marker and not _has_marker(spec)
    # the owner's uid only: a uid sent in the request is not the one the pod will get
    name_group = own_podgroup_name({**metadata, "uid": ""}) if bare else ""
    own_group = bare and not name_group
    if own_group:
        name_group = fresh_name()
    if not set_scheduler and has_gate and not add_marker and not name_group:
        return PodPlan(group=group, skipped="already scheduled by us and gated")
    return PodPlan(
        group=name_group or group,
        set_scheduler=set_scheduler,
        add_gate=not has_gate,
        add_marker=add_marker,
        barrier=adoption.barrier,
        name_group=name_group,
        own_group=own_group,
    )


def _marker_ops(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One pyextender.io/batch in requests and limits of the first container
    (an extended resource needs both, and they must be equal)."""
    first = _mapping((_mapping(pod.get("spec")).get("containers") or [{}])[0])
    res = first.get("resources")
    base = "/spec/containers/0/resources"
    one = {BATCH_RESOURCE: "1"}
    if not isinstance(res, Mapping):
        return [{"op": "add", "path": base, "value": {"requests": one, "limits": one}}]
    ops: list[dict[str, Any]] = []
    key = BATCH_RESOURCE.replace("~", "~0").replace("/", "~1")
    for part in ("requests", "limits"):
        if isinstance(res.get(part), Mapping):
            ops.append({"op": "add", "path": f"{base}/{part}/{key}", "value": "1"})
        else:
            ops.append({"op": "add", "path": f"{base}/{part}", "value": one})
    return ops


def _annotation_ops(pod: Mapping[str, Any], values: Mapping[str, str]) -> list[dict[str, Any]]:
    """Set each annotation to its value; a pod with no annotations at all (a bare pod
    may have none) gets the whole map in one operation."""
    if not values:
        return []
    if not isinstance(_mapping(pod.get("metadata")).get("annotations"), Mapping):
        return [{"op": "add", "path": "/metadata/annotations", "value": dict(values)}]
    return [
        {
            "op": "add",
            "path": "/metadata/annotations/" + k.replace("~", "~0").replace("/", "~1"),
            "value": v,
        }
        for k, v in values.items()
    ]


def pod_patch(
    pod: Mapping[str, Any], plan: PodPlan, adoption: Adoption | None = None
) -> list[dict[str, Any]]:
    """RFC 6902 operations carrying out ``plan``.

    ``add`` replaces an existing member (RFC 6902 §4.1), so it also covers
    the ``default-scheduler`` the API server fills in before admission.
    """
    adoption = adoption or Adoption()
    ops: list[dict[str, Any]] = []
    annotations: dict[str, str] = {}
    if plan.set_scheduler:
        ops.append({"op": "add", "path": "/spec/schedulerName", "value": adoption.scheduler_name})
    if plan.add_gate and plan.barrier:
        annotations.update(dict.fromkeys((BARRIER_ANNOTATION, GATED_BY_WEBHOOK_ANNOTATION), "true"))
    elif plan.add_gate:
        gate = {"name": GANG_GATE}
        if isinstance(_mapping(pod.get("spec")).get("schedulingGates"), list):
            ops.append({"op": "add", "path": "/spec/schedulingGates/-", "value": gate})
        else:
            ops.append({"op": "add", "path": "/spec/schedulingGates", "value": [gate]})
        annotations[GATED_BY_WEBHOOK_ANNOTATION] = "true"
    if plan.name_group:
        annotations[GROUP_NAME_ANNOTATION] = plan.name_group
    if plan.own_group:
        annotations[OWN_PODGROUP_ANNOTATION] = "true"
    ops.extend(_annotation_ops(pod, annotations))
    if plan.add_marker:
        ops.extend(_marker_ops(pod))
    return ops
