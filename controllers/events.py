"""core/v1 Events that say why a controller did something.

A repeat of the same (object, reason, message) bumps ``count`` on the first
Event instead of creating a new one, as kubectl's event recorder does. Events
are best effort: a failure is logged, never retried.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import uuid
from typing import Any

from controllers.kube import Kube
from controllers.store import meta

log = logging.getLogger(__name__)

COMPONENT = "pyextender-controllers"
CLUSTER_EVENTS_NAMESPACE = "default"
"""Where Events about cluster-scoped objects (Queues) go, as kubectl expects."""
MAX_REMEMBERED = 4096


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Recorder:
    def __init__(self, kube: Kube, instance: str) -> None:
        self.kube = kube
        self.instance = instance
        self._seen: dict[tuple[str, str, str], tuple[str, str, int]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def event(self, obj: dict[str, Any], reason: str, message: str, warning: bool = False) -> None:
        """Record an Event about ``obj`` (a Kubernetes object as a dict)."""
        m = meta(obj)
        ident = str(m.get("uid") or f"{obj.get('kind')}/{m.get('namespace')}/{m.get('name')}")
        log.info(
            "event %s %s/%s: %s %s",
            obj.get("kind"),
            m.get("namespace"),
            m.get("name"),
            reason,
            message,
        )
        task = asyncio.get_running_loop().create_task(
            self._send(obj, ident, reason, message, warning)
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(
        self, obj: dict[str, Any], ident: str, reason: str, message: str, warning: bool
    ) -> None:
        m = meta(obj)
        now = _now()
        seen_key = (ident, reason, message)
        try:
            seen = self._seen.get(seen_key)
            if seen is not None:
                ns, name, count = seen
                self._seen[seen_key] = (ns, name, count + 1)
                await asyncio.to_thread(
                    self.kube.patch_event, ns, name, {"count": count + 1, "lastTimestamp": now}
                )
                return
            ns = str(m.get("namespace") or CLUSTER_EVENTS_NAMESPACE)
            name = f"{m.get('name')}.{uuid.uuid4().hex[:16]}"
            body = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": ns},
                "involvedObject": {
                    "apiVersion": obj.get("apiVersion"),
                    "kind": obj.get("kind"),
                    "name": m.get("name"),
                    "namespace": m.get("namespace"),
                    "uid": m.get("uid"),
                },
                "reason": reason,
                "message": message[:1024],
                "type": "Warning" if warning else "Normal",
                "source": {"component": COMPONENT},
                "reportingComponent": COMPONENT,
                "reportingInstance": self.instance,
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
            }
            if len(self._seen) >= MAX_REMEMBERED:
                self._seen.clear()
            self._seen[seen_key] = (ns, name, 1)
            await asyncio.to_thread(self.kube.create_event, ns, body)
        except Exception as exc:
            self._seen.pop(seen_key, None)
            log.warning("could not record event %s on %s: %s", reason, m.get("name"), exc)
