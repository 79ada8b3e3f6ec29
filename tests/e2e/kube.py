"""Small helpers for e2e tests: pod manifests, waiting, metrics scraping."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any, TypeVar

from kubernetes import client

T = TypeVar("T")


def pod(
    name: str,
    namespace: str,
    gpus: int = 0,
    cpu: str = "1",
    scheduler: str = "volcano",
    priority_class: str | None = None,
    gpu_resource: str = "nvidia.com/gpu",
) -> dict[str, Any]:
    requests: dict[str, str] = {"cpu": cpu, "memory": "1Gi"}
    limits: dict[str, str] = {}
    if gpus:
        requests[gpu_resource] = str(gpus)
        limits[gpu_resource] = str(gpus)
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "resources": {"requests": requests, "limits": limits},
            }
        ],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def wait_for(
    what: str, fn: Callable[[], T | None], timeout: float = 30.0, interval: float = 0.1
) -> T:
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def pods(core: client.CoreV1Api, namespace: str) -> list[Any]:
    return list(core.list_namespaced_pod(namespace).items)


def bound(core: client.CoreV1Api, namespace: str) -> dict[str, str]:
    """pod name -> node name for bound pods."""
    return {p.metadata.name: p.spec.node_name for p in pods(core, namespace) if p.spec.node_name}


def events_for(core: client.CoreV1Api, namespace: str, pod_name: str) -> list[str]:
    evs = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={pod_name}")
    return [f"{e.reason}: {e.message}" for e in evs.items]


def reasons_for(
    core: client.CoreV1Api, namespace: str, reason: str, expected: set[str], timeout: float = 10.0
) -> set[str]:
    """The names of the objects with a ``reason`` event in ``namespace``, once they include
    ``expected`` (or at the timeout). The sidecar posts an eviction's event after the
    eviction, without waiting for it, so it can land a moment after what the eviction let
    happen; callers still assert the exact set."""
    names: set[str] = set()
    deadline = time.monotonic() + timeout
    while True:
        evs = core.list_namespaced_event(namespace, field_selector=f"reason={reason}").items
        names = {e.involved_object.name for e in evs}
        if expected <= names or time.monotonic() >= deadline:
            return names
        time.sleep(0.1)


def metrics(url: str) -> dict[str, float]:
    """Prometheus text -> {"name{labels}": value} (samples only)."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def decisions(url: str) -> list[dict[str, Any]]:
    """The sidecar's recent per-pod decisions (filter, prioritize, bind ...)."""
    with urllib.request.urlopen(f"{url}/debug/decisions", timeout=5) as r:
        rows: list[dict[str, Any]] = json.loads(r.read())
    return rows


def verb_count(url: str, verb: str) -> float:
    return metrics(url).get(f'pyextender_verb_requests_total{{code="200",verb="{verb}"}}', 0.0)


def post(
    url: str, body: bytes, method: str = "POST", headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    req = urllib.request.Request(url, data=body if method == "POST" else None, method=method)
    for k, v in (headers or {"Content-Type": "application/json"}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, _body(r.read())
    except urllib.error.HTTPError as e:
        return e.code, _body(e.read())


def _body(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


def gpus_per_node(core: client.CoreV1Api) -> dict[str, int]:
    """Sum of nvidia.com/gpu requests of non-terminated bound pods, per node."""
    used: dict[str, int] = {}
    for p in core.list_pod_for_all_namespaces().items:
        if not p.spec.node_name or p.status.phase in ("Succeeded", "Failed"):
            continue
        for c in p.spec.containers:
            req = (c.resources.requests or {}) if c.resources else {}
            used[p.spec.node_name] = used.get(p.spec.node_name, 0) + int(
                req.get("nvidia.com/gpu", 0)
            )
    return used


GROUP = ("scheduling.volcano.sh", "v1beta1")


def podgroup(
    api: client.ApiClient,
    namespace: str,
    name: str,
    min_member: int,
    queue: str = "default",
    annotations: dict[str, str] | None = None,
) -> None:
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        *GROUP,
        namespace,
        "podgroups",
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "annotations": annotations or {}},
            "spec": {"minMember": min_member, "queue": queue},
        },
    )


def read_podgroup(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    doc: dict[str, Any] = client.CustomObjectsApi(api).get_namespaced_custom_object(
        *GROUP, namespace, "podgroups", name
    )
    return doc


def queue(api: client.ApiClient, name: str, weight: int = 1, **spec: Any) -> None:
    client.CustomObjectsApi(api).create_cluster_custom_object(
        *GROUP,
        "queues",
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": name},
            "spec": {"weight": weight, **spec},
        },
    )


def gang(
    core: client.CoreV1Api,
    api: client.ApiClient,
    namespace: str,
    name: str,
    size: int,
    gpus: int,
    min_member: int | None = None,
    queue_name: str = "default",
    priority_class: str | None = None,
    annotations: dict[str, str] | None = None,
    pod_annotations: dict[str, str] | None = None,
    gpu_resource: str = "nvidia.com/gpu",
) -> list[str]:
    """A PodGroup and its pods, gated as the webhook would gate them."""
    podgroup(
        api, namespace, name, size if min_member is None else min_member, queue_name, annotations
    )
    names = []
    for i in range(size):
        names.append(f"{name}-{i}")
        create_member(
            core, namespace, name, i, gpus, priority_class, pod_annotations,
            gpu_resource=gpu_resource,
        )  # fmt: skip
    return names


def create_member(
    core: client.CoreV1Api,
    namespace: str,
    group: str,
    index: int,
    gpus: int,
    priority_class: str | None = None,
    annotations: dict[str, str] | None = None,
    node_selector: dict[str, str] | None = None,
    gpu_resource: str = "nvidia.com/gpu",
) -> None:
    m = pod(
        f"{group}-{index}", namespace, gpus=gpus, priority_class=priority_class,
        gpu_resource=gpu_resource,
    )  # fmt: skip
    m["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": group, **(annotations or {})}
    m["spec"]["schedulingGates"] = [{"name": "pyextender.io/gang"}]
    if node_selector:
        m["spec"]["nodeSelector"] = node_selector
    core.create_namespaced_pod(namespace, m)


def bound_of(core: client.CoreV1Api, namespace: str, names: list[str]) -> int:
    b = bound(core, namespace)
    return sum(1 for n in names if n in b)


def priority_class(api: client.ApiClient, name: str, value: int) -> None:
    try:
        client.SchedulingV1Api(api).create_priority_class(
            {"metadata": {"name": name}, "value": value}
        )
    except client.ApiException as exc:
        if exc.status != 409:
            raise


def condition(api: client.ApiClient, namespace: str, name: str, kind: str) -> str:
    pg = read_podgroup(api, namespace, name)
    for c in (pg.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return str(c.get("message", ""))
    return ""
