"""PodGroup controller.

1. Keeps our part of every PodGroup's status current from its member pods
   (counts, Running/Completed/Unknown, condition Scheduled; podgroup_status).
2. Gives a pod of ours that names no PodGroup one of its own, as Volcano does:
   ``podgroup-<uid of the pod's controller, or of the pod>``, minMember 1 (or its
   ReplicaSet's/StatefulSet's ``scheduling.volcano.sh/group-min-member``),
   minResources that many times the pod's quota usage, and annotates the pod with
   it. Our webhook names it in the pod's creation instead (an owned pod's
   ``podgroup-<owner uid>``; a pod without an owner, whose uid is not known then,
   ``podgroup-<fresh uuid>`` marked ``pyextender.io/own-podgroup``): then the
   PodGroup is created and nothing is written to the pod. Ours: it names
   ``volcano`` in a namespace labelled ``pyextender.io/enabled=true``, or our
   webhook held it (``_ours``). Such a pod waits, gated, until the sidecar admits
   that PodGroup to its queue.
3. Deletes ``podgroup-<owner uid>`` when its ReplicaSet or StatefulSet is scaled to
   zero (spec.replicas 0: the old ReplicaSet after a Deployment rollout), and
   gives the owner's pods their PodGroup again when it is scaled back up, as
   Volcano's pg_controller_handler does on the owner's add/update.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from controllers import podgroup_status
from controllers import pods as P
from controllers.kube import PODGROUPS
from controllers.runtime import Context, Controller, call, ignore_exists, ignore_missing
from controllers.store import Obj, key_of, meta, split_key
from pyextender.api import names
from pyextender.api.client import refused
from pyextender.api.volcano.podgroup import one_pod_group

log = logging.getLogger(__name__)

BARE_POD = "pod:"
"""Key prefix of a bare pod that needs a PodGroup (other keys are PodGroups)."""
OWNER = "owner:"
"""Key prefix of a ReplicaSet or StatefulSet: ``owner:<kind>:<namespace>/<name>``."""
OWNER_KINDS = ("ReplicaSet", "StatefulSet")
MAX_WARNED = 4096
"""PodGroups whose MinMemberUnreachable reason is remembered (oldest forgotten first)."""


def _controller_uid(pod: Obj) -> str:
    ref = P.controller_ref(pod)
    return str(ref.get("uid") or "") if ref and ref.get("kind") in OWNER_KINDS else ""


def _named_its_own(pod: Obj) -> bool:
    """Our webhook named the pod's own PodGroup at its creation (a pod without an owner):
    its annotations say from the start which PodGroup it has and why, so creating that
    PodGroup posts no event (one write fewer per such pod, as it is one per pod)."""
    return P.annotations_of(pod).get(names.OWN_PODGROUP_ANNOTATION) == "true"


def _replicas(owner: Obj) -> int:
    """spec.replicas of a ReplicaSet/StatefulSet (the API server defaults it to 1)."""
    value = (owner.get("spec") or {}).get("replicas")
    return value if isinstance(value, int) else 1


def bare_podgroup_name(pod: Obj) -> str:
    return names.own_podgroup_name(meta(pod))


GROUP_MIN_MEMBER_ANNOTATION = "scheduling.volcano.sh/group-min-member"
"""On a ReplicaSet (copied there from its Deployment) or StatefulSet: the minMember of
the PodGroup its pods get, as Volcano reads it from the pod's owners."""


def min_member_of(owner_annotations: Mapping[str, str]) -> int:
    """The owner's group-min-member, else 1 (also for a value that is not an integer
    >= 0: Volcano logs it and keeps 1)."""
    raw = owner_annotations.get(GROUP_MIN_MEMBER_ANNOTATION, "")
    try:
        value = int(raw)
    except ValueError:
        return 1
    return value if 0 <= value <= 2**31 - 1 else 1


def unreachable_min_member(kind: str, owner: Obj, min_member: int) -> str:
    """Why the PodGroup of ``owner``'s pods can never have ``min_member`` of them, or ""
    (Volcano creates the same PodGroup and leaves it Pending without a word):
    - fewer replicas than that;
    - a StatefulSet with OrderedReady pod management (the default) creates pod i+1 only
      once pod i is Running and Ready, and our gate holds pod 0 until the gang is whole.
    """
    name = f"{kind} {meta(owner).get('name')}"
    replicas = _replicas(owner)
    if 0 < replicas < min_member:  # at 0 its pods are going away
        return (
            f"{name} has {replicas} replicas, fewer than its {GROUP_MIN_MEMBER_ANNOTATION} "
            f"{min_member}: its pods' PodGroup can never gather {min_member} members, so "
            f"its pods that wait are held for ever; scale it to {min_member} or more"
        )
    policy = (owner.get("spec") or {}).get("podManagementPolicy") or "OrderedReady"
    if kind == "StatefulSet" and min_member > 1 and policy == "OrderedReady":
        return (
            f"{name} creates its pods one at a time, each once the one before is Ready "
            f"(podManagementPolicy OrderedReady), so its PodGroup never has the "
            f"{min_member} pods its {GROUP_MIN_MEMBER_ANNOTATION} asks for before the first "
            f"may start: recreate it with podManagementPolicy: Parallel (the field cannot "
            f"be changed), or with {GROUP_MIN_MEMBER_ANNOTATION}: 1"
        )
    return ""


def bare_podgroup(pod: Obj, owner_annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Volcano's PodGroup for a pod that names none; minMember from the owner's
    group-min-member, minResources that many times the pod's quota usage."""
    m = meta(pod)
    ref = P.controller_ref(pod)
    owners = (
        list(m.get("ownerReferences") or [])
        if ref
        else [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": m.get("name"),
                "uid": m.get("uid"),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    )
    spec = pod.get("spec") or {}
    min_member = min_member_of(owner_annotations or {})
    try:
        # as Volcano: the pod's quota usage (cpu, requests.cpu, limits.cpu, pods, ...)
        usage = {k: v * min_member for k, v in P.quota_usage(spec).items()}
    except (ValueError, TypeError, AttributeError):
        usage = {}
    body: dict[str, Any] = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": bare_podgroup_name(pod),
            "namespace": m.get("namespace"),
            "ownerReferences": owners,
        },
        "spec": {
            "minMember": min_member,
            "priorityClassName": spec.get("priorityClassName") or "",
            "minResources": P.format_quota(usage),
        },
    }
    queue = P.annotations_of(pod).get(names.POD_QUEUE_ANNOTATION)
    if queue:
        body["spec"]["queue"] = queue
    return body


def _why(phase: str, pg: Obj, m: podgroup_status.Members) -> tuple[str, str]:
    min_member = int((pg.get("spec") or {}).get("minMember") or 0)
    if phase == "Running":
        return "GangRunning", f"{m.allocated} members bound, minMember {min_member}"
    if phase == "Completed":
        return "GangCompleted", f"all {m.allocated} bound members succeeded"
    return (
        "GangBroken",
        f"only {m.allocated} of minMember {min_member} members still bound "
        f"({m.running} running, {m.failed} failed)",
    )


class PodGroupController(Controller):
    name = "podgroup"

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        ctx.pods.add_handler(self._on_pod)
        ctx.podgroups.add_handler(self._on_podgroup)
        ctx.namespaces.add_handler(self._on_namespace)
        ctx.pods.add_index("controller-uid", lambda o: [u] if (u := _controller_uid(o)) else [])
        ctx.replicasets.add_handler(self._owner_handler("ReplicaSet"))
        ctx.statefulsets.add_handler(self._owner_handler("StatefulSet"))
        self._unreachable: dict[str, str] = {}
        """PodGroup uid -> the MinMemberUnreachable reason last sent for it (one Warning per
        distinct reason, however often its owner's status changes). By uid: a PodGroup
        deleted at zero replicas and made again on scale-up is a new one, told afresh."""

    @staticmethod
    def _group_of(pod: Obj) -> list[str]:
        group = P.group_name(pod)
        return [f"{meta(pod).get('namespace')}/{group}"] if group else []

    def _on_pod(self, key: str, old: Obj | None, new: Obj | None) -> None:
        for obj in (old, new):
            if obj is not None:
                for pg_key in self._group_of(obj):
                    self.queue.add(pg_key)
        if new is not None and self._needs_podgroup(new):
            self.queue.add(BARE_POD + key)

    def _owner_handler(self, kind: str) -> Callable[[str, Obj | None, Obj | None], None]:
        def handler(key: str, old: Obj | None, new: Obj | None) -> None:
            if new is not None:
                self.queue.add(f"{OWNER}{kind}:{key}")

        return handler

    def _on_podgroup(self, key: str, old: Obj | None, new: Obj | None) -> None:
        if new is not None:
            self.queue.add(key)

    def _on_namespace(self, key: str, old: Obj | None, new: Obj | None) -> None:
        if new is None or self._enabled(key) == (old is not None and self._enabled_obj(old)):
            return
        for pod in self.ctx.pods.values():
            if meta(pod).get("namespace") == key and self._needs_podgroup(pod):
                self.queue.add(BARE_POD + key_of(pod))

    @staticmethod
    def _enabled_obj(ns: Obj) -> bool:
        return P.labels_of(ns).get(names.ENABLED_LABEL) == "true"

    def _enabled(self, namespace: str) -> bool:
        ns = self.ctx.namespaces.get(namespace)
        return ns is not None and self._enabled_obj(ns)

    def _ours(self, pod: Obj) -> bool:
        """A pod that should belong to a PodGroup: it names our scheduler in an adopted
        namespace, or our webhook held it (the webhook saw its namespace adopted, by
        label or by name, and in existing mode gave it the cluster's scheduler name):
        it waits, held, for the PodGroup we give it to be admitted."""
        if P.annotations_of(pod).get(names.GATED_BY_WEBHOOK_ANNOTATION) == "true":
            return True
        return P.scheduler_name(pod) == self.ctx.scheduler_name and self._enabled(
            str(meta(pod).get("namespace"))
        )

    def _needs_podgroup(self, pod: Obj) -> bool:
        """A pod of ours that names no PodGroup, or names the one of its own that we
        give it (the webhook names an owned pod's at creation) before that exists."""
        group = P.group_name(pod)
        if group and (
            group != bare_podgroup_name(pod)
            or self.ctx.podgroups.get(f"{meta(pod).get('namespace')}/{group}") is not None
        ):
            return False
        return P.phase(pod) not in P.TERMINATED and not P.deleting(pod) and self._ours(pod)

    def resync(self) -> None:
        for key in list(self.ctx.podgroups.objects):
            self.queue.add(key)
        for key, pod in list(self.ctx.pods.objects.items()):
            if self._needs_podgroup(pod):
                self.queue.add(BARE_POD + key)
        for kind, store in (
            ("ReplicaSet", self.ctx.replicasets),
            ("StatefulSet", self.ctx.statefulsets),
        ):
            for key, owner in list(store.objects.items()):
                if _replicas(owner) == 0:
                    self.queue.add(f"{OWNER}{kind}:{key}")

    async def reconcile(self, key: str) -> None:
        if key.startswith(BARE_POD):
            await self._reconcile_bare_pod(key[len(BARE_POD) :])
        elif key.startswith(OWNER):
            kind, _, owner_key = key[len(OWNER) :].partition(":")
            await self._reconcile_owner(kind, owner_key)
        else:
            await self._reconcile_status(key)

    async def _reconcile_status(self, key: str) -> None:
        ctx = self.ctx
        pg = ctx.podgroups.get(key)
        if pg is None or P.deleting(pg):
            return
        members = ctx.pods.by_index("group", key)
        patch = podgroup_status.status_patch(pg, members)
        if not patch:
            return
        body: dict[str, Any] = {"status": patch}
        if "phase" in patch or "conditions" in patch:
            # the sidecar writes phase and conditions too: only on top of what we read
            body["metadata"] = {"resourceVersion": meta(pg).get("resourceVersion")}
        ns, name = split_key(key)
        updated = await ignore_missing(call(ctx.kube.patch, PODGROUPS, ns, name, body, True))
        if updated is None:
            return  # deleted meanwhile (a finished or restarted job drops its PodGroup)
        ctx.podgroups.remember(updated)
        self.wrote("podgroup-status")
        if "phase" in patch:
            reason, message = _why(patch["phase"], pg, podgroup_status.count_members(members))
            min_member = int((pg.get("spec") or {}).get("minMember") or 0)
            if reason == "GangBroken" or not one_pod_group(min_member, len(members)):
                ctx.recorder.event(updated or pg, reason, message, warning=reason == "GangBroken")

    async def _reconcile_owner(self, kind: str, key: str) -> None:
        """A ReplicaSet/StatefulSet at spec.replicas 0 loses ``podgroup-<its uid>``; one
        above 0 whose pods lost it (scaled to zero and back) gets it again."""
        ctx = self.ctx
        store = ctx.replicasets if kind == "ReplicaSet" else ctx.statefulsets
        owner = store.get(key)
        if owner is None:
            return
        ns, _ = split_key(key)
        uid = str(meta(owner).get("uid") or "")
        pg_name = f"{names.PODGROUP_PREFIX}{uid}"
        pg = ctx.podgroups.get(f"{ns}/{pg_name}")
        if _replicas(owner) == 0:
            if pg is None or P.deleting(pg):
                return
            await ignore_missing(call(ctx.kube.delete, PODGROUPS, ns, pg_name))
            ctx.podgroups.forget(f"{ns}/{pg_name}")
            self.wrote("podgroup-delete")
            log.info("%s %s scaled to zero: deleted PodGroup %s", kind, key, pg_name)
            return
        if pg is not None:
            # scaled below its min-member (or edited): say so on the PodGroup
            self._warn_unreachable(kind, owner, pg)
            return
        for pod in ctx.pods.by_index("controller-uid", uid):
            if (
                P.group_name(pod) in ("", pg_name)
                and P.phase(pod) not in P.TERMINATED
                and not P.deleting(pod)
                and self._ours(pod)
            ):
                body = bare_podgroup(pod, P.annotations_of(owner))
                created = await self._create(pod, ns, body)
                if created:
                    ctx.podgroups.remember(created)
                    self.wrote("podgroup")
                    log.info("%s %s scaled up again: created PodGroup %s", kind, key, pg_name)
                    self._warn_unreachable(kind, owner, created, pod)
                return

    async def _create(self, pod: Obj, ns: str, body: dict[str, Any]) -> Obj | None:
        """Create the PodGroup ``body`` for ``pod`` (None: it exists already). When the API
        server or an admission webhook refuses it (a queue that does not exist, say), the
        pod gets a Warning saying why, as it stays held, and the error goes up for the
        worker to retry with backoff (at most MAX_DELAY_S apart): the cause may be fixed."""
        try:
            return await ignore_exists(call(self.ctx.kube.create, PODGROUPS, ns, body))
        except Exception as exc:
            if refused(exc):
                name = meta(body).get("name")
                self.ctx.recorder.event(
                    pod,
                    "FailedCreatePodGroup",
                    f"cannot create its PodGroup {name} (HTTP {getattr(exc, 'status', '?')}): "
                    f"{getattr(exc, 'reason', exc)}; "
                    f"the pod stays held, and it is retried",
                    warning=True,
                )
            raise

    def _warn_unreachable(self, kind: str, owner: Obj, pg: Obj, *also: Obj) -> None:
        """A Warning MinMemberUnreachable on ``pg`` (and on ``also``) when its owner can
        never give it minMember pods (``unreachable_min_member``): once per distinct
        reason, and again only after the owner could fill it in between (scaled back up)."""
        key = str(meta(pg).get("uid") or key_of(pg))
        min_member = (pg.get("spec") or {}).get("minMember")
        why = unreachable_min_member(kind, owner, min_member if isinstance(min_member, int) else 1)
        if why == self._unreachable.get(key, ""):
            return
        if not why:
            del self._unreachable[key]
            return
        if len(self._unreachable) >= MAX_WARNED:
            del self._unreachable[next(iter(self._unreachable))]  # the oldest
        self._unreachable[key] = why
        for obj in (pg, *also):
            self.ctx.recorder.event(obj, "MinMemberUnreachable", why, warning=True)

    async def _owner(self, pod: Obj) -> tuple[str, Obj] | None:
        """The pod's ReplicaSet or StatefulSet (kind, object): from the watch cache, or
        read when the owner's watch event has not come yet (the pod's may come first)."""
        ref = P.controller_ref(pod)
        if not ref or ref.get("kind") not in OWNER_KINDS:
            return None
        ns, name = str(meta(pod).get("namespace")), str(ref.get("name"))
        kind = str(ref.get("kind"))
        is_rs = kind == "ReplicaSet"
        owner = (self.ctx.replicasets if is_rs else self.ctx.statefulsets).get(f"{ns}/{name}")
        if owner is not None and meta(owner).get("uid") == ref.get("uid"):
            return kind, owner
        apps = self.ctx.kube.apps
        read = apps.read_namespaced_replica_set if is_rs else apps.read_namespaced_stateful_set
        found = await ignore_missing(call(read, name, ns))
        if found is None or found.metadata.uid != ref.get("uid"):
            return None
        spec = found.spec
        return kind, {
            "metadata": {"name": name, "annotations": dict(found.metadata.annotations or {})},
            "spec": {
                "replicas": spec.replicas,
                "podManagementPolicy": getattr(spec, "pod_management_policy", None),
            },
        }

    async def _reconcile_bare_pod(self, key: str) -> None:
        ctx = self.ctx
        pod = ctx.pods.get(key)
        if pod is None or not self._needs_podgroup(pod):
            return
        ns, _ = split_key(key)
        pg_name = bare_podgroup_name(pod)
        if ctx.podgroups.get(f"{ns}/{pg_name}") is None:
            owner = await self._owner(pod)
            if owner and _replicas(owner[1]) == 0:
                return  # its pods are on their way out (_reconcile_owner deleted its PodGroup)
            body = bare_podgroup(pod, P.annotations_of(owner[1]) if owner else {})
            created = await self._create(pod, ns, body)
            if created:
                ctx.podgroups.remember(created)
                self.wrote("podgroup")
                if not _named_its_own(pod):
                    ctx.recorder.event(
                        pod,
                        "PodGroupCreated",
                        f"pod is ours (schedulerName {P.scheduler_name(pod)}) and names no "
                        f"PodGroup of a gang: created PodGroup {pg_name}",
                    )
                if owner:
                    self._warn_unreachable(*owner, created, pod)
        if P.group_name(pod) == pg_name:
            return  # named at creation (the webhook): nothing to write on the pod
        patch = {"metadata": {"annotations": {names.GROUP_NAME_ANNOTATION: pg_name}}}
        updated = await ignore_missing(call(ctx.kube.patch_pod, ns, meta(pod).get("name"), patch))
        if updated is None:
            return
        ctx.pods.remember(updated)
        self.wrote("pod-annotation")
