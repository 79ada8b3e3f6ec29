"""Admission of Volcano CronJobs: the schedule, time zone, policy, limits, and the
jobTemplate judged as a Job would be, each problem named by its path."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.webhook_support import request
from webhook.queues import MemoryQueues
from webhook.validate import validate

QUEUES = MemoryQueues(
    [
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "closed"},
            "spec": {},
            "status": {"state": "Closed"},
        }
    ]
)


def task(name: str = "worker", replicas: int = 2, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "replicas": replicas,
        "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
        **extra,
    }


def cronjob(job_spec: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "CronJob",
        "metadata": {"name": "nightly", "namespace": "ns"},
        "spec": {
            "schedule": "*/5 * * * *",
            "jobTemplate": {"spec": {"queue": "default", "tasks": [task()], **(job_spec or {})}},
            **spec,
        },
    }


def test_a_volcano_cronjob_is_accepted() -> None:
    doc = cronjob(
        concurrencyPolicy="Forbid",
        startingDeadlineSeconds=60,
        successfulJobsHistoryLimit=5,
        failedJobsHistoryLimit=3,
        timeZone="Asia/Shanghai",
        job_spec={"minAvailable": 1, "policies": [{"event": "PodEvicted", "action": "RestartJob"}]},
    )
    doc["spec"]["jobTemplate"]["metadata"] = {"labels": {"team": "ml"}}
    verdict = validate(request(doc), QUEUES)
    assert verdict.allowed, verdict.message


@pytest.mark.parametrize(
    ("spec", "job_spec", "expected"),
    [
        ({"schedule": "*/5 * * *"}, {}, "spec.schedule: expected 5 fields"),
        ({"schedule": "70 * * * *"}, {}, "spec.schedule: "),
        ({"schedule": "@every 1h"}, {}, "spec.schedule: unknown descriptor"),
        ({"schedule": "TZ=UTC 0 * * * *"}, {}, "spec.schedule: a time zone in the schedule"),
        ({"schedule": ""}, {}, "spec.schedule: required"),
        ({"timeZone": "Nowhere/City"}, {}, "spec.timeZone: unknown time zone"),
        ({"concurrencyPolicy": "Queue"}, {}, "spec.concurrencyPolicy: must be one of"),
        ({"successfulJobsHistoryLimit": -1}, {}, "spec.successfulJobsHistoryLimit: must be"),
        ({"failedJobsHistoryLimit": -1}, {}, "spec.failedJobsHistoryLimit: must be"),
        ({"startingDeadlineSeconds": -1}, {}, "spec.startingDeadlineSeconds: must be"),
        ({}, {"tasks": []}, "spec.jobTemplate.spec.tasks: at least one task is required"),
        (
            {},
            {"tasks": [task(template={"spec": {}})]},
            "spec.jobTemplate.spec.tasks[0].template.spec.containers: at least one container",
        ),
        (
            {},
            {"tasks": [task(), task()]},
            "spec.jobTemplate.spec.tasks[1].name: duplicate task name",
        ),
        ({}, {"minAvailable": 9}, "spec.jobTemplate.spec.minAvailable: must be <="),
        (
            {},
            {"tasks": [task(partitionPolicy={"totalPartitions": 1, "partitionSize": 2})]},
            "spec.jobTemplate.spec.tasks[0].partitionPolicy: not supported",
        ),
        (
            {},
            {"policies": [{"event": "CommandIssued", "action": "AbortJob"}]},
            "spec.jobTemplate.spec.policies[0].event: CommandIssued is raised internally",
        ),
        (
            {},
            {"plugins": {"pytorch": ["--masters=x"]}},
            "spec.jobTemplate.spec.plugins.pytorch[0]: unknown argument --masters",
        ),
        ({}, {"queue": "nope"}, 'spec.jobTemplate.spec.queue: queue "nope" does not exist'),
        (
            {},
            {"tasks": [task("w" * 60)]},
            "spec.jobTemplate.spec.tasks[0].name: pod names such as",
        ),
    ],
)
def test_create_denied_naming_the_field(
    spec: dict[str, Any], job_spec: dict[str, Any], expected: str
) -> None:
    verdict = validate(request(cronjob(job_spec, **spec)), QUEUES)
    assert not verdict.allowed
    assert expected in verdict.message, verdict.message
    assert verdict.message.startswith('CronJob "nightly" is invalid: ')


def test_closed_queue_is_a_warning() -> None:
    verdict = validate(request(cronjob({"queue": "closed"})), QUEUES)
    assert verdict.allowed
    assert any("closed" in w and "Closed" in w for w in verdict.warnings), verdict.warnings


def test_template_may_change_on_update_and_the_queue_is_not_rechecked() -> None:
    old = cronjob()
    new = cronjob({"queue": "gone", "tasks": [task(replicas=4)]}, suspend=True)
    verdict = validate(request(new, operation="UPDATE", old=old), QUEUES)
    assert verdict.allowed, verdict.message


def test_update_to_a_bad_schedule_is_denied() -> None:
    verdict = validate(request(cronjob(schedule="bad"), operation="UPDATE", old=cronjob()), QUEUES)
    assert not verdict.allowed and "spec.schedule" in verdict.message
