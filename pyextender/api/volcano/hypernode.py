"""``topology.volcano.sh/v1alpha1`` HyperNode: a network-topology domain (rack, switch, supernode).

HyperNodes form a tree: tier-1 HyperNodes list Nodes, higher tiers list
HyperNodes. resolve_nodes() says which nodes a HyperNode covers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

from pyextender.api.volcano.codec import Kind, Model, PrinterColumn, Problem, Resource, attr, model
from pyextender.api.volcano.meta import Condition, LabelSelector, ObjectMeta
from pyextender.api.volcano.network_topology import DNS_SUBDOMAIN

MemberType = Literal["Node", "HyperNode"]


@model
class ExactMatch(Model):
    """Select the member with exactly this name."""

    name: str = attr("Name of the node or HyperNode.", default="")


@model
class RegexMatch(Model):
    """Select members whose name contains a match of the pattern (unanchored, as in Go)."""

    pattern: str = attr("Regular expression over member names.", default="")


@model
class MemberSelector(Model):
    """Exactly one of exactMatch, regexMatch, labelMatch."""

    exact_match: ExactMatch | None = attr("Match one name.", default=None)
    regex_match: RegexMatch | None = attr("Match names by regular expression.", default=None)
    label_match: LabelSelector | None = attr(
        "Match nodes by labels (members of type Node only).", default=None
    )

    CEL_RULES = (
        (
            "has(self.exactMatch) || has(self.regexMatch) || has(self.labelMatch)",
            "one of exactMatch, regexMatch or labelMatch is required",
        ),
        (
            "(has(self.exactMatch) ? 1 : 0) + (has(self.regexMatch) ? 1 : 0)"
            " + (has(self.labelMatch) ? 1 : 0) <= 1",
            "only one of exactMatch, regexMatch or labelMatch may be set",
        ),
    )

    def check(self) -> list[Problem]:
        chosen = [
            s for s in (self.exact_match, self.regex_match, self.label_match) if s is not None
        ]
        if not chosen:
            return [("", "one of exactMatch, regexMatch or labelMatch is required")]
        if len(chosen) > 1:
            return [("", "only one of exactMatch, regexMatch or labelMatch may be set")]
        if self.regex_match is not None:
            try:
                re.compile(self.regex_match.pattern)
            except re.error as exc:
                return [("regexMatch.pattern", f"invalid regular expression: {exc}")]
        return []

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        if self.exact_match is not None:
            return name == self.exact_match.name
        if self.regex_match is not None:
            return re.search(self.regex_match.pattern, name) is not None
        if self.label_match is not None:
            return self.label_match.matches(labels)
        return False


@model
class MemberSpec(Model):
    """A node or HyperNode (or a set of them, by selector) inside this HyperNode."""

    type: MemberType = attr("Node or HyperNode.", required=True, default="Node")
    selector: MemberSelector = attr("Which members.", default_factory=MemberSelector)

    def check(self) -> list[Problem]:
        if self.type == "HyperNode" and self.selector.label_match is not None:
            return [("selector.labelMatch", "applies only to members of type Node")]
        return []


@model
class HyperNodeSpec(Model):
    """Tier and members of a HyperNode."""

    tier: int = attr(
        "Tier in the topology tree; 1 is closest to the nodes.",
        required=True,
        default=1,
        minimum=0,
        int64=True,
    )
    tier_name: str = attr(
        "Name of the tier (e.g. rack, supernode).",
        default="",
        max_length=253,
        pattern=DNS_SUBDOMAIN,
    )
    members: list[MemberSpec] = attr("Nodes or HyperNodes in this HyperNode.", default_factory=list)


@model
class UnhealthyNode(Model):
    """A member node whose network is unhealthy."""

    name: str = attr("Node name.", default="")
    reason: str = attr("What is wrong.", default="")


@model
class HyperNodeStatus(Model):
    """Observed state of a HyperNode."""

    unhealthy_nodes: list[UnhealthyNode] = attr(
        "Nodes with unhealthy networking.", default_factory=list
    )
    conditions: list[Condition] = attr("Conditions of the HyperNode.", default_factory=list)
    node_count: int = attr("Nodes in the HyperNode.", default=0, minimum=0, int64=True)


@model
class HyperNode(Resource):
    """A set of nodes that share network performance (one domain of the topology tree)."""

    KIND = Kind(
        group="topology.volcano.sh",
        version="v1alpha1",
        kind="HyperNode",
        plural="hypernodes",
        scope="Cluster",
        description="A network-topology domain: nodes, or lower-tier HyperNodes, that share "
        "network performance.",
        short_names=("hn",),
        printer_columns=(
            # Volcano prints tier as a string column; kept for identical kubectl output.
            PrinterColumn("Tier", "string", ".spec.tier"),
            PrinterColumn("NodeCount", "integer", ".status.nodeCount"),
            PrinterColumn("Age", "date", ".metadata.creationTimestamp"),
        ),
    )

    metadata: ObjectMeta = attr("Standard object metadata.", default_factory=ObjectMeta)
    spec: HyperNodeSpec = attr("Tier and members.", default_factory=HyperNodeSpec)
    status: HyperNodeStatus = attr("Observed state.", default_factory=HyperNodeStatus)


def resolve_nodes(
    hypernode: HyperNode,
    nodes: Mapping[str, Mapping[str, str]],
    hypernodes: Mapping[str, HyperNode] | None = None,
) -> set[str]:
    """Names of the nodes ``hypernode`` covers.

    ``nodes`` maps every node name to its labels; ``hypernodes`` maps names to
    HyperNodes, for members of type HyperNode (resolved recursively; a cycle
    contributes nothing further).
    """
    return _resolve(hypernode, nodes, hypernodes or {}, frozenset({hypernode.metadata.name}))


def _resolve(
    hypernode: HyperNode,
    nodes: Mapping[str, Mapping[str, str]],
    hypernodes: Mapping[str, HyperNode],
    visiting: frozenset[str],
) -> set[str]:
    out: set[str] = set()
    for member in hypernode.spec.members:
        sel = member.selector
        if member.type == "Node":
            if sel.exact_match is not None:
                if sel.exact_match.name in nodes:
                    out.add(sel.exact_match.name)
                continue
            out.update(name for name, labels in nodes.items() if sel.matches(name, labels))
            continue
        for name, child in hypernodes.items():
            if name in visiting or not sel.matches(name, {}):
                continue
            out |= _resolve(child, nodes, hypernodes, visiting | {name})
    return out
