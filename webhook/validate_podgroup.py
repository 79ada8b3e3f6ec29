"""PodGroup rules beyond the schema: the queue must exist and be open.

Checked on CREATE and when ``spec.queue`` changes (Volcano checks on CREATE
only; moving a gang into a closed queue is the same mistake). A
``minTaskMember`` that adds up to more than ``minMember`` is allowed, as
Volcano and the operators that write it (Kubeflow's training operator, for
one) expect, but the user is warned: the gang then effectively needs the sum.
"""

from __future__ import annotations

from pyextender.api.volcano import PodGroup
from pyextender.api.volcano.codec import show
from webhook.findings import Findings
from webhook.queues import QueueSource, absent


def check_podgroup(
    group: PodGroup, old: PodGroup | None, operation: str, queues: QueueSource
) -> Findings:
    found = Findings()
    spec = group.spec
    if operation == "CREATE" or old is None or old.spec.queue_name != spec.queue_name:
        name = spec.queue_name
        info = queues.get(name, recent=True)
        if info is None:
            found.problem("spec.queue", absent(name))
        elif not info.is_open:
            found.problem(
                "spec.queue",
                f"queue {show(name)} is {info.state}; only an Open queue takes new gangs",
            )
    per_task = sum(spec.min_task_member.values())
    if per_task > spec.min_member:
        found.warn(
            f"spec.minTaskMember adds up to {per_task}, more than spec.minMember "
            f"({spec.min_member}): the gang waits for {per_task} members"
        )
    return found
