"""Job controller for ``batch.volcano.sh/v1alpha1`` Jobs.

Watches Jobs, their pods and PodGroups. A pod that fails, is evicted
(deleted), completes its task, or a PodGroup that turns Unknown becomes a
Request; lifecycle policies turn it into an action (job_state.decide); the
job's phase and that action say what to kill and which phase follows
(job_state.plan / next_phase). In Pending and Running the controller syncs:
it makes sure the PodGroup, the objects of the Job's plugins (job_plugins.py),
the PVCs of its volumes (job_volumes.py) and every pod ``<job>-<task>-<i>`` exist
(pods of a gang not yet admitted are created with our scheduling gate; a task
with ``dependsOn`` once the tasks it depends on are ready), and removes pods
beyond the replicas. A policy with a ``timeout`` puts its action off; the pod
running again, or any other action, cancels it. Every action taken or put off is
recorded as Volcano does (reason ExecuteAction), and once more under the action's name
with the pod and event that caused it. Pods the controller deletes itself raise no
PodEvicted. It is the only writer of Job status. Finished jobs with
``ttlSecondsAfterFinished`` are deleted when it expires.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import time
from typing import Any

from kubernetes.client.exceptions import ApiException

from controllers import job_plugins, job_pods, job_state, job_status, job_volumes
from controllers import pods as P
from controllers.job_state import Request
from controllers.kube import JOBS, PODGROUPS
from controllers.runtime import Context, Controller, call, ignore_exists, ignore_missing
from controllers.store import Obj, meta, split_key
from pyextender.api import names
from pyextender.api.volcano import FieldError, Job

log = logging.getLogger(__name__)

MAX_PENDING_REQUESTS = 256
"""Per job; beyond this, events are folded into one resync (nothing is lost: a sync
recounts every pod)."""
EXECUTE_ACTION = "ExecuteAction"
"""Event reason Volcano records when a policy or Command action starts or is put off."""
MAX_REMEMBERED_DELETES = 4096
"""Uids of pods we deleted, kept until their deletion is seen (bounded: oldest go)."""


def go_duration(seconds: float) -> str:
    """``seconds`` as Go's time.Duration prints it ("6s", "1m30s", "500ms"), the form
    of Volcano's delayed-action message."""
    if 0 < seconds < 1:
        return f"{seconds * 1000:g}ms"
    return job_status.go_duration(seconds)


def _owner_job(obj: Obj) -> str | None:
    ref = P.controller_ref(obj)
    if ref and ref.get("kind") == "Job" and ref.get("apiVersion") == job_pods.JOB_API_VERSION:
        return f"{meta(obj).get('namespace')}/{ref.get('name')}"
    return None


def _version(pod: Obj) -> int:
    raw = P.annotations_of(pod).get(names.VOLCANO_JOB_VERSION, "")
    return int(raw) if raw.isdigit() else -1


class JobController(Controller):
    name = "job"

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.requests: dict[str, list[Request]] = {}
        self._invalid: dict[str, str] = {}
        """Job key -> resourceVersion we already reported as invalid."""
        self._hosts: dict[str, dict[str, str]] = {}
        """Job uid -> the svc host ConfigMap data last written (rewritten after a restart)."""
        self._deleted: dict[str, None] = {}
        """Uids of pods we deleted ourselves (insertion-ordered): their deletion is no
        PodEvicted, as Volcano marks such pods out of sync before deleting them."""
        self._delayed: dict[str, dict[str, tuple[float, Request]]] = {}
        """Job key -> pod name ("" for the job) -> (monotonic deadline, the request to run
        then, its action set): actions a policy's ``timeout`` put off."""
        ctx.pods.add_index("job", lambda o: [k] if (k := _owner_job(o)) else [])
        ctx.podgroups.add_index("job", lambda o: [k] if (k := _owner_job(o)) else [])
        ctx.jobs.add_handler(self._on_job)
        ctx.pods.add_handler(self._on_pod)
        ctx.podgroups.add_handler(self._on_podgroup)

    # -- events -> requests -------------------------------------------------------
    def request(self, key: str, req: Request) -> None:
        pending = self.requests.setdefault(key, [])
        plain = req.event == "OutOfSync" and not req.action
        if plain and any(r.event == "OutOfSync" and not r.action for r in pending):
            pass  # one sync recounts everything
        elif len(pending) < MAX_PENDING_REQUESTS:
            pending.append(req)
        self.queue.add(key)

    def _on_job(self, key: str, old: Obj | None, new: Obj | None) -> None:
        if new is None or old is None:
            self.request(key, Request())
            return
        # our own status writes come back here: only a new spec or phase needs work
        before, after = old.get("spec"), new.get("spec")
        if before != after and job_volumes.without_generated_names(
            before
        ) != job_volumes.without_generated_names(after):
            self.request(key, Request(event="JobUpdated"))
        elif before != after:
            self.request(key, Request())  # the claim names we wrote
        elif _job_phase(old) != _job_phase(new) or P.deleting(new) != P.deleting(old):
            self.request(key, Request())

    def _task_completed(self, job_key: str, task: str) -> bool:
        job = self.ctx.jobs.get(job_key)
        tasks = ((job or {}).get("spec") or {}).get("tasks") or []
        replicas = next((int(t.get("replicas") or 0) for t in tasks if t.get("name") == task), 0)
        done = len(
            [
                p
                for p in self.ctx.pods.by_index("job", job_key)
                if P.annotations_of(p).get(names.VOLCANO_TASK_SPEC) == task
                and P.phase(p) == "Succeeded"
            ]
        )
        return replicas > 0 and done >= replicas

    def _on_pod(self, key: str, old: Obj | None, new: Obj | None) -> None:
        pod = new if new is not None else old
        assert pod is not None
        job_key = _owner_job(pod)
        if job_key is None:
            return
        task = P.annotations_of(pod).get(names.VOLCANO_TASK_SPEC, "")
        base = Request(task=task, pod=str(meta(pod).get("name")), version=_version(pod))
        if new is None:
            self._cancel_delayed(job_key, base.pod, ("PodPending",))
            uid = str(meta(pod).get("uid") or "")
            event = "OutOfSync" if uid in self._deleted else "PodEvicted"
            self._deleted.pop(uid, None)
            self.request(job_key, dataclasses.replace(base, event=event))
            return
        before = P.phase(old) if old is not None else ""
        after = P.phase(new)
        event = "OutOfSync"
        exit_code = None
        if after != "Pending" and before == "Pending":
            self._cancel_delayed(job_key, base.pod, ("PodPending",))
        if after == "Running" and before != "Running":
            self._cancel_delayed(job_key, base.pod, ("PodFailed", "PodEvicted"))
        if after == "Pending" and old is None and self._watches_pending(job_key):
            event = "PodPending"  # a new pod: a policy's timeout may act if it stays Pending
        elif after == "Failed" and before != "Failed":
            event, exit_code = "PodFailed", P.exit_code(new)
        elif after == "Succeeded" and before != "Succeeded" and self._task_completed(job_key, task):
            event = "TaskCompleted"
        elif (
            after in ("Pending", "Running")
            and old is not None
            and not P.deleting(new)
            and self._task_failed(job_key, task)
        ):
            # Volcano's updatePod: any update of a task's Pending/Running pod while the
            # task's restarts are over its maxRetry (so also after maxRetry is lowered)
            event = "TaskFailed"
        if (
            event == "OutOfSync"
            and old is not None
            and before == after
            and P.deleting(old) == P.deleting(new)
            and P.node_name(old) == P.node_name(new)
            and P.containers_ready(old) == P.containers_ready(new)
        ):
            return  # nothing the job counts (or a dependsOn waits for) has changed
        self.request(job_key, dataclasses.replace(base, event=event, exit_code=exit_code))

    def _watches_pending(self, job_key: str) -> bool:
        """A policy of the job acts on PodPending (only ones with a timeout do)."""
        spec = (self.ctx.jobs.get(job_key) or {}).get("spec") or {}
        policies = [*(spec.get("policies") or [])]
        for task in spec.get("tasks") or []:
            policies += task.get("policies") or []
        return any(
            p.get("timeout") and {"PodPending", "*"} & {p.get("event"), *(p.get("events") or [])}
            for p in policies
            if isinstance(p, dict)
        )

    def _task_failed(self, job_key: str, task: str) -> bool:
        raw = self.ctx.jobs.get(job_key)
        if raw is None:
            return False
        pods = self.ctx.pods.by_index("job", job_key)
        if not any(P.restart_count(p) for p in pods if _task_of(p) == task):
            return False  # the common case, without decoding the Job
        try:
            job = Job.from_dict(raw)
        except FieldError:
            return False
        return job_state.task_restarts_exceeded(job, task, pods)

    # -- delayed actions (a policy's timeout) ---------------------------------------
    def _delay(self, key: str, req: Request, action: str, seconds: float) -> None:
        """Run ``action`` for ``req`` after ``seconds``, unless cancelled before."""
        if self._settled(key, req):
            # the pod event that cancels it came before this request was handled (an
            # earlier reconcile replaced the pod, and it already runs): nothing to wait for
            log.info(
                "job %s: pod %s moved on before its %s; %s not delayed",
                *(key, req.pod, req.event, action),
            )
            return
        later = dataclasses.replace(req, action=action)
        self._delayed.setdefault(key, {})[req.pod] = (time.monotonic() + seconds, later)
        self.queue.add_after(key, seconds)

    def _settled(self, key: str, req: Request) -> bool:
        """Whether the pod of ``req`` already did what would cancel its delayed action."""
        if not req.pod or req.event not in ("PodPending", "PodFailed", "PodEvicted"):
            return False
        ns, _ = split_key(key)
        pod = self.ctx.pods.get(f"{ns}/{req.pod}")
        if req.event == "PodPending":
            return pod is None or P.phase(pod) != "Pending"
        # the failed pod is Failed and the evicted one gone: a Running one is its replacement
        return pod is not None and not P.deleting(pod) and P.phase(pod) == "Running"

    def _cancel_delayed(self, key: str, pod: str, events: tuple[str, ...]) -> None:
        """A pod that runs again cancels the actions its failure or eviction put off."""
        waiting = self._delayed.get(key, {})
        pending = waiting.get(pod)
        if pending is not None and pending[1].event in events:
            del waiting[pod]
            log.info("job %s: pod %s runs again; delayed %s cancelled", key, pod, pending[1].action)

    def _due(self, key: str) -> list[Request]:
        waiting = self._delayed.get(key)
        if not waiting:
            return []
        now = time.monotonic()
        due = [req for deadline, req in waiting.values() if deadline <= now]
        for target in [t for t, (deadline, _) in waiting.items() if deadline <= now]:
            del waiting[target]
        if waiting:  # come back for the next one, whatever woke us
            self.queue.add_after(key, max(0.05, min(d for d, _ in waiting.values()) - now))
        return due

    def _on_podgroup(self, key: str, old: Obj | None, new: Obj | None) -> None:
        pg = new if new is not None else old
        assert pg is not None
        job_key = _owner_job(pg)
        if job_key is None:
            return
        phase = _pg_phase(new)
        if new is not None and old is not None and phase == _pg_phase(old):
            return
        self.request(job_key, Request(event="Unknown" if phase == "Unknown" else "OutOfSync"))

    def resync(self) -> None:
        for key in list(self.ctx.jobs.objects):
            self.request(key, Request())

    # -- reconcile ------------------------------------------------------------------
    async def reconcile(self, key: str) -> None:
        reqs = [*self._due(key), *(self.requests.pop(key, None) or [])] or [Request()]
        raw = self.ctx.jobs.get(key)
        if raw is None:
            self._delayed.pop(key, None)
            await self._cleanup_deleted(key)
            return
        if P.deleting(raw):
            return
        for i, req in enumerate(reqs):
            try:
                await self._handle(key, req)
            except BaseException:
                self.requests[key] = reqs[i:] + self.requests.get(key, [])
                raise
        await self._expire(key)

    def _decode(self, key: str, raw: Obj) -> Job | None:
        try:
            return Job.from_dict(raw)
        except FieldError as exc:
            rv = str(meta(raw).get("resourceVersion"))
            if self._invalid.get(key) != rv:
                self._invalid[key] = rv
                self.ctx.recorder.event(raw, "InvalidJob", f"job cannot be run: {exc}", True)
            return None

    async def _handle(self, key: str, req: Request) -> None:
        ctx = self.ctx
        raw = ctx.jobs.get(key)
        if raw is None:
            return
        job = self._decode(key, raw)
        if job is None:
            return
        if job_volumes.unnamed_claims(job):
            await self._create_claims(job, raw)
            return  # the Job now names its claims; that update brings it back here
        status: dict[str, Any] = dict(raw.get("status") or {})
        if claims := job_volumes.controlled(job):
            status["controlledResources"] = {**(status.get("controlledResources") or {}), **claims}
        if job.status.state.phase is None:
            status = job_status.with_phase(
                status, "Pending", "JobCreated", "waiting for pods", job_status.now_rfc3339()
            )
            status["minAvailable"] = job.spec.gang_size
        phase = str(status["state"]["phase"])
        action, delay = job_state.decide_with_delay(job, req)
        if delay > 0:
            # Volcano's reason and wording (job_controller.go processNextReq): tools wait on them
            ctx.recorder.event(
                raw, EXECUTE_ACTION, f"Execute action {action} after {go_duration(delay)}"
            )
            self._delay(key, req, action, delay)
            action = job_state.SYNC
        elif action not in job_state.INTERNAL_ACTIONS:
            self._delayed.pop(key, None)  # Volcano: any real action cancels the delayed ones
        if action != job_state.SYNC:
            # Volcano's message, trailing blank included, for tools that compare it whole
            ctx.recorder.event(raw, EXECUTE_ACTION, f"Start to execute action {action} ")
            # ours besides, under the action's name: which pod and event, and why
            what = f"pod {req.pod} {req.event}" if req.pod else req.event
            if req.exit_code is not None:
                what += f" (exit code {req.exit_code})"
            source = "command" if req.event == "CommandIssued" else "lifecycle policy"
            ctx.recorder.event(raw, action, f"{what}: {source} action {action} in phase {phase}")
        pl = job_state.plan(phase, action)
        counts, killed = await self._apply(job, raw, pl, req, status, f"{action} in {phase}")
        if killed and pl.kill == "job":
            # Volcano bumps the version for a whole-job kill only: events of the old
            # pods are then ignored, while after a task or pod restart the other
            # pods' events still count
            status["version"] = job.status.version + 1
        if killed:
            created = job_status.parse_time(job.metadata.creation_timestamp) or time.time()
            status["runningDuration"] = job_status.go_duration(time.time() - created)
        new_phase, retry_inc = job_state.next_phase(pl.rule, job, counts)
        status.update(job_status.counts_status(counts, job.spec.gang_size))
        if retry_inc:
            status["retryCount"] = job.status.retry_count + retry_inc
        if new_phase is not None and new_phase != phase:
            reason, message = _transition_why(new_phase, action, req, counts, job)
            status = job_status.with_phase(
                status, new_phase, reason, message, job_status.now_rfc3339()
            )
            ctx.recorder.event(raw, reason, message, warning=new_phase in ("Failed", "Aborted"))
        await self._write_status(key, raw, status)

    async def _apply(
        self,
        job: Job,
        raw: Obj,
        pl: job_state.Plan,
        req: Request,
        status: dict[str, Any],
        why: str,
    ) -> tuple[job_state.Counts, bool]:
        """Kill or sync as the plan says; returns the pod counts after it and whether we killed."""
        ctx = self.ctx
        key = f"{job.metadata.namespace}/{job.metadata.name}"
        counts = job_state.Counts()
        pods = ctx.pods.by_index("job", key)
        ours = [p for p in pods if (P.controller_ref(p) or {}).get("uid") == job.metadata.uid]
        for stale in (p for p in pods if p not in ours and not P.deleting(p)):
            await self._delete_pod(stale, "left by an earlier job of the same name")
        if pl.kill == "":
            await self._sync(job, raw, ours, counts, status)
            return counts, False
        if pl.kill == "none":
            for p in ours:
                counts.add(p)
            return counts, False
        keep = job_state.retained(job, pl)
        for p in ours:
            target = (
                pl.kill == "job"
                or (pl.kill == "task" and _task_of(p) == req.task)
                or (pl.kill == "pod" and meta(p).get("name") == req.pod)
            )
            if target and not P.deleting(p) and P.phase(p) not in keep:
                await self._delete_pod(p, why)
                counts.terminating += 1
            else:
                counts.add(p)
        if pl.drop_podgroup:
            pg_name = job_pods.podgroup_name(job.metadata.name, job.metadata.uid)
            await ignore_missing(call(ctx.kube.delete, PODGROUPS, job.metadata.namespace, pg_name))
            ctx.podgroups.forget(f"{job.metadata.namespace}/{pg_name}")
        return counts, True

    async def _create_claims(self, job: Job, raw: Obj) -> None:
        """Volcano's job IO: a PVC for every volumeClaim, its name written into the spec."""
        ctx = self.ctx
        ns, job_name = job.metadata.namespace, job.metadata.name
        volumes = copy.deepcopy((raw.get("spec") or {}).get("volumes") or [])
        for i in job_volumes.unnamed_claims(job):
            claim = job.spec.volumes[i].volume_claim or {}
            while True:  # a fresh random name until one is free, as Volcano
                name = job_volumes.claim_name(job_name)
                body = job_volumes.pvc_body(job, name, claim)
                try:
                    await call(ctx.kube.core.create_namespaced_persistent_volume_claim, ns, body)
                    break
                except ApiException as exc:
                    if exc.status != 409:
                        raise
            self.wrote("persistentvolumeclaim")
            log.info("job %s/%s: created PVC %s for spec.volumes[%d]", ns, job_name, name, i)
            volumes[i]["volumeClaimName"] = name
        # volumes are immutable after creation (webhook): no resourceVersion precondition,
        # so a concurrent status write cannot make us create the claims twice
        updated = await call(ctx.kube.patch, JOBS, ns, job_name, {"spec": {"volumes": volumes}})
        ctx.jobs.remember(updated)
        self.wrote("job")

    async def _delete_pod(self, pod: Obj, why: str) -> None:
        ns, name = meta(pod).get("namespace"), meta(pod).get("name")
        uid = str(meta(pod).get("uid") or "")
        if len(self._deleted) >= MAX_REMEMBERED_DELETES:
            del self._deleted[next(iter(self._deleted))]
        self._deleted[uid] = None
        gone = await ignore_missing(call(self.ctx.kube.delete_pod, str(ns), str(name), uid))
        self.wrote("pod-delete")
        log.info("deleted pod %s/%s: %s", ns, name, why)
        if gone and P.deleting(gone):
            self.ctx.pods.remember(gone, only_if_present=True)
        else:
            self.ctx.pods.forget(f"{ns}/{name}")

    async def _sync(
        self, job: Job, raw: Obj, ours: list[Obj], counts: job_state.Counts, status: dict[str, Any]
    ) -> None:
        ctx = self.ctx
        m = job.metadata
        pg = await self._ensure_podgroup(job)
        gated = job.spec.gang_size > 1 and _pg_phase(pg) in (None, "", "Pending")
        await self._sync_plugins(job, status)
        by_name = {str(meta(p).get("name")): p for p in ours}
        wanted: set[str] = set()
        for task in job.spec.tasks:
            may_create = job_state.dependencies_ready(job, task, ours)
            for i in range(task.replicas):
                name = job_pods.pod_name(m.name, job_pods.task_name(task), i)
                wanted.add(name)
                existing = by_name.get(name)
                if existing is not None:
                    counts.add(existing)
                    continue
                if not may_create:
                    continue  # dependsOn: created once the tasks it depends on are ready
                body = job_pods.build_pod(job, task, i, gated, ctx.gang_barrier)
                created = await ignore_exists(call(ctx.kube.create_pod, m.namespace, body))
                if created:
                    ctx.pods.remember(created)
                    self.wrote("pod")
                counts.add(created or body)
        for name, pod in by_name.items():
            if name not in wanted:
                if P.deleting(pod):
                    counts.terminating += 1
                    continue
                await self._delete_pod(pod, "beyond the task's replicas")
                counts.terminating += 1

    async def _sync_plugins(self, job: Job, status: dict[str, Any]) -> None:
        """Create each plugin's objects once (marked in status.controlledResources as
        Volcano does) and keep the svc host ConfigMap current when a task is rescaled."""
        ns = job.metadata.namespace
        plugins = job.spec.plugin_args
        controlled = dict(status.get("controlledResources") or {})
        for name, args in plugins.items():
            if controlled.get(f"plugin-{name}") == name:
                continue
            for body in job_plugins.plugin_objects(job, args):
                kind = str(body["kind"])
                created = await call(self.ctx.kube.create_core, kind, ns, body)
                if created:
                    self.wrote(kind.lower())
                else:
                    # left by an earlier job of the same name (no garbage collector ran)
                    log.info("%s %s/%s exists; kept", kind, ns, body["metadata"]["name"])
            controlled[f"plugin-{name}"] = name
        if controlled:
            status["controlledResources"] = controlled
        if "svc" not in plugins:
            return
        hosts = job_plugins.svc_hosts(job)
        if self._hosts.get(job.metadata.uid) == hosts:
            return
        cm = job_plugins.svc_configmap(job)
        patch = {"metadata": {"ownerReferences": cm["metadata"]["ownerReferences"]}, "data": hosts}
        name = str(cm["metadata"]["name"])
        try:
            await call(self.ctx.kube.patch_configmap, ns, name, patch)
        except ApiException as exc:
            if exc.status != 404:
                raise
            await call(self.ctx.kube.create_core, "ConfigMap", ns, cm)
        self.wrote("configmap")
        self._hosts[job.metadata.uid] = hosts

    async def _ensure_podgroup(self, job: Job) -> Obj | None:
        ctx = self.ctx
        ns = job.metadata.namespace
        name = job_pods.podgroup_name(job.metadata.name, job.metadata.uid)
        pg = ctx.podgroups.get(f"{ns}/{name}")
        # minResources counts the tasks of the highest PriorityClass first, as Volcano
        priorities = P.priority_values(ctx.priorityclasses.values())
        if pg is None:
            created = await ignore_exists(
                call(ctx.kube.create, PODGROUPS, ns, job_pods.build_podgroup(job, priorities))
            )
            if created:
                ctx.podgroups.remember(created)
                self.wrote("podgroup")
            return created
        want = job_pods.podgroup_spec(job, priorities)
        have = pg.get("spec") or {}
        diff = {k: v for k, v in want.items() if k != "queue" and have.get(k, type(v)()) != v}
        if diff:
            # Volcano updates these when the job is edited (never the queue)
            patch = {k: job_status.replace_with_nulls(have.get(k), v) for k, v in diff.items()}
            updated = await call(ctx.kube.patch, PODGROUPS, ns, name, {"spec": patch})
            ctx.podgroups.remember(updated)
            self.wrote("podgroup")
            return updated
        return pg

    async def _write_status(self, key: str, raw: Obj, status: dict[str, Any]) -> None:
        old = raw.get("status") or {}
        if status == old:
            return
        ns, name = split_key(key)
        body = {
            "metadata": {"resourceVersion": meta(raw).get("resourceVersion")},
            "status": job_status.replace_with_nulls(old, status),
        }
        updated = await ignore_missing(call(self.ctx.kube.patch, JOBS, ns, name, body, True))
        if updated is None:
            return  # the job was deleted meanwhile
        self.ctx.jobs.remember(updated)
        self.wrote("job-status")

    async def _expire(self, key: str) -> None:
        """ttlSecondsAfterFinished: delete a finished job once its time is up."""
        raw = self.ctx.jobs.get(key)
        if raw is None:
            return
        ttl = (raw.get("spec") or {}).get("ttlSecondsAfterFinished")
        state = (raw.get("status") or {}).get("state") or {}
        if not isinstance(ttl, int) or state.get("phase") not in job_state.FINISHED:
            return
        finished = job_status.parse_time(state.get("lastTransitionTime")) or time.time()
        left = finished + ttl - time.time()
        if left > 0:
            self.queue.add_after(key, left + 0.1)
            return
        ns, name = split_key(key)
        self.ctx.recorder.event(
            raw, "TTLExpired", f"job {state.get('phase')} {ttl}s ago: deleting it"
        )
        await ignore_missing(call(self.ctx.kube.delete, JOBS, ns, name))
        self.wrote("job-delete")

    async def _cleanup_deleted(self, key: str) -> None:
        """What the garbage collector does for a deleted Job; clusters without
        kube-controller-manager (devcluster) have none."""
        ctx = self.ctx
        self._invalid.pop(key, None)
        for pg in ctx.podgroups.by_index("job", key):
            self._hosts.pop(str((P.controller_ref(pg) or {}).get("uid")), None)
        for pod in ctx.pods.by_index("job", key):
            if not P.deleting(pod):
                await self._delete_pod(pod, "its job was deleted")
        for pg in ctx.podgroups.by_index("job", key):
            ns, name = str(meta(pg).get("namespace")), str(meta(pg).get("name"))
            await ignore_missing(call(ctx.kube.delete, PODGROUPS, ns, name))
            ctx.podgroups.forget(f"{ns}/{name}")


def _task_of(pod: Obj) -> str:
    return P.annotations_of(pod).get(names.VOLCANO_TASK_SPEC, "")


def _job_phase(job: Obj) -> Any:
    return ((job.get("status") or {}).get("state") or {}).get("phase")


def _pg_phase(pg: Obj | None) -> Any:
    return ((pg or {}).get("status") or {}).get("phase")


def _transition_why(
    phase: str, action: str, req: Request, c: job_state.Counts, job: Job
) -> tuple[str, str]:
    """CamelCase reason and message for entering ``phase``."""
    gang = job.spec.gang_size
    if action != job_state.SYNC:
        cause = f"{req.event} of pod {req.pod}" if req.pod else req.event
        return f"Job{phase}", f"{action} ({cause}, retry {job.status.retry_count})"
    messages = {
        "Running": f"{c.running + c.succeeded + c.failed} of minAvailable {gang} pods started",
        "Completed": f"{c.succeeded} pods succeeded (minAvailable {gang})",
        "Failed": (
            f"retried {job.status.retry_count} times (maxRetry {job.spec.max_retry})"
            if job.status.retry_count >= job.spec.max_retry
            else f"{c.failed} pods failed, {c.succeeded} succeeded (minAvailable {gang})"
        ),
        "Pending": "old pods are gone; creating the pods of the next run",
        "Aborted": "every pod of the job is gone",
        "Terminated": "every pod of the job is gone",
    }
    return f"Job{phase}", messages.get(phase, phase)
