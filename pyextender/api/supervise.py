"""Background loops that must not die silently.

A process runs a few long-lived asyncio tasks next to its server (the actions
loop, housekeeping, a config watcher, the controllers' workers). An exception
that ends one of them used to vanish with the task; the process kept answering
/healthz while doing nothing. Tasks started here are watched: a crash (or a
loop that returns when it should run forever) is logged with its traceback,
counted, and turns ``health()`` false, so /healthz fails and the kubelet
restarts the process.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

log = logging.getLogger(__name__)


class Supervisor:
    def __init__(self, on_failure: Callable[[str], None] | None = None) -> None:
        self.on_failure = on_failure
        """Called with the task's name when one dies (e.g. to count it in a metric)."""
        self.failures: dict[str, str] = {}
        """task name -> what ended it."""
        self.tasks: dict[str, asyncio.Task[Any]] = {}

    def spawn(
        self, name: str, work: Coroutine[Any, Any, Any], forever: bool = True
    ) -> asyncio.Task[Any]:
        """Start ``work`` as a watched task. ``forever``: returning is a failure too."""
        task = asyncio.create_task(work, name=name)
        self.tasks[name] = task
        task.add_done_callback(lambda t: self._done(name, t, forever))
        return task

    def _done(self, name: str, task: asyncio.Task[Any], forever: bool) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            why = f"{type(exc).__name__}: {exc}"
            log.error("background task %s died: %s", name, why, exc_info=exc)
        elif forever:
            why = "returned, but should run until the process stops"
            log.error("background task %s %s", name, why)
        else:
            return
        self.failures[name] = why
        if self.on_failure is not None:
            self.on_failure(name)

    def health(self) -> tuple[bool, str]:
        """(healthy, why): unhealthy once any watched task has died."""
        if not self.failures:
            return True, "ok"
        return False, "; ".join(f"{n}: {w}" for n, w in sorted(self.failures.items()))

    async def stop(self) -> None:
        """Cancel every task still running and wait for them."""
        running = [t for t in self.tasks.values() if not t.done()]
        for t in running:
            t.cancel()
        await asyncio.gather(*running, return_exceptions=True)
