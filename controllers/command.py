"""Command controller for ``bus.volcano.sh/v1alpha1`` Commands (what ``vcctl`` creates).

As Volcano: the Command is deleted first, so it runs at most once, then its
action goes to the target's controller: job actions (AbortJob, ResumeJob,
RestartJob, RestartTask, TerminateJob, CompleteJob) to the Job controller as a
request that overrides lifecycle policies; OpenQueue/CloseQueue to the Queue
controller. A RestartTask Command names its task in the annotation
``volcano.sh/task-spec`` (the key Volcano puts on a task's pods); the webhook
requires it.
"""

from __future__ import annotations

import logging

from controllers import pods as P
from controllers.job import JobController
from controllers.job_state import Request
from controllers.kube import COMMANDS
from controllers.queue import QueueController
from controllers.runtime import Context, Controller, call, ignore_missing
from controllers.store import Obj, split_key
from pyextender.api import names

log = logging.getLogger(__name__)

JOB_ACTIONS = frozenset(
    {"AbortJob", "ResumeJob", "RestartJob", "RestartTask", "TerminateJob", "CompleteJob"}
)
QUEUE_ACTIONS = frozenset({"OpenQueue", "CloseQueue"})


def route(cmd: Obj) -> tuple[str, str, str] | str:
    """(controller, target name, action) for a Command, or why it cannot run."""
    action = str(cmd.get("action") or "")
    target = cmd.get("target") or {}
    kind, name = target.get("kind"), target.get("name")
    if not name:
        return "command has no target name"
    if kind == "Job" and action in JOB_ACTIONS:
        return "job", str(name), action
    if kind == "Queue" and action in QUEUE_ACTIONS:
        return "queue", str(name), action
    return f"action {action or '(none)'} does not apply to a target of kind {kind}"


class CommandController(Controller):
    name = "command"

    def __init__(self, ctx: Context, jobs: JobController, queues: QueueController) -> None:
        super().__init__(ctx)
        self.jobs = jobs
        self.queues = queues
        ctx.commands.add_handler(self._on_command)

    def _on_command(self, key: str, old: Obj | None, new: Obj | None) -> None:
        if new is not None:
            self.queue.add(key)

    def resync(self) -> None:
        for key in list(self.ctx.commands.objects):
            self.queue.add(key)

    async def reconcile(self, key: str) -> None:
        ctx = self.ctx
        cmd = ctx.commands.get(key)
        if cmd is None:
            return
        ns, name = split_key(key)
        # delete first: a command must never run twice, even if we crash after acting
        deleted = await ignore_missing(call(ctx.kube.delete, COMMANDS, ns, name))
        ctx.commands.forget(key)
        if deleted is None:
            return  # already gone: consumed by someone else, so not ours to run
        self.wrote("command-delete")
        routed = route(cmd)
        if isinstance(routed, str):
            ctx.recorder.event(cmd, "CommandRejected", routed, warning=True)
            return
        controller, target, action = routed
        log.info("command %s: %s on %s %s", key, action, controller, target)
        if controller == "job":
            job_key = f"{ns}/{target}"
            job = ctx.jobs.get(job_key)
            if job is not None:
                # Volcano's wording (job_controller_handler.go processNextCommand)
                ctx.recorder.event(
                    job,
                    "CommandIssued",
                    f"Start to execute command {action}, and clean it up to make sure executed"
                    " not more than once.",
                )
            # RestartTask names its task as Volcano's pods do: annotation volcano.sh/task-spec
            task = P.annotations_of(cmd).get(names.VOLCANO_TASK_SPEC, "")
            tasks = [t.get("name") for t in ((job or {}).get("spec") or {}).get("tasks") or []]
            if action == "RestartTask" and task not in tasks:
                why = f"RestartTask names task {task!r}; job {target} has tasks {tasks}"
                ctx.recorder.event(cmd, "CommandRejected", why, warning=True)
                return
            self.jobs.request(job_key, Request(event="CommandIssued", action=action, task=task))
        else:
            self.queues.command(target, action)
