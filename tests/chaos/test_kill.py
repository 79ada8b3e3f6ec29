"""kill -9 of each process in turn, while gangs and Volcano Jobs stream through.

One cluster (3 kwok nodes, 8 GPUs and 16 CPUs each) with the sidecar, the
controllers and the webhook; each test runs a fresh workload in its own adopted
namespace and an invariant checker (tests/chaos/invariants.py) for its whole
length: steady state, the kill, DOWN_S seconds down, the restart (same command;
kube-apiserver with the same args, so every watch must resume), recovery (gangs
and Jobs created after the restart are scheduled) and the drain (everything
created is bound or completed, or explained).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator

import pytest
from kubernetes import client

from devcluster.cluster import Cluster
from devcluster.controllers import controllers_url, enable_controllers
from devcluster.controllers import wait_ready as wait_controllers
from devcluster.webhook import enable_webhook
from pyextender.api.names import ENABLED_LABEL
from tests.chaos.cluster_parts import LEASE_ARGS, wait_until
from tests.chaos.conftest import api_client, start_cluster
from tests.chaos.explain import unexplained
from tests.chaos.invariants import Checker
from tests.chaos.workload import Workload

pytestmark = pytest.mark.e2e

DOWN_S = 3.0
STEADY_GANGS = 2
"""Gangs fully bound before the kill."""
AFTER_GANGS = 3
"""Gangs created after the restart that must be fully bound."""
MIN_SAMPLES = 20
"""Each test lasts over 10 s at one sample per 200 ms (fewer on a busy machine, and
none while the API server is down)."""
RECOVERY_S = 120.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory, "kill", nodes=3)
    try:
        c.start_sidecar([*LEASE_ARGS])
        c.wait_sidecar_ready()
        enable_controllers(c)
        enable_webhook(c)
        yield c
    finally:
        c.down(quiet=True)


@pytest.fixture(scope="module")
def api(cluster: Cluster) -> client.ApiClient:
    st = cluster.state
    assert st is not None
    return api_client(st)


def _restart(cluster: Cluster, role: str) -> None:
    cluster.restart_role(role)
    if role == "sidecar":
        cluster.wait_sidecar_ready()
    elif role == "controllers":
        wait_controllers(cluster, controllers_url(cluster), role, leader=True, timeout=60)
    elif role == "webhook":
        enable_webhook(cluster)
    elif role == "kube-apiserver":
        # their watches resume: the sidecar and the controllers are ready again
        cluster.wait_sidecar_ready()
        wait_controllers(cluster, controllers_url(cluster), "controllers", leader=True, timeout=60)


def _fully_bound(w: Workload, names: list[str]) -> bool:
    counts = w.bound_counts()
    return all(g in w.deleting or counts.get(g, 0) >= w.gang_size for g in names)


def _completed(w: Workload, names: list[str]) -> bool:
    phases = w.job_phases()
    return all(phases.get(j) == "Completed" for j in names)


@pytest.mark.parametrize(
    "role", ["sidecar", "controllers", "webhook", "kube-scheduler-volcano", "kube-apiserver"]
)
def test_kill_9_and_restart(cluster: Cluster, api: client.ApiClient, role: str) -> None:
    ns = f"kill-{role}"
    client.CoreV1Api(api).create_namespace(
        {"metadata": {"name": ns, "labels": {ENABLED_LABEL: "true"}}}
    )
    st = cluster.state
    assert st is not None
    checker = Checker(api_client(st)).start()
    work = Workload(api_client(st), ns).start()
    started = time.monotonic()
    try:
        wait_until(
            f"{STEADY_GANGS} gangs bound before the kill",
            lambda: len(work.gangs) >= STEADY_GANGS and _fully_bound(work, work.gangs[:2]),
            timeout=60,
        )
        cluster.stop_role(role, signal.SIGKILL)
        killed_at = time.monotonic()
        time.sleep(DOWN_S)
        _restart(cluster, role)
        back_after = time.monotonic() - killed_at
        first_gang, first_job = len(work.gangs), len(work.jobs)
        wait_until(
            f"{AFTER_GANGS} gangs created after the restart fully bound",
            lambda: (
                len(work.gangs) >= first_gang + AFTER_GANGS
                and _fully_bound(work, work.gangs[first_gang : first_gang + AFTER_GANGS])
            ),
            timeout=RECOVERY_S,
        )
        recovered_after = time.monotonic() - killed_at
        wait_until(
            "a Job created after the restart completed",
            lambda: len(work.jobs) > first_job and _completed(work, [work.jobs[first_job]]),
            timeout=RECOVERY_S,
        )
        work.stop_creating()
        wait_until(
            "every gang bound (deleted once bound) and every Job completed",
            lambda: work.settled() and _completed(work, work.jobs),
            timeout=RECOVERY_S,
        )
        # a short run on a loaded machine may end before the checker had its
        # minimum: it keeps checking the settled cluster until it has
        wait_until(
            f"{MIN_SAMPLES} invariant samples",
            lambda: checker.samples >= MIN_SAMPLES,
            timeout=60,
        )
        work.stop()
        assert not work.errors, work.errors
        left = unexplained(api, ns)
        assert left == [], (left, f"deleted {work.deleted}", f"errors {work.errors}")
    finally:
        work.stop()
        checker.close()
        work.clean_up()  # frees the nodes for the next test
    took = time.monotonic() - started
    print(
        f"kill -9 {role}: back {back_after:.1f}s after the kill, new gangs bound "
        f"{recovered_after:.1f}s after it; {len(work.gangs)} gangs, {len(work.jobs)} jobs, "
        f"{work.create_failures} refused creates retried, {work.list_failures} failed lists; "
        f"{checker.summary()}; {took:.0f}s"
    )
    assert checker.violations == [], checker.violations
    assert checker.samples >= MIN_SAMPLES, checker.summary()
    if role == "kube-apiserver":
        # positive control: the sampler did see the API server go away
        assert checker.failed >= 1, checker.summary()
    else:
        assert checker.failed <= 2, checker.summary()
