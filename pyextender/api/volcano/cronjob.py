"""``batch.volcano.sh/v1alpha1`` CronJob: a Volcano Job created on a cron schedule.

Fields and defaults are Volcano's (modelled on ``batch/v1`` CronJob): the
controller (``controllers/cronjob.py``) creates a Job named
``<cronjob>-<scheduled time in minutes since the epoch>`` from ``jobTemplate`` at
each scheduled time, honouring ``concurrencyPolicy``, ``suspend``,
``startingDeadlineSeconds`` and the history limits.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from pyextender.api.volcano.codec import (
    Kind,
    Model,
    PrinterColumn,
    Problem,
    RawObject,
    Resource,
    Timestamp,
    attr,
    model,
    show,
)
from pyextender.api.volcano.job import JobSpec
from pyextender.api.volcano.meta import ObjectMeta

ConcurrencyPolicy = Literal["Allow", "Forbid", "Replace"]
"""Allow: runs may overlap; Forbid: skip a run while one is active; Replace: delete the
active runs and start the new one."""

DESCRIPTORS = frozenset(
    {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
)
"""Shorthands of the standard cron format (besides five fields)."""


def schedule_problem(schedule: str) -> str:
    """Why ``schedule`` is not a standard cron schedule ("" when it is one)."""
    text = schedule.strip()
    if not text:
        return "required: a cron schedule such as '*/5 * * * *'"
    if text.upper().startswith(("TZ=", "CRON_TZ=")):
        return "a time zone in the schedule is not supported; use spec.timeZone"
    if text.startswith("@"):
        if text in DESCRIPTORS:
            return ""
        return (
            f"unknown descriptor {show(text)}; known: {', '.join(sorted(DESCRIPTORS))} "
            "(@every is not supported)"
        )
    fields = text.split()
    if len(fields) != 5:
        return (
            f"expected 5 fields (minute hour day-of-month month day-of-week), "
            f"got {len(fields)} in {show(schedule)}"
        )
    if not croniter.is_valid(text):
        return f"{show(schedule)} is not a valid cron schedule"
    return ""


def time_zone_problem(name: str) -> str:
    """Why ``name`` is not an IANA time zone ("" when it is one)."""
    if not name or name.startswith(("/", ".")) or ".." in name:
        return f"{show(name)} is not a time zone name (e.g. Etc/UTC, Asia/Shanghai)"
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return f"unknown time zone {show(name)} (e.g. Etc/UTC, Asia/Shanghai)"
    return ""


def _check_string_map(value: object, path: str) -> list[Problem]:
    if value is None:
        return []
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        return [(path, "must be a map of strings to strings")]
    return []


@model
class JobTemplateSpec(Model):
    """The Job each run creates: its labels/annotations and its spec."""

    metadata: RawObject = attr(
        "Labels and annotations given to each created Job.", default_factory=dict
    )
    spec: JobSpec = attr("Spec of each created Job.", default_factory=JobSpec)

    def check(self) -> list[Problem]:
        return _check_string_map(
            self.metadata.get("labels"), "metadata.labels"
        ) + _check_string_map(self.metadata.get("annotations"), "metadata.annotations")


@model
class CronJobSpec(Model):
    """When to run, what to do with overlapping runs, and how many finished Jobs to keep."""

    schedule: str = attr(
        "Cron schedule (five fields, or @hourly, @daily, ...).", required=True, default=""
    )
    time_zone: str | None = attr(
        "IANA time zone of the schedule; unset means the controller's (UTC).", default=None
    )
    starting_deadline_seconds: int | None = attr(
        "Seconds after its scheduled time a run may still start; a run later than that is "
        "missed. Unset means no deadline.",
        default=None,
        minimum=0,
        int64=True,
    )
    concurrency_policy: ConcurrencyPolicy = attr(
        "Allow (runs may overlap), Forbid (skip while one is active) or Replace (delete the "
        "active runs first).",
        default="Allow",
        schema_default=True,
    )
    suspend: bool = attr("Create no more Jobs while true.", default=False)
    job_template: JobTemplateSpec = attr(
        "The Job each run creates.", required=True, default_factory=JobTemplateSpec
    )
    successful_jobs_history_limit: int = attr(
        "Completed Jobs to keep.", default=3, minimum=0, schema_default=True
    )
    failed_jobs_history_limit: int = attr(
        "Failed (or aborted, terminated) Jobs to keep.", default=1, minimum=0, schema_default=True
    )

    def check(self) -> list[Problem]:
        problems: list[Problem] = []
        if why := schedule_problem(self.schedule):
            problems.append(("schedule", why))
        if self.time_zone is not None and (why := time_zone_problem(self.time_zone)):
            problems.append(("timeZone", why))
        return problems


@model
class JobReference(Model):
    """A Job created by the CronJob."""

    api_version: str = attr("API version of the Job.", default="")
    kind: str = attr("Kind (Job).", default="")
    namespace: str = attr("Namespace of the Job.", default="")
    name: str = attr("Name of the Job.", default="")
    uid: str = attr("UID of the Job.", default="")
    resource_version: str = attr("resourceVersion of the Job when recorded.", default="")


@model
class CronJobStatus(Model):
    """Active runs and when the schedule last fired / last succeeded."""

    active: list[JobReference] = attr("Jobs of this CronJob still running.", default_factory=list)
    last_schedule_time: Timestamp | None = attr(
        "Scheduled time of the last created Job.", default=None
    )
    last_successful_time: Timestamp | None = attr(
        "When a Job of this CronJob last completed.", default=None
    )


@model
class CronJob(Resource):
    """Volcano Jobs created on a cron schedule."""

    KIND = Kind(
        group="batch.volcano.sh",
        version="v1alpha1",
        kind="CronJob",
        plural="cronjobs",
        scope="Namespaced",
        description="Volcano Jobs created on a cron schedule.",
        short_names=("cronvcjob", "cronvj"),
        printer_columns=(
            PrinterColumn("SCHEDULE", "string", ".spec.schedule"),
            PrinterColumn("SUSPEND", "boolean", ".spec.suspend"),
            PrinterColumn("LAST SCHEDULE", "date", ".status.lastScheduleTime"),
            PrinterColumn("AGE", "date", ".metadata.creationTimestamp"),
            PrinterColumn("TIMEZONE", "string", ".spec.timeZone", priority=1),
        ),
    )

    metadata: ObjectMeta = attr("Standard object metadata.", default_factory=ObjectMeta)
    spec: CronJobSpec = attr("Schedule and Job template.", default_factory=CronJobSpec)
    status: CronJobStatus = attr("Observed state.", default_factory=CronJobStatus)


def parse_time(text: str) -> datetime:
    """An RFC 3339 timestamp as the API server writes it (``Z`` suffix)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
