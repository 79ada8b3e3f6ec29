"""PodGroup and Queue status computed from pods: counts, phases, state machine, allocated."""

from __future__ import annotations

from typing import Any

import pytest

from controllers import podgroup_status as pgs
from controllers import queue_status as qs


def pod(
    phase: str = "Running", node: str = "n1", cpu: str = "1", deleting: bool = False
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "ns"}
    if deleting:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return {
        "metadata": meta,
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
        },
        "status": {"phase": phase},
    }


@pytest.mark.parametrize(
    ("pods", "want"),
    [
        ([], pgs.Members()),
        ([pod("Pending", node="")], pgs.Members()),
        ([pod("Pending")], pgs.Members(allocated=1)),
        ([pod("Running"), pod("Running")], pgs.Members(running=2, allocated=2)),
        ([pod("Succeeded"), pod("Failed")], pgs.Members(succeeded=1, failed=1, allocated=1)),
        ([pod("Running", deleting=True)], pgs.Members()),
    ],
)
def test_count_members(pods: list[dict[str, Any]], want: pgs.Members) -> None:
    assert pgs.count_members(pods) == want


M = pgs.Members


@pytest.mark.parametrize(
    ("current", "min_member", "members", "want"),
    [
        (None, 3, M(allocated=2), None),  # never Pending/Inqueue from us
        ("Pending", 3, M(allocated=2), None),
        ("Inqueue", 3, M(running=3, allocated=3), "Running"),
        ("Inqueue", 3, M(allocated=3), "Running"),  # bound, not yet started
        ("Pending", 1, M(running=1, allocated=1), "Running"),  # pods bound without admission
        ("Running", 3, M(running=3, allocated=3), None),
        ("Running", 2, M(succeeded=2, allocated=2), "Completed"),
        ("Running", 3, M(running=1, failed=2, allocated=1), "Unknown"),
        ("Running", 3, M(), "Unknown"),
        ("Unknown", 3, M(running=3, allocated=3), "Running"),
        ("Completed", 3, M(), None),  # terminal
        ("Inqueue", 0, M(), None),  # nothing allocated is never Running
    ],
)
def test_podgroup_next_phase(
    current: str | None, min_member: int, members: pgs.Members, want: str | None
) -> None:
    assert pgs.next_phase(current, min_member, members) == want


def test_podgroup_status_patch_touches_only_our_fields() -> None:
    unsched = {"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources"}
    pg = {
        "spec": {"minMember": 2},
        "status": {"phase": "Inqueue", "conditions": [unsched], "running": 0},
    }
    patch = pgs.status_patch(pg, [pod(), pod()], now="T")
    assert patch["phase"] == "Running"
    assert patch["running"] == 2
    # the sidecar's condition is kept, ours is added
    assert patch["conditions"][0] == unsched
    assert patch["conditions"][1]["type"] == "Scheduled"
    assert patch["conditions"][1]["status"] == "True"
    assert set(patch) == {"phase", "running", "conditions"}
    # nothing changes the second time
    pg["status"].update(patch)
    assert pgs.status_patch(pg, [pod(), pod()]) == {}


@pytest.mark.parametrize(
    ("current", "action", "podgroups", "want"),
    [
        (None, None, 0, "Open"),
        ("Open", None, 5, "Open"),
        ("Open", "CloseQueue", 0, "Closed"),
        ("Open", "CloseQueue", 2, "Closing"),
        ("Closing", None, 2, "Closing"),
        ("Closing", None, 0, "Closed"),
        ("Closing", "OpenQueue", 2, "Open"),
        ("Closed", None, 3, "Closed"),
        ("Closed", "OpenQueue", 0, "Open"),
        ("Unknown", None, 0, "Unknown"),
    ],
)
def test_queue_next_state(
    current: str | None, action: str | None, podgroups: int, want: str
) -> None:
    assert qs.next_state(current, action, podgroups) == want


def test_queue_allocated_counts_bound_live_pods_only() -> None:
    members = [pod(cpu="500m"), pod(cpu="1"), pod("Succeeded"), pod("Pending", node="")]
    assert qs.allocated(members) == {"cpu": "1500m"}


def test_queue_status_patch_counts_and_drops_released_resources() -> None:
    queue = {"status": {"state": "Open", "allocated": {"cpu": "2", "nvidia.com/gpu": "8"}}}
    pgs_ = [
        {"status": {"phase": "Running"}},
        {"status": {"phase": "Inqueue"}},
        {"status": {}},  # no phase yet counts as Pending
    ]
    patch = qs.status_patch(queue, pgs_, [pod(cpu="1")])
    assert patch["running"] == 1 and patch["inqueue"] == 1 and patch["pending"] == 1
    # merge patch: a resource no longer held must be sent as null
    assert patch["allocated"] == {"cpu": "1", "nvidia.com/gpu": None}
    assert "state" not in patch
    assert qs.status_patch(queue, [], [], action="CloseQueue")["state"] == "Closed"


def test_queue_status_patch_always_has_allocated_once() -> None:
    """Volcano's Queue CRD requires status.allocated: an idle new queue gets {}."""
    assert qs.status_patch({"spec": {}}, [], [])["allocated"] == {}
    assert "allocated" not in qs.status_patch(
        {"status": {"state": "Open", "allocated": {}}}, [], []
    )
