"""Queue controller: the default queues, and every Queue's status.

Creates ``root`` and ``default`` when they are missing (at leadership start),
and keeps each Queue's status current: state (Open/Closing/Closed, changed by
OpenQueue/CloseQueue Commands), PodGroups per phase and ``allocated``, the sum
of requests of its PodGroups' bound, non-terminated pods (queue_status).
"""

from __future__ import annotations

import logging

from controllers import pods as P
from controllers import queue_status
from controllers.kube import QUEUES
from controllers.runtime import Context, Controller, call, ignore_exists
from controllers.store import Obj, meta
from pyextender.api.volcano import default_queues
from pyextender.api.volcano.queue import DEFAULT_QUEUE

log = logging.getLogger(__name__)

_STATE_REASONS = {"Open": "QueueOpened", "Closing": "QueueClosing", "Closed": "QueueClosed"}


class QueueController(Controller):
    name = "queue"

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.actions: dict[str, str] = {}
        """Queue name -> OpenQueue/CloseQueue from a Command, applied at the next reconcile."""
        ctx.podgroups.add_index("queue", lambda pg: [queue_status.queue_of(pg)])
        ctx.queues.add_handler(self._on_queue)
        ctx.podgroups.add_handler(self._on_podgroup)
        ctx.pods.add_handler(self._on_pod)

    def _on_queue(self, key: str, old: Obj | None, new: Obj | None) -> None:
        if new is not None:
            self.queue.add(key)

    def _on_podgroup(self, key: str, old: Obj | None, new: Obj | None) -> None:
        for obj in (old, new):
            if obj is not None:
                self.queue.add(queue_status.queue_of(obj))

    def _on_pod(self, key: str, old: Obj | None, new: Obj | None) -> None:
        before = old is not None and P.holds_resources(old)
        after = new is not None and P.holds_resources(new)
        if before == after:
            return
        pod = new if new is not None else old
        assert pod is not None
        group = P.group_name(pod)
        pg = self.ctx.podgroups.get(f"{meta(pod).get('namespace')}/{group}") if group else None
        if pg is not None:
            self.queue.add(queue_status.queue_of(pg))

    def command(self, queue: str, action: str) -> None:
        self.actions[queue] = action
        self.queue.add(queue)

    def resync(self) -> None:
        for key in list(self.ctx.queues.objects):
            self.queue.add(key)

    async def ensure_default_queues(self, weight: int = 1, reclaimable: bool = True) -> None:
        """Create root and default if missing; default with the given weight/reclaimable."""
        ctx = self.ctx
        for q in default_queues():
            if ctx.queues.get(q.metadata.name) is not None:
                continue
            body = q.to_dict()
            body.pop("status", None)
            if q.metadata.name == DEFAULT_QUEUE:
                body["spec"].update(weight=weight, reclaimable=reclaimable)
            created = await ignore_exists(call(ctx.kube.create, QUEUES, "", body))
            if created:
                ctx.queues.remember(created)
                self.wrote("queue")
                ctx.recorder.event(created, "QueueCreated", "default queue created at start")
                log.info("created queue %s", q.metadata.name)
            self.queue.add(q.metadata.name)

    async def reconcile(self, key: str) -> None:
        ctx = self.ctx
        q = ctx.queues.get(key)
        if q is None:
            self.actions.pop(key, None)
            return
        pgs = ctx.podgroups.by_index("queue", key)
        members = [
            pod
            for pg in pgs
            for pod in ctx.pods.by_index(
                "group", f"{meta(pg).get('namespace')}/{meta(pg).get('name')}"
            )
        ]
        action = self.actions.pop(key, None)
        patch = queue_status.status_patch(q, pgs, members, action)
        if not patch:
            return
        try:
            updated = await call(ctx.kube.patch, QUEUES, "", key, {"status": patch}, True)
        except BaseException:
            if action is not None:
                self.actions.setdefault(key, action)
            raise
        ctx.queues.remember(updated)
        self.wrote("queue-status")
        if "state" in patch:
            why = f"command {action}" if action else "status sync"
            if patch["state"] == "Closing":
                why += f": {len(pgs)} PodGroups still use the queue"
            ctx.recorder.event(
                updated or q,
                _STATE_REASONS.get(patch["state"], "QueueState"),
                f"queue is {patch['state']} ({why})",
            )
