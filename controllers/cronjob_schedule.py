"""What a CronJob's controller should do now: pure functions of the CronJob, the Jobs it
owns and the time, so that tests drive them with any clock.

Semantics are Volcano's (its CronJob controller follows ``batch/v1`` CronJob's):

- a run is due at each schedule time after ``status.lastScheduleTime`` (or the
  CronJob's creation) up to now; only the most recent one is started, the ones
  before it are missed (more than ``TOO_MANY_MISSED`` says so in a warning);
- with ``startingDeadlineSeconds``, a schedule time older than that is not started
  any more (event ``MissSchedule``);
- ``suspend`` starts nothing; ``Forbid`` starts nothing while a run is active (the due
  run is started when the active one ends, if still within the deadline); ``Replace``
  deletes the active runs first; ``Allow`` lets runs overlap;
- a run is the Job ``<cronjob>-<scheduled time in minutes since the epoch>``, owned by
  the CronJob; a name that exists already means that time has been run;
- finished Jobs (Completed, or Failed/Aborted/Terminated) beyond
  ``successfulJobsHistoryLimit`` / ``failedJobsHistoryLimit`` are deleted, oldest first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from croniter import croniter

from pyextender.api.volcano.cronjob import CronJob, parse_time, schedule_problem
from pyextender.api.volcano.cronjob import time_zone_problem as tz_problem

Obj = dict[str, Any]

TOO_MANY_MISSED = 100
"""Missed schedule times past which the controller warns (the clock may be off, or the
controller was down for long), as upstream does."""
REQUEUE_SLACK_S = 0.1
"""Added to the wait for the next schedule time, so that it is due when we wake."""
SUCCEEDED = frozenset({"Completed"})
FAILED = frozenset({"Failed", "Aborted", "Terminated"})
SCHEDULED_ANNOTATION = "volcano.sh/cronjob-scheduled-timestamp"
"""On each created Job: its scheduled time (RFC 3339)."""
CREATED_BY_LABEL = "volcano.sh/cronjob-name"


def fmt_time(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def run_name(cronjob: str, scheduled: datetime) -> str:
    """``<cronjob>-<scheduled time in minutes since the epoch>`` (Volcano's Job names)."""
    return f"{cronjob}-{int(scheduled.timestamp()) // 60}"


def phase_of(job: Obj) -> str:
    state = (job.get("status") or {}).get("state") or {}
    return str(state.get("phase") or "")


def finished_at(job: Obj) -> datetime:
    state = (job.get("status") or {}).get("state") or {}
    text = state.get("lastTransitionTime") or (job.get("metadata") or {}).get("creationTimestamp")
    return parse_time(str(text)) if text else datetime.min.replace(tzinfo=UTC)


def _created(job: Obj) -> str:
    return str((job.get("metadata") or {}).get("creationTimestamp") or "")


def _name(job: Obj) -> str:
    return str((job.get("metadata") or {}).get("name") or "")


@dataclass(frozen=True, slots=True)
class Due:
    """The schedule as of now."""

    run: datetime | None
    """The most recent schedule time not yet run (None: nothing due)."""
    missed: int
    """Schedule times since the last run up to now (capped at TOO_MANY_MISSED + 1)."""
    next: datetime
    """The next schedule time after now."""


def due(cron: CronJob, now: datetime) -> Due:
    """Raises ValueError for a schedule or time zone the webhook would have refused."""
    spec = cron.spec
    if why := schedule_problem(spec.schedule) or (
        tz_problem(spec.time_zone) if spec.time_zone is not None else ""
    ):
        raise ValueError(why)
    zone = ZoneInfo(spec.time_zone) if spec.time_zone else UTC
    local_now = now.astimezone(zone)
    following: datetime = croniter(spec.schedule, local_now).get_next(datetime)
    last = cron.status.last_schedule_time or cron.metadata.creation_timestamp
    earliest = parse_time(last) if last else now
    if spec.starting_deadline_seconds is not None:
        earliest = max(earliest, now - timedelta(seconds=spec.starting_deadline_seconds))
    if earliest >= now:
        return Due(None, 0, following)
    # the latest schedule time <= now (croniter's get_prev is strictly before its start)
    start = local_now.replace(microsecond=0) + timedelta(seconds=1)
    latest: datetime = croniter(spec.schedule, start).get_prev(datetime)
    if latest <= earliest:
        return Due(None, 0, following)
    missed = 0
    it = croniter(spec.schedule, earliest.astimezone(zone))
    while missed <= TOO_MANY_MISSED:
        if it.get_next(datetime) > now:
            break
        missed += 1
    return Due(latest, missed, following)


@dataclass(slots=True)
class Plan:
    """The writes one reconcile makes, in order: deletions, the new Job, status, events."""

    active: list[Obj] = field(default_factory=list)
    """Jobs still running (status.active before any creation), oldest first."""
    delete: list[str] = field(default_factory=list)
    """Jobs to delete: the active ones on Replace, then those past the history limits."""
    replaced: list[str] = field(default_factory=list)
    """The ones of ``delete`` deleted for Replace (they leave status.active)."""
    create: str = ""
    """Name of the Job to create ("" for none)."""
    scheduled: datetime | None = None
    """Its scheduled time (also the new lastScheduleTime)."""
    last_schedule: datetime | None = None
    """New status.lastScheduleTime when it moves without a creation (the run exists)."""
    last_successful: datetime | None = None
    """New status.lastSuccessfulTime (None: unchanged)."""
    events: list[tuple[str, str, bool]] = field(default_factory=list)
    """(reason, message, warning) about the CronJob."""
    requeue_after: float | None = None
    """Seconds until the next schedule time (None: nothing to wait for)."""


def plan(cron: CronJob, owned: list[Obj], now: datetime) -> Plan:
    """What to do about ``cron``, given the Jobs it owns (from the cache) and the time."""
    p = Plan()
    spec = cron.spec
    by_name = {_name(j): j for j in owned}
    finished_ok = sorted(
        (j for j in owned if phase_of(j) in SUCCEEDED), key=lambda j: (finished_at(j), _name(j))
    )
    finished_bad = sorted(
        (j for j in owned if phase_of(j) in FAILED), key=lambda j: (finished_at(j), _name(j))
    )
    p.active = sorted(
        (
            j
            for j in owned
            if phase_of(j) not in SUCCEEDED | FAILED
            and not (j.get("metadata") or {}).get("deletionTimestamp")
        ),
        key=lambda j: (_created(j), _name(j)),
    )
    # what happened to the runs status.active listed
    for ref in cron.status.active:
        job = by_name.get(ref.name)
        if job is None or (ref.uid and (job.get("metadata") or {}).get("uid") != ref.uid):
            p.events.append(("MissingJob", f"Active job went missing: {ref.name}", False))
        elif phase_of(job) in SUCCEEDED | FAILED:
            p.events.append(
                ("SawCompletedJob", f"Saw completed job: {ref.name}, phase: {phase_of(job)}", False)
            )
    if finished_ok:
        newest = finished_at(finished_ok[-1])
        last_ok = cron.status.last_successful_time
        if last_ok is None or parse_time(last_ok) < newest:
            p.last_successful = newest
    # history limits
    for jobs, limit in (
        (finished_ok, spec.successful_jobs_history_limit),
        (finished_bad, spec.failed_jobs_history_limit),
    ):
        excess = len(jobs) - limit
        p.delete += [_name(j) for j in jobs[: max(0, excess)]]
    if cron.metadata.deletion_timestamp or spec.suspend:
        return p
    try:
        d = due(cron, now)
    except ValueError as exc:
        p.events.append(("InvalidSchedule", f"cannot run: {exc}", True))
        return p
    p.requeue_after = max(0.0, (d.next - now).total_seconds()) + REQUEUE_SLACK_S
    if d.run is None:
        return p
    if d.missed > TOO_MANY_MISSED:
        p.events.append(
            (
                "TooManyMissedTimes",
                f"too many missed start times (> {TOO_MANY_MISSED}); only the most recent, "
                f"{fmt_time(d.run)}, is started. Set or lower .spec.startingDeadlineSeconds "
                "or check the clock",
                True,
            )
        )
    deadline = spec.starting_deadline_seconds
    if deadline is not None and d.run + timedelta(seconds=deadline) < now:
        p.events.append(
            ("MissSchedule", f"Missed scheduled time to start a job: {fmt_time(d.run)}", True)
        )
        return p
    name = run_name(cron.metadata.name, d.run)
    if name in by_name:
        p.last_schedule = d.run  # that time has been run already
        return p
    if spec.concurrency_policy == "Forbid" and p.active:
        p.events.append(
            (
                "JobAlreadyActive",
                f"Not starting job for {fmt_time(d.run)}: concurrencyPolicy is Forbid and "
                f"{', '.join(_name(j) for j in p.active)} still running",
                False,
            )
        )
        return p
    if spec.concurrency_policy == "Replace":
        p.replaced = [_name(j) for j in p.active]
        p.delete = p.replaced + [n for n in p.delete if n not in p.replaced]
    p.create = name
    p.scheduled = d.run
    return p


def job_for(cron: CronJob, cron_obj: Obj, name: str, scheduled: datetime) -> Obj:
    """The Job a run creates: the template, named and owned by the CronJob."""
    template = cron.spec.job_template
    meta = template.metadata
    labels = dict(meta.get("labels") or {})
    annotations = dict(meta.get("annotations") or {})
    annotations[SCHEDULED_ANNOTATION] = fmt_time(scheduled)
    labels[CREATED_BY_LABEL] = cron.metadata.name
    cm = cron_obj.get("metadata") or {}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": cron.metadata.namespace,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": CronJob.KIND.api_version,
                    "kind": CronJob.KIND.kind,
                    "name": cm.get("name", cron.metadata.name),
                    "uid": cm.get("uid", cron.metadata.uid),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": template.spec.to_dict(),
    }


def reference(job: Obj) -> Obj:
    """A status.active entry for ``job``."""
    m = job.get("metadata") or {}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "namespace": m.get("namespace", ""),
        "name": m.get("name", ""),
        "uid": m.get("uid", ""),
        "resourceVersion": m.get("resourceVersion", ""),
    }
