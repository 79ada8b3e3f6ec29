"""The sidecar's libcurl writes (pyextender.api.raw_requests) against the real API
server: the connection settings the generated client resolves (client
certificate, bearer token, CA, TLS server name) reach the wire, and every kind of
failure comes back in the shape callers handle (ApiException with the server's
message, RequestFailed for no reply)."""

from __future__ import annotations

import copy
import socket
from pathlib import Path

import msgspec
import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from devcluster.cluster import Cluster
from devcluster.localpods import sa_kubeconfig
from pyextender.api.raw_requests import JSON_PATCH, RawApi, RequestFailed
from pyextender.server.binder import ApiBinder, BindConflict
from tests.e2e.kube import pod


def _parked(core: client.CoreV1Api, namespace: str, name: str) -> None:
    """A pod no scheduler picks up (its schedulerName has no scheduler)."""
    core.create_namespaced_pod(namespace, pod(name, namespace, cpu="100m", scheduler="nobody"))


def test_a_binding_lands_with_its_annotations_and_a_second_one_conflicts(
    api: client.ApiClient, core: client.CoreV1Api, namespace: str
) -> None:
    _parked(core, namespace, "p")
    uid = core.read_namespaced_pod("p", namespace).metadata.uid
    node = core.list_node().items[0].metadata.name
    binder = ApiBinder(api)
    binder.bind(namespace, "p", uid, node, {"pyextender.io/gpu-index": "3"})
    got = core.read_namespaced_pod("p", namespace)
    assert got.spec.node_name == node
    assert got.metadata.annotations["pyextender.io/gpu-index"] == "3"
    with pytest.raises(BindConflict, match="already assigned"):
        binder.bind(namespace, "p", uid, node, {})


def test_errors_carry_the_api_servers_status_and_message(
    api: client.ApiClient, core: client.CoreV1Api, namespace: str
) -> None:
    raw = RawApi(api.configuration)
    with pytest.raises(ApiException) as missing:
        raw.patch(f"/api/v1/namespaces/{namespace}/pods/absent", {"metadata": {}})
    assert missing.value.status == 404
    assert missing.value.reason == 'pods "absent" not found'
    assert msgspec.json.decode(missing.value.body)["kind"] == "Status"

    _parked(core, namespace, "q")
    # a JSON patch whose test fails: the precondition the gate lift relies on
    patch = [{"op": "test", "path": "/metadata/uid", "value": "not-its-uid"}]
    with pytest.raises(ApiException) as refused:
        raw.patch(f"/api/v1/namespaces/{namespace}/pods/q", patch, JSON_PATCH)
    assert refused.value.status == 422
    assert refused.value.reason == msgspec.json.decode(refused.value.body)["message"]

    # a message that quotes the whole object is cut short in the reason, whole in the body
    with pytest.raises(ApiException) as invalid:
        raw.patch(f"/api/v1/namespaces/{namespace}/pods/q", {"spec": {"containers": "x"}})
    assert invalid.value.status == 422
    assert len(invalid.value.reason) <= 515 and invalid.value.reason.endswith("...")
    assert "cannot unmarshal" in msgspec.json.decode(invalid.value.body)["message"]

    # the same handle goes on serving after errors
    reply = raw.patch(
        f"/api/v1/namespaces/{namespace}/pods/q", {"metadata": {"labels": {"ok": "yes"}}}
    )
    assert msgspec.json.decode(reply)["metadata"]["labels"] == {"ok": "yes"}


def test_a_service_account_token_is_what_the_api_server_sees(
    cluster: Cluster, api: client.ApiClient, core: client.CoreV1Api, namespace: str,
    tmp_path: Path,
) -> None:  # fmt: skip
    """The bearer token of a kubeconfig (as in a Pod) is sent: the refusal names the
    ServiceAccount, not an anonymous user."""
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "nobody"}})
    path = sa_kubeconfig(cluster, namespace, "nobody", tmp_path / "kubeconfig")
    cfg = client.Configuration()
    config.load_kube_config(config_file=str(path), client_configuration=cfg)
    with pytest.raises(ApiException) as denied:
        RawApi(cfg).post(f"/api/v1/namespaces/{namespace}/events", {"metadata": {}})
    assert denied.value.status == 403
    assert f"system:serviceaccount:{namespace}:nobody" in denied.value.reason


def test_the_tls_server_name_is_verified_in_place_of_the_address(
    api: client.ApiClient, namespace: str
) -> None:
    """The API server's certificate names ``kubernetes``; we connect to 127.0.0.1."""
    cfg = copy.copy(api.configuration)
    cfg.tls_server_name = "kubernetes"
    path = f"/api/v1/namespaces/{namespace}/pods/absent"
    with pytest.raises(ApiException) as reached:
        RawApi(cfg).patch(path, {})
    assert reached.value.status == 404  # TLS verified, the request served
    cfg.tls_server_name = "not-the-api-server"
    with pytest.raises(RequestFailed, match=r"SSL|certificate"):
        RawApi(cfg).patch(path, {})


def test_no_reply_is_a_request_failure(api: client.ApiClient) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before the request: nothing listens
    cfg = copy.copy(api.configuration)
    cfg.host = f"https://127.0.0.1:{port}"
    with pytest.raises(RequestFailed, match=f"PATCH /x: .*{port}"):
        RawApi(cfg).patch("/x", {})
