"""Pod templates of Job tasks checked as the API server checks a pod's containers
(webhook/validate_pod_template.py; Volcano: pkg/webhooks/admission/jobs/validate/admit_job.go,
validateTaskTemplate)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.test_webhook_validate import QUEUES, job, task
from tests.unit.webhook_support import request
from webhook.validate import validate


def container(**resources: Any) -> dict[str, Any]:
    return {"name": "c", "image": "busybox", "resources": resources}


C0 = "spec.tasks[0].template.spec.containers[0]"
TEMPLATE_CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    ("ok", container(requests={"cpu": "500m"}, limits={"cpu": 1, "memory": "1Gi"}), []),
    (
        "negative cpu",
        container(requests={"cpu": "-1"}),
        [f"{C0}.resources.requests.cpu: must be greater than or equal to 0"],
    ),
    (
        "negative memory limit",
        container(limits={"memory": "-2Gi"}),
        [f"{C0}.resources.limits.memory: must be greater than or equal to 0"],
    ),
    (
        "unparsable",
        container(requests={"memory": "lots"}),
        [f'{C0}.resources.requests.memory: "lots" is not a quantity'],
    ),
    (
        "request over limit",
        container(requests={"cpu": "2"}, limits={"cpu": "1"}),
        [f'{C0}.resources.requests.cpu: must be less than or equal to cpu limit of "1"'],
    ),
    (
        "gpu request without limit",
        container(requests={"nvidia.com/gpu": 1}),
        [f"{C0}.resources.limits.nvidia.com/gpu: required"],
    ),
    (
        "gpu request below limit",
        container(requests={"nvidia.com/gpu": 1}, limits={"nvidia.com/gpu": 2}),
        [f"{C0}.resources.requests.nvidia.com/gpu: must be equal to nvidia.com/gpu limit of 2"],
    ),
    (
        "fractional gpu",
        container(limits={"nvidia.com/gpu": "0.5"}),
        [f"{C0}.resources.limits.nvidia.com/gpu: must be an integer"],
    ),
    ("unknown resource", container(limits={"gpu": 1}), [f"{C0}.resources.limits.gpu: must be a"]),
    ("no image", {"name": "c"}, [f"{C0}.image: required"]),
    ("bad name", {"name": "C_1", "image": "x"}, [f"{C0}.name", "not a DNS label"]),
]


@pytest.mark.parametrize(
    ("ctr", "expected"), [c[1:] for c in TEMPLATE_CASES], ids=[c[0] for c in TEMPLATE_CASES]
)
def test_pod_template_resources(ctr: dict[str, Any], expected: list[str]) -> None:
    t = task("w")
    t["template"]["spec"]["containers"] = [ctr]
    verdict = validate(request(job(tasks=[t])), QUEUES)
    if not expected:
        assert verdict.allowed, verdict.message
        return
    assert not verdict.allowed
    for fragment in expected:
        assert fragment in verdict.message, verdict.message


def test_duplicate_container_names_across_init_containers() -> None:
    t = task("w")
    t["template"]["spec"]["initContainers"] = [{"name": "c", "image": "x"}]
    verdict = validate(request(job(tasks=[t])), QUEUES)
    assert not verdict.allowed
    assert (
        f"{C0}.name: " + '"c" is already used by spec.tasks[0].template.spec.initContainers[0]'
    ) in verdict.message
