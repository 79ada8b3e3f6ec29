"""bus.volcano.sh Command rules: an action, a target of the right kind, root stays open.

Volcano has no webhook for Commands, so a bad one is silently dropped by its
controller; refusing it at admission tells vcctl's user at once.
"""

from __future__ import annotations

from pyextender.api import names
from pyextender.api.volcano import Command
from pyextender.api.volcano.codec import show
from pyextender.api.volcano.queue import ROOT_QUEUE
from webhook.findings import Findings

QUEUE_ACTIONS = frozenset({"OpenQueue", "CloseQueue"})


def check_command(command: Command) -> Findings:
    found = Findings()
    if command.action is None:
        found.problem("action", "required (e.g. AbortJob, ResumeJob, CloseQueue)")
    target = command.target
    if target is None:
        found.problem("target", "required: the Job or Queue the action applies to")
        return found
    if command.action is None:
        return found
    wanted = "Queue" if command.action in QUEUE_ACTIONS else "Job"
    if target.kind != wanted:
        found.problem(
            "target.kind", f"{command.action} applies to a {wanted}, got {show(target.kind)}"
        )
    elif command.action == "CloseQueue" and target.name == ROOT_QUEUE:
        found.problem("target.name", "the root queue cannot be closed")
    elif command.action == "RestartTask" and not command.metadata.annotations.get(
        names.VOLCANO_TASK_SPEC
    ):
        found.problem(
            f"metadata.annotations[{names.VOLCANO_TASK_SPEC}]",
            "RestartTask needs the name of the task to restart here",
        )
    return found
