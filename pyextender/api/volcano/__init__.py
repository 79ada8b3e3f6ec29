"""Volcano's CRD types as typed models: PodGroup, Queue, Job, CronJob, Command, HyperNode.

Each model decodes Volcano's own YAML (``Model.from_dict``), reports bad
fields by path (``FieldError``), encodes back (``to_dict``) and is the source
of the generated CRDs in ``manifests/crds`` (``python -m
pyextender.api.volcano.crdgen``).
"""

from __future__ import annotations

from pyextender.api.volcano.codec import FieldError, Model, Resource, duration_seconds
from pyextender.api.volcano.command import Command
from pyextender.api.volcano.cronjob import CronJob
from pyextender.api.volcano.hypernode import HyperNode, resolve_nodes
from pyextender.api.volcano.job import Job
from pyextender.api.volcano.meta import LabelSelector, ObjectMeta, OwnerReference
from pyextender.api.volcano.network_topology import NetworkTopologySpec
from pyextender.api.volcano.podgroup import PodGroup, PodGroupCondition
from pyextender.api.volcano.queue import Queue, default_queues

RESOURCES: tuple[type[Resource], ...] = (PodGroup, Queue, Job, CronJob, Command, HyperNode)
"""Every kind we serve, in the order manifests list them."""

_BY_KIND = {(r.KIND.api_version, r.KIND.kind): r for r in RESOURCES}


def load(data: object) -> Resource:
    """Decode any of our kinds, chosen by its apiVersion and kind."""
    if not isinstance(data, dict):
        raise FieldError([("", "must be an object")])
    key = (data.get("apiVersion"), data.get("kind"))
    cls = _BY_KIND.get(key)  # type: ignore[arg-type]
    if cls is None:
        known = ", ".join(f"{a}/{k}" for a, k in _BY_KIND)
        raise FieldError([("kind", f"unknown apiVersion/kind {key[0]}/{key[1]}; known: {known}")])
    return cls.from_dict(data)


__all__ = [
    "RESOURCES",
    "Command",
    "CronJob",
    "FieldError",
    "HyperNode",
    "Job",
    "LabelSelector",
    "Model",
    "NetworkTopologySpec",
    "ObjectMeta",
    "OwnerReference",
    "PodGroup",
    "PodGroupCondition",
    "Queue",
    "Resource",
    "default_queues",
    "duration_seconds",
    "load",
    "resolve_nodes",
]
