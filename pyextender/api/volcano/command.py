"""``bus.volcano.sh/v1alpha1`` Command: a one-shot request to a controller.

vcctl uses Commands to suspend/resume jobs and open/close queues.

A Command has no spec/status: its fields sit at the top level of the object.
"""

from __future__ import annotations

from typing import Literal

from pyextender.api.volcano.codec import Kind, Resource, attr, model
from pyextender.api.volcano.meta import ObjectMeta, OwnerReference

CommandAction = Literal[
    "AbortJob",
    "RestartJob",
    "RestartTask",
    "TerminateJob",
    "CompleteJob",
    "ResumeJob",
    "OpenQueue",
    "CloseQueue",
]


@model
class Command(Resource):
    """Ask the controller of ``target`` to perform ``action`` once."""

    KIND = Kind(
        group="bus.volcano.sh",
        version="v1alpha1",
        kind="Command",
        plural="commands",
        scope="Namespaced",
        description="A one-shot request to the controller of the target object.",
        status_subresource=False,
    )

    metadata: ObjectMeta = attr("Standard object metadata.", default_factory=ObjectMeta)
    action: CommandAction | None = attr("Action to perform on the target.", default=None)
    target: OwnerReference | None = attr("Object the action applies to.", default=None)
    reason: str = attr("CamelCase reason for the command.", default="")
    message: str = attr("Human-readable details.", default="")
