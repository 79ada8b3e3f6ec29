"""The ASGI extender app in-process: wire format, bind guard, errors."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from pyextender.cache.cluster import ClusterCache
from pyextender.framework.runtime import build_profile
from pyextender.plugins.defaults import load, plugins_of
from pyextender.server.binder import BindConflict
from pyextender.server.http import ExtenderApp
from pyextender.server.metrics import Metrics
from pyextender.server.verbs import Extender


class FakeBinder:
    """Records binds; can be told the API server already holds a binding."""

    def __init__(self) -> None:
        self.bound: dict[str, str] = {}
        self.pods: dict[str, dict[str, Any]] = {}
        self.fail: Exception | None = None
        self.annotations: dict[str, dict[str, str]] = {}
        self.reads: list[str] = []

    def bind(
        self, namespace: str, name: str, uid: str, node: str, annotations: dict[str, str]
    ) -> None:
        if self.fail is not None:
            raise self.fail
        key = f"{namespace}/{name}"
        if key in self.bound:
            raise BindConflict("already bound")
        self.bound[key] = node
        if annotations:
            self.annotations[key] = annotations

    def read_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        key = f"{namespace}/{name}"
        self.reads.append(key)
        doc = self.pods.get(key)
        if doc is None:
            return None
        return {**doc, "spec": {**doc["spec"], "nodeName": self.bound.get(key)}}


def _node(name: str, gpus: int) -> dict[str, Any]:
    alloc = {"cpu": "32", "memory": "128Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return {"metadata": {"name": name}, "status": {"allocatable": alloc}}


def _pod(
    name: str, gpus: int, scheduler: str = "volcano", node: str | None = None
) -> dict[str, Any]:
    req = {"cpu": "1", "nvidia.com/gpu": str(gpus)}
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "spec": {
            "schedulerName": scheduler,
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": req}}],
        },
        "status": {"phase": "Running" if node else "Pending"},
    }


class Client:
    def __init__(self) -> None:
        self.cache = ClusterCache()
        self.cache.replace_nodes([_node("n8", 8), _node("n4", 4)])
        self.cache.replace_pods([])
        self.binder = FakeBinder()
        metrics = Metrics()
        profile = build_profile(plugins_of(load(None)), metrics.observe_plugin)
        self.ext = Extender(self.cache, profile, self.binder, metrics)
        self.app = ExtenderApp(self.ext, lambda: (self.cache.synced, "x"), max_body_bytes=4096)

    def call(self, path: str, body: bytes, method: str = "POST") -> tuple[int, Any]:
        return asyncio.run(self._call(path, body, method))

    async def _call(self, path: str, body: bytes, method: str) -> tuple[int, Any]:
        sent: list[dict[str, Any]] = []
        chunks = [body]

        async def receive() -> dict[str, Any]:
            if not chunks:
                # like uvicorn: after the body, receive() waits for a disconnect
                await asyncio.Event().wait()
            return {"type": "http.request", "body": chunks.pop(), "more_body": False}

        async def send(msg: dict[str, Any]) -> None:
            sent.append(msg)

        scope = {"type": "http", "path": path, "method": method, "headers": []}
        await self.app(scope, receive, send)
        raw = sent[1]["body"]
        try:
            return sent[0]["status"], json.loads(raw)
        except ValueError:
            return sent[0]["status"], raw.decode()


@pytest.fixture
def c() -> Client:
    return Client()


def test_filter_names_only(c: Client) -> None:
    code, body = c.call(
        "/filter", json.dumps({"Pod": _pod("p", 8), "NodeNames": ["n8", "n4", "ghost"]}).encode()
    )
    assert code == 200
    assert body["NodeNames"] == ["n8"]
    assert body["FailedAndUnresolvableNodes"] == {
        "n4": "node allocatable nvidia.com/gpu is less than the pod requests"
    }
    assert body["FailedNodes"] == {"ghost": "node is not in the pyextender cache yet"}
    assert body["Error"] == "" and body["Nodes"] is None


def test_filter_with_full_node_list(c: Client) -> None:
    nodes = {"items": [_node("n8", 8), _node("n4", 4)]}
    code, body = c.call("/filter", json.dumps({"Pod": _pod("p", 8), "Nodes": nodes}).encode())
    assert code == 200 and [n["metadata"]["name"] for n in body["Nodes"]["items"]] == ["n8"]


def test_null_fields_are_accepted(c: Client) -> None:
    code, body = c.call(
        "/filter", json.dumps({"Pod": _pod("p", 1), "NodeNames": None, "Nodes": None}).encode()
    )
    assert code == 200 and body["NodeNames"] == []


def test_prioritize_scores_0_to_10(c: Client) -> None:
    code, body = c.call(
        "/prioritize", json.dumps({"Pod": _pod("p", 2), "NodeNames": ["n8", "n4"]}).encode()
    )
    assert code == 200
    assert {h["Host"] for h in body} == {"n8", "n4"}
    assert all(isinstance(h["Score"], int) and 0 <= h["Score"] <= 10 for h in body)


def test_pods_of_other_schedulers_pass_through(c: Client) -> None:
    code, body = c.call(
        "/filter",
        json.dumps(
            {"Pod": _pod("p", 64, scheduler="default-scheduler"), "NodeNames": ["n8"]}
        ).encode(),
    )
    assert code == 200 and body["NodeNames"] == ["n8"]


def test_preempt_passes_meta_victims_through(c: Client) -> None:
    victims = {"n8": {"Pods": [{"UID": "a"}], "NumPDBViolations": 1}, "n4": None}
    code, body = c.call(
        "/preempt", json.dumps({"Pod": _pod("p", 8), "NodeNameToMetaVictims": victims}).encode()
    )
    assert code == 200 and body == {"NodeNameToMetaVictims": victims}


def test_preempt_converts_full_victims(c: Client) -> None:
    full = {"n8": {"Pods": [_pod("v", 8, node="n8")], "NumPDBViolations": 0}}
    code, body = c.call(
        "/preempt", json.dumps({"Pod": _pod("p", 8), "NodeNameToVictims": full}).encode()
    )
    assert code == 200
    assert body["NodeNameToMetaVictims"]["n8"]["Pods"] == [{"UID": "uid-v"}]


@pytest.mark.parametrize("item", [[None], "n8", 3, {"metadata": "n8"}, {"metadata": [1]}])
def test_node_list_items_of_the_wrong_type_are_a_400(c: Client, item: Any) -> None:
    # found by fuzzing the live verbs: a 500 ('list' object has no attribute 'get')
    for verb in ("/filter", "/prioritize"):
        nodes = {"items": [{"metadata": {"name": "n8"}}, item]}
        code, body = c.call(verb, json.dumps({"Pod": _pod("p", 1), "Nodes": nodes}).encode())
        assert code == 400, body
        assert "Nodes.items[].metadata.name" in body["Error"]


@pytest.mark.parametrize("meta", ["oops", [1], 3])
def test_preempt_victim_metadata_of_the_wrong_type_is_a_400(c: Client, meta: Any) -> None:
    # found by fuzzing the live verb: a 500 ('str' object has no attribute 'get')
    full = {"n8": {"Pods": [{"metadata": meta}], "NumPDBViolations": 0}}
    code, body = c.call(
        "/preempt", json.dumps({"Pod": _pod("p", 8), "NodeNameToVictims": full}).encode()
    )
    assert code == 400, body
    assert "NodeNameToVictims[n8].Pods" in body["Error"]


def _bind(c: Client, name: str, node: str) -> tuple[int, Any]:
    args = {"PodName": name, "PodNamespace": "ns", "PodUID": f"uid-{name}", "Node": node}
    return c.call("/bind", json.dumps(args).encode())


def test_bind_counts_the_pod_and_guards_against_overcommit(c: Client) -> None:
    for name in ("a", "b"):
        c.cache.pod_event("ADDED", _pod(name, 8))
    assert _bind(c, "a", "n8") == (200, {"Error": ""})
    code, body = _bind(c, "b", "n8")  # kube-scheduler raced: the node is full now
    assert (
        code == 200
        and "no longer fits" in body["Error"]
        and "Insufficient nvidia.com/gpu" in body["Error"]
    )
    assert c.binder.bound == {"ns/a": "n8"}


def test_bind_is_idempotent(c: Client) -> None:
    c.cache.pod_event("ADDED", _pod("a", 4))
    assert _bind(c, "a", "n8") == (200, {"Error": ""})
    c.binder.pods["ns/a"] = _pod("a", 4)
    assert _bind(c, "a", "n8") == (200, {"Error": ""})  # retry while in flight
    c.cache.pod_event("MODIFIED", _pod("a", 4, node="n8"))
    assert _bind(c, "a", "n8") == (200, {"Error": ""})  # retry after the watch saw it
    assert c.binder.bound == {"ns/a": "n8"}
    gpu = c.cache.state.column["nvidia.com/gpu"]
    assert c.cache.state.used[c.cache.state.index["n8"], gpu] == 4


def test_bind_failure_releases_the_assumption(c: Client) -> None:
    c.cache.pod_event("ADDED", _pod("a", 8))
    c.binder.fail = RuntimeError("api down")
    code, body = _bind(c, "a", "n8")
    assert code == 200 and "api down" in body["Error"]
    assert not c.cache.state.pods


def test_bind_of_unknown_pod_reads_it_first(c: Client) -> None:
    c.binder.pods["ns/late"] = _pod("late", 8)
    assert _bind(c, "late", "n8") == (200, {"Error": ""})
    _code, body = _bind(c, "missing", "n8")
    assert "does not exist" in body["Error"]


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("PodName", "%", "PodName '%' is not a DNS subdomain"),
        ("PodName", "x" * 254, "is not a DNS subdomain"),
        ("PodNamespace", "Team_A", "PodNamespace 'Team_A' is not a DNS label"),
    ],
)
def test_bind_of_a_name_no_pod_can_have_is_a_400_naming_it(
    c: Client, field: str, value: str, expected: str
) -> None:
    """The API server would refuse to read such a pod (400 for '%'): the request is
    the mistake, and nothing is read or written."""
    args = {"PodName": "a", "PodNamespace": "ns", "PodUID": "u", "Node": "n8", field: value}
    code, body = c.call("/bind", json.dumps(args).encode())
    assert code == 400 and expected in body["Error"], body
    assert c.binder.reads == [] and c.binder.bound == {}


def test_bind_when_the_pod_cannot_be_read_is_an_error_to_retry(c: Client) -> None:
    def down(namespace: str, name: str) -> dict[str, Any] | None:
        raise OSError("connection refused")

    c.binder.read_pod = down  # type: ignore[method-assign]
    code, body = _bind(c, "unseen", "n8")
    assert code == 200 and body["Error"] == "reading pod ns/unseen: connection refused"
    assert not c.cache.state.pods and c.binder.bound == {}


def test_bind_of_a_pod_the_watch_has_not_shown_uses_the_filter_request(c: Client) -> None:
    """kube-scheduler's informer can be ahead of ours: the pod it filtered a moment
    ago binds without a GET, and the fit guard still runs on it."""
    for name in ("early", "twin"):
        code, _ = c.call(
            "/filter", json.dumps({"Pod": _pod(name, 8), "NodeNames": ["n8", "n4"]}).encode()
        )
        assert code == 200
    assert _bind(c, "early", "n8") == (200, {"Error": ""})
    assert c.binder.reads == [] and c.binder.bound == {"ns/early": "n8"}
    # the guard used the request's pod: n8 is now full for another 8-GPU pod
    code, body = _bind(c, "twin", "n8")
    assert "Insufficient nvidia.com/gpu" in body["Error"] and c.binder.reads == []
    # a bind naming another UID (the pod was deleted and made again) reads it
    c.binder.pods["ns/twin"] = {
        **_pod("twin", 4),
        "metadata": {"name": "twin", "namespace": "ns", "uid": "uid-new"},
    }
    args = {"PodName": "twin", "PodNamespace": "ns", "PodUID": "uid-new", "Node": "n4"}
    assert c.call("/bind", json.dumps(args).encode()) == (200, {"Error": ""})
    assert c.binder.reads == ["ns/twin"] and c.binder.bound["ns/twin"] == "n4"


def test_bind_refuses_pods_of_other_schedulers(c: Client) -> None:
    c.binder.pods["ns/theirs"] = _pod("theirs", 1, scheduler="default-scheduler")
    code, body = _bind(c, "theirs", "n8")
    assert code == 200 and "pyextender binds only pods of 'volcano'" in body["Error"]
    assert c.binder.bound == {}
    # adopted into the cluster's own scheduler: the marker resource makes it ours
    adopted = _pod("adopted", 1, scheduler="default-scheduler")
    adopted["spec"]["containers"][0]["resources"]["requests"]["pyextender.io/batch"] = "1"
    c.binder.pods["ns/adopted"] = adopted
    assert _bind(c, "adopted", "n8") == (200, {"Error": ""})
    assert c.binder.bound == {"ns/adopted": "n8"}


@pytest.mark.parametrize(
    ("path", "body", "method", "status", "needle"),
    [
        ("/filter", b"{", "POST", 400, "malformed JSON"),
        ("/filter", b'{"NodeNames": 3}', "POST", 400, "$.NodeNames"),
        # nesting beyond the decoder's recursion limit, under a key it skips (found by fuzzing)
        ("/filter", b'{"a":' + b"[" * 1500 + b"]" * 1500 + b"}", "POST", 400, "malformed JSON"),
        ("/bind", b'{"a":' + b"[" * 1500 + b"]" * 1500 + b"}", "POST", 400, "malformed JSON"),
        ("/bind", b"{}", "POST", 400, "required"),
        ("/filter", b"x" * 5000, "POST", 413, "exceeds 4096 bytes"),
        ("/nope", b"{}", "POST", 404, "unknown path"),
        ("/filter", b"", "GET", 405, "use POST"),
    ],
)
def test_bad_input(
    c: Client, path: str, body: bytes, method: str, status: int, needle: str
) -> None:
    code, reply = c.call(path, body, method)
    assert code == status and needle in reply["Error"]


@pytest.mark.parametrize("quantity", ["1E30", "99999999999999999999Ei", "9223372036854775808"])
def test_quantity_overflow_is_a_400_naming_the_resource(c: Client, quantity: str) -> None:
    pod = _pod("huge", 1)
    pod["spec"]["containers"][0]["resources"]["requests"]["memory"] = quantity
    for verb in ("/filter", "/prioritize"):
        code, reply = c.call(verb, json.dumps({"Pod": pod, "NodeNames": ["n8"]}).encode())
        assert code == 400, reply
        assert "memory" in reply["Error"] and "too large" in reply["Error"]
    # and the server keeps serving
    code, body = c.call("/filter", json.dumps({"Pod": _pod("p", 1), "NodeNames": ["n8"]}).encode())
    assert code == 200 and body["NodeNames"] == ["n8"]


def test_probes(c: Client) -> None:
    assert c.call("/healthz", b"", "GET") == (200, "ok")
    assert c.call("/readyz", b"", "GET")[0] == 200
    code, text = c.call("/metrics", b"", "GET")
    assert code == 200 and "pyextender_verb_duration_seconds" in text


def test_decisions_say_why(c: Client) -> None:
    c.call("/filter", json.dumps({"Pod": _pod("big", 8), "NodeNames": ["n4"]}).encode())
    c.cache.pod_event("ADDED", _pod("a", 8))
    _bind(c, "a", "n8")
    code, rows = c.call("/debug/decisions", b"", "GET")
    assert code == 200
    verbs = [(r["pod"], r["verb"]) for r in rows]
    assert ("ns/big", "filter") in verbs and ("ns/a", "bind") in verbs
    big = next(r for r in rows if r["pod"] == "ns/big")
    assert (
        big["feasible"] == 0 and big["unresolvable"] == 1 and "nvidia.com/gpu" in big["reasons"][0]
    )


def test_bind_records_gpus_on_the_binding_and_keeps_them_on_retry(c: Client) -> None:
    c.cache.pod_event("ADDED", _pod("g", 4))
    assert _bind(c, "g", "n8") == (200, {"Error": ""})
    chosen = c.binder.annotations["ns/g"]["pyextender.io/gpu-index"]
    assert len(chosen.split(",")) == 4
    # a retry while the first bind's pod is still only assumed here keeps the same GPUs
    held = c.cache.state.pods["uid-g"]
    c.binder.bound.clear()
    c.binder.annotations.clear()
    assert held.assumed
    assert _bind(c, "g", "n8") == (200, {"Error": ""})
    assert c.binder.annotations["ns/g"]["pyextender.io/gpu-index"] == chosen
