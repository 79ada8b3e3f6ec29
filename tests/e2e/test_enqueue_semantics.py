"""PodGroup phases and admission as Volcano's scheduler has them (issue 14, items 10, 11, 14).

Volcano sources read: ``pkg/scheduler/framework/session.go`` / ``job_updater.go``
(jobStatus: every group not Inqueue and not running minMember is written Pending),
``pkg/scheduler/actions/enqueue/enqueue.go`` with ``plugins/overcommit/overcommit.go``
and ``plugins/proportion/proportion.go`` (Inqueue on minResources against the queue
and the cluster, pods not required), ``pkg/scheduler/actions/allocate/allocate.go``
(Pending jobs are skipped only when enqueue is configured; otherwise allocate moves
them to Inqueue itself).

Each test runs in extender and framework mode (``env``). Tests that need another
scheduler config restart the sidecar with ``--config`` and put the default back.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from kubernetes import client

from pyextender.plugins.defaults import DEFAULT_CONFIG
from tests.e2e.conftest import Env, create
from tests.e2e.kube import (
    GROUP,
    bound,
    bound_of,
    condition,
    create_member,
    gang,
    pod,
    read_podgroup,
    wait_for,
)
from tests.e2e.waits import cycles_pass

pytestmark = pytest.mark.e2e


def _phase(env: Env, name: str) -> str:
    status = read_podgroup(env.api, env.namespace, name).get("status") or {}
    return str(status.get("phase") or "")


def _podgroup(env: Env, name: str, min_member: int, min_resources: dict[str, str]) -> None:
    client.CustomObjectsApi(env.api).create_namespaced_custom_object(
        *GROUP,
        env.namespace,
        "podgroups",
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name},
            "spec": {"minMember": min_member, "queue": "default", "minResources": min_resources},
        },
    )


@contextmanager
def _sidecar_config(env: Env, text: str, tmp_path: Path) -> Iterator[None]:
    """Run the sidecar with the scheduler config ``text``; the default one afterwards."""
    path = tmp_path / "scheduler.yaml"
    path.write_text(text)
    env.cluster.stop_role("sidecar", signal.SIGTERM)
    env.cluster.start_sidecar(extra_args=[f"--config={path}"])
    env.cluster.wait_sidecar_ready()
    try:
        yield
    finally:
        env.cluster.stop_role("sidecar", signal.SIGTERM)
        env.cluster.start_sidecar()
        env.cluster.wait_sidecar_ready()


def _block(env: Env, gpus: int) -> None:
    """Take ``gpus`` GPUs with pods of the default scheduler (8 per node at most)."""
    names = []
    for i, n in enumerate([8] * (gpus // 8) + ([gpus % 8] if gpus % 8 else [])):
        names.append(f"block-{i}")
        create(env.core, pod(names[-1], env.namespace, gpus=n, scheduler="default-scheduler"))
    wait_for("blockers bound", lambda: len(bound(env.core, env.namespace)) == len(names))


def test_a_new_podgroup_that_waits_is_written_pending(env: Env) -> None:
    """Item 10: a PodGroup too big for its queue gets phase Pending (not an empty phase)."""
    _podgroup(env, "huge", 2, {"nvidia.com/gpu": "100"})
    wait_for("phase Pending", lambda: _phase(env, "huge") == "Pending", timeout=20)
    why = wait_for("the reason", lambda: condition(env.api, env.namespace, "huge", "Unschedulable"))
    assert "nvidia.com/gpu 100/16" in why, why
    cycles_pass(env.sidecar, 3)
    assert _phase(env, "huge") == "Pending"


def test_a_podgroup_without_pods_is_inqueue_when_it_fits(env: Env) -> None:
    """Item 11: Inqueue on minResources alone, before any pod exists; its pods, created
    afterwards, then bind as one gang."""
    _podgroup(env, "early", 2, {"nvidia.com/gpu": "4", "cpu": "2"})
    wait_for("phase Inqueue without pods", lambda: _phase(env, "early") == "Inqueue", timeout=20)
    for i in range(2):
        create_member(env.core, env.namespace, "early", i, gpus=2)
    names = ["early-0", "early-1"]
    wait_for("the gang bound", lambda: bound_of(env.core, env.namespace, names) == 2, timeout=60)


def test_inqueue_gang_keeps_its_gates_until_the_whole_gang_fits(env: Env) -> None:
    """Item 11: admitted (Inqueue) while the cluster is busy; no member is ungated or
    bound until all of them fit, then all bind."""
    _block(env, 12)
    names = gang(env.core, env.api, env.namespace, "g", 2, gpus=4)
    wait_for("phase Inqueue", lambda: _phase(env, "g") == "Inqueue", timeout=20)
    why = wait_for("the reason", lambda: condition(env.api, env.namespace, "g", "Unschedulable"))
    assert "tasks in gang unschedulable" in why and "Insufficient nvidia.com/gpu" in why, why
    cycles_pass(env.sidecar, 3)
    gated = [
        p.metadata.name
        for p in env.core.list_namespaced_pod(env.namespace).items
        if p.metadata.name in names and p.spec.scheduling_gates
    ]
    assert sorted(gated) == names and bound_of(env.core, env.namespace, names) == 0
    env.core.delete_namespaced_pod("block-1", env.namespace, grace_period_seconds=0)
    wait_for("the gang bound", lambda: bound_of(env.core, env.namespace, names) == 2, timeout=60)


REQUIRE_FIT = DEFAULT_CONFIG + "configurations:\n- name: enqueue\n  arguments: {requireFit: true}\n"


def test_require_fit_keeps_the_podgroup_pending_until_the_gang_fits(
    env: Env, tmp_path: Path
) -> None:
    """Item 11, the documented option ``enqueue.requireFit``: Inqueue only once the
    whole gang fits now (its gates come off in the same step)."""
    with _sidecar_config(env, REQUIRE_FIT, tmp_path):
        _block(env, 12)
        names = gang(env.core, env.api, env.namespace, "strict", 2, gpus=4)
        wait_for("phase Pending", lambda: _phase(env, "strict") == "Pending", timeout=20)
        cycles_pass(env.sidecar, 3)
        assert _phase(env, "strict") == "Pending"
        assert bound_of(env.core, env.namespace, names) == 0
        env.core.delete_namespaced_pod("block-1", env.namespace, grace_period_seconds=0)
        wait_for("bound", lambda: bound_of(env.core, env.namespace, names) == 2, timeout=60)
        assert _phase(env, "strict") in ("Inqueue", "Running")


NO_ENQUEUE = DEFAULT_CONFIG.replace(
    'actions: "enqueue, allocate, preempt, reclaim, backfill"', 'actions: "allocate, backfill"'
)


def test_without_the_enqueue_action_allocate_admits(env: Env, tmp_path: Path) -> None:
    """Item 14: a config listing only allocate and backfill still schedules gangs."""
    assert "enqueue" not in NO_ENQUEUE.split("tiers")[0]
    with _sidecar_config(env, NO_ENQUEUE, tmp_path):
        names = gang(env.core, env.api, env.namespace, "noenq", 3, gpus=2)
        wait_for("bound", lambda: bound_of(env.core, env.namespace, names) == 3, timeout=60)
        assert _phase(env, "noenq") in ("Inqueue", "Running")
