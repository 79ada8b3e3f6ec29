"""Queue rules beyond the schema: positive weight, resource ordering, a sound queue tree.

- ``spec.weight`` written as 0 is refused (omit it for the default 1);
- per resource, guarantee <= deserved <= capability, and none negative;
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
from pyextender.api.volcano.queue import DEFAULT_QUEUE, ROOT_QUEUE
from webhook.findings import Findings
from webhook.queues import QueueSource

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
        if name in deserved and amount > deserved[name]:
            found.problem(
                f"spec.guarantee.resource[{name}]",
                f"must be <= spec.deserved[{name}] ({spec.deserved[name]}), "
                f"got {spec.guarantee.resource[name]}",
            )
        if name in capability and amount > capability[name]:
            found.problem(
                f"spec.guarantee.resource[{name}]",
                f"must be <= spec.capability[{name}] ({spec.capability[name]}), "
                f"got {spec.guarantee.resource[name]}",
            )
    for name, amount in deserved.items():
        if name in capability and amount > capability[name]:
            found.problem(
                f"spec.deserved[{name}]",
                f"must be <= spec.capability[{name}] ({spec.capability[name]}), "
                f"got {spec.deserved[name]}",
            )


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
            found.problem("spec.parent", f"{where} {show(current)} does not exist")
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


def check_queue(
    queue: Queue, old: Queue | None, operation: str, queues: QueueSource, raw_weight: object
) -> Findings:
    """Rules for CREATE and UPDATE. ``raw_weight`` is spec.weight as sent (None when absent)."""
    found = Findings()
    name = queue.metadata.name
    if raw_weight is not None and queue.spec.weight == 0:
        found.problem("spec.weight", "must be > 0, got 0 (omit it for the default weight 1)")
    _check_resources(queue, found)
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
