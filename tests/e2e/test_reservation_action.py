"""The ``reservation`` action on its own (no sla plugin in the tiers), as a Volcano
config with ``reserve`` in its actions runs it: a gang starved past its
sla-waiting-time gets a node held for it; small jobs that keep arriving are kept
off that node and the gang runs once the node's pods end.

Volcano: pkg/scheduler/actions/elect/elect.go (the target job: highest priority,
waiting longest), pkg/scheduler/actions/reserve/reserve.go and
pkg/scheduler/plugins/reservation/reservation.go (nodes locked for the target job,
one per cycle, until it is ready; other jobs are not allocated on locked nodes).
Ours holds, at once, the nodes expected to be free soonest that the gang fits on
(pyextender/actions/reservation.py), for the job past its sla-waiting-time.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from devcluster.cluster import Cluster
from tests.e2e.kube import bound, bound_of, gang, wait_for
from tests.e2e.waits import cycles_pass

pytestmark = pytest.mark.e2e

CONFIGS = {
    "ours": """
actions: "enqueue, allocate, backfill, reservation"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: gpu-share
""",
    # Volcano's names: its reserve action (ours: reservation) and reservation plugin
    # (which only elects the target job there; ignored here with a warning)
    "volcano": """
actions: "enqueue, reserve, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: reservation
""",
}


@pytest.fixture(params=sorted(CONFIGS))
def reservation_sidecar(
    cluster: Cluster, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[str]:
    """The sidecar restarted with one of CONFIGS; the default one again afterwards."""
    st = cluster.state
    assert st is not None
    path = tmp_path / "scheduler.conf"
    path.write_text(CONFIGS[request.param])
    cluster.stop_role("sidecar")
    cluster.start_sidecar([f"--config={path}"])
    cluster.wait_sidecar_ready()
    try:
        yield st.extender_url
    finally:
        cluster.stop_role("sidecar")
        cluster.start_sidecar()
        cluster.wait_sidecar_ready()


def _age(api: client.ApiClient, namespace: str, name: str) -> float:
    """Seconds since the PodGroup was created."""
    pg = client.CustomObjectsApi(api).get_namespaced_custom_object(
        "scheduling.volcano.sh", "v1beta1", namespace, "podgroups", name
    )
    created = dt.datetime.fromisoformat(pg["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
    return time.time() - created.timestamp()


def test_reservation_action_holds_a_node_for_a_starving_gang(
    core: client.CoreV1Api, api: client.ApiClient, namespace: str, reservation_sidecar: str
) -> None:
    """16 one-GPU fillers fill both 8-GPU nodes; big (1 x 8 GPUs, sla-waiting-time 1s)
    waits, then 8 small one-GPU jobs arrive. Fillers end one at a time, alternating
    nodes: every freed GPU could go to a small job, so without a reservation big never
    sees a free node. With it, the small jobs all land on one node, big runs on the
    other."""
    url = reservation_sidecar
    fill = gang(core, api, namespace, "fill", 16, gpus=1, min_member=1)
    wait_for("fillers bound", lambda: bound_of(core, namespace, fill) == 16, timeout=60)
    big = gang(core, api, namespace, "big", 1, gpus=8, annotations={"sla-waiting-time": "1s"})
    small: list[str] = []
    for i in range(8):
        small += gang(core, api, namespace, f"small{i}", 1, gpus=1)
    # big past its 1s (cycles alone may take less: every PodGroup write starts one),
    # then a few cycles: a node is held for it
    wait_for("big past its sla-waiting-time", lambda: _age(api, namespace, "big") > 1.5)
    cycles_pass(url, n=3)
    on = bound(core, namespace)
    by_node: dict[str, list[str]] = {}
    for name in fill:
        by_node.setdefault(on[name], []).append(name)
    assert sorted(len(v) for v in by_node.values()) == [8, 8], by_node
    first, second = by_node.values()
    for a, b in zip(first, second, strict=True):
        for name in (a, b):
            core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
        cycles_pass(url, n=2)
    wait_for("big bound", lambda: bound_of(core, namespace, big) == 1, timeout=60)
    wait_for("small jobs bound", lambda: bound_of(core, namespace, small) == 8, timeout=60)
    on = bound(core, namespace)
    assert {on[n] for n in small} == {n for n in by_node if n != on[big[0]]}, on
