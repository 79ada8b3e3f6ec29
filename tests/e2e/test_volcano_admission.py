"""Admission as Volcano's webhooks do it, behind a real kube-apiserver: Job defaults,
Queue defaults and Queue validation.

The webhook is registered the way devcluster (and the chart) installs it: the
defaults entry of the MutatingWebhookConfiguration runs before the validating one.
Registered for this module only unless the session already runs it.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.kube import wait_for

pytestmark = pytest.mark.e2e

JOBS = ("batch.volcano.sh", "v1alpha1", "jobs")
QUEUES = ("scheduling.volcano.sh", "v1beta1", "queues")
PODGROUPS = ("scheduling.volcano.sh", "v1beta1", "podgroups")
_names = itertools.count()


@pytest.fixture
def queues(co: client.CustomObjectsApi) -> Iterator[list[str]]:
    """Names of queues a test made; deleted afterwards."""
    made: list[str] = []
    yield made
    for name in reversed(made):
        try:
            co.delete_cluster_custom_object(*QUEUES, name)
        except client.ApiException as exc:
            if exc.status != 404:
                raise


def denial(exc: client.ApiException) -> str:
    return str(json.loads(exc.body)["message"])


def template(**resources: Any) -> dict[str, Any]:
    ctr: dict[str, Any] = {"name": "main", "image": "busybox"}
    if resources:
        ctr["resources"] = resources
    return {"spec": {"terminationGracePeriodSeconds": 0, "containers": [ctr]}}


def job(name: str, tasks: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"tasks": tasks, **spec},
    }


def queue_doc(name: str, annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": meta,
        "spec": spec,
    }


def qname() -> str:
    return f"adm{os.getpid()}-{next(_names)}"


# ---------------------------------------------------------------- Job defaults


def test_job_without_task_names_is_defaulted_and_runs(
    webhook: None, co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    """Volcano: pkg/webhooks/admission/jobs/mutate/mutate_job.go (queue ``default``,
    schedulerName ``volcano``, maxRetry 3, task names ``default<i>``, task
    minAvailable = replicas, task maxRetry 3, job minAvailable = the sum of the tasks'
    minimums). Before, the unnamed tasks were refused (``spec.tasks[0].name: required``)."""
    body = job(
        "unnamed",
        [
            {"replicas": 2, "template": template(requests={"cpu": "100m"})},
            {"replicas": 1, "template": template(requests={"cpu": "100m"})},
        ],
    )
    co.create_namespaced_custom_object(*JOBS[:2], ns, JOBS[2], body)
    spec = co.get_namespaced_custom_object(*JOBS[:2], ns, JOBS[2], "unnamed")["spec"]
    assert spec["queue"] == "default"
    assert spec["schedulerName"] == "volcano"
    assert spec["maxRetry"] == 3
    assert spec["minAvailable"] == 3
    assert [(t["name"], t["minAvailable"], t["maxRetry"]) for t in spec["tasks"]] == [
        ("default0", 2, 3),
        ("default1", 1, 3),
    ]
    # the controllers build the job from the stored (defaulted) object: pods per task name
    want = {"unnamed-default0-0", "unnamed-default0-1", "unnamed-default1-0"}
    wait_for(
        f"pods {sorted(want)}",
        lambda: want <= {p.metadata.name for p in core.list_namespaced_pod(ns).items},
        timeout=45,
    )
    groups = co.list_namespaced_custom_object(*PODGROUPS[:2], ns, PODGROUPS[2])["items"]
    (group,) = [g for g in groups if g["metadata"]["name"].startswith("unnamed")]
    assert group["spec"]["minMember"] == 3
    assert group["spec"]["minTaskMember"] == {"default0": 2, "default1": 1}


def test_explicit_job_fields_are_kept(webhook: None, co: client.CustomObjectsApi, ns: str) -> None:
    """Volcano: pkg/webhooks/admission/jobs/mutate/mutate_job.go fills only what is unset
    (or 0: maxRetry, minAvailable)."""
    body = job(
        "explicit",
        [{"name": "w", "replicas": 4, "minAvailable": 1, "maxRetry": 5, "template": template()}],
        minAvailable=2,
        maxRetry=1,
        schedulerName="volcano",
    )
    made = co.create_namespaced_custom_object(*JOBS[:2], ns, JOBS[2], body, dry_run="All")
    assert made["spec"]["minAvailable"] == 2 and made["spec"]["maxRetry"] == 1
    (t,) = made["spec"]["tasks"]
    assert (t["name"], t["minAvailable"], t["maxRetry"]) == ("w", 1, 5)


# ---------------------------------------------------------------- queues


def test_queue_weight_defaults_to_one_and_stays_positive(
    webhook: None, co: client.CustomObjectsApi, queues: list[str]
) -> None:
    """Volcano: pkg/webhooks/admission/queues/mutate/mutate_queue.go (weight 0 -> 1,
    reclaimable -> true, a hierarchy prefixed with root) and validate_queue.go; the
    schema says weight >= 1 (it said >= 0)."""
    zero, omitted = qname(), qname()
    made = co.create_cluster_custom_object(*QUEUES, queue_doc(zero, weight=0))
    queues.append(zero)
    assert made["spec"]["weight"] == 1 and made["spec"]["reclaimable"] is True
    made = co.create_cluster_custom_object(*QUEUES, queue_doc(omitted))
    queues.append(omitted)
    assert made["spec"]["weight"] == 1
    with pytest.raises(client.ApiException) as info:
        co.patch_cluster_custom_object(*QUEUES, zero, {"spec": {"weight": 0}})
    assert info.value.status == 422 and "spec.weight" in denial(info.value)
    hier = qname()
    made = co.create_cluster_custom_object(
        *QUEUES,
        queue_doc(
            hier,
            annotations={"volcano.sh/hierarchy": "sci", "volcano.sh/hierarchy-weights": "2"},
        ),
    )
    queues.append(hier)
    assert made["metadata"]["annotations"]["volcano.sh/hierarchy"] == "root/sci"
    assert made["metadata"]["annotations"]["volcano.sh/hierarchy-weights"] == "1/2"


BAD_QUEUES: list[tuple[str, dict[str, Any], str]] = [
    (
        "deserved over capability",
        {"spec": {"capability": {"cpu": "4"}, "deserved": {"cpu": "8"}}},
        "spec.deserved[cpu]: deserved[cpu]=8 must be <= capability[cpu]=4",
    ),
    (
        "deserved under guarantee",
        {"spec": {"deserved": {"cpu": "1"}, "guarantee": {"resource": {"cpu": "2"}}}},
        "deserved[cpu]=1 must be >= guarantee[cpu]=2",
    ),
    (
        "guarantee without deserved",
        {"spec": {"guarantee": {"resource": {"cpu": "2"}}}},
        "spec.deserved[cpu]: deserved[cpu] must be >= guarantee[cpu]=2",
    ),
    (
        "guarantee of a resource deserved does not name",
        {"spec": {"deserved": {"cpu": "2"}, "guarantee": {"resource": {"memory": "1Gi"}}}},
        "deserved[memory] must be >= guarantee[memory]=1Gi",
    ),
    (
        "hierarchy without weights",
        {"annotations": {"volcano.sh/hierarchy": "root/sci"}},
        "metadata.annotations[volcano.sh/hierarchy-weights]: required",
    ),
    (
        "hierarchy lengths differ",
        {
            "annotations": {
                "volcano.sh/hierarchy": "root/sci/dev",
                "volcano.sh/hierarchy-weights": "1/2",
            }
        },
        "volcano.sh/hierarchy must have the same length with volcano.sh/hierarchy-weights",
    ),
    (
        "hierarchy weight not positive",
        {
            "annotations": {
                "volcano.sh/hierarchy": "root/sci",
                "volcano.sh/hierarchy-weights": "1/0",
            }
        },
        "0 in the 1/0 must be larger than 0",
    ),
    (
        "hierarchy weight not a number",
        {
            "annotations": {
                "volcano.sh/hierarchy": "root/sci",
                "volcano.sh/hierarchy-weights": "1/a",
            }
        },
        "a in the 1/a is invalid number",
    ),
]


@pytest.mark.parametrize(
    ("parts", "expected"), [c[1:] for c in BAD_QUEUES], ids=[c[0] for c in BAD_QUEUES]
)
def test_bad_queue_is_refused_in_volcanos_words(
    webhook: None, co: client.CustomObjectsApi, parts: dict[str, Any], expected: str
) -> None:
    """Volcano: pkg/webhooks/admission/queues/validate/validate_queue.go
    (validateResourceQuantityOfQueue: guarantee <= deserved <= capability, a guaranteed
    resource must be deserved; validateHierarchicalAttributes)."""
    doc = queue_doc(qname(), parts.get("annotations"), **parts.get("spec", {}))
    with pytest.raises(client.ApiException) as info:
        co.create_cluster_custom_object(*QUEUES, doc, dry_run="All")
    assert info.value.status == 422
    message = denial(info.value)
    assert 'admission webhook "volcano-crds.pyextender.io" denied the request' in message
    assert expected in message, message


def test_good_queue_with_all_three_levels_is_accepted(
    webhook: None, co: client.CustomObjectsApi
) -> None:
    """Volcano: pkg/webhooks/admission/queues/validate/validate_queue.go; a resource with no
    capability is unbounded (memory here)."""
    doc = queue_doc(
        qname(),
        {"volcano.sh/hierarchy": "root/sci", "volcano.sh/hierarchy-weights": "1/2.5"},
        capability={"cpu": "8"},
        deserved={"cpu": "4", "memory": "8Gi"},
        guarantee={"resource": {"cpu": "4", "memory": "2Gi"}},
    )
    co.create_cluster_custom_object(*QUEUES, doc, dry_run="All")


def test_hierarchy_may_not_hold_another_queues_path(
    webhook: None, co: client.CustomObjectsApi, queues: list[str]
) -> None:
    """Volcano: pkg/webhooks/admission/queues/validate/validate_queue.go
    (validateHierarchicalAttributes: a queue's hierarchy may not be a prefix path of
    another queue's)."""
    dev, sci = qname(), qname()
    deep = {"volcano.sh/hierarchy": f"root/{sci}/dev", "volcano.sh/hierarchy-weights": "1/2/3"}
    co.create_cluster_custom_object(*QUEUES, queue_doc(dev, deep))
    queues.append(dev)
    inner = {"volcano.sh/hierarchy": f"root/{sci}", "volcano.sh/hierarchy-weights": "1/2"}
    with pytest.raises(client.ApiException) as info:
        co.create_cluster_custom_object(*QUEUES, queue_doc(sci, inner), dry_run="All")
    assert info.value.status == 422
    assert f"root/{sci} is not allowed to be in the sub path of root/{sci}/dev of queue {dev}" in (
        denial(info.value)
    )
