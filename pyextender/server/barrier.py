"""The gang permit barrier inside the bind verb.

kube-scheduler binds each pod in its own goroutine and waits for our bind
reply (up to the extender's httpTimeout). A gang member's bind is held here
until minMember members of its PodGroup have reached bind (or are bound
already); then all of them proceed together. If the gang does not assemble
in time, the held binds fail, kube-scheduler forgets its assumptions and
retries later, and no partial gang ever runs.
"""

from __future__ import annotations

import asyncio

from pyextender.api.objects import PodInfo
from pyextender.cache.cluster import ClusterCache

DEFAULT_TIMEOUT_S = 20.0
"""Seconds a member waits for its gang; below kube-scheduler's 30 s httpTimeout."""


class GangBarrier:
    def __init__(self, cache: ClusterCache, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        self.cache = cache
        self.timeout = timeout
        self.waiting: dict[str, dict[str, asyncio.Future[None]]] = {}

    def _bound(self, key: str, exclude: str) -> int:
        return sum(
            1
            for p in self.cache.member_pods(key)
            if p.node_name and p.uid != exclude and not p.deleting
        )

    async def wait(self, pod: PodInfo) -> str:
        """ "" when the pod may bind now, else why it may not."""
        key = self.cache.group_of(pod)
        group = self.cache.groups.get(key) if key else None
        if group is None or group.min_member <= 1:
            return ""
        arrived = self.waiting.setdefault(key, {})
        fut = arrived.get(pod.uid)
        if fut is None or fut.done():
            fut = asyncio.get_running_loop().create_future()
            arrived[pod.uid] = fut
        ready = self._bound(key, pod.uid) + len(arrived)
        if ready >= group.min_member:
            for f in arrived.values():
                if not f.done():
                    f.set_result(None)
            self.waiting.pop(key, None)
            return ""
        try:
            await asyncio.wait_for(asyncio.shield(fut), self.timeout)
            return ""
        except TimeoutError:
            arrived = self.waiting.get(key, {})
            arrived.pop(pod.uid, None)
            if not arrived:
                self.waiting.pop(key, None)
            have = self._bound(key, pod.uid) + len(arrived) + 1
            return (
                f"gang {key}: only {have}/{group.min_member} members reached bind within "
                f"{self.timeout:.0f}s; releasing so kube-scheduler retries"
            )
