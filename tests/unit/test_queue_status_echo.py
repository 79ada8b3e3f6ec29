"""The Queue controller's status writes follow STATUS_WINDOW_S, their own echo included.

A PodGroup or pod change asks for its queue's status at most once a window
(add_coalesced). The echo of the controller's own status write used to ask again at
once, so under a stream of PodGroup changes every write's echo led to the next write
and the window never held (bench/adopted_pods.py: 0.2-0.5 Queue status writes per
standalone pod, against 0.06-0.08 with the echo coalesced).
"""

from __future__ import annotations

import asyncio
from typing import Any

from controllers.queue import QueueController
from controllers.runtime import Context


class _Kube:
    def create_event(self, ns: str, body: dict[str, Any]) -> None:
        pass

    def patch_event(self, ns: str, name: str, patch: dict[str, Any]) -> None:
        pass


def _queue(weight: int = 1, allocated: str = "0", rv: str = "1") -> dict[str, Any]:
    return {
        "metadata": {"name": "default", "resourceVersion": rv, "labels": {"a": "b"}},
        "spec": {"weight": weight, "parent": "root"},
        "status": {"state": "Open", "allocated": {"cpu": allocated}},
    }


async def _queued_after(
    old: dict[str, Any] | None, new: dict[str, Any]
) -> tuple[set[str], set[str]]:
    """(keys queued at once, keys waiting for the window) after ``old`` -> ``new``."""
    ctx = Context.empty(_Kube(), "test", "volcano")  # type: ignore[arg-type]
    ctl = QueueController(ctx)
    ctl._on_queue("default", old, new)
    return set(ctl.queue._dirty), set(ctl.queue._later)


def test_a_status_only_change_waits_for_the_window() -> None:
    at_once, later = asyncio.run(_queued_after(_queue(), _queue(allocated="2", rv="2")))
    assert (at_once, later) == (set(), {"default"})


def test_a_spec_or_label_change_is_acted_on_at_once() -> None:
    assert "default" in asyncio.run(_queued_after(_queue(), _queue(weight=3, rv="2")))[0]
    relabelled = _queue(rv="2")
    relabelled["metadata"]["labels"] = {"a": "c"}
    assert "default" in asyncio.run(_queued_after(_queue(), relabelled))[0]
    assert "default" in asyncio.run(_queued_after(None, _queue()))[0]  # first seen
