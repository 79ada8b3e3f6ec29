"""A LIST is converted page by page in the informer thread (start-up memory),
and the cache takes converted pods as it takes documents."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from pyextender.api.informer import Informer
from pyextender.cache.cluster import ClusterCache


class Resp:
    def __init__(self, data: bytes) -> None:
        self.data = data


def _pod(name: str, node: str | None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "spec": {
            "schedulerName": "volcano",
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
        },
        "status": {"phase": "Running" if node else "Pending"},
    }


def _node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"allocatable": {"cpu": "8", "pods": "110"}}}


def test_list_pages_are_converted_one_at_a_time() -> None:
    pages = {
        "": {
            "items": [_pod("a", "n1"), {"metadata": {"name": "bad"}, "spec": 5}],
            "metadata": {"continue": "2"},
        },
        "2": {"items": [_pod("b", None)], "metadata": {"resourceVersion": "9"}},
    }

    def list_fn(**kw: Any) -> Resp:
        return Resp(json.dumps(pages[kw.get("_continue") or ""]).encode())

    converted: list[list[str]] = []

    def convert(page: list[dict[str, Any]]) -> list[Any]:
        converted.append([o["metadata"]["name"] for o in page])
        return ClusterCache.pods_of_page(page)  # the bad object is left out

    cache = ClusterCache()
    cache.replace_nodes([_node("n1")])
    loop = asyncio.new_event_loop()
    inf = Informer("pods", list_fn, loop, cache.replace_pods, cache.pod_event, convert=convert)
    inf._list()
    loop.run_until_complete(asyncio.sleep(0))
    loop.close()
    assert converted == [["a", "bad"], ["b"]]  # once per page, in order
    assert cache.synced_pods and inf.resource_version == "9"
    assert set(cache.pods_by_uid) == {"uid-a", "uid-b"}
    assert set(cache.state.pods) == {"uid-a"} and set(cache.pending) == {"uid-b"}


def test_converted_and_document_lists_give_the_same_cache() -> None:
    docs = [_pod(f"p{i}", "n1" if i % 2 else None) for i in range(6)]
    a, b = ClusterCache(), ClusterCache()
    for c in (a, b):
        c.replace_nodes([_node("n1")])
    a.replace_pods(docs)
    b.replace_pods(ClusterCache.pods_of_page(docs))
    assert a.pods_by_uid == b.pods_by_uid and a.pending == b.pending
    assert a.state.used.tolist() == b.state.used.tolist()
