"""priority: higher-priority jobs and queues first; preempt only lower priority."""

from __future__ import annotations

from pyextender.framework.plugin_args import arguments
from pyextender.framework.registry import PluginSpec
from pyextender.framework.session import Job, QueueState, Session, Task


@arguments
class Args:
    """priority takes no arguments."""


class Priority:
    name = "priority"

    def __init__(self, args: Args) -> None:
        self.args = args

    def job_order(self, ssn: Session, a: Job, b: Job) -> int:
        return (b.priority > a.priority) - (a.priority > b.priority)

    def job_order_key(self, ssn: Session, job: Job) -> float:
        return -job.priority  # higher priority first

    def queue_order(self, ssn: Session, a: QueueState, b: QueueState) -> int:
        pa, pb = a.view.priority, b.view.priority
        return (pb > pa) - (pa > pb)

    def preemptable(self, ssn: Session, preemptor: Job, victims: list[Task]) -> list[Task]:
        return [t for t in victims if t.pod.priority < preemptor.priority]


SPEC = PluginSpec(
    name="priority",
    args_type=Args,
    factory=Priority,
    summary="Order jobs and queues by priority; only lower-priority pods are preempted.",
)
