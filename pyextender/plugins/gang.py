"""gang: a job's gates are lifted only when all of its minMember tasks exist
(Volcano's JobValidFn), and it is never left running below minMember by an
eviction (it is evicted whole).

Admission (Pending -> Inqueue) does not ask for the pods: like Volcano's enqueue
it looks at minResources and the queue only (see pyextender.actions.enqueue). With
``enqueue.requireFit`` admission asks this check too, with one exception for
operators: a PodGroup with minResources and no pods at all, older than
``PODLESS_GRACE_S``, is judged by its minResources alone. The Kubeflow training
operator creates a job's pods only once its PodGroup has left Pending, so waiting
for its pods would wait forever.

The all-or-nothing placement itself is done by the actions (whole-gang fit) and
by the bind barrier in the sidecar; this plugin supplies the session's view.
"""

from __future__ import annotations

from pyextender.framework.plugin_args import arguments
from pyextender.framework.registry import PluginSpec
from pyextender.framework.session import Job, Session, Task, unschedulable
from pyextender.framework.status import SUCCESS, Status

PODLESS_GRACE_S = 5.0
"""Seconds a PodGroup with minResources and no pods waits before it is admitted on
its minResources: time for a controller that creates pods at once (ours) to do so."""


def podless(ssn: Session, job: Job) -> bool:
    """A PodGroup to admit on its minResources: no pods yet (its operator waits for
    Inqueue before creating them), minResources given, past the grace period."""
    group = job.group
    return (
        not job.tasks
        and group is not None
        and bool(group.min_resources)
        and ssn.now - job.created >= PODLESS_GRACE_S
    )


@arguments
class Args:
    """gang takes no arguments."""


class Gang:
    name = "gang"

    def __init__(self, args: Args) -> None:
        self.args = args

    def job_order(self, ssn: Session, a: Job, b: Job) -> int:
        # jobs still short of minMember go before jobs that already run
        return int(a.ready) - int(b.ready)

    def job_order_key(self, ssn: Session, job: Job) -> float:
        return int(job.ready)

    def job_valid(self, ssn: Session, job: Job) -> Status:
        exist = len(job.tasks) + job.succeeded
        if exist < job.min_member and not podless(ssn, job):
            if job.group is None:
                return unschedulable(self.name, "PodGroup not found", structural=True)
            return unschedulable(
                self.name,
                f"{exist}/{job.min_member} tasks exist; waiting for the rest",
                structural=True,
            )
        group = job.group
        # Volcano checks each task's minimum only when minMember covers them all: a job
        # with minAvailable below their sum (e.g. tasks that wait on dependsOn) is a
        # gang of minMember pods, whichever tasks they belong to
        if (
            group is not None
            and group.min_task_member
            and exist
            and job.min_member >= sum(group.min_task_member.values())
        ):
            counts: dict[str, int] = {}
            for t in job.tasks:
                spec = t.pod.annotations.get("volcano.sh/task-spec", "")
                counts[spec] = counts.get(spec, 0) + 1
            for task, need in sorted(group.min_task_member.items()):
                if counts.get(task, 0) < need:
                    return unschedulable(
                        self.name,
                        f'task "{task}": {counts.get(task, 0)}/{need} pods exist',
                        structural=True,
                    )
        return SUCCESS

    def preemptable(self, ssn: Session, preemptor: Job, victims: list[Task]) -> list[Task]:
        return victims  # the action evicts gangs whole when they would drop below minMember

    def reclaimable(self, ssn: Session, reclaimer: Job, victims: list[Task]) -> list[Task]:
        return victims


SPEC = PluginSpec(
    name="gang",
    args_type=Args,
    factory=Gang,
    summary="All-or-nothing: admit whole gangs, never leave one running below minMember.",
)
