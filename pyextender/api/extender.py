"""kube-scheduler extender wire types (k8s.io/kube-scheduler extender/v1).

The Go structs have no json tags, so the JSON keys are the Go field names
(PascalCase). Every pointer, map and slice may be ``null``. Decoding checks
types and names the offending path in its error; unknown keys are ignored
so that a newer kube-scheduler can add fields.
"""

from __future__ import annotations

from typing import Any

import msgspec

KubeObject = dict[str, Any]


class ExtenderArgs(msgspec.Struct, rename=None):
    """Body of filter and prioritize."""

    Pod: KubeObject | None = None
    Nodes: KubeObject | None = None
    """A v1.NodeList; only when nodeCacheCapable is false."""
    NodeNames: list[str] | None = None
    """Candidate names; only when nodeCacheCapable is true."""


class ExtenderFilterResult(msgspec.Struct, omit_defaults=False):
    Nodes: KubeObject | None = None
    NodeNames: list[str] | None = None
    FailedNodes: dict[str, str] | None = None
    FailedAndUnresolvableNodes: dict[str, str] | None = None
    Error: str = ""


class HostPriority(msgspec.Struct, array_like=False):
    Host: str
    Score: int
    """0..10 (extender.MaxExtenderPriority); kube-scheduler scales it by weight×10."""


class ExtenderBindingArgs(msgspec.Struct):
    PodName: str = ""
    PodNamespace: str = ""
    PodUID: str = ""
    Node: str = ""


class ExtenderBindingResult(msgspec.Struct):
    Error: str = ""


class MetaPod(msgspec.Struct):
    UID: str = ""


class MetaVictims(msgspec.Struct):
    Pods: list[MetaPod | None] | None = None
    NumPDBViolations: int = 0


class Victims(msgspec.Struct):
    Pods: list[KubeObject | None] | None = None
    NumPDBViolations: int = 0


class ExtenderPreemptionArgs(msgspec.Struct):
    Pod: KubeObject | None = None
    NodeNameToVictims: dict[str, Victims | None] | None = None
    NodeNameToMetaVictims: dict[str, MetaVictims | None] | None = None


class ExtenderPreemptionResult(msgspec.Struct):
    NodeNameToMetaVictims: dict[str, MetaVictims | None] | None = None


MAX_EXTENDER_PRIORITY = 10
