"""CronJob schedule logic with a fake clock: due runs, missed runs, the starting deadline,
concurrency policies, suspend, history limits, status and the Jobs it creates."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controllers.cronjob_schedule import (
    SCHEDULED_ANNOTATION,
    TOO_MANY_MISSED,
    due,
    fmt_time,
    job_for,
    plan,
    run_name,
)
from pyextender.api.volcano import CronJob, FieldError

T0 = datetime(2026, 11, 23, 10, 0, 0, tzinfo=UTC)
"""Creation time of every CronJob below (a whole hour)."""


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def cronjob(status: dict[str, Any] | None = None, **spec: Any) -> CronJob:
    body: dict[str, Any] = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "CronJob",
        "metadata": {
            "name": "nightly",
            "namespace": "ns",
            "uid": "cj-uid",
            "creationTimestamp": fmt_time(T0),
        },
        "spec": {
            "schedule": "*/5 * * * *",
            "jobTemplate": {
                "metadata": {"labels": {"team": "ml"}},
                "spec": {
                    "queue": "q",
                    "tasks": [
                        {
                            "name": "worker",
                            "replicas": 1,
                            "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}},
                        }
                    ],
                },
            },
            **spec,
        },
        "status": status or {},
    }
    return CronJob.from_dict(body)


def job(minutes: float, phase: str = "Running", finished: float | None = None) -> dict[str, Any]:
    """A Job the CronJob created for the schedule time ``at(minutes)``."""
    name = run_name("nightly", at(minutes))
    state: dict[str, Any] = {"phase": phase}
    if finished is not None:
        state["lastTransitionTime"] = fmt_time(at(finished))
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "creationTimestamp": fmt_time(at(minutes)),
        },
        "status": {"state": state},
    }


def test_job_names_are_minutes_since_the_epoch() -> None:
    assert run_name("nightly", T0) == f"nightly-{int(T0.timestamp()) // 60}"
    assert run_name("nightly", at(5)) == f"nightly-{int(T0.timestamp()) // 60 + 5}"


def test_nothing_due_before_the_first_schedule_time_after_creation() -> None:
    cj = cronjob()
    d = due(cj, at(0))  # created exactly at a schedule time: that one is not run
    assert d.run is None and d.next == at(5)
    p = plan(cj, [], at(3))
    assert not p.create
    assert p.requeue_after == pytest.approx(120.1)


def test_a_due_run_is_created_and_waits_for_the_next() -> None:
    p = plan(cronjob(), [], at(5) + timedelta(seconds=2))
    assert p.create == run_name("nightly", at(5))
    assert p.scheduled == at(5)
    assert p.requeue_after == pytest.approx(298.1)


def test_the_schedule_time_itself_is_due() -> None:
    assert plan(cronjob(), [], at(5)).create == run_name("nightly", at(5))


def test_missed_runs_start_only_the_most_recent() -> None:
    cj = cronjob(status={"lastScheduleTime": fmt_time(at(5))})
    d = due(cj, at(27))
    assert d.run == at(25) and d.missed == 4 and d.next == at(30)
    assert plan(cj, [job(5, "Completed", 6)], at(27)).create == run_name("nightly", at(25))


def test_too_many_missed_warns_and_still_starts_the_latest() -> None:
    cj = cronjob(schedule="* * * * *")
    now = at(TOO_MANY_MISSED + 30)
    p = plan(cj, [], now)
    assert [e[0] for e in p.events] == ["TooManyMissedTimes"]
    assert p.events[0][2] is True
    assert p.scheduled == now


def test_starting_deadline_skips_runs_older_than_it() -> None:
    cj = cronjob(startingDeadlineSeconds=60)
    # 10:05 is due, but at 10:07 it is more than 60 s late: nothing to start
    p = plan(cj, [], at(7))
    assert not p.create and p.events == []
    assert p.requeue_after == pytest.approx(180.1)
    # within the deadline it starts
    assert plan(cj, [], at(5.5)).create == run_name("nightly", at(5))
    # and the deadline bounds the missed count (no TooManyMissedTimes)
    every_minute = cronjob(schedule="* * * * *", startingDeadlineSeconds=200)
    d = due(every_minute, at(500))
    assert d.run == at(500) and d.missed == 4  # 497..500 minutes: after now - 200 s


def test_an_existing_run_is_not_created_twice() -> None:
    cj = cronjob()
    p = plan(cj, [job(5)], at(6))
    assert not p.create
    assert p.last_schedule == at(5)


def test_forbid_waits_for_the_active_run() -> None:
    cj = cronjob(
        concurrencyPolicy="Forbid",
        startingDeadlineSeconds=240,
        status={"lastScheduleTime": fmt_time(at(5))},
    )
    p = plan(cj, [job(5)], at(10.5))
    assert not p.create
    assert [e[0] for e in p.events] == ["JobAlreadyActive"]
    # the active run ends within the deadline: the due run starts then
    p = plan(cj, [job(5, "Completed", 11)], at(11))
    assert p.create == run_name("nightly", at(10))
    # it ends after the deadline: that run is gone, wait for the next
    assert not plan(cj, [job(5, "Completed", 15)], at(14.5)).create


def test_allow_lets_runs_overlap() -> None:
    cj = cronjob(status={"lastScheduleTime": fmt_time(at(5))})
    p = plan(cj, [job(5)], at(10))
    assert p.create == run_name("nightly", at(10))
    assert p.delete == [] and [j["metadata"]["name"] for j in p.active] == [
        run_name("nightly", at(5))
    ]


def test_replace_deletes_the_active_runs_first() -> None:
    cj = cronjob(concurrencyPolicy="Replace", status={"lastScheduleTime": fmt_time(at(5))})
    old = run_name("nightly", at(5))
    p = plan(cj, [job(5)], at(10))
    assert p.create == run_name("nightly", at(10))
    assert p.delete == [old] and p.replaced == [old]


def test_suspend_creates_nothing_and_does_not_requeue() -> None:
    p = plan(cronjob(suspend=True), [], at(12))
    assert not p.create and p.requeue_after is None


def test_history_limits_delete_the_oldest_finished_runs() -> None:
    cj = cronjob(successfulJobsHistoryLimit=2, failedJobsHistoryLimit=1)
    jobs = [
        job(5, "Completed", 6),
        job(10, "Completed", 11),
        job(15, "Completed", 16),
        job(20, "Failed", 21),
        job(25, "Aborted", 26),
        job(30, "Running"),
    ]
    p = plan(cj, jobs, at(31))
    assert p.delete == [run_name("nightly", at(5)), run_name("nightly", at(20))]
    assert p.last_successful == at(16)
    assert [j["metadata"]["name"] for j in p.active] == [run_name("nightly", at(30))]


def test_zero_limits_keep_nothing_finished() -> None:
    cj = cronjob(successfulJobsHistoryLimit=0, failedJobsHistoryLimit=0)
    p = plan(cj, [job(5, "Completed", 6), job(10, "Terminated", 11)], at(12))
    assert sorted(p.delete) == sorted([run_name("nightly", at(5)), run_name("nightly", at(10))])


def test_finished_and_missing_runs_leave_active_with_events() -> None:
    gone = run_name("nightly", at(0))
    done = run_name("nightly", at(5))
    cj = cronjob(
        status={
            "lastScheduleTime": fmt_time(at(5)),
            "active": [{"name": gone, "uid": "uid-x"}, {"name": done, "uid": f"uid-{done}"}],
        }
    )
    p = plan(cj, [job(5, "Completed", 7)], at(8))
    reasons = [e[0] for e in p.events]
    assert reasons == ["MissingJob", "SawCompletedJob"]
    assert p.active == []
    assert p.last_successful == at(7)


def test_time_zone_shifts_the_schedule() -> None:
    cj = cronjob(schedule="0 19 * * *", timeZone="Asia/Shanghai")  # 19:00 +08 = 11:00 UTC
    d = due(cj, at(30))
    assert d.run is None and d.next == at(60)
    assert plan(cj, [], at(61)).scheduled == at(60)


def test_defaults_are_volcanos() -> None:
    spec = cronjob().spec
    assert spec.concurrency_policy == "Allow"
    assert spec.successful_jobs_history_limit == 3
    assert spec.failed_jobs_history_limit == 1
    assert spec.suspend is False and spec.starting_deadline_seconds is None


def test_created_job_is_the_template_named_and_owned() -> None:
    cj = cronjob()
    raw = {"metadata": {"name": "nightly", "uid": "cj-uid"}}
    body = job_for(cj, raw, run_name("nightly", at(5)), at(5))
    m = body["metadata"]
    assert body["kind"] == "Job" and body["apiVersion"] == "batch.volcano.sh/v1alpha1"
    assert m["name"] == run_name("nightly", at(5)) and m["namespace"] == "ns"
    assert m["labels"]["team"] == "ml"
    assert m["annotations"][SCHEDULED_ANNOTATION] == "2026-11-23T10:05:00Z"
    (ref,) = m["ownerReferences"]
    assert ref == {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "CronJob",
        "name": "nightly",
        "uid": "cj-uid",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert body["spec"]["queue"] == "q"
    assert body["spec"]["tasks"][0]["name"] == "worker"


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({"schedule": "61 * * * *"}, "spec.schedule"),
        ({"schedule": "* * * *"}, "spec.schedule"),
        ({"schedule": "@every 5m"}, "spec.schedule"),
        ({"schedule": "CRON_TZ=UTC * * * * *"}, "spec.schedule"),
        ({"timeZone": "Mars/Olympus"}, "spec.timeZone"),
        ({"timeZone": "../etc/passwd"}, "spec.timeZone"),
        ({"concurrencyPolicy": "Sometimes"}, "spec.concurrencyPolicy"),
        ({"successfulJobsHistoryLimit": -1}, "spec.successfulJobsHistoryLimit"),
        ({"failedJobsHistoryLimit": -2}, "spec.failedJobsHistoryLimit"),
        ({"startingDeadlineSeconds": -5}, "spec.startingDeadlineSeconds"),
    ],
)
def test_model_rejects_bad_fields_by_path(spec: dict[str, Any], path: str) -> None:
    with pytest.raises(FieldError) as exc:
        cronjob(**spec)
    assert [p for p, _ in exc.value.problems] == [path], exc.value.problems


@pytest.mark.parametrize("schedule", ["*/5 * * * *", "@hourly", "0 3 * * 1-5", "@midnight"])
def test_model_accepts_standard_schedules(schedule: str) -> None:
    assert cronjob(schedule=schedule).spec.schedule == schedule


# ---------------------------------------------------------------- the controller's writes


class FakeKube:
    """The calls the CronJob controller makes, recorded; objects get uids and versions."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.events: list[dict[str, Any]] = []
        self.version = 100

    def _stamp(self, body: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        out = dict(body)
        out["metadata"] = {
            **body.get("metadata", {}),
            "uid": f"uid-{body['metadata']['name']}",
            "resourceVersion": str(self.version),
        }
        return out

    def create(self, kind: Any, ns: str, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("create", kind.plural, body))
        return self._stamp(body)

    def delete(self, kind: Any, ns: str, name: str) -> bool:
        self.calls.append(("delete", kind.plural, {"name": name}))
        return True

    def patch(
        self, kind: Any, ns: str, name: str, patch: dict[str, Any], status: bool = False
    ) -> dict[str, Any]:
        self.calls.append(("patch-status" if status else "patch", kind.plural, patch))
        self.version += 1
        return {"metadata": {"name": name, "namespace": ns, "resourceVersion": str(self.version)}}

    def create_event(self, ns: str, body: dict[str, Any]) -> None:
        self.events.append(body)

    def patch_event(self, ns: str, name: str, patch: dict[str, Any]) -> None:
        pass


def _controller(now: datetime) -> tuple[Any, FakeKube, list[datetime]]:
    from controllers.cronjob import CronJobController
    from controllers.runtime import Context

    kube = FakeKube()
    clock = [now]
    ctx = Context.empty(kube, "test", "volcano")  # type: ignore[arg-type]
    return CronJobController(ctx, clock=lambda: clock[0]), kube, clock


def _raw(cj: CronJob) -> dict[str, Any]:
    body = cj.to_dict()
    body["metadata"]["resourceVersion"] = "1"
    return body


def test_reconcile_creates_the_run_patches_status_records_events() -> None:
    asyncio.run(_reconcile_scenario())


async def _reconcile_scenario() -> None:
    ctl, kube, clock = _controller(at(5) + timedelta(seconds=1))
    ctl.ctx.cronjobs.replace([_raw(cronjob(concurrencyPolicy="Replace"))])
    await ctl.reconcile("ns/nightly")
    await asyncio.sleep(0.05)  # events are sent in the background
    name = run_name("nightly", at(5))
    create, status = kube.calls
    assert create[:2] == ("create", "jobs") and create[2]["metadata"]["name"] == name
    assert status[:2] == ("patch-status", "cronjobs")
    assert status[2]["status"]["lastScheduleTime"] == "2026-11-23T10:05:00Z"
    assert [a["name"] for a in status[2]["status"]["active"]] == [name]
    assert [e["reason"] for e in kube.events] == ["SuccessfulCreate"]
    assert kube.events[0]["involvedObject"]["kind"] == "CronJob"
    assert ctl.ctx.jobs.get(f"ns/{name}") is not None  # the cache knows its new Job
    # the next schedule time: Replace deletes the running one, creates the new one
    kube.calls.clear()
    ctl.ctx.cronjobs.replace(
        [
            _raw(
                cronjob(
                    concurrencyPolicy="Replace",
                    status={
                        "lastScheduleTime": "2026-11-23T10:05:00Z",
                        "active": [{"name": name, "uid": f"uid-{name}"}],
                    },
                )
            )
        ]
    )
    clock[0] = at(10)
    await ctl.reconcile("ns/nightly")
    await asyncio.sleep(0.05)
    assert [c[:2] for c in kube.calls] == [
        ("delete", "jobs"),
        ("create", "jobs"),
        ("patch-status", "cronjobs"),
    ]
    assert kube.calls[0][2]["name"] == name
    assert [a["name"] for a in kube.calls[2][2]["status"]["active"]] == [
        run_name("nightly", at(10))
    ]
