"""A task's pod template checked as the API server checks a pod's containers.

Volcano runs Kubernetes' own pod-template validation on every task at
admission (``pkg/webhooks/admission/jobs/validate/admit_job.go``,
validateTaskTemplate). A template the API server would refuse as a pod is
refused here at once, naming the field, instead of leaving a Job whose pods
can never be created. Checked, per container and init container (Kubernetes'
ValidateResourceRequirements and container rules):

- a name (a DNS label, unique across containers and init containers) and an image;
- every request and limit a quantity, not negative; an unqualified resource
  name is a standard one (cpu, memory, ephemeral-storage, hugepages-<size>);
  extended resources (``vendor/name``) in whole units;
- a request no more than its limit; for resources that cannot be overcommitted
  (extended resources, hugepages) a request needs a limit equal to it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from pyextender.api.quantity import QuantityError, parse_quantity
from pyextender.api.volcano.codec import show
from webhook.findings import Findings

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_LABEL_MAX = 63
STANDARD_UNQUALIFIED = frozenset({"cpu", "memory", "ephemeral-storage"})
HUGEPAGES_PREFIX = "hugepages-"


def _native(name: str) -> bool:
    """Kubernetes' own resources: unqualified or in the kubernetes.io domain."""
    return "/" not in name or "kubernetes.io/" in name


def _overcommittable(name: str) -> bool:
    """Requests may be below limits (cpu, memory, ...); not for extended resources or hugepages."""
    return _native(name) and not name.startswith(HUGEPAGES_PREFIX)


def _amounts(values: Any, path: str, found: Findings) -> dict[str, Decimal]:
    """Resource name -> amount of one requests/limits map; problems reported by path."""
    if values is None:
        return {}
    if not isinstance(values, Mapping):
        found.problem(path, f"must be a map of resource name to quantity, got {show(values)}")
        return {}
    out: dict[str, Decimal] = {}
    for name, text in values.items():
        where = f"{path}.{name}"
        standard = name in STANDARD_UNQUALIFIED or name.startswith(HUGEPAGES_PREFIX)
        if "/" not in name and not standard:
            found.problem(
                where,
                "must be a standard resource for containers (cpu, memory, "
                "ephemeral-storage, hugepages-<size>) or a qualified name (vendor/name)",
            )
            continue
        try:
            amount = parse_quantity(text)
        except QuantityError:
            found.problem(where, f"{show(text)} is not a quantity (e.g. 500m, 2, 1Gi)")
            continue
        if amount < 0:
            found.problem(where, f"must be greater than or equal to 0, got {show(text)}")
            continue
        if not _native(name) and amount != amount.to_integral_value():
            found.problem(where, f"must be an integer, got {show(text)}")
            continue
        out[name] = amount
    return out


def _check_resources(resources: Any, path: str, found: Findings) -> None:
    if resources is None:
        return
    if not isinstance(resources, Mapping):
        found.problem(path, f"must be an object, got {show(resources)}")
        return
    limits = _amounts(resources.get("limits"), f"{path}.limits", found)
    requests = _amounts(resources.get("requests"), f"{path}.requests", found)
    raw_limits = resources.get("limits") or {}
    raw_requests = resources.get("requests") or {}
    for name, amount in requests.items():
        limit = limits.get(name)
        where = f"{path}.requests.{name}"
        if limit is None:
            if not _overcommittable(name) and name not in raw_limits:
                found.problem(
                    f"{path}.limits.{name}",
                    "required: a limit must be set for resources that cannot be "
                    f"overcommitted (requests.{name} is {show(raw_requests[name])})",
                )
            continue
        if not _overcommittable(name) and amount != limit:
            found.problem(
                where,
                f"must be equal to {name} limit of {show(raw_limits[name])}, "
                f"got {show(raw_requests[name])}",
            )
        elif amount > limit:
            found.problem(
                where,
                f"must be less than or equal to {name} limit of {show(raw_limits[name])}, "
                f"got {show(raw_requests[name])}",
            )


def check_pod_template(template: Mapping[str, Any], path: str, found: Findings) -> None:
    """Problems of a task's ``template`` (a PodTemplateSpec); ``path`` names it."""
    spec = template.get("spec")
    if not isinstance(spec, Mapping):
        return  # "at least one container is required" is reported by the caller
    seen: dict[str, str] = {}
    for key in ("initContainers", "containers"):
        containers = spec.get(key)
        if containers is None:
            continue
        if not isinstance(containers, list):
            found.problem(f"{path}.spec.{key}", f"must be a list, got {show(containers)}")
            continue
        for i, container in enumerate(containers):
            where = f"{path}.spec.{key}[{i}]"
            if not isinstance(container, Mapping):
                found.problem(where, f"must be an object, got {show(container)}")
                continue
            name = container.get("name")
            if not isinstance(name, str) or not name:
                found.problem(f"{where}.name", "required")
            elif len(name) > DNS_LABEL_MAX or not DNS_LABEL.match(name):
                found.problem(
                    f"{where}.name",
                    f"{show(name)} is not a DNS label (lower-case letters, digits and '-', "
                    f"at most {DNS_LABEL_MAX} characters)",
                )
            elif name in seen:
                found.problem(f"{where}.name", f"{show(name)} is already used by {seen[name]}")
            else:
                seen[name] = where
            image = container.get("image")
            # only empty: Kubernetes lets a template carry " " for tools to fill in
            if not isinstance(image, str) or not image:
                found.problem(f"{where}.image", "required")
            _check_resources(container.get("resources"), f"{where}.resources", found)
