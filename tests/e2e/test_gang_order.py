"""Which gang goes first (issue 14, items 12 and 13).

Volcano sources read: ``pkg/scheduler/actions/allocate/allocate.go`` with
``pkg/scheduler/plugins/gang/gang.go`` (JobReady: a job is given tasks until it
reaches minAvailable, then goes back behind the jobs not yet ready, so every job gets
its minimum before any gets more) and ``pkg/scheduler/plugins/sla/sla.go``
(JobOrderFn: earlier deadline = creation + sla-waiting-time first; JobEnqueueableFn:
past it, admitted at once; JobPipelinedFn: past it, keeps what it was given).

The cluster has 2 nodes x 8 GPUs.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.conftest import Env, create
from tests.e2e.kube import bound, bound_of, condition, gang, pod, wait_for
from tests.e2e.test_controllers import create_job
from tests.e2e.waits import cycles_pass

pytestmark = pytest.mark.e2e


def _elastic_job(name: str, replicas: int) -> dict[str, Any]:
    template = {
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "c",
                    "image": "busybox",
                    "resources": {
                        "requests": {"cpu": "100m", "nvidia.com/gpu": "1"},
                        "limits": {"nvidia.com/gpu": "1"},
                    },
                }
            ],
        }
    }
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": "volcano",
            "minAvailable": 2,
            "tasks": [{"name": "w", "replicas": replicas, "template": template}],
        },
    }


def test_every_jobs_minimum_before_any_jobs_extras(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    """Item 12: three jobs (minAvailable 2, 16 one-GPU replicas = the cluster's GPUs)
    created together all start; the extras share what the minimums leave."""
    jobs = ("one", "two", "three")
    for name in jobs:
        create_job(co, ns, _elastic_job(name, 16))

    def running_per_job() -> dict[str, int]:
        placed = bound(core, ns)
        return {j: sum(1 for p in placed if p.startswith(f"{j}-")) for j in jobs}

    def state() -> str:
        pgs = co.list_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", ns, "podgroups")
        phases = {
            g["metadata"]["name"][:12]: (
                (g.get("status") or {}).get("phase"),
                [c.get("message") for c in (g.get("status") or {}).get("conditions") or []],
            )
            for g in pgs["items"]
        }
        return f"bound per job {running_per_job()}, podgroups {phases}"

    try:
        wait_for(
            "every job at its minimum",
            lambda: (r := running_per_job()) and all(v >= 2 for v in r.values()) and r,
            timeout=60,
        )
        wait_for("the cluster full", lambda: sum(running_per_job().values()) == 16, timeout=60)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; {state()}") from None
    got = running_per_job()
    assert all(v >= 2 for v in got.values()) and sum(got.values()) == 16, got


def _podgroup_age(env: Env, name: str) -> float:
    pg = client.CustomObjectsApi(env.api).get_namespaced_custom_object(
        "scheduling.volcano.sh", "v1beta1", env.namespace, "podgroups", name
    )
    created = pg["metadata"]["creationTimestamp"].replace("Z", "+00:00")
    from datetime import datetime

    return time.time() - datetime.fromisoformat(created).timestamp()


def test_a_gang_past_its_sla_holds_later_gangs_back(env: Env) -> None:
    """Item 13: "big" (16 GPUs, sla-waiting-time 1s) waits for a busy node; a later
    8-GPU gang that would fit the free node at once stays unbound behind it; big runs
    first when the node frees."""
    create(env.core, pod("block", env.namespace, gpus=8, scheduler="default-scheduler"))
    wait_for("blocker bound", lambda: len(bound(env.core, env.namespace)) == 1)
    big = gang(env.core, env.api, env.namespace, "big", 2, gpus=8,
               annotations={"sla-waiting-time": "1s"})  # fmt: skip
    wait_for("big past its waiting time", lambda: _podgroup_age(env, "big") > 1.5, timeout=10)
    wait_for("big's reason", lambda: condition(env.api, env.namespace, "big", "Unschedulable"))
    small = gang(env.core, env.api, env.namespace, "small", 1, gpus=8)
    cycles_pass(env.sidecar, 5)
    assert bound_of(env.core, env.namespace, small) == 0, "a later gang took big's free node"
    env.core.delete_namespaced_pod("block", env.namespace, grace_period_seconds=0)
    wait_for("big bound", lambda: bound_of(env.core, env.namespace, big) == 2, timeout=60)
    assert bound_of(env.core, env.namespace, small) == 0


def test_the_earlier_sla_deadline_goes_first(env: Env) -> None:
    """Item 13: "patient" (sla-waiting-time 10m) is older than "urgent" (1s), both
    16 GPUs on a full cluster: when it frees, urgent (earlier deadline) runs, not the
    older one."""
    for i in range(2):
        create(env.core, pod(f"block-{i}", env.namespace, gpus=8, scheduler="default-scheduler"))
    wait_for("blockers bound", lambda: len(bound(env.core, env.namespace)) == 2)
    patient = gang(env.core, env.api, env.namespace, "patient", 2, gpus=8,
                   annotations={"sla-waiting-time": "10m"})  # fmt: skip
    wait_for("patient waits", lambda: condition(env.api, env.namespace, "patient", "Unschedulable"))
    urgent = gang(env.core, env.api, env.namespace, "urgent", 2, gpus=8,
                  annotations={"sla-waiting-time": "1s"})  # fmt: skip
    wait_for("urgent past its waiting time", lambda: _podgroup_age(env, "urgent") > 1.5)
    cycles_pass(env.sidecar, 2)
    for i in range(2):
        env.core.delete_namespaced_pod(f"block-{i}", env.namespace, grace_period_seconds=0)
    wait_for("urgent bound", lambda: bound_of(env.core, env.namespace, urgent) == 2, timeout=60)
    assert bound_of(env.core, env.namespace, patient) == 0
