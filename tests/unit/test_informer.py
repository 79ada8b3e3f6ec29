"""The informer resumes watches from the last resourceVersion and re-lists on 410 Gone."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from pyextender.api.informer import Informer


class Resp:
    def __init__(self, data: bytes = b"", lines: list[dict[str, Any]] | None = None) -> None:
        self.data = data
        self._lines = lines or []

    def stream(self, amt: int, decode_content: bool = False) -> Any:
        for line in self._lines:
            yield (json.dumps(line) + "\n").encode()

    def release_conn(self) -> None:
        pass


def _obj(name: str, rv: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": rv}}


def test_resume_then_relist_on_gone() -> None:
    calls: list[dict[str, Any]] = []
    lists = iter(
        [
            {"items": [_obj("a", "5")], "metadata": {"resourceVersion": "10"}},
            {"items": [_obj("b", "30")], "metadata": {"resourceVersion": "40"}},
        ]
    )
    watches = iter(
        [
            [
                {"type": "ADDED", "object": _obj("c", "11")},
                {"type": "BOOKMARK", "object": _obj("", "15")},
            ],
            [{"type": "ERROR", "object": {"code": 410, "message": "too old resource version"}}],
            [],
        ]
    )
    done = threading.Event()

    def list_fn(**kw: Any) -> Resp:
        calls.append(kw)
        if kw.get("watch"):
            try:
                return Resp(lines=next(watches))
            except StopIteration:
                done.set()
                inf.stop.set()
                return Resp()
        return Resp(data=json.dumps(next(lists)).encode())

    seen: list[tuple[str, Any]] = []
    loop = asyncio.new_event_loop()
    inf = Informer(
        "things",
        list_fn,
        loop,
        on_replace=lambda items: seen.append(("replace", [i["metadata"]["name"] for i in items])),
        on_event=lambda kind, obj: seen.append((kind, obj["metadata"]["name"])),
    )
    inf.start()
    assert done.wait(5)
    inf.thread.join(5)
    loop.run_until_complete(asyncio.sleep(0))
    loop.close()
    watch_rvs = [c["resource_version"] for c in calls if c.get("watch")]
    # first watch from the list's RV; resumed from the bookmark; after 410 from the
    # re-list; a watch the server ends cleanly resumes from the same RV
    assert watch_rvs == ["10", "15", "40", "40"]
    assert seen == [("replace", ["a"]), ("ADDED", "c"), ("replace", ["b"])]
    assert inf.relists == 2
