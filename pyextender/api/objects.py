"""Light, typed views of the Pod and Node JSON the API server sends.

The cache keeps only these (not full objects) so that 50,000 pods fit in the
memory budget. Built from plain dicts decoded by msgspec/json.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pyextender.api import names
from pyextender.api.resources import PYEXTENDER_GPU_MILLI, parse_resource_list


class ObjectError(ValueError):
    """A Pod or Node document that does not have the shape we need."""


def _mapping(obj: Any, what: str) -> Mapping[str, Any]:
    if obj is None:
        return {}
    if not isinstance(obj, Mapping):
        raise ObjectError(f"{what} must be an object, got {type(obj).__name__}")
    return obj


def _str_map(obj: Any, what: str) -> dict[str, str]:
    raw = _mapping(obj, what)
    return {str(k): str(v) for k, v in raw.items()}


SCHEDULER_ANNOTATION_PREFIXES = (
    "scheduling.k8s.io/",
    "scheduling.volcano.sh/",
    "volcano.sh/",
    "pyextender.io/",
    "metax-tech.com/",
    "sla-waiting-time",
)
"""Pod annotations the scheduler reads. Others (last-applied configurations,
mesh and monitoring annotations, ...) are not kept: at 50,000 pods they cost
far more memory than everything the scheduler needs."""

_SHAPES: dict[tuple[tuple[str, int], ...], dict[str, int]] = {}
_MAX_SHAPES = 4096


def _shared_requests(requests: dict[str, int]) -> dict[str, int]:
    """One dict per distinct request set (pods of a job share it). Never mutated."""
    key = tuple(sorted(requests.items()))
    shared = _SHAPES.get(key)
    if shared is None:
        shared = {sys.intern(k): v for k, v in requests.items()}
        if len(_SHAPES) < _MAX_SHAPES:
            _SHAPES[key] = shared
    return shared


def _scheduler_annotations(obj: Any) -> dict[str, str]:
    raw = _mapping(obj, "annotations")
    return {
        sys.intern(str(k)): sys.intern(str(v))
        for k, v in raw.items()
        if str(k).startswith(SCHEDULER_ANNOTATION_PREFIXES)
    }


def _add(total: dict[str, int], part: Mapping[str, int]) -> None:
    for key, value in part.items():
        total[key] = total.get(key, 0) + value


def _max_into(total: dict[str, int], part: Mapping[str, int]) -> None:
    for key, value in part.items():
        if value > total.get(key, 0):
            total[key] = value


def pod_requests(spec: Mapping[str, Any]) -> dict[str, int]:
    """Effective pod request, as kube-scheduler computes it.

    sum(containers) + sum(restartable init containers), then the maximum with
    each ordinary init container (plus the sidecars started before it), plus
    pod overhead. Units as in pyextender.api.resources.
    """
    containers = spec.get("containers") or []
    total: dict[str, int] = {}
    for c in containers:
        _add(total, parse_resource_list(_mapping(c.get("resources"), "resources").get("requests")))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for c in spec.get("initContainers") or []:
        req = parse_resource_list(_mapping(c.get("resources"), "resources").get("requests"))
        if c.get("restartPolicy") == "Always":
            _add(sidecars, req)
            continue
        with_sidecars = dict(sidecars)
        _add(with_sidecars, req)
        _max_into(init_peak, with_sidecars)
    _add(total, sidecars)
    _max_into(total, init_peak)
    _add(total, parse_resource_list(spec.get("overhead")))
    return total


@dataclass(frozen=True, slots=True)
class Toleration:
    """One toleration of a pod, as the API has it (operator "" means Equal)."""

    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' rule: same effect (or none given), and the key matches (an
        empty key with Exists matches every key), and Exists or an equal value."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.operator in ("", "Equal") and self.value == taint.value


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(slots=True)
class PodInfo:
    """What the scheduler needs to know about one pod."""

    namespace: str
    name: str
    uid: str
    scheduler_name: str
    node_name: str
    phase: str
    requests: dict[str, int]
    """Shared between pods with the same requests: never mutate it."""
    priority: int = 0
    annotations: dict[str, str] = field(default_factory=dict)
    """Only the annotations the scheduler reads (SCHEDULER_ANNOTATION_PREFIXES)."""
    gates: tuple[str, ...] = ()
    deleting: bool = False
    created: str = ""
    """metadata.creationTimestamp (RFC 3339, UTC; sorts as text)."""
    started: str = ""
    """status.startTime (RFC 3339), "" while not started."""
    soft_preferences: bool = False
    """The pod states a preference that kube-scheduler's own score plugins weigh
    (``soft_preferences``): the extender's filter then leaves the choice of node
    to scoring instead of picking it."""
    soft_tolerations: tuple[Toleration, ...] = ()
    """Its tolerations that can match a PreferNoSchedule taint (effect "" or
    PreferNoSchedule): what kube-scheduler's TaintToleration score looks at."""
    gpu_models: tuple[str, ...] = ()
    """The GPU models (``nvidia.com/gpu.product`` values) its required node constraints
    accept (``required_gpu_models``); empty: any model."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def group_name(self) -> str:
        return self.annotations.get(names.GROUP_NAME_ANNOTATION, "")

    @property
    def terminated(self) -> bool:
        """Succeeded/Failed pods hold no resources."""
        return self.phase in ("Succeeded", "Failed")

    @property
    def gpu_milli(self) -> int:
        """Per-GPU share in milli-GPU for sharing pods, 0 when not sharing."""
        raw = self.annotations.get(PYEXTENDER_GPU_MILLI) or ""
        if raw.isdigit():
            return int(raw)
        return 0


_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
PREFER_NO_SCHEDULE = "PreferNoSchedule"


def _items(value: Any) -> list[Any]:
    """A list field's items; nothing for a missing or ill-typed one (these fields only
    steer scoring, never admit a pod, so a bad one is ignored rather than fatal)."""
    return value if isinstance(value, list) else []


def soft_preferences(spec: Mapping[str, Any]) -> bool:
    """Preferred node affinity, preferred pod (anti-)affinity, or a topology spread
    constraint with ``whenUnsatisfiable: ScheduleAnyway``: preferences only
    kube-scheduler's score plugins (NodeAffinity, InterPodAffinity,
    PodTopologySpread) weigh; our score plugins do not repeat them."""
    affinity = spec.get("affinity")
    if isinstance(affinity, Mapping):
        for kind in ("nodeAffinity", "podAffinity", "podAntiAffinity"):
            part = affinity.get(kind)
            if isinstance(part, Mapping) and part.get(_PREFERRED):
                return True
    return any(
        isinstance(c, Mapping) and c.get("whenUnsatisfiable") == "ScheduleAnyway"
        for c in _items(spec.get("topologySpreadConstraints"))
    )


def _term_models(term: Any, key: str) -> frozenset[str] | None:
    """The models one node selector term accepts: the intersection of its ``In``
    expressions on ``key``; None when it has none (the term takes any model)."""
    exprs = _items(term.get("matchExpressions")) if isinstance(term, Mapping) else []
    sets = [
        frozenset(str(v) for v in _items(e.get("values")))
        for e in exprs
        if isinstance(e, Mapping) and e.get("key") == key and e.get("operator") == "In"
    ]
    return frozenset.intersection(*sets) if sets else None


def required_gpu_models(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The GPU models a pod's hard node constraints accept, sorted; () when they accept any.

    Read from ``nodeSelector`` and the required node affinity on the GPU model label,
    ``In`` expressions only: terms are alternatives, so the affinity narrows only when
    every term names models (their union); the node selector must hold as well (the
    intersection). Other operators (NotIn, Exists, ...) leave it open: this feeds a
    workload model (which nodes a kind of pod can use), never a filter, so reading
    less than kube-scheduler does costs precision, not correctness."""
    key = names.GPU_MODEL_LABEL
    accepted: frozenset[str] | None = None
    selector = spec.get("nodeSelector")
    if isinstance(selector, Mapping) and isinstance(selector.get(key), str):
        accepted = frozenset((selector[key],))
    affinity = spec.get("affinity")
    node_affinity = affinity.get("nodeAffinity") if isinstance(affinity, Mapping) else None
    required = (
        node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
        if isinstance(node_affinity, Mapping)
        else None
    )
    terms = _items(required.get("nodeSelectorTerms")) if isinstance(required, Mapping) else []
    per_term = [_term_models(t, key) for t in terms]
    if per_term and None not in per_term:
        union = frozenset().union(*(m for m in per_term if m is not None))
        accepted = union if accepted is None else accepted & union
    if not accepted:
        return ()
    return tuple(sys.intern(m) for m in sorted(accepted))


def _soft_tolerations(spec: Mapping[str, Any]) -> tuple[Toleration, ...]:
    out = []
    for t in _items(spec.get("tolerations")):
        if isinstance(t, Mapping) and t.get("effect") in (None, "", PREFER_NO_SCHEDULE):
            out.append(
                Toleration(
                    key=str(t.get("key") or ""),
                    operator=str(t.get("operator") or ""),
                    value=str(t.get("value") or ""),
                    effect=str(t.get("effect") or ""),
                )
            )
    return tuple(out)


def tolerates_all(tolerations: tuple[Toleration, ...], taints: tuple[Taint, ...]) -> bool:
    """Every taint tolerated by one of the tolerations."""
    return all(any(t.tolerates(taint) for t in tolerations) for taint in taints)


def pod_from_dict(obj: Mapping[str, Any]) -> PodInfo:
    """Build a PodInfo from a Pod JSON document. Raises ObjectError on bad shape."""
    if not isinstance(obj, Mapping):
        raise ObjectError("pod must be a JSON object")
    meta = _mapping(obj.get("metadata"), "metadata")
    spec = _mapping(obj.get("spec"), "spec")
    status = _mapping(obj.get("status"), "status")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ObjectError("pod metadata.name is missing")
    try:
        requests = pod_requests(spec)
    except (ValueError, AttributeError, TypeError) as exc:
        raise ObjectError(f"pod {name}: {exc}") from exc
    gates = tuple(
        str(g.get("name", "")) for g in spec.get("schedulingGates") or [] if isinstance(g, Mapping)
    )
    priority = spec.get("priority")
    # Strings shared by many pods are interned: at 50,000 pods that is megabytes.
    return PodInfo(
        namespace=sys.intern(str(meta.get("namespace") or "default")),
        name=name,
        uid=str(meta.get("uid") or ""),
        scheduler_name=sys.intern(str(spec.get("schedulerName") or "default-scheduler")),
        node_name=sys.intern(str(spec.get("nodeName") or "")),
        phase=sys.intern(str(status.get("phase") or "Pending")),
        requests=_shared_requests(requests),
        priority=priority if isinstance(priority, int) else 0,
        annotations=_scheduler_annotations(meta.get("annotations")),
        gates=gates,
        deleting=meta.get("deletionTimestamp") is not None,
        created=str(meta.get("creationTimestamp") or ""),
        started=str(status.get("startTime") or ""),
        soft_preferences=soft_preferences(spec),
        soft_tolerations=_soft_tolerations(spec),
        gpu_models=required_gpu_models(spec),
    )


@dataclass(slots=True)
class NodeInfo:
    """What the scheduler needs to know about one node."""

    name: str
    allocatable: dict[str, int]
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    unschedulable: bool = False
    ready: bool = True
    prefer_no_schedule: tuple[Taint, ...] = ()
    """Its PreferNoSchedule taints (kube-scheduler's TaintToleration scores them)."""


def node_from_dict(obj: Mapping[str, Any]) -> NodeInfo:
    """Build a NodeInfo from a Node JSON document. Raises ObjectError on bad shape."""
    if not isinstance(obj, Mapping):
        raise ObjectError("node must be a JSON object")
    meta = _mapping(obj.get("metadata"), "metadata")
    spec = _mapping(obj.get("spec"), "spec")
    status = _mapping(obj.get("status"), "status")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ObjectError("node metadata.name is missing")
    try:
        alloc = parse_resource_list(status.get("allocatable") or status.get("capacity"))
    except ValueError as exc:
        raise ObjectError(f"node {name}: {exc}") from exc
    ready = True
    for cond in status.get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == "Ready":
            ready = cond.get("status") == "True"
    return NodeInfo(
        name=name,
        allocatable=alloc,
        labels=_str_map(meta.get("labels"), "labels"),
        annotations=_str_map(meta.get("annotations"), "annotations"),
        unschedulable=bool(spec.get("unschedulable", False)),
        ready=ready,
        prefer_no_schedule=tuple(
            Taint(str(t.get("key") or ""), str(t.get("value") or ""), PREFER_NO_SCHEDULE)
            for t in _items(spec.get("taints"))
            if isinstance(t, Mapping) and t.get("effect") == PREFER_NO_SCHEDULE
        ),
    )
