"""Queue rules beyond the schema: positive weight, resource ordering, a sound queue tree.

Volcano's rules (``pkg/webhooks/admission/queues/validate/validate_queue.go``),
in its wording where scripts match on it:

- ``spec.weight`` >= 1 (the model and the schema say so; a new queue's 0
  became 1 in the defaults webhook, as in Volcano);
- per resource, none negative, and guarantee <= deserved <= capability; a
  guaranteed resource must be deserved too ("deserved[cpu] must be >=
  guarantee[cpu]=2"), a deserved one must fit the capability ("deserved[cpu]=8
  must be <= capability[cpu]=4"); a resource without capability is unbounded;
- the annotations ``volcano.sh/hierarchy`` and ``volcano.sh/hierarchy-weights``
  come together, with as many ``/``-separated weights as queues, each a
  number > 0, and no other queue's hierarchy may continue below this one's
  (``root/sci`` next to ``root/sci/dev``);
- ``root`` has no parent and can be neither closed nor deleted; ``default``
  cannot be deleted;
- a parent must exist, and a queue may not end up below itself (cycle);
- a queue with child queues cannot be deleted.
"""

from __future__ import annotations

from decimal import Decimal

from pyextender.api.quantity import QuantityError, parse_quantity
from pyextender.api.volcano import Queue
from pyextender.api.volcano.codec import show
from pyextender.api.volcano.queue import DEFAULT_QUEUE, HIERARCHY, HIERARCHY_WEIGHTS, ROOT_QUEUE
from webhook.findings import Findings
from webhook.queues import QueueSource, absent

MAX_DEPTH = 64
"""Queue tree depth we walk before calling the chain broken (guards stored cycles)."""


def _amounts(resources: dict[str, str], path: str, found: Findings) -> dict[str, Decimal]:
    out: dict[str, Decimal] = {}
    for name, text in resources.items():
        try:
            value = parse_quantity(text)
        except QuantityError:  # the model already reported it
            continue
        if value < 0:
            found.problem(f"{path}[{name}]", f"must not be negative, got {text}")
        out[name] = value
    return out


def _check_resources(queue: Queue, found: Findings) -> None:
    spec = queue.spec
    capability = _amounts(spec.capability, "spec.capability", found)
    deserved = _amounts(spec.deserved, "spec.deserved", found)
    guarantee = _amounts(spec.guarantee.resource, "spec.guarantee.resource", found)
    for name, amount in guarantee.items():
        wanted = spec.guarantee.resource[name]
        if name not in spec.deserved:
            found.problem(
                f"spec.deserved[{name}]",
                f"deserved[{name}] must be >= guarantee[{name}]={wanted} "
                "(a guaranteed resource must be deserved too)",
            )
        elif name in deserved and deserved[name] < amount:
            found.problem(
                f"spec.deserved[{name}]",
                f"deserved[{name}]={spec.deserved[name]} must be >= guarantee[{name}]={wanted}",
            )
    for name, amount in deserved.items():
        if name in capability and amount > capability[name]:
            found.problem(
                f"spec.deserved[{name}]",
                f"deserved[{name}]={spec.deserved[name]} must be <= "
                f"capability[{name}]={spec.capability[name]}",
            )


def _check_hierarchy(
    name: str, annotations: dict[str, str], queues: QueueSource, found: Findings
) -> None:
    """The annotations of Volcano's older hierarchy form (``root/a/b`` with weights ``1/2/3``)."""
    hierarchy = annotations.get(HIERARCHY, "")
    weights = annotations.get(HIERARCHY_WEIGHTS, "")
    if not hierarchy and not weights:
        return
    path = f"metadata.annotations[{HIERARCHY_WEIGHTS}]"
    if not weights:
        found.problem(path, f"required when {HIERARCHY} is set (one weight per queue in it)")
        return
    steps, parts = hierarchy.split("/"), weights.split("/")
    if len(steps) != len(parts):
        found.problem(
            f"metadata.annotations[{HIERARCHY}]",
            f"{HIERARCHY} must have the same length with {HIERARCHY_WEIGHTS}: "
            f"{len(steps)} queues in {show(hierarchy)}, {len(parts)} weights in {show(weights)}",
        )
        return
    for part in parts:
        try:
            weight = float(part)
        except ValueError:
            found.problem(path, f"{part} in the {weights} is invalid number")
            return
        if not weight > 0:  # also refuses nan
            found.problem(path, f"{part} in the {weights} must be larger than 0")
            return
    # a queue's path names a leaf: no other queue may hang below it
    for other, theirs in sorted(queues.hierarchies().items()):
        if other != name and theirs.startswith(hierarchy + "/"):
            found.problem(
                f"metadata.annotations[{HIERARCHY}]",
                f"{hierarchy} is not allowed to be in the sub path of {theirs} of queue {other}",
            )
            return


def _check_parent(queue: Queue, queues: QueueSource, found: Findings) -> None:
    name, parent = queue.metadata.name, queue.parent_name
    if parent == name:
        found.problem("spec.parent", f"a queue cannot be its own parent ({show(name)})")
        return
    chain = [name]
    current = parent
    while current:
        info = queues.get(current)
        if info is None:
            where = "parent queue" if current == parent else f"ancestor queue (via {show(parent)})"
            found.problem("spec.parent", absent(current, where))
            return
        chain.append(current)
        if current == name or len(chain) > MAX_DEPTH:
            found.problem(
                "spec.parent",
                f"{show(parent)} is below {show(name)} in the queue tree, "
                "which would then have a cycle: " + " -> ".join(chain),
            )
            return
        current = info.parent


def check_queue(queue: Queue, old: Queue | None, operation: str, queues: QueueSource) -> Findings:
    """Rules for CREATE and UPDATE (spec.weight >= 1 is the model's own rule)."""
    found = Findings()
    name = queue.metadata.name
    _check_resources(queue, found)
    _check_hierarchy(name, queue.metadata.annotations, queues, found)
    if name == ROOT_QUEUE:
        if queue.spec.parent:
            found.problem(
                "spec.parent", f"the root queue has no parent, got {show(queue.spec.parent)}"
            )
        if queue.status.state in ("Closed", "Closing"):
            found.problem("status.state", "the root queue cannot be closed")
        return found
    if operation == "CREATE" or old is None or old.parent_name != queue.parent_name:
        _check_parent(queue, queues, found)
    return found


def check_queue_delete(name: str, queues: QueueSource) -> str:
    """Why queue ``name`` may not be deleted ("" when it may)."""
    if name in (ROOT_QUEUE, DEFAULT_QUEUE):
        return f"the {name} queue cannot be deleted"
    children = queues.children(name)
    if children:
        return (
            f"queue {show(name)} has child queues ({', '.join(children)}); "
            "delete them or move them to another parent first"
        )
    return ""
