"""HyperNode rules beyond the schema: selectors that select something, no self-membership."""

from __future__ import annotations

from pyextender.api.volcano import HyperNode
from webhook.findings import Findings


def check_hypernode(hypernode: HyperNode) -> Findings:
    found = Findings()
    own = hypernode.metadata.name
    for i, member in enumerate(hypernode.spec.members):
        path = f"spec.members[{i}].selector"
        sel = member.selector
        if sel.exact_match is not None:
            if not sel.exact_match.name:
                found.problem(f"{path}.exactMatch.name", "required")
            elif member.type == "HyperNode" and sel.exact_match.name == own:
                found.problem(f"{path}.exactMatch.name", "a HyperNode cannot contain itself")
        if sel.regex_match is not None and not sel.regex_match.pattern:
            found.problem(f"{path}.regexMatch.pattern", "required")
    return found
