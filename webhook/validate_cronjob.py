"""batch.volcano.sh CronJob rules beyond the schema.

The model already checks the schedule (five cron fields or a descriptor), the
time zone (an IANA name), concurrencyPolicy, the limits, and the template's
Job spec as a Job's (``spec.jobTemplate.spec.minAvailable`` ...). Here the
template also gets every rule a Job gets at admission (``validate_job``), its
paths under ``spec.jobTemplate``: every run creates that Job, so a template that
would be refused as a Job is refused now rather than at each scheduled time.
On CREATE its queue must exist; a closed queue is only a warning (it may be open
by the time a run is due). The template may change after creation (it applies
to later runs), so UPDATE has no restrictions of its own.
"""

from __future__ import annotations

import time

from pyextender.api.volcano import CronJob, Job
from pyextender.api.volcano.codec import show
from pyextender.api.volcano.meta import ObjectMeta
from webhook.findings import Findings
from webhook.queues import QueueSource, absent
from webhook.validate_job import check_job_spec

PREFIX = "spec.jobTemplate."


def run_name(cronjob: str, now_s: float | None = None) -> str:
    """The name of a Job the CronJob creates now: ``<cronjob>-<minutes since the epoch>``."""
    return f"{cronjob}-{int((time.time() if now_s is None else now_s) // 60)}"


def check_cronjob(cron: CronJob, operation: str, queues: QueueSource) -> Findings:
    found = Findings()
    template = cron.spec.job_template
    name = run_name(cron.metadata.name) if cron.metadata.name else ""
    job = Job(metadata=ObjectMeta(name=name, namespace=cron.metadata.namespace), spec=template.spec)
    rules = check_job_spec(job)
    for path, message in rules.problems:
        found.problem(PREFIX + path if path.startswith("spec") else path, message)
    found.warnings += rules.warnings
    if operation == "CREATE":
        queue = template.spec.queue
        info = queues.get(queue, recent=True)
        if info is None:
            found.problem(f"{PREFIX}spec.queue", absent(queue))
        elif not info.is_open:
            found.warn(
                f"{PREFIX}spec.queue: queue {show(queue)} is {info.state}; "
                "runs are refused until it is Open"
            )
    return found
