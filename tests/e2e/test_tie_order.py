"""Of nodes our plugins score alike, pods go to one fixed order of nodes (a hash of
each name), whatever order kube-scheduler lists them in: in extender mode its
parallel filter hands us feasible nodes in an order that changes from pod to pod,
and an order that changes spreads pods that fragmentation scoring would pack."""

from __future__ import annotations

from typing import Any

import pytest

from devcluster.nodes import NodeShape, node_manifest
from pyextender.cache.state import tie_rank
from tests.e2e.conftest import Env, create
from tests.e2e.kube import bound, pod, wait_for

pytestmark = pytest.mark.e2e

TIE_NODES = 6
PODS = 5


def _ready(node: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])


def test_pods_scored_alike_everywhere_all_go_to_the_first_node_in_our_order(env: Env) -> None:
    core, ns = env.core, env.namespace
    # CPU-only nodes of this test alone (label + taint), so nothing else lands there and
    # every score plugin scores them alike: no GPUs, equal CPU
    # made last first in our order: kube-scheduler's own node list starts with the
    # nodes made first, so its order and ours differ
    names = sorted((f"tie-{ns}-{i}" for i in range(TIE_NODES)), key=tie_rank, reverse=True)
    first = names[-1]
    for name in names:
        m = node_manifest(name, NodeShape(cpu="8", memory="64Gi", gpus=0), None)
        m["metadata"]["labels"]["pyextender-test/tie"] = ns
        m["spec"]["taints"] = [{"key": "pyextender-test/tie", "value": ns, "effect": "NoSchedule"}]
        core.create_node(m)
    try:
        wait_for(
            "the test's nodes Ready",
            lambda: all(_ready(core.read_node(n)) for n in names),
            timeout=30,
        )
        for i in range(PODS):
            m = pod(f"tied-{i}", ns, cpu="1")
            m["spec"]["nodeSelector"] = {"pyextender-test/tie": ns}
            m["spec"]["tolerations"] = [
                {"key": "pyextender-test/tie", "operator": "Equal", "value": ns}
            ]
            create(core, m)
        placed = wait_for(
            f"{PODS} pods bound", lambda: (b := bound(core, ns)) and len(b) == PODS and b
        )
        # one node, not one per pod: each pod found the same nodes equal and took the
        # same first one (8 CPUs hold all five)
        assert set(placed.values()) == {first}, (env.mode, placed, first)
    finally:
        core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
        for name in names:
            core.delete_node(name)
