"""The admission webhook behind a real kube-apiserver: pod mutation per namespace mode,
Volcano CRD validation, and garbage sent straight to it.

Unless the session already runs the webhook, it is registered for this module
only and removed afterwards, so the rest of the session sees a cluster without it.
"""

from __future__ import annotations

import http.client
import itertools
import json
import os
import socket
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from devcluster.cluster import Cluster, ClusterState
from devcluster.webhook import ROLE as WEBHOOK_ROLE
from devcluster.webhook import disable_webhook, enable_webhook, webhook_url
from pyextender.api.names import (
    ENABLED_LABEL,
    GANG_GATE,
    GROUP_NAME_ANNOTATION,
    RELEASED_ANNOTATION,
)
from pyextender.api.volcano.queue import HIERARCHY, HIERARCHY_WEIGHTS

pytestmark = pytest.mark.e2e

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
_ns = itertools.count()


@pytest.fixture(scope="module")
def webhook(cluster: Cluster) -> Iterator[str]:
    """Base URL of the running, registered webhook; removed afterwards if this module added it."""
    already = cluster.status()["processes"].get("webhook") == "running"
    enable_webhook(cluster)
    enable_webhook(cluster)  # idempotent: a second call changes nothing
    try:
        yield webhook_url(cluster)
    finally:
        if not already:
            disable_webhook(cluster)


@pytest.fixture(scope="module")
def tls(state: ClusterState) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(Path(state.dir) / "pki" / "ca.crt"))


@pytest.fixture(scope="module")
def crds(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def make_namespace(core: client.CoreV1Api, mode: str | None) -> str:
    name = f"wh{os.getpid()}-{next(_ns)}"
    labels = {ENABLED_LABEL: mode} if mode else {}
    core.create_namespace({"metadata": {"name": name, "labels": labels}})
    return name


@pytest.fixture
def namespaces(core: client.CoreV1Api) -> Iterator[dict[str, str]]:
    """One namespace per mode: adopted ("true"), "shadow", and not adopted ("off")."""
    made = {
        mode: make_namespace(core, None if mode == "off" else mode)
        for mode in ("true", "shadow", "off")
    }
    yield made
    for ns in made.values():
        core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)


def gang_pod(name: str, group: str | None = "pg-1") -> dict[str, Any]:
    annotations = {GROUP_NAME_ANNOTATION: group} if group else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}
            ],
        },
    }


def gates(pod: Any) -> list[str]:
    return [g.name for g in pod.spec.scheduling_gates or []]


def webhook_metrics(url: str, tls: ssl.SSLContext) -> dict[str, float]:
    with urllib.request.urlopen(f"{url}/metrics", context=tls, timeout=5) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def denial(exc: client.ApiException) -> str:
    return str(json.loads(exc.body)["message"])


# ---------------------------------------------------------------- pod mutation


def test_gang_pod_in_adopted_namespace_is_gated_and_routed(
    webhook: str, core: client.CoreV1Api, namespaces: dict[str, str]
) -> None:
    ns = namespaces["true"]
    created = core.create_namespaced_pod(ns, gang_pod("w-0"))
    assert created.spec.scheduler_name == "volcano"
    assert gates(created) == [GANG_GATE]
    # gated: no scheduler may place it until the gang is admitted. Positive control: a
    # plain pod created after it in the same namespace (not a gang member, so not gated)
    # gets bound; by then a scheduler would have placed w-0 too, were it not gated.
    control = gang_pod("w-0-control", group=None)
    core.create_namespaced_pod(ns, control)
    deadline = time.monotonic() + 60
    while not core.read_namespaced_pod("w-0-control", ns).spec.node_name:
        assert time.monotonic() < deadline, "the control pod was not bound within 60s"
        time.sleep(0.2)
    pod = core.read_namespaced_pod("w-0", ns)
    assert not pod.spec.node_name
    reasons = {c.reason for c in pod.status.conditions or [] if c.type == "PodScheduled"}
    assert reasons == {"SchedulingGated"}


def test_existing_gates_are_kept(
    webhook: str, core: client.CoreV1Api, namespaces: dict[str, str]
) -> None:
    pod = gang_pod("w-1")
    pod["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    created = core.create_namespaced_pod(namespaces["true"], pod)
    assert gates(created) == ["example.com/quota", GANG_GATE]


def test_non_gang_pod_in_adopted_namespace_is_untouched(
    webhook: str, core: client.CoreV1Api, namespaces: dict[str, str]
) -> None:
    created = core.create_namespaced_pod(namespaces["true"], gang_pod("plain", group=None))
    assert created.spec.scheduler_name == "default-scheduler"
    assert gates(created) == []


def test_other_scheduler_is_respected(
    webhook: str, core: client.CoreV1Api, namespaces: dict[str, str]
) -> None:
    pod = gang_pod("other")
    pod["spec"]["schedulerName"] = "my-scheduler"
    created = core.create_namespaced_pod(namespaces["true"], pod)
    assert created.spec.scheduler_name == "my-scheduler"
    assert gates(created) == []


def test_gang_pod_in_other_namespace_is_untouched(
    webhook: str, core: client.CoreV1Api, namespaces: dict[str, str]
) -> None:
    created = core.create_namespaced_pod(namespaces["off"], gang_pod("w-0"))
    assert created.spec.scheduler_name == "default-scheduler"
    assert gates(created) == []


def test_shadow_namespace_is_untouched_but_counted(
    webhook: str, tls: ssl.SSLContext, core: client.CoreV1Api, namespaces: dict[str, str]
) -> None:
    key = 'pyextender_webhook_shadow_changes_total{change="scheduling_gate"}'
    before = webhook_metrics(webhook, tls).get(key, 0.0)
    created = core.create_namespaced_pod(namespaces["shadow"], gang_pod("w-0"))
    assert created.spec.scheduler_name == "default-scheduler"
    assert gates(created) == []
    assert created.metadata.annotations == {GROUP_NAME_ANNOTATION: "pg-1"}
    assert webhook_metrics(webhook, tls).get(key, 0.0) == before + 1


# ---------------------------------------------------------------- CRD validation

QUEUE = ("scheduling.volcano.sh", "v1beta1", "queues")
PODGROUP = ("scheduling.volcano.sh", "v1beta1", "podgroups")
JOB = ("batch.volcano.sh", "v1alpha1", "jobs")


def queue_doc(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
    }


INVALID: list[tuple[str, tuple[str, str, str], dict[str, Any], list[str]]] = [
    (
        "queue guarantee without deserved",
        QUEUE,
        queue_doc("wh-bad-guarantee", guarantee={"resource": {"cpu": "1"}}),
        ['Queue "wh-bad-guarantee" is invalid', "deserved[cpu] must be >= guarantee[cpu]=1"],
    ),
    (
        "queue missing parent",
        QUEUE,
        queue_doc("wh-orphan", parent="no-such-queue"),
        ["spec.parent", '"no-such-queue" does not exist'],
    ),
    (
        "queue deserved over capability",
        QUEUE,
        queue_doc("wh-over", capability={"cpu": "4"}, deserved={"cpu": "8"}),
        ["spec.deserved[cpu]: deserved[cpu]=8 must be <= capability[cpu]=4"],
    ),
    (
        "podgroup missing queue",
        PODGROUP,
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "pg-bad"},
            "spec": {"minMember": 2, "queue": "no-such-queue"},
        },
        ['PodGroup "pg-bad" is invalid', "spec.queue", '"no-such-queue" does not exist'],
    ),
    (
        # the API server refuses "%" in a path (400): no lookup, a plain denial, not a 503
        "podgroup queue that cannot be a name",
        PODGROUP,
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "pg-bad-name"},
            "spec": {"minMember": 2, "queue": "%"},
        },
        ['PodGroup "pg-bad-name" is invalid', "spec.queue", "a queue name is a DNS subdomain"],
    ),
    (
        "job minAvailable over replicas",
        JOB,
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "job-bad"},
            "spec": {
                "minAvailable": 5,
                "tasks": [
                    {
                        "name": "w",
                        "replicas": 2,
                        "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}},
                    },
                    {
                        "name": "w",
                        "replicas": 1,
                        "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}},
                    },
                ],
            },
        },
        [
            'Job "job-bad" is invalid',
            "spec.tasks[1].name: duplicate task name",
            "spec.minAvailable: must be <= the sum of task replicas (3), got 5",
        ],
    ),
]


@pytest.mark.parametrize(
    ("where", "doc", "expected"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID]
)
def test_invalid_objects_are_rejected_naming_the_field(
    webhook: str,
    crds: client.CustomObjectsApi,
    namespaces: dict[str, str],
    where: tuple[str, str, str],
    doc: dict[str, Any],
    expected: list[str],
) -> None:
    with pytest.raises(client.ApiException) as info:
        if where == QUEUE:
            crds.create_cluster_custom_object(*where, doc)
        else:
            crds.create_namespaced_custom_object(*where[:2], namespaces["off"], where[2], doc)
    assert info.value.status == 422
    message = denial(info.value)
    assert 'admission webhook "volcano-crds.pyextender.io" denied the request' in message
    for fragment in expected:
        assert fragment in message, message


def test_queue_tree_rules(webhook: str, crds: client.CustomObjectsApi) -> None:
    made: list[str] = []
    try:
        for name, parent in (("wh-a", ""), ("wh-b", "wh-a")):
            crds.create_cluster_custom_object(*QUEUE, queue_doc(name, parent=parent or "root"))
            made.append(name)
        # wh-a under its own child: a cycle
        with pytest.raises(client.ApiException) as info:
            crds.patch_cluster_custom_object(*QUEUE, "wh-a", {"spec": {"parent": "wh-b"}})
        assert "wh-a -> wh-b -> wh-a" in denial(info.value)
        # a parent with children stays
        with pytest.raises(client.ApiException) as info:
            crds.delete_cluster_custom_object(*QUEUE, "wh-a")
        assert info.value.status == 403
        assert 'queue "wh-a" has child queues (wh-b)' in denial(info.value)
        # a weight change is fine
        crds.patch_cluster_custom_object(*QUEUE, "wh-b", {"spec": {"weight": 4}})
    finally:
        for name in reversed(made):
            crds.delete_cluster_custom_object(*QUEUE, name)


def create_group(crds: client.CustomObjectsApi, ns: str, name: str, min_member: int) -> None:
    body = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": min_member},
    }
    crds.create_namespaced_custom_object(*PODGROUP[:2], ns, PODGROUP[2], body)


def test_spec_changes_and_queue_updates_are_still_judged(
    webhook: str, crds: client.CustomObjectsApi, namespaces: dict[str, str]
) -> None:
    """The API server skips the webhook only for UPDATEs that leave spec alone
    (SPEC_CHANGED_CEL; the next test shows one skipped): a PodGroup spec change is
    still judged, and so is a Queue UPDATE that touches only its annotations (Queue
    rules read the hierarchy annotations). Judged by verdicts, not by the webhook's
    counters, which other objects of the session move too."""
    ns = namespaces["off"]
    create_group(crds, ns, "pg-judged", 2)
    with pytest.raises(client.ApiException) as info:
        crds.patch_namespaced_custom_object(
            *PODGROUP[:2], ns, PODGROUP[2], "pg-judged", {"spec": {"queue": "no-such-queue"}}
        )
    assert info.value.status == 422 and "no-such-queue" in denial(info.value)
    crds.create_cluster_custom_object(*QUEUE, queue_doc("wh-judged"))
    try:
        with pytest.raises(client.ApiException) as info:
            crds.patch_cluster_custom_object(
                *QUEUE,
                "wh-judged",
                {"metadata": {"annotations": {HIERARCHY: "root/wh-judged"}}},
            )
        assert info.value.status == 422
        assert f"{HIERARCHY_WEIGHTS}" in denial(info.value)
    finally:
        crds.delete_cluster_custom_object(*QUEUE, "wh-judged")


def test_a_gang_is_released_while_the_webhook_is_down(
    webhook: str, cluster: Cluster, crds: client.CustomObjectsApi, namespaces: dict[str, str]
) -> None:
    """failurePolicy is Fail, so while the webhook is down every request sent to it is
    refused; the sidecar's release of a gang (its PodGroup's released-pods annotation)
    is not sent, so gangs keep being released. A spec change still waits for it."""
    ns = namespaces["off"]
    create_group(crds, ns, "pg-down", 1)
    cluster.stop_role(WEBHOOK_ROLE)
    try:
        crds.patch_namespaced_custom_object(
            *PODGROUP[:2],
            ns,
            PODGROUP[2],
            "pg-down",
            {"metadata": {"annotations": {RELEASED_ANNOTATION: "uid-1"}}},
        )
        with pytest.raises(client.ApiException) as info:
            crds.patch_namespaced_custom_object(
                *PODGROUP[:2], ns, PODGROUP[2], "pg-down", {"spec": {"minMember": 2}}
            )
        assert 'failed calling webhook "volcano-crds.pyextender.io"' in denial(info.value)
    finally:
        enable_webhook(cluster)
    got = crds.get_namespaced_custom_object(*PODGROUP[:2], ns, PODGROUP[2], "pg-down")
    assert got["metadata"]["annotations"][RELEASED_ANNOTATION] == "uid-1"
    assert got["spec"]["minMember"] == 1


def test_volcano_examples_are_accepted(
    webhook: str, core: client.CoreV1Api, crds: client.CustomObjectsApi
) -> None:
    """Every Volcano object in examples/ passes the schema and the webhook unchanged."""
    docs = [
        (path.name, doc)
        for path in sorted(EXAMPLES.glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc and "volcano.sh/" in doc.get("apiVersion", "")
    ]
    assert {d["kind"] for _, d in docs} >= {"Queue", "PodGroup", "Job", "HyperNode"}
    for ns in {d["metadata"]["namespace"] for _, d in docs if d["metadata"].get("namespace")}:
        try:
            core.create_namespace({"metadata": {"name": ns}})
        except client.ApiException as exc:
            if exc.status != 409:
                raise
    # queues for real (jobs and podgroups must find them), the rest as dry runs,
    # so other tests' schedulers never see example HyperNodes or gangs
    queues = [d for _, d in docs if d["kind"] == "Queue"]
    try:
        for q in queues:
            crds.create_cluster_custom_object(*QUEUE, q)
        for name, doc in docs:
            if doc["kind"] == "Queue":
                continue
            group, version = doc["apiVersion"].split("/")
            plural = doc["kind"].lower() + "s"
            try:
                if doc["metadata"].get("namespace"):
                    crds.create_namespaced_custom_object(
                        group, version, doc["metadata"]["namespace"], plural, doc, dry_run="All"
                    )
                else:
                    crds.create_cluster_custom_object(group, version, plural, doc, dry_run="All")
            except client.ApiException as exc:
                raise AssertionError(f"{name}: {doc['kind']} rejected: {exc.body}") from None
    finally:
        for q in queues:
            crds.delete_cluster_custom_object(*QUEUE, q["metadata"]["name"])


# ---------------------------------------------------------------- garbage


def _post(url: str, tls: ssl.SSLContext, body: bytes, headers: dict[str, str]) -> tuple[int, str]:
    req = urllib.request.Request(url, data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(req, context=tls, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


GARBAGE: list[tuple[str, str, bytes, int, str]] = [
    ("malformed json", "/mutate/pods", b'{"apiVersion": "admission', 400, "malformed JSON"),
    ("binary", "/validate", os.urandom(4096), 400, "malformed JSON"),
    ("a list", "/validate", b"[]", 400, "must be a JSON object"),
    (
        "v1beta1 review",
        "/validate",
        json.dumps({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}).encode(),
        400,
        "apiVersion must be",
    ),
    (
        "not a review",
        "/mutate/pods",
        json.dumps({"apiVersion": "v1", "kind": "Pod"}).encode(),
        400,
        "kind must be",
    ),
    (
        "review without request",
        "/mutate/pods-shadow",
        json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode(),
        400,
        "request: required",
    ),
    ("unknown path", "/mutate/nodes", b"{}", 404, "unknown path"),
]


def test_garbage_gets_clear_errors_and_the_webhook_keeps_serving(
    webhook: str,
    tls: ssl.SSLContext,
    cluster: Cluster,
    core: client.CoreV1Api,
    namespaces: dict[str, str],
) -> None:
    headers = {"Content-Type": "application/json"}
    for case, path, body, status, message in GARBAGE:
        got, text = _post(webhook + path, tls, body, headers)
        assert got == status, (case, got, text)
        assert message in json.loads(text)["error"], (case, text)
    # a body larger than the limit (8 MiB), refused from its Content-Length
    host, port = "127.0.0.1", int(webhook.rsplit(":", 1)[1])
    conn = http.client.HTTPSConnection(host, port, context=tls, timeout=10)
    conn.putrequest("POST", "/validate")
    conn.putheader("Content-Length", str(64 * 2**20))
    conn.endheaders()
    conn.send(b"x" * 65536)
    resp = conn.getresponse()
    assert resp.status == 413 and "exceeds" in json.loads(resp.read())["error"]
    conn.close()
    # plain HTTP and half-open TLS on the HTTPS port, then hang up
    with socket.create_connection((host, port), timeout=5) as raw:
        raw.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        raw.recv(100)
    with socket.create_connection((host, port), timeout=5) as raw:
        raw.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
    # still alive, still serving the API server
    assert cluster.status()["processes"]["webhook"] == "running"
    with urllib.request.urlopen(f"{webhook}/healthz", context=tls, timeout=5) as r:
        assert r.status == 200
    created = core.create_namespaced_pod(namespaces["true"], gang_pod("after-garbage"))
    assert gates(created) == [GANG_GATE]
    m = webhook_metrics(webhook, tls)
    assert m.get('pyextender_webhook_bad_requests_total{reason="malformed_json"}', 0) >= 2
    assert m.get('pyextender_webhook_bad_requests_total{reason="too_large"}', 0) >= 1
