"""Queue controller: the default queues, and every Queue's status.

Creates ``root`` and ``default`` when they are missing (at leadership start),
and keeps each Queue's status current: state (Open/Closing/Closed, changed by
OpenQueue/CloseQueue Commands), PodGroups per phase and ``allocated``, the sum
of requests of the bound, non-terminated pods of its PodGroups and of every queue
below it (queue_status), as Volcano's scheduler writes it
(pkg/scheduler/framework/session.go, updateQueueStatus).

The queue tree (``spec.parent``) follows Volcano's queue controller
(pkg/controllers/queue/queue_controller_action.go): closing a queue closes its
open children, marking them ``volcano.sh/closed-by-parent: "true"``, down the
whole subtree; opening it reopens only those marked children; a queue cannot be
opened while its parent is Closed/Closing, and root cannot be closed.
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

STATUS_WINDOW_S = 1.0
"""A PodGroup or pod change rewrites its queues' status (allocated, counts) at most once
per this many seconds: Volcano's scheduler writes it once per session, every second by
default. Per change, 400 single-pod PodGroups cost 2.6 Queue writes each (each one sent
to the validating webhook too, and a sum over every pod of the queue's subtree); a spec
change or an Open/Close command is still acted on at once."""

_STATE_REASONS = {"Open": "QueueOpened", "Closing": "QueueClosing", "Closed": "QueueClosed"}
"""Event reasons of state changes a plain sync makes (Closing -> Closed); a change made
by an OpenQueue/CloseQueue request has the action as its reason, as Volcano records."""


def _only_status_changed(old: Obj, new: Obj) -> bool:
    """Whether ``old`` and ``new`` differ in status alone: same spec, labels, annotations."""
    o, n = meta(old), meta(new)
    return (
        old.get("spec") == new.get("spec")
        and o.get("labels") == n.get("labels")
        and o.get("annotations") == n.get("annotations")
    )


class QueueController(Controller):
    name = "queue"

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.actions: dict[str, tuple[str, str]] = {}
        """Queue name -> (OpenQueue/CloseQueue, why) from a Command or the queue tree,
        applied at the next reconcile."""
        self.refused: dict[str, int] = {}
        """Queue name -> how often its pending OpenQueue was refused (parent shut)."""
        self.warned: dict[str, str] = {}
        """Queue name -> the GuaranteeExceeded finding last reported ("" for none)."""
        ctx.podgroups.add_index("queue", lambda pg: [queue_status.queue_of(pg)])
        ctx.queues.add_index("parent", lambda q: [queue_status.parent_of(q)])
        ctx.queues.add_handler(self._on_queue)
        ctx.podgroups.add_handler(self._on_podgroup)
        ctx.pods.add_handler(self._on_pod)

    def _on_queue(self, key: str, old: Obj | None, new: Obj | None) -> None:
        if new is not None:
            if old is not None and _only_status_changed(old, new):
                # the echo of our own status write (or someone else's status): the
                # status it may have to correct is rewritten at the window, as for a
                # PodGroup change; at once, each write's echo asked for the next and
                # the window never held while PodGroups kept changing
                self.queue.add_coalesced(key, STATUS_WINDOW_S)
            else:
                self.queue.add(key)
        if queue_status.state_of(old) != queue_status.state_of(new):
            # children follow their parent's state (a child created under a closed
            # parent, or a status written by someone else)
            for child in self.ctx.queues.by_index("parent", key):
                self.queue.add(str(meta(child).get("name")))
        moved = [queue_status.parent_of(q) for q in (old, new) if q is not None]
        guarantees = [queue_status.guarantee_of(q) for q in (old, new) if q is not None]
        if old is None or new is None or len(set(moved)) > 1 or guarantees[0] != guarantees[-1]:
            # a parent's allocated counts its subtree, and it checks its children's
            # guarantees: the old and new chains change
            for parent in moved:
                self._with_ancestors(parent)

    def _on_podgroup(self, key: str, old: Obj | None, new: Obj | None) -> None:
        for obj in (old, new):
            if obj is not None:
                self._with_ancestors(queue_status.queue_of(obj), STATUS_WINDOW_S)

    def _with_ancestors(self, name: str, window_s: float = 0.0) -> None:
        """Queue ``name`` and every queue above it (their allocated includes it); with
        ``window_s``, coalesced: the status a PodGroup or pod change moves is written
        once per window however many changed (see STATUS_WINDOW_S)."""
        seen: set[str] = set()
        while name and name not in seen:
            seen.add(name)
            if window_s > 0:
                self.queue.add_coalesced(name, window_s)
            else:
                self.queue.add(name)
            q = self.ctx.queues.get(name)
            name = queue_status.parent_of(q) if q is not None else ""

    def subtree(self, name: str) -> list[str]:
        """``name`` and every queue below it (a parent chain that loops is cut)."""
        out = [name]
        seen = {name}
        for current in out:
            for child in self.ctx.queues.by_index("parent", current):
                n = str(meta(child).get("name"))
                if n not in seen:
                    seen.add(n)
                    out.append(n)
        return out

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
            self._with_ancestors(queue_status.queue_of(pg), STATUS_WINDOW_S)

    def command(self, queue: str, action: str, why: str = "command") -> None:
        """Run OpenQueue/CloseQueue on ``queue`` at its next reconcile; the last one wins."""
        self.actions[queue] = (action, why)
        self.refused.pop(queue, None)
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
            self.refused.pop(key, None)
            self.warned.pop(key, None)
            return
        if key != queue_status.ROOT and not (q.get("spec") or {}).get("parent"):
            # as Volcano's syncQueue (updateQueueParent): an unset parent is written root
            root = {"spec": {"parent": queue_status.ROOT}}
            q = await call(ctx.kube.patch, QUEUES, "", key, root)
            ctx.queues.remember(q)
            self.wrote("queue-parent")
        pending = self.actions.pop(key, None)
        action, why = pending if pending is not None else (None, "")
        parent_name = queue_status.parent_of(q)
        parent = ctx.queues.get(parent_name) if parent_name else None
        children = ctx.queues.by_index("parent", key)
        steps = queue_status.tree_steps(q, parent, children, action)
        if steps.refuse:
            assert action is not None
            self._refuse(q, key, action, why, steps.refuse)
            action = None  # the status sync still runs
        else:
            self.refused.pop(key, None)
        for child in children:
            name = str(meta(child).get("name"))
            if name in steps.close_children:
                await self._mark(child, "true")
                self.command(name, "CloseQueue", f"parent queue {key} closed")
        pgs = ctx.podgroups.by_index("queue", key)
        # as Volcano's scheduler writes it: a queue's allocated counts its whole subtree
        # (root's, everything); its PodGroup counts are its own
        members = [
            pod
            for name in self.subtree(key)
            for pg in ctx.podgroups.by_index("queue", name)
            for pod in ctx.pods.by_index(
                "group", f"{meta(pg).get('namespace')}/{meta(pg).get('name')}"
            )
        ]
        patch = queue_status.status_patch(q, pgs, members, action)
        if patch:
            try:
                updated = await call(ctx.kube.patch, QUEUES, "", key, {"status": patch}, True)
            except BaseException:
                if action is not None:
                    self.actions.setdefault(key, (action, why))
                raise
            ctx.queues.remember(updated)
            self.wrote("queue-status")
            if "state" in patch:
                self._state_event(updated or q, patch["state"], action, why, len(pgs))
        if steps.mark is not None:
            await self._mark(ctx.queues.get(key) or q, steps.mark)
        over = queue_status.children_over_guarantee(q, children)
        if over and self.warned.get(key) != over:  # once per finding, not per reconcile
            ctx.recorder.event(q, "GuaranteeExceeded", over, warning=True)
        self.warned[key] = over
        # after our own state is written: a reopened child checks that its parent is Open
        for name in steps.open_children:
            self.command(name, "OpenQueue", f"parent queue {key} opened")
        if steps.follow is not None:
            verb = "closed" if steps.follow == "CloseQueue" else "opened"
            self.command(key, steps.follow, f"parent queue {parent_name} {verb}")

    def _refuse(self, q: Obj, key: str, action: str, why: str, reason: str) -> None:
        """Record why ``action`` cannot run; an OpenQueue is tried again with backoff (the
        parent may be opening right now), up to OPEN_RETRIES times."""
        n = self.refused.get(key, 0) + 1
        retry = action == "OpenQueue" and n < queue_status.OPEN_RETRIES
        if n == 1 or not retry:
            what = "retrying" if retry else "dropped"
            self.ctx.recorder.event(
                q, action, f"{action} ({why}) refused: {reason} ({what})", warning=True
            )
        if retry:
            self.refused[key] = n
            self.actions.setdefault(key, (action, why))
            self.queue.add_after(key, min(0.1 * 2**n, 10.0))  # seconds
        else:
            self.refused.pop(key, None)

    async def _mark(self, q: Obj, value: str) -> None:
        """Set the queue's closed-by-parent annotation (a metadata patch, not status)."""
        name = str(meta(q).get("name"))
        annotations = meta(q).get("annotations") or {}
        if annotations.get(queue_status.CLOSED_BY_PARENT) == value:
            return
        patch = {"metadata": {"annotations": {queue_status.CLOSED_BY_PARENT: value}}}
        updated = await call(self.ctx.kube.patch, QUEUES, "", name, patch)
        self.ctx.queues.remember(updated)
        self.wrote("queue-annotation")

    def _state_event(self, q: Obj, state: str, action: str | None, why: str, pgs: int) -> None:
        if action is not None:
            message = f"queue is {state}: {action} ({why})"
            if state == "Closing":
                message += f": {pgs} PodGroups still use the queue"
            self.ctx.recorder.event(q, action, message)
            return
        message = f"queue is {state} (status sync)"
        self.ctx.recorder.event(q, _STATE_REASONS.get(state, "QueueState"), message)
