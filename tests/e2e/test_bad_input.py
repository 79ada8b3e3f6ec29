"""Bad requests get a clear error; the server keeps serving; the cache is untouched."""

from __future__ import annotations

import http.client
import json
import urllib.parse
from typing import Any

import pytest

from tests.e2e.kube import metrics, post

pytestmark = pytest.mark.e2e

POD = {
    "metadata": {"name": "p", "namespace": "default", "uid": "u"},
    "spec": {"schedulerName": "volcano", "containers": [{"name": "c"}]},
}


def _cache(url: str) -> tuple[float, float]:
    m = metrics(url)
    return m["pyextender_cache_nodes"], m["pyextender_cache_pods"]


CASES: list[tuple[str, str, bytes, int, str]] = [
    ("malformed json", "/filter", b'{"Pod": {', 400, "malformed JSON"),
    ("not an object", "/prioritize", b"[1, 2]", 400, "invalid request"),
    (
        "wrong type NodeNames",
        "/filter",
        json.dumps({"Pod": POD, "NodeNames": "node-a"}).encode(),
        400,
        "$.NodeNames",
    ),
    ("wrong type Score field", "/bind", json.dumps({"PodName": 5}).encode(), 400, "$.PodName"),
    ("missing Pod", "/filter", json.dumps({"NodeNames": ["a"]}).encode(), 400, "Pod is required"),
    (
        "bad quantity",
        "/filter",
        json.dumps(
            {
                "Pod": {
                    **POD,
                    "spec": {"containers": [{"resources": {"requests": {"cpu": "lots"}}}]},
                },
                "NodeNames": [],
            }
        ).encode(),
        400,
        "cpu",
    ),
    ("empty body", "/filter", b"", 400, "empty request body"),
    (
        "bind without node",
        "/bind",
        json.dumps({"PodName": "p", "PodNamespace": "default"}).encode(),
        400,
        "Node are required",
    ),
    ("unknown verb", "/reserve", b"{}", 404, "unknown path"),
]


@pytest.mark.parametrize(
    ("case", "path", "body", "status", "needle"), CASES, ids=[c[0] for c in CASES]
)
def test_bad_request(
    sidecar: str, case: str, path: str, body: bytes, status: int, needle: str
) -> None:
    before = _cache(sidecar)
    code, reply = post(sidecar + path, body)
    assert code == status, reply
    assert isinstance(reply, dict) and needle in reply["Error"], reply
    assert _cache(sidecar) == before
    assert post(sidecar + "/healthz", b"", method="GET")[0] == 200


def test_wrong_method(sidecar: str) -> None:
    code, reply = post(sidecar + "/filter", b"", method="GET")
    assert code == 405 and "POST" in reply["Error"]


def test_body_over_limit_is_rejected(sidecar: str) -> None:
    """A declared body over the 16 MiB default is refused before it is read."""
    before = _cache(sidecar)
    url = urllib.parse.urlsplit(sidecar)
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=10)
    conn.putrequest("POST", "/filter")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Content-Length", str(20 * 2**20))
    conn.endheaders()
    conn.send(b'{"NodeNames": [' + b'"n",' * 1000)  # a start; the rest never comes
    resp = conn.getresponse()
    reply = json.loads(resp.read())
    conn.close()
    assert resp.status == 413 and "exceeds" in reply["Error"], reply
    assert _cache(sidecar) == before
    assert post(sidecar + "/healthz", b"", method="GET")[0] == 200


def test_server_still_answers_real_work_after_bad_input(sidecar: str) -> None:
    code, reply = post(
        sidecar + "/filter", json.dumps({"Pod": POD, "NodeNames": ["nope"]}).encode()
    )
    assert code == 200
    body: dict[str, Any] = reply
    assert body["NodeNames"] == [] and "nope" in body["FailedNodes"]
