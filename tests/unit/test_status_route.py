"""StatusRoute follows a CRD that gains a status subresource under a running process.

The object's endpoint ignores ``status`` once the subresource exists, so a write sent
there on a stale discovery answer would be lost without a word; the route reads the
reply, sees its status missing, asks discovery again and sends it to ``/status``.
(The other direction, a 404 from ``/status``, is in test_actuator.py; the real API
server's side of both in tests/e2e/test_status_route.py.)
"""

from __future__ import annotations

import json
import time
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pyextender.api.status_route import StatusRoute, status_missed

GROUP, VERSION, PLURAL = "scheduling.volcano.sh", "v1beta1", "podgroups"
OBJECT = "/apis/scheduling.volcano.sh/v1beta1/namespaces/ns/podgroups/g"


class Resp:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def release_conn(self) -> None:
        pass


class Server:
    """Discovery (``get_api_resources``) and raw PATCHes, as an API server with one
    PodGroup answers them: the object's endpoint drops ``status`` while ``/status``
    is served, ``/status`` drops metadata; ``prune`` names status keys its schema drops."""

    def __init__(self, served_status: bool) -> None:
        self.served_status = served_status
        self.prune: set[str] = set()
        self.calls: list[tuple[str, Any]] = []
        self.obj: dict[str, Any] = {"metadata": {"resourceVersion": "1"}, "status": {}}

    def get_api_resources(self, group: str, version: str, **_: Any) -> Resp:
        self.calls.append(("discovery", None))
        names = [PLURAL] + ([f"{PLURAL}/status"] if self.served_status else [])
        return Resp(json.dumps({"resources": [{"name": n} for n in names]}).encode())

    def patch(self, path: str, body: dict[str, Any], content_type: str) -> bytes:
        self.calls.append((path, body))
        to_status = path.endswith("/status")
        meta = body.get("metadata") or {}
        if meta.get("resourceVersion") not in (None, self.obj["metadata"]["resourceVersion"]):
            raise AssertionError(f"409: stale resourceVersion {meta['resourceVersion']}")
        changed = False
        if meta.get("annotations") and not to_status:
            self.obj["metadata"]["annotations"] = meta["annotations"]
            changed = True
        if "status" in body and to_status == self.served_status:
            for key, value in body["status"].items():
                if key not in self.prune:
                    self.obj["status"][key] = value
                    changed = True
        if changed:
            rv = int(self.obj["metadata"]["resourceVersion"]) + 1
            self.obj["metadata"]["resourceVersion"] = str(rv)
        return json.dumps(self.obj).encode()

    def paths(self) -> list[str]:
        return [what.removeprefix(OBJECT) or "object" for what, _ in self.calls]


def _route(server: Server, recheck_s: float = 0.0) -> StatusRoute:
    route = StatusRoute(client.ApiClient(), ttl_s=3600.0, recheck_s=recheck_s)
    route.custom = server  # type: ignore[assignment]
    return route


def _write(route: StatusRoute, server: Server, body: dict[str, Any]) -> dict[str, Any]:
    reply = route.patch_status(server, GROUP, VERSION, PLURAL, "ns", "g", body)  # type: ignore[arg-type]
    out: dict[str, Any] = json.loads(reply)
    return out


def test_a_crd_that_gains_status_gets_the_write_at_once() -> None:
    server = Server(served_status=False)
    route = _route(server)
    _write(route, server, {"status": {"phase": "Pending"}})
    assert server.obj["status"] == {"phase": "Pending"}
    server.served_status = True  # the CRD is replaced by one with /status
    body = {
        "status": {"phase": "Inqueue"},
        "metadata": {"resourceVersion": "2", "annotations": {"a": "b"}},
    }
    reply = _write(route, server, body)
    assert server.obj["status"] == {"phase": "Inqueue"} == reply["status"]
    assert server.obj["metadata"]["annotations"] == {"a": "b"}
    # object (status ignored, annotations written: version 3), discovery, /status
    # with the precondition moved to the version our own write produced
    assert server.paths() == ["discovery", "object", "object", "discovery", "/status"]
    assert server.calls[-1][1]["metadata"]["resourceVersion"] == "3"
    assert body["metadata"]["resourceVersion"] == "2"  # the caller's body is left as it was
    _write(route, server, {"status": {"phase": "Running"}})
    assert server.paths()[-1] == "/status" and server.obj["status"]["phase"] == "Running"


def test_a_status_the_reply_shows_costs_no_discovery() -> None:
    server = Server(served_status=False)
    route = _route(server)
    for phase in ("Pending", "Inqueue", "Running"):
        _write(route, server, {"status": {"phase": phase, "running": None}})
    assert server.paths() == ["discovery", "object", "object", "object"]


def test_a_pruned_field_asks_discovery_at_most_once_per_recheck() -> None:
    server = Server(served_status=False)
    server.prune = {"extra"}
    route = _route(server, recheck_s=60.0)
    route.has_status(GROUP, VERSION, PLURAL)
    asked = time.monotonic() - 120.0  # within the ttl, past recheck_s
    route._known[(GROUP, VERSION)] = (asked, route._known[(GROUP, VERSION)][1])
    _write(route, server, {"status": {"phase": "Pending", "extra": 1}})
    _write(route, server, {"status": {"phase": "Inqueue", "extra": 2}})
    # the first reply lacks "extra": discovery is asked again (still no /status), and
    # not again within recheck_s; both phases were written
    assert server.paths() == ["discovery", "object", "discovery", "object"]
    # past recheck_s again: the same missing field asks once more
    route._known[(GROUP, VERSION)] = (asked, route._known[(GROUP, VERSION)][1])
    _write(route, server, {"status": {"phase": "Running", "extra": 3}})
    assert server.paths()[4:] == ["object", "discovery"]
    assert server.obj["status"] == {"phase": "Running"}


def test_status_missed_reads_merge_patch_semantics() -> None:
    reply = json.dumps(
        {
            "metadata": {"resourceVersion": "7"},
            "status": {"phase": "Inqueue", "conditions": [{"type": "A"}], "sub": {"x": 1, "y": 2}},
        }
    ).encode()
    for sent in (
        {"phase": "Inqueue"},
        {"conditions": [{"type": "A"}], "sub": {"x": 1}},
        {"gone": None, "sub": {"z": None}},
    ):
        assert status_missed(reply, sent) is None, sent
    for sent in (
        {"phase": "Running"},
        {"conditions": []},
        {"sub": {"x": 2}},
        {"phase": None},
        {"new": {"a": 1}},
    ):
        assert status_missed(reply, sent) == "7", sent
    assert status_missed(b"not json", {"phase": "Inqueue"}) is None
    assert status_missed(b'{"metadata": {}}', {"phase": "A"}) == ""


def test_a_failed_rediscovery_keeps_the_object_write() -> None:
    """The reply lacks a pruned field and discovery then fails (has_status assumes a
    /status, which answers 404): the object write stands and no error reaches the
    caller."""
    server = Server(served_status=False)
    server.prune = {"extra"}
    route = _route(server)
    route.has_status(GROUP, VERSION, PLURAL)

    def down(*_: Any, **__: Any) -> Resp:
        raise OSError("discovery down")

    route.custom.get_api_resources = down  # type: ignore[attr-defined]
    real_patch = server.patch

    def patch(path: str, body: dict[str, Any], content_type: str) -> bytes:
        if path.endswith("/status"):
            server.calls.append((path, body))
            raise ApiException(status=404)
        return real_patch(path, body, content_type)

    server.patch = patch  # type: ignore[method-assign]
    reply = _write(route, server, {"status": {"phase": "Pending", "extra": 1}})
    assert reply["status"] == {"phase": "Pending"} == server.obj["status"]
    assert server.paths()[-2:] == ["object", "/status"]
