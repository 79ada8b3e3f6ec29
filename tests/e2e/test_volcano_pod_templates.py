"""Pod templates of Volcano Job tasks checked at admission as the API server checks pods,
behind a real kube-apiserver (the webhook registered as devcluster installs it, for this
module only unless the session already runs it)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client

pytestmark = pytest.mark.e2e

JOBS = ("batch.volcano.sh", "v1alpha1", "jobs")


def denial(exc: client.ApiException) -> str:
    return str(json.loads(exc.body)["message"])


def template(**resources: Any) -> dict[str, Any]:
    ctr: dict[str, Any] = {"name": "main", "image": "busybox"}
    if resources:
        ctr["resources"] = resources
    return {"spec": {"containers": [ctr]}}


def job(name: str, tasks: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"tasks": tasks},
    }


C0 = "spec.tasks[0].template.spec.containers[0]"
BAD_TEMPLATES: list[tuple[str, dict[str, Any], str]] = [
    (
        "negative cpu request",
        {"requests": {"cpu": "-1"}},
        f"{C0}.resources.requests.cpu: must be greater than or equal to 0",
    ),
    (
        "negative memory",
        {"limits": {"memory": "-1Gi"}},
        f"{C0}.resources.limits.memory: must be greater than or equal to 0",
    ),
    (
        "requests over limits",
        {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}},
        f'{C0}.resources.requests.cpu: must be less than or equal to cpu limit of "1"',
    ),
    (
        "gpu without limit",
        {"requests": {"nvidia.com/gpu": 1}},
        f"{C0}.resources.limits.nvidia.com/gpu: required",
    ),
]


@pytest.mark.parametrize(
    ("resources", "expected"),
    [c[1:] for c in BAD_TEMPLATES],
    ids=[c[0] for c in BAD_TEMPLATES],
)
def test_bad_pod_template_is_refused_naming_the_field(
    webhook: None,
    co: client.CustomObjectsApi,
    namespace: str,
    resources: dict[str, Any],
    expected: str,
) -> None:
    """Volcano: pkg/webhooks/admission/jobs/validate/admit_job.go (validateTaskTemplate runs
    Kubernetes' pod template validation: quantities >= 0, requests <= limits, extended
    resources with equal limits). Before, such a Job was accepted and its pods could never
    be created."""
    body = job("badtpl", [{"name": "w", "replicas": 1, "template": template(**resources)}])
    with pytest.raises(client.ApiException) as info:
        co.create_namespaced_custom_object(*JOBS[:2], namespace, JOBS[2], body)
    assert info.value.status == 422
    message = denial(info.value)
    assert 'admission webhook "volcano-crds.pyextender.io" denied the request' in message
    assert expected in message, message
