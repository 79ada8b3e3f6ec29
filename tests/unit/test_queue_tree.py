"""The queue tree's part of OpenQueue/CloseQueue (controllers.queue_status.tree_steps),
after Volcano's pkg/controllers/queue/queue_controller_action.go."""

from __future__ import annotations

from typing import Any

from controllers.queue_status import (
    CLOSED_BY_PARENT,
    TreeSteps,
    allocated,
    children_over_guarantee,
    tree_steps,
)


def q(name: str, state: str = "Open", parent: str = "", mark: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if mark is not None:
        meta["annotations"] = {CLOSED_BY_PARENT: mark}
    return {"metadata": meta, "spec": {"parent": parent}, "status": {"state": state}}


def test_close_cascades_to_open_children_only() -> None:
    kids = [q("a", parent="t"), q("b", "Closed", parent="t"), q("c", "Closing", parent="t")]
    steps = tree_steps(q("t"), q("root"), kids, "CloseQueue")
    assert steps == TreeSteps(close_children=("a",))


def test_close_of_a_shut_queue_does_not_cascade_again() -> None:
    assert tree_steps(q("t", "Closing"), q("root"), [q("a", parent="t")], "CloseQueue") == (
        TreeSteps()
    )


def test_root_cannot_be_closed() -> None:
    assert "root" in tree_steps(q("root"), None, [q("t")], "CloseQueue").refuse


def test_open_reopens_only_children_closed_by_parent() -> None:
    kids = [
        q("a", "Closed", "t", mark="true"),
        q("b", "Closed", "t"),
        q("c", "Closed", "t", "false"),
    ]
    steps = tree_steps(q("t", "Closed"), q("root"), kids, "OpenQueue")
    assert steps.open_children == ("a",) and steps.mark == "false" and not steps.refuse


def test_open_is_refused_under_a_shut_parent_but_not_under_root() -> None:
    child = q("a", "Closed", parent="t", mark="true")
    refused = tree_steps(child, q("t", "Closing"), [], "OpenQueue")
    assert refused.refuse == "its parent queue t is Closing; open the parent queue first"
    assert not tree_steps(q("t", "Closed", "root"), q("root", "Closed"), [], "OpenQueue").refuse


def test_sync_follows_the_parent() -> None:
    # an open queue under a shut parent closes, marked
    assert tree_steps(q("a", parent="t"), q("t", "Closed"), [], None) == TreeSteps(
        follow="CloseQueue", mark="true"
    )
    # reopened parent: a queue it closed opens, one closed by its own command stays
    assert tree_steps(q("a", "Closed", "t", "true"), q("t"), [], None).follow == "OpenQueue"
    assert tree_steps(q("a", "Closed", "t"), q("t"), [], None) == TreeSteps()
    assert tree_steps(q("a", "Closed", "t", "false"), q("t"), [], None) == TreeSteps()


def test_allocated_lists_gpu_sharing_resources() -> None:
    """Volcano's queue allocated is the pods' requests, scalar resources included (its
    gpushare device adds nothing of its own: AddQueueResource is empty)."""
    pod = {
        "spec": {
            "nodeName": "n0",
            "containers": [
                {"name": "c", "resources": {"requests": {"cpu": "1", "volcano.sh/gpu-number": "2"},
                                            "limits": {"volcano.sh/gpu-number": "2"}}}
            ],
        },
        "status": {"phase": "Running"},
    }  # fmt: skip
    assert allocated([pod]) == {"cpu": "1", "volcano.sh/gpu-number": "2"}


def g(name: str, gpus: str | None, parent: str = "") -> dict[str, Any]:
    q_ = q(name, parent=parent)
    if gpus is not None:
        q_["spec"]["guarantee"] = {"resource": {"nvidia.com/gpu": gpus}}
    return q_


def test_children_guarantees_must_fit_the_parents() -> None:
    kids = [g("a", "3", "t"), g("b", "3", "t"), g("c", None, "t")]
    assert children_over_guarantee(g("t", "4"), kids) == (
        "the guarantees of child queues (a, b, c) exceed this queue's: nvidia.com/gpu 6 > 4"
    )
    assert children_over_guarantee(g("t", "6"), kids) == ""
    assert children_over_guarantee(g("t", None), kids) == ""  # reserves the children's sum
