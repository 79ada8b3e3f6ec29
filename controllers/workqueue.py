"""A de-duplicating work queue of object keys, as client-go's workqueue.

A key added many times before a worker takes it is processed once; a key is
never processed by two workers at once (added while processing, it is queued
again when the worker is done). Failures are retried with exponential backoff.
"""

from __future__ import annotations

import asyncio

BASE_DELAY_S = 0.05
MAX_DELAY_S = 30.0


class WorkQueue:
    def __init__(self, name: str) -> None:
        self.name = name
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._dirty: set[str] = set()
        self._processing: set[str] = set()
        self._failures: dict[str, int] = {}
        self._later: set[str] = set()
        """Keys with an add_coalesced pending."""

    def __len__(self) -> int:
        return len(self._dirty)

    def add(self, key: str) -> None:
        if key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._queue.put_nowait(key)

    def add_coalesced(self, key: str, window_s: float) -> None:
        """Add ``key`` ``window_s`` seconds from now, unless it is queued already or a
        coalesced add of it is pending: the changes of that window cost one reconcile.
        For a status summing many objects (a queue's), rewritten at most once a window
        instead of once per change of any of them."""
        if key in self._dirty or key in self._later:
            return
        self._later.add(key)

        def fire() -> None:
            self._later.discard(key)
            self.add(key)

        asyncio.get_running_loop().call_later(window_s, fire)

    def add_after(self, key: str, delay_s: float) -> None:
        if delay_s <= 0:
            self.add(key)
            return
        asyncio.get_running_loop().call_later(delay_s, self.add, key)

    async def get(self) -> str:
        key = await self._queue.get()
        self._dirty.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: str) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._queue.put_nowait(key)

    def retry(self, key: str) -> float:
        """Re-add after an exponentially growing delay; returns the delay in seconds."""
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        delay: float = min(BASE_DELAY_S * float(2**n), MAX_DELAY_S)
        self.add_after(key, delay)
        return delay

    def forget(self, key: str) -> None:
        self._failures.pop(key, None)
