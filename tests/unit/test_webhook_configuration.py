"""The webhook configurations: what the API server is told, and that manifests are current."""

from __future__ import annotations

from pyextender.api.names import ENABLED_LABEL
from webhook.configuration import (
    MUTATE_PODS,
    MUTATE_PODS_SHADOW,
    VALIDATE,
    mutating_configuration,
    stale_files,
    url_client_config,
    validating_configuration,
)

CC = url_client_config("https://127.0.0.1:9443/", "Q0E=")


def test_pod_webhooks_per_mode() -> None:
    hooks = {h["name"]: h for h in mutating_configuration(CC)["webhooks"]}
    enforce = hooks["gang-pods.pyextender.io"]
    shadow = hooks["gang-pods-shadow.pyextender.io"]
    assert enforce["clientConfig"] == {
        "url": "https://127.0.0.1:9443" + MUTATE_PODS,
        "caBundle": "Q0E=",
    }
    assert shadow["clientConfig"]["url"].endswith(MUTATE_PODS_SHADOW)
    assert enforce["namespaceSelector"] == {"matchLabels": {ENABLED_LABEL: "true"}}
    assert shadow["namespaceSelector"] == {"matchLabels": {ENABLED_LABEL: "shadow"}}
    assert enforce["failurePolicy"] == "Fail" and shadow["failurePolicy"] == "Ignore"
    for hook in hooks.values():
        assert hook["rules"][0]["operations"] == ["CREATE"]
        assert hook["sideEffects"] == "None"
        assert hook["admissionReviewVersions"] == ["v1"]
        assert hook["timeoutSeconds"] == 5


def test_validating_rules_cover_every_kind() -> None:
    (hook,) = validating_configuration(CC)["webhooks"]
    assert hook["clientConfig"]["url"].endswith(VALIDATE)
    assert hook["failurePolicy"] == "Fail"
    by_resource = {r["resources"][0]: r for r in hook["rules"]}
    assert set(by_resource) == {"podgroups", "queues", "jobs", "cronjobs", "commands", "hypernodes"}
    assert by_resource["queues"]["operations"] == ["CREATE", "UPDATE", "DELETE"]
    assert by_resource["jobs"]["apiGroups"] == ["batch.volcano.sh"]
    # UPDATEs only when spec changed, except Queues (tests/e2e/test_webhook.py sees it)
    (cond,) = hook["matchConditions"]
    assert "object.spec != oldObject.spec" in cond["expression"]
    assert "request.resource.resource == 'queues'" in cond["expression"]


def test_manifests_are_current() -> None:
    assert stale_files() == [], "run: python -m webhook.configuration"
