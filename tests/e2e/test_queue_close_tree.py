"""Closing a parent queue closes its subtree; opening it reopens what it closed.

As Volcano's queue controller (pkg/controllers/queue/queue_controller_action.go:
closeHierarchicalQueue, openHierarchicalQueue, syncHierarchicalQueue; the state
machine in pkg/controllers/queue/state/*.go), reached the way users reach it:
``vcctl queue operate`` creates a ``bus.volcano.sh`` Command (CloseQueue/OpenQueue)
that the Command controller hands to the Queue controller.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from devcluster.cluster import ClusterState
from tests.e2e.kube import bound_of, gang, queue, wait_for

pytestmark = pytest.mark.e2e

QUEUES = ("scheduling.volcano.sh", "v1beta1", "queues")
MARK = "volcano.sh/closed-by-parent"


def vcctl(state: ClusterState, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "pyextender.vcctl", f"--kubeconfig={state.kubeconfig}", *args],
        capture_output=True, text=True, timeout=60, env=dict(os.environ),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_closing_a_parent_closes_its_subtree_and_opening_reopens_it(
    state: ClusterState,
    core: client.CoreV1Api,
    api: client.ApiClient,
    co: client.CustomObjectsApi,
    namespace: str,
    controllers: str,
    sidecar: str,
    webhook: None,
) -> None:
    """team > (a > a1, b). b is closed by its own command first. Closing team closes a
    and a1 (marked closed-by-parent), and a new gang in a1 is refused; a cannot be
    opened while team is Closed; opening team reopens a and a1 (the gang runs), while b,
    closed by its own command, stays Closed."""
    suffix = uuid.uuid4().hex[:6]
    team, a, a1, b = (f"{n}{suffix}" for n in ("team", "a", "aa", "b"))
    queue(api, team)
    queue(api, a, parent=team)
    queue(api, a1, parent=a)
    queue(api, b, parent=team)

    def get(name: str) -> dict[str, Any]:
        q: dict[str, Any] = co.get_cluster_custom_object(*QUEUES, name)
        return q

    def state_of(name: str) -> str:
        return str((get(name).get("status") or {}).get("state") or "")

    def mark(name: str) -> str | None:
        return ((get(name)["metadata"].get("annotations")) or {}).get(MARK)

    def states(want: dict[str, str]) -> bool:
        return all(state_of(n) == s for n, s in want.items())

    try:
        wait_for("all Open", lambda: states(dict.fromkeys((team, a, a1, b), "Open")))
        vcctl(state, "queue", "operate", "-n", b, "-a", "close")
        wait_for("b Closed", lambda: state_of(b) == "Closed")

        vcctl(state, "queue", "operate", "--name", team, "--action", "close")
        wait_for("team, a, a1 Closed", lambda: states(dict.fromkeys((team, a, a1), "Closed")))
        assert mark(a) == "true" and mark(a1) == "true"
        assert mark(b) != "true" and mark(team) != "true"

        # a leaf closed by its parent takes no new gang: the webhook refuses its PodGroup
        # (as Volcano's PodGroup validation does for a queue that is not Open)
        with pytest.raises(ApiException) as refused:
            gang(core, api, namespace, "g", 1, gpus=1, queue_name=a1)
        assert refused.value.status == 422
        message = json.loads(refused.value.body)["message"]
        assert f'queue "{a1}" is Closed' in message, message

        vcctl(state, "queue", "operate", "-n", a, "-a", "open")
        why = wait_for(
            "OpenQueue refused on a",
            lambda: next(
                (
                    e.message
                    for e in core.list_event_for_all_namespaces(
                        field_selector=f"involvedObject.name={a}"
                    ).items
                    if e.reason == "OpenQueue" and e.type == "Warning"
                ),
                None,
            ),
        )
        assert f"its parent queue {team} is Closed; open the parent queue first" in why, why
        assert state_of(a) == "Closed"

        vcctl(state, "queue", "operate", "-n", team, "-a", "open")
        wait_for("team, a, a1 Open", lambda: states(dict.fromkeys((team, a, a1), "Open")))
        pods = gang(core, api, namespace, "g", 1, gpus=1, queue_name=a1)
        wait_for("a1's gang bound", lambda: bound_of(core, namespace, pods) == 1, timeout=60)
        assert state_of(b) == "Closed"  # closed by its own command: not reopened
        assert mark(a) == "false"
    finally:
        co.delete_collection_namespaced_custom_object(
            "scheduling.volcano.sh", "v1beta1", namespace, "podgroups"
        )
        core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        wait_for("pods gone", lambda: not core.list_namespaced_pod(namespace).items)
        for name in (a1, a, b, team):
            co.delete_cluster_custom_object(*QUEUES, name)
