"""Releasing gated pods: adoption from the webhook's selectors, transitions only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from controllers.release import (
    AdoptionWatch,
    adopted,
    adopting_selectors,
    handover_plan,
    recreated,
    release_patch,
    selector_matches,
)
from pyextender.api.names import GANG_GATE, GATED_BY_WEBHOOK_ANNOTATION


@pytest.mark.parametrize(
    ("selector", "labels", "want"),
    [
        ({}, {}, True),
        ({"matchLabels": {"a": "1"}}, {"a": "1"}, True),
        ({"matchLabels": {"a": "1"}}, {"a": "2"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1"]}]}, {"a": "1"}, True),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {}, True),
        ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {}, False),
        ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {}, True),
    ],
)
def test_label_selectors(selector: dict[str, Any], labels: dict[str, str], want: bool) -> None:
    assert selector_matches(selector, labels) is want


def conf(*hooks: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "webhooks": [
            {"clientConfig": {"service": {"path": path}}, "namespaceSelector": sel}
            for path, sel in hooks
        ]
    }


ADOPT = {"matchLabels": {"pyextender.io/enabled": "true"}}
SHADOW = {"matchLabels": {"pyextender.io/enabled": "shadow"}}


def ns(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}}


def test_only_enforcing_pod_webhooks_adopt() -> None:
    c = conf(("/mutate/pods", ADOPT), ("/mutate/pods-shadow", SHADOW), ("/validate", {}))
    assert adopting_selectors(c) == [ADOPT]
    spaces = [
        ns("a", **{"pyextender.io/enabled": "true"}),
        ns("b"),
        ns("s", **{"pyextender.io/enabled": "shadow"}),
    ]
    assert adopted(spaces, adopting_selectors(c)) == {"a"}


def gated(name: str, namespace: str, ours: bool = True) -> dict[str, Any]:
    annotations = {GATED_BY_WEBHOOK_ANNOTATION: "true"} if ours else {}
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "resourceVersion": "7",
            "annotations": annotations,
        },
        "spec": {"schedulingGates": [{"name": "other"}, {"name": GANG_GATE}]},
    }


def test_release_patch_keeps_other_gates() -> None:
    patch = release_patch(gated("p", "a"))
    assert patch["spec"]["schedulingGates"] == [{"name": "other"}]
    assert patch["metadata"]["resourceVersion"] == "7"


def test_watch_releases_only_our_pods_outside_adopted_namespaces() -> None:
    labels: dict[str, dict[str, str]] = {"a": {"pyextender.io/enabled": "true"}, "b": {}}
    released: list[str] = []

    def release(pods: Sequence[Mapping[str, Any]]) -> int:
        released.extend(p["metadata"]["name"] for p in pods)
        return len(pods)

    watch = AdoptionWatch(
        lambda: conf(("/mutate/pods", ADOPT)),
        lambda: [ns(n, **lab) for n, lab in labels.items()],
        lambda: [
            gated("in-a", "a"),
            gated("theirs-b", "b", ours=False),  # gated by someone else: not ours to lift
            gated("unknown-ns", "c"),  # namespace not seen by the informer yet
        ],
        release,
    )
    assert watch.check() == 0  # a is adopted
    labels["a"] = {}
    assert watch.check() == 1 and released == ["in-a"]


def test_watch_does_nothing_without_the_configuration() -> None:
    watch = AdoptionWatch(
        lambda: None, lambda: [ns("a")], lambda: [gated("p", "a")], lambda p: len(p)
    )
    assert watch.check() == 0


def owned(kind_api: str) -> dict[str, Any]:
    pod = gated("p", "a")
    pod["metadata"]["ownerReferences"] = [
        {"apiVersion": kind_api, "kind": "X", "name": "o", "uid": "1", "controller": True}
    ]
    pod["spec"]["schedulerName"] = "volcano"
    return pod


@pytest.mark.parametrize(
    ("pod", "want"),
    [
        ({**gated("p", "a"), "spec": {"schedulerName": "volcano"}}, "recreate"),
        (owned("apps/v1"), "delete"),
        (owned("batch.volcano.sh/v1alpha1"), ""),  # its controller goes away too
        ({**gated("p", "a"), "spec": {"schedulerName": "volcano", "nodeName": "n"}}, ""),
        ({**gated("p", "a"), "spec": {"schedulerName": "other"}}, ""),
    ],
)
def test_handover_plan(pod: dict[str, Any], want: str) -> None:
    assert handover_plan(pod, "volcano") == want


def test_recreated_pod_is_the_same_pod_for_the_other_scheduler() -> None:
    pod = gated("p", "a")
    pod["metadata"].update(uid="u", creationTimestamp="t", labels={"app": "x"})
    pod["spec"].update(schedulerName="volcano", containers=[{"name": "c"}])
    out = recreated(pod, "default-scheduler")
    assert out["spec"]["schedulerName"] == "default-scheduler"
    assert out["spec"]["schedulingGates"] == [{"name": "other"}]  # ours gone, theirs kept
    assert out["spec"]["containers"] == [{"name": "c"}]
    assert out["metadata"]["labels"] == {"app": "x"}
    assert "uid" not in out["metadata"] and "resourceVersion" not in out["metadata"]
    assert GATED_BY_WEBHOOK_ANNOTATION not in out["metadata"]["annotations"]
