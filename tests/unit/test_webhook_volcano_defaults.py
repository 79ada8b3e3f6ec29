"""Volcano's defaults of new Jobs and Queues (webhook/mutate_volcano.py) and the queue
hierarchy annotations.

Semantics from Volcano's pkg/webhooks/admission/jobs/mutate/mutate_job.go,
queues/mutate/mutate_queue.go and queues/validate/validate_queue.go.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest

from tests.unit.test_webhook_marker import apply
from tests.unit.test_webhook_validate import QUEUES, queue, task
from tests.unit.webhook_support import body, request, review
from webhook.app import WebhookApp
from webhook.configuration import MUTATE_VOLCANO
from webhook.mutate_volcano import job_patch, queue_patch
from webhook.queues import MemoryQueues
from webhook.validate import validate


def defaulted(doc: dict[str, Any], patch: list[dict[str, Any]]) -> dict[str, Any]:
    return apply(doc, patch)


def bare_job(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "ns"},
        "spec": spec,
    }


def container(**resources: Any) -> dict[str, Any]:
    return {"name": "c", "image": "busybox", "resources": resources}


def test_unnamed_tasks_get_volcanos_defaults_and_pass_validation() -> None:
    doc = bare_job(
        tasks=[
            {"replicas": 2, "template": {"spec": {"containers": [container()]}}},
            {"replicas": 3, "minAvailable": 1, "template": {"spec": {"containers": [container()]}}},
        ]
    )
    # without the defaults our validation refuses the unnamed tasks, as before
    assert not validate(request(doc), QUEUES).allowed
    out = defaulted(doc, job_patch(doc))
    spec = out["spec"]
    assert spec["queue"] == "default"
    assert spec["schedulerName"] == "volcano"
    assert spec["maxRetry"] == 3
    assert [t["name"] for t in spec["tasks"]] == ["default0", "default1"]
    assert [t["minAvailable"] for t in spec["tasks"]] == [2, 1]
    assert [t["maxRetry"] for t in spec["tasks"]] == [3, 3]
    assert spec["minAvailable"] == 3  # the tasks' minimums: 2 + 1
    verdict = validate(request(out), QUEUES)
    assert verdict.allowed, verdict.message


def test_explicit_values_are_kept_and_zeros_defaulted() -> None:
    doc = bare_job(
        queue="research",
        schedulerName="other",
        maxRetry=0,
        minAvailable=0,
        tasks=[task("w", replicas=4, minAvailable=2, maxRetry=5)],
    )
    patch = job_patch(doc)
    assert {p["path"]: p["value"] for p in patch} == {"/spec/maxRetry": 3, "/spec/minAvailable": 2}
    doc = bare_job(queue="q", schedulerName="s", maxRetry=1, minAvailable=1, tasks=[task("w")])
    doc["spec"]["tasks"][0].update(minAvailable=1, maxRetry=1)
    assert job_patch(doc) == []


def test_host_network_pods_keep_cluster_dns_and_plugins_bring_their_helpers() -> None:
    t = task("w")
    t["template"]["spec"]["hostNetwork"] = True
    doc = bare_job(tasks=[t], plugins={"mpi": ["--master=w", "--worker=w"]})
    out = defaulted(doc, job_patch(doc))
    assert out["spec"]["tasks"][0]["template"]["spec"]["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert out["spec"]["plugins"] == {"mpi": ["--master=w", "--worker=w"], "svc": [], "ssh": []}


def test_garbage_is_left_for_validation() -> None:
    assert job_patch({"spec": "nonsense"}) == []
    doc = bare_job(tasks=["x", {"replicas": "two"}])
    out = defaulted(doc, job_patch(doc))
    assert "minAvailable" not in out["spec"]  # cannot be summed from unreadable tasks
    assert out["spec"]["tasks"][1]["name"] == "default1"


def test_queue_defaults() -> None:
    doc = queue("q", weight=0)
    doc["metadata"]["annotations"] = {
        "volcano.sh/hierarchy": "sci/dev",
        "volcano.sh/hierarchy-weights": "2/3",
    }
    out = defaulted(doc, queue_patch(doc))
    assert out["spec"]["weight"] == 1 and out["spec"]["reclaimable"] is True
    assert out["metadata"]["annotations"] == {
        "volcano.sh/hierarchy": "root/sci/dev",
        "volcano.sh/hierarchy-weights": "1/2/3",
    }
    kept = queue("q", weight=4, reclaimable=False)
    assert queue_patch(kept) == []


def test_app_answers_with_a_json_patch() -> None:
    app = WebhookApp(MemoryQueues(), lambda: (True, ""))
    doc = bare_job(tasks=[task("")])
    sent = review(doc, group="batch.volcano.sh", version="v1alpha1", kind="Job")
    messages: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body(sent), "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    scope = {"type": "http", "path": MUTATE_VOLCANO, "method": "POST", "headers": []}
    asyncio.run(app(scope, receive, send))
    response = json.loads(messages[-1]["body"])["response"]
    assert response["allowed"] is True and response["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(response["patch"]))
    assert defaulted(doc, patch)["spec"]["tasks"][0]["name"] == "default0"


HIERARCHY_CASES: list[tuple[str, dict[str, str], str]] = [
    ("ok", {"volcano.sh/hierarchy": "root/a", "volcano.sh/hierarchy-weights": "1/2.5"}, ""),
    (
        "weights missing",
        {"volcano.sh/hierarchy": "root/a"},
        "metadata.annotations[volcano.sh/hierarchy-weights]: required when volcano.sh/hierarchy",
    ),
    (
        "lengths differ",
        {"volcano.sh/hierarchy": "root/a/b", "volcano.sh/hierarchy-weights": "1/2"},
        "volcano.sh/hierarchy must have the same length with volcano.sh/hierarchy-weights",
    ),
    (
        "not a number",
        {"volcano.sh/hierarchy": "root/a", "volcano.sh/hierarchy-weights": "1/x"},
        "x in the 1/x is invalid number",
    ),
    (
        "zero weight",
        {"volcano.sh/hierarchy": "root/a", "volcano.sh/hierarchy-weights": "1/0"},
        "0 in the 1/0 must be larger than 0",
    ),
    (
        "weights alone",
        {"volcano.sh/hierarchy-weights": "1/2"},
        "must have the same length",
    ),
]


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [c[1:] for c in HIERARCHY_CASES],
    ids=[c[0] for c in HIERARCHY_CASES],
)
def test_hierarchy_annotations(annotations: dict[str, str], expected: str) -> None:
    doc = queue("h")
    doc["metadata"]["annotations"] = annotations
    verdict = validate(request(doc), QUEUES)
    if not expected:
        assert verdict.allowed, verdict.message
        return
    assert not verdict.allowed
    assert expected in verdict.message, verdict.message


def test_hierarchy_may_not_hold_another_queues_path() -> None:
    """Volcano refuses root/sci while root/sci/dev names another queue (not root/scidev)."""
    dev = queue("dev")
    dev["metadata"]["annotations"] = {
        "volcano.sh/hierarchy": "root/sci/dev",
        "volcano.sh/hierarchy-weights": "1/2/3",
    }
    queues = MemoryQueues([dev])
    sci = queue("sci")
    sci["metadata"]["annotations"] = {
        "volcano.sh/hierarchy": "root/sci",
        "volcano.sh/hierarchy-weights": "1/2",
    }
    verdict = validate(request(sci), queues)
    assert not verdict.allowed
    assert (
        "root/sci is not allowed to be in the sub path of root/sci/dev of queue dev"
    ) in verdict.message
    sci["metadata"]["annotations"]["volcano.sh/hierarchy"] = "root/sc"
    assert validate(request(sci), queues).allowed
