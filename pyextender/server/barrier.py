"""The gang permit barrier inside the bind verb.

kube-scheduler binds each pod in its own goroutine and waits for our bind
reply (up to the extender's httpTimeout). A gang member's bind is held here
until minMember members of its PodGroup have reached bind (or are bound
already); then **the barrier binds all of them together**, in one task that
does not belong to any single caller: a member whose bind fails is retried at
once, and a caller that gives up after the release does not stop its pod from
being bound with the rest. If the gang does not assemble in time, the held
binds fail, kube-scheduler forgets its assumptions and retries later, and no
partial gang ever runs.

A pod that names a PodGroup the cache does not know is never bound (as Volcano,
which schedules no pod without its PodGroup): it could be part of a gang whose
other members are nowhere near placed. Its bind fails and kube-scheduler retries.

Only live waiters count toward the quorum: a waiter whose pod was deleted, or
whose caller went away (kube-scheduler's request timed out or its connection
closed: the HTTP layer cancels the wait), is dropped before it can help
release a gang short.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pyextender.api.objects import PodInfo
from pyextender.cache.cluster import ClusterCache

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 20.0
"""Seconds a member waits for its gang; below kube-scheduler's 30 s httpTimeout."""
BIND_ATTEMPTS = 3
"""Tries per member once the gang is released (a failed bind is retried at once)."""
RETRY_PAUSE_S = 0.05
"""Pause before a retry (seconds), doubling."""

Outcome = tuple[str, str]
"""(result, error): result is bound, already_bound, conflict, error, gang_timeout,
abandoned, superseded, no_podgroup ...; error is "" on success."""
BindFn = Callable[[], Awaitable[Outcome]]
SettleFn = Callable[[Outcome], None]
"""Told the final outcome of one bind exactly once, whoever is still listening
(metrics, decision log, dropping the assumption of a bind that did not happen)."""
RETRYABLE = frozenset({"error"})
"""Results worth another try: transport or server errors, not conflicts or misfits."""


@dataclass(slots=True)
class _Waiter:
    pod: PodInfo
    bind: BindFn
    settle: SettleFn
    done: asyncio.Future[Outcome]

    def finish(self, out: Outcome) -> None:
        if not self.done.done():
            self.settle(out)
            self.done.set_result(out)


class GangBarrier:
    def __init__(
        self,
        cache: ClusterCache,
        timeout: float = DEFAULT_TIMEOUT_S,
        on_gang_failure: Callable[[str, int], None] | None = None,
        on_waiting: Callable[[int], None] | None = None,
    ) -> None:
        self.cache = cache
        self.timeout = timeout
        self.on_gang_failure = on_gang_failure
        """Called with (gang key, members that failed to bind) after a release."""
        self.on_waiting = on_waiting
        """Called with the number of members waiting whenever it changes (a gauge)."""
        self.waiting: dict[str, dict[str, _Waiter]] = {}
        self._releases: set[asyncio.Task[None]] = set()

    def _bound(self, key: str, exclude: set[str]) -> int:
        """Members already placed: bound and alive, or finished with success."""
        return self.cache.succeeded_members(key) + sum(
            1
            for p in self.cache.member_pods(key)
            if p.node_name and p.uid not in exclude and not p.deleting
        )

    def _live(self, w: _Waiter) -> bool:
        """A waiter counts while its pod exists (as far as the watch has shown)."""
        if w.done.done():
            return False
        seen = self.cache.pods_by_uid.get(w.pod.uid)
        if seen is None:
            # either not shown by the watch yet (the bind read it from the API),
            # or deleted: the cache remembers recent deletions
            return w.pod.uid not in self.cache.deleted_uids
        return not seen.deleting

    def _count(self) -> None:
        if self.on_waiting is not None:
            self.on_waiting(sum(len(v) for v in self.waiting.values()))

    def forget(self, uid: str) -> None:
        """The pod is gone: stop counting it; its held bind fails."""
        for key, arrived in list(self.waiting.items()):
            w = arrived.pop(uid, None)
            if w is not None:
                w.finish(("error", f"pod {w.pod.key} was deleted while its gang waited"))
            if not arrived:
                self.waiting.pop(key, None)
        self._count()

    async def wait(self, pod: PodInfo, bind: BindFn, settle: SettleFn) -> Outcome:
        """Bind ``pod`` with ``bind`` once its gang may run; the outcome of its bind,
        or ("gang_timeout", why) when the gang did not assemble in time. ``settle``
        hears the final outcome even when this call is cancelled (caller gone)."""
        if why := self.cache.missing_group(pod):
            out = ("no_podgroup", why)
            settle(out)
            return out
        key = self.cache.group_of(pod)
        group = self.cache.groups.get(key) if key else None
        if group is None or group.min_member <= 1:
            out = await _with_retries(bind)
            settle(out)
            return out
        arrived = self.waiting.setdefault(key, {})
        old = arrived.get(pod.uid)
        if old is not None:
            # kube-scheduler retried while the first call still waits: the new call
            # takes the place (the old caller has given up); the assumption stays
            old.finish(("superseded", "superseded by a retried bind of the same pod"))
        me = _Waiter(pod, bind, settle, asyncio.get_running_loop().create_future())
        arrived[pod.uid] = me
        for uid in [u for u, w in arrived.items() if not self._live(w)]:
            arrived.pop(uid).finish(("error", f"pod {uid} is gone; it no longer counts"))
        ready = self._bound(key, set(arrived)) + len(arrived)
        if ready >= group.min_member:
            self._release(key)
        self._count()
        try:
            return await asyncio.wait_for(asyncio.shield(me.done), self.timeout)
        except TimeoutError:
            have = self._bound(key, {pod.uid}) + len(self.waiting.get(key, {}))
            self._drop(key, me)
            out = (
                "gang_timeout",
                f"gang {key}: only {have}/{group.min_member} members reached bind within "
                f"{self.timeout:.0f}s; releasing so kube-scheduler retries",
            )
            me.finish(out)
            return out
        except asyncio.CancelledError:
            # the caller went away: before the release it no longer counts (and its
            # assumption goes); after it, the release task still binds the pod
            if self._drop(key, me):
                me.finish(("abandoned", "the caller went away before the gang was complete"))
            raise

    def _drop(self, key: str, me: _Waiter) -> bool:
        """Remove a waiter that was not released; False if it was (or is gone)."""
        current = self.waiting.get(key, {})
        if current.get(me.pod.uid) is not me or me.done.done():
            return False
        del current[me.pod.uid]
        if not current:
            self.waiting.pop(key, None)
        self._count()
        return True

    def _release(self, key: str) -> None:
        members = list(self.waiting.pop(key, {}).values())
        task = asyncio.ensure_future(self._bind_all(key, members))
        self._releases.add(task)
        task.add_done_callback(self._releases.discard)

    async def _bind_all(self, key: str, members: list[_Waiter]) -> None:
        """Bind the released members together; each caller gets its own outcome."""
        outcomes = await asyncio.gather(
            *(_with_retries(w.bind) for w in members), return_exceptions=True
        )
        failed = 0
        for w, out in zip(members, outcomes, strict=True):
            if isinstance(out, BaseException):
                out = ("error", f"binding {w.pod.key}: {out}")
            if out[1]:
                failed += 1
            w.finish(out)
        if failed:
            log.warning("gang %s: %d/%d members failed to bind", key, failed, len(members))
            if self.on_gang_failure is not None:
                self.on_gang_failure(key, failed)


async def _with_retries(bind: BindFn) -> Outcome:
    out: Outcome = ("error", "not attempted")
    for attempt in range(BIND_ATTEMPTS):
        out = await bind()
        if out[0] not in RETRYABLE:
            return out
        if attempt + 1 < BIND_ATTEMPTS:
            await asyncio.sleep(RETRY_PAUSE_S * 2**attempt)
    return out
