"""Our admission webhook on a devcluster: serving cert, process, webhook configurations.

    from devcluster.webhook import enable_webhook, disable_webhook
    enable_webhook(cluster)   # idempotent; returns once the API server calls us
    disable_webhook(cluster)  # configurations removed first, then the process

The webhook listens on 127.0.0.1 with a cert signed by the cluster CA, so the
configurations use ``clientConfig.url`` and ``caBundle`` = the cluster's
``ca.crt``. The API server picks up new configurations a moment after they
are written; ``enable_webhook`` waits by dry-run requests until the pod
mutation, the CRD validation and the defaults of new Jobs/Queues are in effect.
"""

from __future__ import annotations

import base64
import ssl
import time
import urllib.request
from pathlib import Path
from typing import Any

from devcluster import pki
from devcluster.cluster import Cluster, ClusterState, free_port
from pyextender.api.names import (
    BARRIER_ANNOTATION,
    ENABLED_LABEL,
    GANG_GATE,
    GROUP_NAME_ANNOTATION,
)
from pyextender.api.volcano import Queue
from webhook.configuration import (
    CONFIGURATION_NAME,
    mutating_configuration,
    url_client_config,
    validating_configuration,
)

ROLE = "webhook"
PROBE_NAMESPACE = "pyextender-webhook-probe"
"""Adopted namespace that dry-run probe pods are 'created' in (nothing is stored)."""


def _state(cluster: Cluster) -> ClusterState:
    st = cluster.state
    if st is None:
        raise RuntimeError(f"cluster {cluster.name!r} is not up")
    return st


def _api(st: ClusterState) -> Any:
    from kubernetes import client, config

    cfg = client.Configuration()
    config.load_kube_config(config_file=st.kubeconfig, client_configuration=cfg)
    return client.ApiClient(cfg)


def _running(cluster: Cluster) -> bool:
    return bool(cluster.status().get("processes", {}).get(ROLE) == "running")


def webhook_url(cluster: Cluster) -> str:
    """Base URL of the webhook (``https://127.0.0.1:<port>``), allocating the port once."""
    st = _state(cluster)
    if ROLE not in st.ports:
        st.ports[ROLE] = free_port()
        st.save()
    return f"https://127.0.0.1:{st.ports[ROLE]}"


def _wait_ready(cluster: Cluster, url: str, ca: Path, timeout: float) -> None:
    st = _state(cluster)
    ctx = ssl.create_default_context(cafile=str(ca))
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if not _running(cluster):
            raise RuntimeError(f"webhook exited; see {st.logs}/{ROLE}.log")
        try:
            with urllib.request.urlopen(f"{url}/readyz", context=ctx, timeout=2) as r:
                if r.status == 200:
                    return
        except Exception as exc:
            last = str(exc)
        time.sleep(0.2)
    raise TimeoutError(f"webhook not ready after {timeout:.0f}s ({last}); see {st.logs}/{ROLE}.log")


def _apply(api: Any, docs: list[dict[str, Any]]) -> None:
    from kubernetes import client

    reg = client.AdmissionregistrationV1Api(api)
    for doc in docs:
        kind = "mutating" if doc["kind"].startswith("Mutating") else "validating"
        create = getattr(reg, f"create_{kind}_webhook_configuration")
        read = getattr(reg, f"read_{kind}_webhook_configuration")
        replace = getattr(reg, f"replace_{kind}_webhook_configuration")
        try:
            create(doc)
        except client.ApiException as exc:
            if exc.status != 409:
                raise
            current = read(doc["metadata"]["name"])
            body = {**doc, "metadata": {**doc["metadata"]}}
            body["metadata"]["resourceVersion"] = current.metadata.resource_version
            replace(doc["metadata"]["name"], body)


def _probe_pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probe", "annotations": {GROUP_NAME_ANNOTATION: "probe"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


def _mutation_active(api: Any) -> bool:
    """A dry-run gang pod in the probe namespace comes back held: gated, or annotated
    for the framework shim's barrier (--gang-barrier=scheduler)."""
    from kubernetes import client

    pod = client.CoreV1Api(api).create_namespaced_pod(PROBE_NAMESPACE, _probe_pod(), dry_run="All")
    if (pod.metadata.annotations or {}).get(BARRIER_ANNOTATION):
        return True
    return any(g.name == GANG_GATE for g in pod.spec.scheduling_gates or [])


def _probe_queue(**spec: Any) -> dict[str, Any]:
    k = Queue.KIND
    return {
        "apiVersion": k.api_version,
        "kind": k.kind,
        "metadata": {"name": "pyextender-webhook-probe"},
        "spec": spec,
    }


def _validation_active(api: Any) -> bool:
    """A dry-run Queue deserving more than its capability is refused by us (the schema
    alone accepts it)."""
    from kubernetes import client

    k = Queue.KIND
    body = _probe_queue(capability={"cpu": "1"}, deserved={"cpu": "2"})
    try:
        client.CustomObjectsApi(api).create_cluster_custom_object(
            k.group, k.version, k.plural, body, dry_run="All"
        )
    except client.ApiException as exc:
        # the API server's JSON escapes "<" (\u003c): match the text around it
        return exc.status == 422 and "deserved[cpu]=2 must be" in str(exc.body)
    return False


def _defaults_active(api: Any) -> bool:
    """A dry-run Queue with weight 0 comes back with weight 1 (our defaults webhook;
    without it the schema refuses weight 0)."""
    from kubernetes import client

    k = Queue.KIND
    try:
        made = client.CustomObjectsApi(api).create_cluster_custom_object(
            k.group, k.version, k.plural, _probe_queue(weight=0), dry_run="All"
        )
    except client.ApiException:
        return False
    return bool(made.get("spec", {}).get("weight") == 1)


def _ensure_probe_namespace(api: Any) -> None:
    from kubernetes import client

    core = client.CoreV1Api(api)
    body = {"metadata": {"name": PROBE_NAMESPACE, "labels": {ENABLED_LABEL: "true"}}}
    try:
        core.create_namespace(body)
    except client.ApiException as exc:
        if exc.status != 409:
            raise
        core.patch_namespace(PROBE_NAMESPACE, body)


def _wait_until(what: str, check: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not in effect after {timeout:.0f}s")
        time.sleep(0.2)


def enable_webhook(cluster: Cluster, timeout: float = 60.0, extra: list[str] | None = None) -> None:
    """Start the webhook (if not running) and register it; returns once it is in effect.
    With ``extra`` arguments it is (re)started with them."""
    st = _state(cluster)
    pki_dir = Path(st.dir) / "pki"
    url = webhook_url(cluster)
    cert, key = pki_dir / "webhook.crt", pki_dir / "webhook.key"
    if not cert.exists() or not key.exists():
        pki.issue_serving_cert(pki_dir, "webhook", ["127.0.0.1", "localhost"])
    if extra is not None and _running(cluster):
        cluster.stop_role(ROLE)
    if not _running(cluster):
        port = url.rsplit(":", 1)[1]
        cluster.start_component(
            ROLE,
            ["webhook", f"--port={port}", f"--tls-cert={cert}", f"--tls-key={key}", *(extra or [])],
        )
    _wait_ready(cluster, url, pki_dir / "ca.crt", timeout)
    ca_bundle = base64.b64encode((pki_dir / "ca.crt").read_bytes()).decode()
    cc = url_client_config(url, ca_bundle)
    api = _api(st)
    _ensure_probe_namespace(api)
    _apply(api, [mutating_configuration(cc), validating_configuration(cc)])
    _wait_until("pod mutation", lambda: _mutation_active(api), timeout)
    _wait_until("CRD validation", lambda: _validation_active(api), timeout)
    _wait_until("Volcano defaults", lambda: _defaults_active(api), timeout)


def disable_webhook(cluster: Cluster, timeout: float = 60.0) -> None:
    """Remove the configurations, wait until the API server stops calling us, stop the process."""
    from kubernetes import client

    st = _state(cluster)
    api = _api(st)
    reg = client.AdmissionregistrationV1Api(api)
    for delete in (
        reg.delete_mutating_webhook_configuration,
        reg.delete_validating_webhook_configuration,
    ):
        try:
            delete(CONFIGURATION_NAME)
        except client.ApiException as exc:
            if exc.status != 404:
                raise
    if _running(cluster):
        _wait_until("webhook removal", lambda: not _mutation_active(api), timeout)
        _wait_until("webhook removal", lambda: not _validation_active(api), timeout)
        _wait_until("webhook removal", lambda: not _defaults_active(api), timeout)
    cluster.stop_role(ROLE)
