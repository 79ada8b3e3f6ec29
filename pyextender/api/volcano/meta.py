"""Kubernetes object metadata, owner references, conditions and label selectors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pyextender.api.volcano.codec import Model, Problem, RawObject, Timestamp, attr, model


@model
class OwnerReference(Model):
    """Points at the object that owns (or is the target of) another one."""

    api_version: str = attr("API version of the referenced object.", required=True, default="")
    kind: str = attr("Kind of the referenced object.", required=True, default="")
    name: str = attr("Name of the referenced object.", required=True, default="")
    uid: str = attr("UID of the referenced object.", required=True, default="")
    controller: bool | None = attr("Whether the referenced object manages this one.", default=None)
    block_owner_deletion: bool | None = attr(
        "Whether foreground deletion of the owner waits for this object.", default=None
    )


@model
class ObjectMeta(Model):
    """Standard object metadata (the fields the API server defines; all optional on input)."""

    name: str = attr("Object name, unique within its namespace.", default="")
    generate_name: str = attr("Prefix for a server-generated name.", default="")
    namespace: str = attr("Namespace of a namespaced object.", default="")
    uid: str = attr("Server-assigned unique ID.", default="")
    resource_version: str = attr("Opaque version used for optimistic concurrency.", default="")
    generation: int = attr("Sequence number of spec changes.", default=0, int64=True)
    self_link: str = attr("Deprecated self link.", default="")
    creation_timestamp: Timestamp | None = attr("When the object was created.", default=None)
    deletion_timestamp: Timestamp | None = attr("When deletion was requested.", default=None)
    deletion_grace_period_seconds: int | None = attr(
        "Grace period of a pending deletion, in seconds.", default=None, int64=True
    )
    labels: dict[str, str] = attr("Labels.", default_factory=dict)
    annotations: dict[str, str] = attr("Annotations.", default_factory=dict)
    owner_references: list[OwnerReference] = attr("Owners of this object.", default_factory=list)
    finalizers: list[str] = attr(
        "Finalizers that must clear before deletion.", default_factory=list
    )
    managed_fields: list[RawObject] = attr(
        "Server-side apply field ownership.", default_factory=list
    )


@model
class Condition(Model):
    """A standard ``metav1.Condition``."""

    type: str = attr("Condition type in CamelCase.", required=True, default="")
    status: Literal["True", "False", "Unknown"] = attr(
        "Whether the condition holds.", required=True, default="Unknown"
    )
    observed_generation: int | None = attr(
        "metadata.generation the condition was computed from.", default=None, int64=True, minimum=0
    )
    last_transition_time: Timestamp | None = attr("When the status last changed.", default=None)
    reason: str = attr("CamelCase reason for the last transition.", default="")
    message: str = attr("Human-readable details.", default="")


@model
class LabelSelectorRequirement(Model):
    """One ``key operator values`` term of a label selector."""

    key: str = attr("Label key.", required=True, default="")
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"] = attr(
        "How the label's value relates to values.", required=True, default="In"
    )
    values: list[str] = attr("Values for In and NotIn; empty otherwise.", default_factory=list)

    def check(self) -> list[Problem]:
        if self.operator in ("In", "NotIn") and not self.values:
            return [("values", f"must not be empty for operator {self.operator}")]
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            return [("values", f"must be empty for operator {self.operator}")]
        return []

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        if self.operator == "In":
            return labels.get(self.key) in self.values
        return self.key not in labels or labels[self.key] not in self.values


@model
class LabelSelector(Model):
    """Kubernetes label selector: every term must hold; an empty selector matches all."""

    match_labels: dict[str, str] = attr(
        "Labels that must be present with these values.", default_factory=dict
    )
    match_expressions: list[LabelSelectorRequirement] = attr(
        "Further requirements, all of which must hold.", default_factory=list
    )

    def matches(self, labels: Mapping[str, str]) -> bool:
        if any(labels.get(k) != v for k, v in self.match_labels.items()):
            return False
        return all(req.matches(labels) for req in self.match_expressions)
