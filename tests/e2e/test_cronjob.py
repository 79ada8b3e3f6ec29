"""Volcano CronJobs on devcluster: admission by the webhook, then the controllers create
``<cronjob>-<minutes>`` Jobs owned by the CronJob, honour Forbid, Replace, suspend and
the history limits, and keep ``status`` current.

The controllers run with the hidden ``--cronjob-clock-speed=20``: the CronJob
controller's clock runs 20 times as fast, so ``* * * * *`` fires every 3 s of real
time. Every wait is on something the API server shows (Jobs, status, Events).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from devcluster.cluster import Cluster
from devcluster.controllers import ROLE, enable_controllers, start_controllers, wait_ready
from devcluster.webhook import enable_webhook
from tests.e2e.kube import events_for, wait_for

pytestmark = pytest.mark.e2e

JOBS = ("batch.volcano.sh", "v1alpha1", "jobs")
CRONJOBS = ("batch.volcano.sh", "v1alpha1", "cronjobs")
COMMANDS = ("bus.volcano.sh", "v1alpha1", "commands")
MERGE = "application/merge-patch+json"
SPEED = 20


@pytest.fixture(scope="module")
def fast_controllers(cluster: Cluster) -> Iterator[None]:
    """The controllers with a fast CronJob clock; the usual ones again afterwards."""
    enable_webhook(cluster)
    cluster.stop_role(ROLE)
    try:
        url = start_controllers(cluster, extra=[f"--cronjob-clock-speed={SPEED}"])
        wait_ready(cluster, url, ROLE, leader=True, timeout=60)
        yield
    finally:
        cluster.stop_role(ROLE)
        enable_controllers(cluster)


@pytest.fixture(scope="module")
def co(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


@pytest.fixture
def ns(namespace: str, co: client.CustomObjectsApi, fast_controllers: None) -> Iterator[str]:
    yield namespace
    group, version, plural = CRONJOBS
    for cj in co.list_namespaced_custom_object(group, version, namespace, plural)["items"]:
        co.delete_namespaced_custom_object(
            group, version, namespace, plural, cj["metadata"]["name"]
        )
    for job in co.list_namespaced_custom_object(*JOBS[:2], namespace, JOBS[2])["items"]:
        co.delete_namespaced_custom_object(*JOBS[:2], namespace, JOBS[2], job["metadata"]["name"])
    time.sleep(0.5)


def cronjob(name: str, **spec: Any) -> dict[str, Any]:
    """Every minute; its Jobs' pods fit no node, so a run stays active until ended."""
    template = {
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "nodeSelector": {"pyextender.io/e2e-no-such-node": "true"},
            "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "10m"}}}
            ],
        }
    }
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "CronJob",
        "metadata": {"name": name},
        "spec": {
            "schedule": "* * * * *",
            "startingDeadlineSeconds": 120,
            "jobTemplate": {
                "metadata": {"labels": {"team": "e2e"}},
                "spec": {
                    "minAvailable": 1,
                    "schedulerName": "default-scheduler",
                    "tasks": [{"name": "worker", "replicas": 1, "template": template}],
                },
            },
            **spec,
        },
    }


def runs(co: client.CustomObjectsApi, ns: str, cron: str) -> list[dict[str, Any]]:
    items = co.list_namespaced_custom_object(*JOBS[:2], ns, JOBS[2])["items"]
    return sorted(
        (
            j
            for j in items
            if any(r.get("name") == cron for r in j["metadata"].get("ownerReferences") or [])
            and not j["metadata"].get("deletionTimestamp")
        ),
        key=lambda j: j["metadata"]["name"],
    )


def names(jobs: list[dict[str, Any]]) -> list[str]:
    return [j["metadata"]["name"] for j in jobs]


def get_cron(co: client.CustomObjectsApi, ns: str, name: str) -> dict[str, Any]:
    out: dict[str, Any] = co.get_namespaced_custom_object(*CRONJOBS[:2], ns, CRONJOBS[2], name)
    return out


def patch_cron(co: client.CustomObjectsApi, ns: str, name: str, spec: dict[str, Any]) -> None:
    co.api_client.call_api(
        f"/apis/{CRONJOBS[0]}/{CRONJOBS[1]}/namespaces/{ns}/{CRONJOBS[2]}/{name}",
        "PATCH",
        header_params={"Content-Type": MERGE, "Accept": "application/json"},
        body={"spec": spec},
        auth_settings=["BearerToken"],
        _preload_content=False,
    )


def reasons(core: client.CoreV1Api, ns: str, name: str) -> list[str]:
    return [e.split(":", 1)[0] for e in events_for(core, ns, name)]


def test_webhook_refuses_a_bad_cronjob_naming_the_field(
    co: client.CustomObjectsApi, ns: str
) -> None:
    bad = cronjob("bad", schedule="*/5 * * *", timeZone="Nowhere/City")
    with pytest.raises(ApiException) as exc:
        co.create_namespaced_custom_object(*CRONJOBS[:2], ns, CRONJOBS[2], bad)
    assert exc.value.status in (400, 422), exc.value.body
    assert "spec.schedule: expected 5 fields" in exc.value.body
    assert "spec.timeZone: unknown time zone" in exc.value.body


def test_forbid_replace_and_suspend(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    created = co.create_namespaced_custom_object(
        *CRONJOBS[:2], ns, CRONJOBS[2], cronjob("tick", concurrencyPolicy="Forbid")
    )
    uid = created["metadata"]["uid"]
    first = wait_for("the first run", lambda: runs(co, ns, "tick"), timeout=60)
    (job,) = first
    m = job["metadata"]
    assert re.fullmatch(r"tick-\d{8,}", m["name"]), m["name"]
    (owner,) = m["ownerReferences"]
    assert owner["kind"] == "CronJob" and owner["uid"] == uid and owner["controller"] is True
    assert m["labels"]["team"] == "e2e"
    assert job["spec"]["tasks"][0]["name"] == "worker"
    status = wait_for(
        "status.active",
        lambda: (s := get_cron(co, ns, "tick").get("status") or {}).get("active") and s,
    )
    assert [a["name"] for a in status["active"]] == [m["name"]]
    assert status["lastScheduleTime"]
    wait_for("SuccessfulCreate event", lambda: "SuccessfulCreate" in reasons(core, ns, "tick"))
    # Forbid: the next minutes come (3 s each) and are not started while it runs
    wait_for(
        "JobAlreadyActive event",
        lambda: "JobAlreadyActive" in reasons(core, ns, "tick"),
        timeout=30,
    )
    assert names(runs(co, ns, "tick")) == [m["name"]]
    # Replace: a new run takes the old one's place
    patch_cron(co, ns, "tick", {"concurrencyPolicy": "Replace"})
    replaced = wait_for(
        "a new run replacing the first",
        lambda: (r := names(runs(co, ns, "tick"))) and m["name"] not in r and r,
        timeout=30,
    )
    assert len(replaced) == 1, replaced
    wait_for("SuccessfulDelete event", lambda: "SuccessfulDelete" in reasons(core, ns, "tick"))
    # suspend: no new runs (wait past two more schedule times)
    patch_cron(co, ns, "tick", {"suspend": True})
    time.sleep(1.0)  # a reconcile already under way may still create one run
    before = names(runs(co, ns, "tick"))
    time.sleep(2.5 * 60 / SPEED)
    assert names(runs(co, ns, "tick")) == before


def test_history_limit_deletes_finished_runs(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    co.create_namespaced_custom_object(
        *CRONJOBS[:2],
        ns,
        CRONJOBS[2],
        cronjob("hist", concurrencyPolicy="Forbid", failedJobsHistoryLimit=0),
    )
    (job,) = wait_for("the first run", lambda: runs(co, ns, "hist"), timeout=60)
    first = job["metadata"]["name"]
    # end it: an aborted run counts as failed; with a limit of 0 it is deleted
    co.create_namespaced_custom_object(
        *COMMANDS[:2],
        ns,
        COMMANDS[2],
        {
            "apiVersion": "bus.volcano.sh/v1alpha1",
            "kind": "Command",
            "metadata": {"name": "abort-first"},
            "action": "AbortJob",
            "target": {"apiVersion": "x", "kind": "Job", "name": first, "uid": "0"},
        },
    )
    nxt = wait_for(
        "the aborted run deleted and the next one started (Forbid no longer holds it)",
        lambda: (r := names(runs(co, ns, "hist"))) and first not in r and r,
        timeout=45,
    )
    assert len(nxt) == 1, nxt
    assert any(
        e.startswith("SuccessfulDelete") and first in e and "history limit" in e
        for e in events_for(core, ns, "hist")
    ), events_for(core, ns, "hist")
