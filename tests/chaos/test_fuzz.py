"""Hypothesis-driven bodies against the live extender verbs and the live webhook.

Each endpoint gets PYEXTENDER_FUZZ_EXAMPLES inputs (default 1,000; the long mode
is 10,000): a valid envelope with fields replaced by odd values (wrong types, huge
numbers, deep nesting, unicode, nulls) and raw bytes. Every answer must come
within the per-request timeout and be below 500 (an AdmissionReview that reports
an internal error counts as a 5xx); afterwards the process still serves, a real
filter call answers as before, the cache is unchanged and no pod got bound.
Binds name pods that do not exist, in a namespace that does not exist.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from kubernetes import client

from devcluster.cluster import Cluster
from devcluster.webhook import enable_webhook, webhook_url
from pyextender.api.names import ENABLED_LABEL, GANG_GATE, GROUP_NAME_ANNOTATION
from tests.chaos.conftest import api_client, start_cluster
from tests.chaos.fuzz_bodies import bodies
from tests.chaos.http_calls import Endpoint, decoded
from tests.e2e.kube import metrics

pytestmark = pytest.mark.e2e

EXAMPLES = int(os.environ.get("PYEXTENDER_FUZZ_EXAMPLES", "1000"))
"""Inputs per endpoint (the long mode sets 10000)."""
GHOST_NS = "fuzz-no-such-namespace"
"""Binds go here: the namespace does not exist, so no fuzzed bind can bind a pod."""
REAL_NS = "fuzz-real"
"""An adopted namespace holding one gated pod that must stay unbound."""


def _pod(name: str, namespace: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
        "spec": {
            "schedulerName": "volcano",
            "containers": [
                {
                    "name": "c",
                    "image": "busybox",
                    "resources": {
                        "requests": {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "1"},
                        "limits": {"nvidia.com/gpu": "1"},
                    },
                }
            ],
        },
        "status": {"phase": "Pending"},
    }


NODES = ["kwok-node-0", "kwok-node-1"]
GHOST_POD = _pod("ghost", GHOST_NS)

NODE_LIST = {
    "items": [
        {
            "metadata": {"name": n, "labels": {"kubernetes.io/hostname": n}},
            "status": {"allocatable": {"cpu": "16", "memory": "128Gi", "nvidia.com/gpu": "8"}},
        }
        for n in NODES
    ]
}

EXTENDER_BASES: dict[str, dict[str, Any]] = {
    "/filter": {"Pod": GHOST_POD, "NodeNames": NODES},
    "/prioritize": {"Pod": GHOST_POD, "NodeNames": NODES},
    "/preempt": {
        "Pod": GHOST_POD,
        "NodeNameToVictims": {
            "kwok-node-0": {"Pods": [_pod("v", GHOST_NS)], "NumPDBViolations": 0}
        },
        "NodeNameToMetaVictims": {
            "kwok-node-1": {"Pods": [{"UID": "uid-v"}], "NumPDBViolations": 0}
        },
    },
    "/bind": {"PodName": "ghost", "PodNamespace": GHOST_NS, "PodUID": "u", "Node": "kwok-node-0"},
}


EXTENDER_EXTRA: dict[str, list[dict[str, Any]]] = {
    "/filter": [{"Pod": GHOST_POD, "Nodes": NODE_LIST}],
    "/prioritize": [{"Pod": GHOST_POD, "Nodes": NODE_LIST}],
    "/preempt": [
        {"Pod": GHOST_POD, "NodeNameToVictims": EXTENDER_BASES["/preempt"]["NodeNameToVictims"]}
    ],
}
"""More envelopes per verb (the full node list; full victims only)."""

VOLCANO = "scheduling.volcano.sh"
VALIDATED: list[tuple[dict[str, Any], dict[str, str], str]] = [
    (
        {
            "apiVersion": f"{VOLCANO}/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "pg", "namespace": REAL_NS},
            "spec": {"minMember": 2, "queue": "default", "minResources": {"cpu": "1"}},
        },
        {"group": VOLCANO, "version": "v1beta1", "kind": "PodGroup"},
        "podgroups",
    ),
    (
        {
            "apiVersion": f"{VOLCANO}/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "q"},
            "spec": {
                "weight": 1,
                "parent": "root",
                "capability": {"cpu": "8", "nvidia.com/gpu": "4"},
                "deserved": {"cpu": "4"},
                "guarantee": {"resource": {"cpu": "1"}},
            },
        },
        {"group": VOLCANO, "version": "v1beta1", "kind": "Queue"},
        "queues",
    ),
    (
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "j", "namespace": REAL_NS},
            "spec": {
                "minAvailable": 2,
                "queue": "default",
                "schedulerName": "volcano",
                "policies": [{"event": "PodFailed", "action": "RestartJob"}],
                "tasks": [
                    {
                        "name": "worker",
                        "replicas": 2,
                        "minAvailable": 2,
                        "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}},
                    }
                ],
            },
        },
        {"group": "batch.volcano.sh", "version": "v1alpha1", "kind": "Job"},
        "jobs",
    ),
]
"""Objects the validating webhook judges: (object, kind, resource)."""


def _reviews(path: str) -> list[dict[str, Any]]:
    """AdmissionReviews for ``path``; the first is the one replayed before and after."""
    if path == "/validate":
        out = [_review(obj, kind, res) for obj, kind, res in VALIDATED]
        update = _review(*VALIDATED[0])
        update["request"]["operation"] = "UPDATE"
        update["request"]["oldObject"] = VALIDATED[0][0]
        return [*out, update]
    obj = _pod("p", REAL_NS)
    obj["metadata"]["annotations"] = {GROUP_NAME_ANNOTATION: "pg"}
    return [_review(obj, {"group": "", "version": "v1", "kind": "Pod"}, "pods")]


def _review(obj: dict[str, Any], kind: dict[str, str], resource: str) -> dict[str, Any]:
    group, version = kind["group"], kind["version"]
    resource_ = {"group": group, "version": version, "resource": resource}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "0d5c6e3a-1111-2222-3333-444455556666",
            "kind": kind,
            "resource": resource_,
            "namespace": obj["metadata"].get("namespace", ""),
            "name": obj["metadata"]["name"],
            "operation": "CREATE",
            "userInfo": {"username": "fuzzer"},
            "object": obj,
            "oldObject": None,
            "dryRun": False,
        },
    }


WEBHOOK_PATHS = ("/mutate/pods", "/mutate/pods-shadow", "/validate")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory, "fuzz")
    try:
        c.start_sidecar()
        c.wait_sidecar_ready()
        enable_webhook(c)
        st_ = c.state
        assert st_ is not None
        core = client.CoreV1Api(api_client(st_))
        core.create_namespace({"metadata": {"name": REAL_NS, "labels": {ENABLED_LABEL: "true"}}})
        canary = _pod("canary", REAL_NS)
        canary["metadata"] = {"name": "canary", "namespace": REAL_NS}
        canary["spec"]["schedulingGates"] = [{"name": GANG_GATE}]
        canary.pop("status")
        core.create_namespaced_pod(REAL_NS, canary)
        yield c
    finally:
        c.down(quiet=True)


def _bound_pods(c: Cluster) -> set[str]:
    st_ = c.state
    assert st_ is not None
    core = client.CoreV1Api(api_client(st_))
    return {
        f"{p.metadata.namespace}/{p.metadata.name}@{p.spec.node_name}"
        for p in core.list_pod_for_all_namespaces().items
        if p.spec.node_name
    }


def _cache(url: str) -> tuple[float, float]:
    m = metrics(url)
    return m["pyextender_cache_nodes"], m["pyextender_cache_pods"]


def _fuzz(
    endpoint: Endpoint,
    path: str,
    bases: list[dict[str, Any]],
    check: Callable[[int, bytes], str],
) -> tuple[int, float]:
    """Runs EXAMPLES bodies; returns (inputs sent, seconds)."""
    sent = [0]

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        derandomize=False,
    )
    @given(body=bodies(bases))
    def one(body: bytes) -> None:
        sent[0] += 1
        status, data = endpoint.post(path, body)
        problem = check(status, data)
        assert not problem, f"POST {path} {body[:300]!r} -> {status}: {problem} {data[:500]!r}"

    start = time.monotonic()
    one()
    return sent[0], time.monotonic() - start


def _extender_check(status: int, data: bytes) -> str:
    if status >= 500:
        return "server error"
    return ""


def _webhook_check(status: int, data: bytes) -> str:
    if status >= 500:
        return "server error"
    if status == 200:
        doc = decoded(data)
        code = ((doc.get("response") or {}).get("status") or {}).get("code", 0)
        if isinstance(code, int) and code >= 500:
            return "AdmissionReview reports an internal error"
    return ""


def _real_filter(ext: Endpoint) -> Any:
    status, data = ext.post("/filter", json.dumps(EXTENDER_BASES["/filter"]).encode())
    assert status == 200, data
    return decoded(data)


@pytest.mark.parametrize("path", list(EXTENDER_BASES))
def test_fuzz_extender_verb(cluster: Cluster, path: str) -> None:
    st_ = cluster.state
    assert st_ is not None
    url = st_.extender_url
    ext = Endpoint(url)
    before_cache, before_filter, before_bound = _cache(url), _real_filter(ext), _bound_pods(cluster)
    # the gauges read the cache when scraped: the reading to compare with shows every node
    nodes = len(client.CoreV1Api(api_client(st_)).list_node().items)
    assert before_cache[0] == nodes, f"the cache shows {before_cache[0]:.0f} of {nodes} nodes"
    bases = [EXTENDER_BASES[path], *EXTENDER_EXTRA.get(path, [])]
    sent, took = _fuzz(ext, path, bases, _extender_check)
    print(f"fuzz {path}: {sent} inputs in {took:.1f}s, 0 5xx")
    assert sent >= EXAMPLES, f"only {sent} inputs were sent"
    status, _ = Endpoint(url).get("/healthz")
    assert status == 200, "the sidecar stopped serving /healthz"
    assert _real_filter(ext) == before_filter, "the same filter call answers differently now"
    # a reading can show a fuzzed bind still in flight (assumed, forgotten when the API
    # server answers 404); an assumption the sidecar kept would never go away
    deadline = time.monotonic() + 5
    while _cache(url) != before_cache and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _cache(url) == before_cache, "the fuzzed calls changed the sidecar's cache"
    assert _bound_pods(cluster) == before_bound, "a fuzzed call bound a pod"


@pytest.mark.parametrize("path", WEBHOOK_PATHS)
def test_fuzz_webhook(cluster: Cluster, path: str) -> None:
    st_ = cluster.state
    assert st_ is not None
    ca = str(Path(st_.dir) / "pki" / "ca.crt")
    hook = Endpoint(webhook_url(cluster), ca=ca)
    real = json.dumps(_reviews(path)[0]).encode()
    status, data = hook.post(path, real)
    assert status == 200, data
    before = decoded(data)["response"]
    sent, took = _fuzz(hook, path, _reviews(path), _webhook_check)
    print(f"fuzz {path}: {sent} inputs in {took:.1f}s, 0 5xx")
    assert sent >= EXAMPLES, f"only {sent} inputs were sent"
    status, _ = hook.get("/healthz")
    assert status == 200, "the webhook stopped serving /healthz"
    status, data = hook.post(path, real)
    assert status == 200, data
    assert decoded(data)["response"] == before, "the same review answers differently now"


def test_fuzz_left_the_cluster_alone(cluster: Cluster) -> None:
    st_ = cluster.state
    assert st_ is not None
    core = client.CoreV1Api(api_client(st_))
    canary = core.read_namespaced_pod("canary", REAL_NS)
    assert not canary.spec.node_name, "the canary pod got bound"
    assert core.list_namespaced_pod(GHOST_NS).items == []
