"""CronJob controller for ``batch.volcano.sh/v1alpha1`` CronJobs.

``cronjob_schedule.plan`` decides from the cache and the clock; this module makes
the writes: deletions (Replace, history limits), the new Job, then
``status`` (active, lastScheduleTime, lastSuccessfulTime) through the status
subresource, and Events on the CronJob. A CronJob is queued again at its next
schedule time, and whenever one of its Jobs changes.

The clock is injectable (``clock``): tests pass a fake one, and ``pyextender
controllers`` has a hidden ``--cronjob-clock-speed`` that makes it run faster
for the e2e test.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from controllers.cronjob_schedule import fmt_time, job_for, phase_of, plan, reference
from controllers.kube import CRONJOBS, JOBS
from controllers.runtime import Context, Controller, call, ignore_exists, ignore_missing
from controllers.store import Obj, meta, split_key
from pyextender.api.volcano import CronJob, FieldError

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]


def real_clock() -> datetime:
    return datetime.now(UTC)


def fast_clock(speed: float) -> Clock:
    """A clock that starts at the real time and runs ``speed`` times as fast (tests)."""
    start_real = datetime.now(UTC)
    start = time.monotonic()

    def now() -> datetime:
        return start_real + timedelta(seconds=(time.monotonic() - start) * speed)

    return now


def _owner_cronjob(job: Obj) -> str | None:
    for ref in meta(job).get("ownerReferences") or []:
        if ref.get("kind") == "CronJob" and ref.get("controller") and ref.get("uid"):
            return f"{meta(job).get('namespace')}/{ref['uid']}"
    return None


class CronJobController(Controller):
    name = "cronjob"

    def __init__(self, ctx: Context, clock: Clock = real_clock) -> None:
        super().__init__(ctx)
        self.clock = clock
        self._invalid: dict[str, str] = {}
        """CronJob key -> resourceVersion already reported as undecodable."""
        ctx.jobs.add_index("cronjob", lambda o: [k] if (k := _owner_cronjob(o)) else [])
        ctx.cronjobs.add_handler(self._on_cronjob)
        ctx.jobs.add_handler(self._on_job)

    def _on_cronjob(self, key: str, old: Obj | None, new: Obj | None) -> None:
        if new is not None:
            self.queue.add(key)

    def _on_job(self, key: str, old: Obj | None, new: Obj | None) -> None:
        job = new if new is not None else old
        assert job is not None
        owner = _owner_cronjob(job)
        if owner is None:
            return
        if new is not None and old is not None and phase_of(old) == phase_of(new):
            return
        ns, uid = split_key(owner)
        for cj in self.ctx.cronjobs.values():
            if meta(cj).get("uid") == uid and meta(cj).get("namespace") == ns:
                self.queue.add(f"{ns}/{meta(cj).get('name')}")

    def resync(self) -> None:
        for key in list(self.ctx.cronjobs.objects):
            self.queue.add(key)

    async def reconcile(self, key: str) -> None:
        ctx = self.ctx
        obj = ctx.cronjobs.get(key)
        if obj is None:
            self._invalid.pop(key, None)
            return
        try:
            cron = CronJob.from_dict(obj)
        except FieldError as exc:
            rv = str(meta(obj).get("resourceVersion") or "")
            if self._invalid.get(key) != rv:
                self._invalid[key] = rv
                ctx.recorder.event(obj, "InvalidSpec", f"cannot run: {exc}", warning=True)
            return
        ns, name = cron.metadata.namespace, cron.metadata.name
        owned = [
            j
            for j in ctx.jobs.by_index("cronjob", f"{ns}/{cron.metadata.uid}")
            if meta(j).get("namespace") == ns
        ]
        now = self.clock()
        p = plan(cron, owned, now)
        for reason, message, warning in p.events:
            ctx.recorder.event(obj, reason, message, warning=warning)
        for job_name in p.delete:
            await ignore_missing(call(ctx.kube.delete, JOBS, ns, job_name))
            ctx.jobs.forget(f"{ns}/{job_name}")
            self.wrote("job_delete")
            why = "replaced by a new run" if job_name in p.replaced else "past the history limit"
            ctx.recorder.event(obj, "SuccessfulDelete", f"Deleted job {job_name} ({why})")
        active = [reference(j) for j in p.active if meta(j).get("name") not in p.replaced]
        status: dict[str, Any] = {}
        if p.create and p.scheduled is not None:
            body = job_for(cron, obj, p.create, p.scheduled)
            created = await ignore_exists(call(ctx.kube.create, JOBS, ns, body))
            if created:
                ctx.jobs.remember(created)
                self.wrote("job_create")
                active.append(reference(created))
                ctx.recorder.event(
                    obj,
                    "SuccessfulCreate",
                    f"Created job {p.create} for {fmt_time(p.scheduled)}",
                )
            status["lastScheduleTime"] = fmt_time(p.scheduled)
        elif p.last_schedule is not None:
            current = cron.status.last_schedule_time
            if current != fmt_time(p.last_schedule):
                status["lastScheduleTime"] = fmt_time(p.last_schedule)
        if p.last_successful is not None:
            status["lastSuccessfulTime"] = fmt_time(p.last_successful)
        before = [(a.name, a.uid) for a in cron.status.active]
        if [(a["name"], a["uid"]) for a in active] != before:
            status["active"] = active or None
        if status:
            updated = await ignore_missing(
                call(ctx.kube.patch, CRONJOBS, ns, name, {"status": status}, True)
            )
            if updated:
                ctx.cronjobs.remember(updated)
                self.wrote("cronjob_status")
        if p.requeue_after is not None:
            self.queue.add_after(key, p.requeue_after)
