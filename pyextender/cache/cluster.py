"""Applies list/watch results for nodes and pods to a ClusterState.

Called on one thread only (the event loop). Pods that are bound and not
terminated hold resources; pending pods of our scheduler are kept in
``pending`` for metrics and (later) gang bookkeeping.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from pyextender.api.names import (
    BARRIER_ANNOTATION,
    BARRIER_GATE,
    RELEASED_ANNOTATION,
    SCHEDULER_NAME,
)
from pyextender.api.objects import ObjectError, PodInfo, node_from_dict, pod_from_dict
from pyextender.api.volcano.hypernode import HyperNode, resolve_nodes
from pyextender.cache.batch import GroupView, QueueView, group_from_dict, queue_from_dict
from pyextender.cache.members import GroupMembers
from pyextender.cache.reading_copy import reading_copy
from pyextender.cache.state import ClusterState

log = logging.getLogger(__name__)

DELETED_MEMORY = 10_000
"""Recently gone pod uids remembered (bounded: ~1 MB at most)."""


NOT_IN_SNAPSHOT = (
    "pending", "pods_by_key", "node_problems", "orphaned_pods", "members", "hypernodes",
    "deleted_uids", "pod_gone", "pod_bound", "released", "pod_released", "gang_whole",
)  # fmt: skip
"""What the cycle never reads (it reads pods_by_uid, groups, queues, succeeded and the
state): a snapshot leaves it out rather than copy it on the loop."""


class ClusterCache:
    """The sidecar's view of the cluster, fed by informers."""

    def __init__(self, scheduler_name: str = SCHEDULER_NAME) -> None:
        self.state = ClusterState()
        self.scheduler_name = scheduler_name
        self.pending: dict[str, PodInfo] = {}
        self.pods_by_key: dict[str, PodInfo] = {}
        self.synced_nodes = False
        self.synced_pods = False
        self.node_problems: dict[str, tuple[str, ...]] = {}
        """node name -> what is wrong with it now (e.g. a bad GPU annotation); a node
        that is fixed drops out, so the same problem coming back is news again."""
        # pods bound by an extender call before the watch saw them bound
        self.orphaned_pods: dict[str, PodInfo] = {}
        self.pods_by_uid: dict[str, PodInfo] = {}
        self.groups: dict[str, GroupView] = {}
        """PodGroups by "namespace/name"."""
        self.members = GroupMembers()
        """PodGroup key -> uids of its live (non-terminated) pods."""
        self.succeeded = GroupMembers()
        """PodGroup key -> uids of its pods that Succeeded and still exist. They hold
        nothing, but count toward the gang (as Volcano's ready count does): a member
        placed after others finished must not wait for minMember new ones."""
        self.queues: dict[str, QueueView] = {}
        self.hypernodes: dict[str, HyperNode] = {}
        self.topology_dirty = False
        """HyperNodes or nodes changed: node tiers need recomputing (refresh_topology)."""
        self.synced_groups = True  # set False by the sidecar when it watches CRDs
        self.synced_queues = True
        self.version = 0
        """Bumped on every applied event: the scheduling loop runs when it moved."""
        self.deleted_uids: dict[str, None] = {}
        """Uids of pods deleted or terminated lately (insertion order, at most
        DELETED_MEMORY): tells "gone" from "not shown by the watch yet"."""
        self.pod_gone: list[Callable[[str], None]] = []
        """Called with a pod's uid when it is deleted, terminates or starts deleting."""
        self.pod_bound: list[Callable[[PodInfo], None]] = []
        """Called with a pod the watch shows bound where the cache had assumed it."""
        self.gang_whole: list[Callable[[], None]] = []
        """Called when a PodGroup not admitted yet (phase Pending) reaches minMember
        pods, by its last pod's event or by its own creation: a cycle can admit it now."""
        self.released: dict[str, None] = {}
        """Uids of pods released at the gang barrier: listed in their PodGroup's
        RELEASED_ANNOTATION, or released by this replica's actions before its watch
        shows that write. Dropped when the pod goes (or its PodGroup does)."""
        self.pod_released: list[Callable[[list[PodInfo]], None]] = []
        """Called with the pods that just came through the barrier (gRPC WatchReleased)."""

    def snapshot(self) -> ClusterCache:
        """A copy for a worker thread (the scheduling cycle): it reads this while the
        event loop goes on applying watch events to the original."""
        snap = reading_copy(self, left_out=NOT_IN_SNAPSHOT)
        snap.state = self.state.snapshot()
        return snap

    @property
    def synced(self) -> bool:
        return self.synced_nodes and self.synced_pods and self.synced_groups and self.synced_queues

    # -- podgroups and queues --------------------------------------------------
    def group_event(self, kind: str, obj: Mapping[str, Any]) -> None:
        group = group_from_dict(obj)
        self.version += 1
        if kind == "DELETED":
            self.groups.pop(group.key, None)
            self.state.gang_plans.pop(group.key, None)
            for uid in released_uids(group):
                self.released.pop(uid, None)
        else:
            new = group.key not in self.groups
            self.groups[group.key] = group
            self.release(released_uids(group))
            if new:
                self._retry_members(group.key)
                if self.gang_whole:
                    self._note_whole(group.key)

    def _note_whole(self, key: str) -> None:
        """Tell gang_whole when PodGroup ``key``, not admitted yet, has exactly minMember
        pods (the event that made it whole; later members do not repeat it)."""
        group = self.groups.get(key)
        if (
            group is not None
            and group.phase in ("", "Pending")
            and self.members.count(key) == max(group.min_member, 1)
        ):
            for listener in self.gang_whole:
                listener()

    def replace_groups(self, items: Iterable[Mapping[str, Any]]) -> None:
        fresh = {g.key: g for g in map(group_from_dict, items)}
        new = [key for key in fresh if key not in self.groups]
        self.groups = fresh
        self.synced_groups = True
        self.version += 1
        for group in fresh.values():
            self.release(released_uids(group))
        for key in new:
            self._retry_members(key)

    def waiting_members(self) -> list[PodInfo]:
        """Unbound members of existing PodGroups that are ours and neither gated nor
        held at the barrier, and carry no barrier annotation: the pods PreFilter may
        have refused while their PodGroup was missing. A new WatchReleased stream lists
        them in its first message, so a PodGroup that appeared while no shim was
        listening (the stream reconnecting, or this sidecar restarting) does not leave
        its members parked; for one that was not parked the listing is a no-op."""
        return [
            p
            for p in self.pending.values()
            if not p.gates
            and BARRIER_ANNOTATION not in p.annotations
            and (key := self.group_of(p))
            and key in self.groups
        ]

    def _retry_members(self, key: str) -> None:
        """A PodGroup appeared: its members that kube-scheduler may have tried while it
        did not exist (unbound, ours, neither gated nor held at the barrier: refused by
        ``missing_group``) go to the pod_released listeners. The WatchReleased stream
        sends them, and the framework shim moves them to the active queue: tried again
        now rather than at some later cluster event (PreFilter refused them as
        unresolvable, which leaves them until one). For the shim a pod without the
        barrier annotation is never held, so listing it releases nothing. Extender mode
        needs none of it: its filter's error has kube-scheduler retry within a backoff."""
        if not self.pod_released:
            return  # nobody listens: the next stream's first message lists them
        waiting = [p for p in self.member_pods(key) if p.uid in self.pending and not p.gates]
        if waiting:
            for listener in self.pod_released:
                listener(waiting)

    # -- the gang barrier --------------------------------------------------------
    def _held(self, pod: PodInfo) -> PodInfo:
        """A pod held at the barrier (annotated, unbound, not released) shows BARRIER_GATE,
        so everything that reads gates (the actions, the verbs) treats it as gated."""
        if (
            pod.node_name
            or BARRIER_ANNOTATION not in pod.annotations
            or pod.uid in self.released
            or BARRIER_GATE in pod.gates
        ):
            return pod
        return replace(pod, gates=(*pod.gates, BARRIER_GATE))

    def release(self, uids: Iterable[str]) -> list[PodInfo]:
        """Let pods through the barrier; returns (and tells pod_released about) the cached
        pods that were held. Idempotent: the PodGroup's annotation repeats our own."""
        out: list[PodInfo] = []
        for uid in uids:
            if not uid or uid in self.released:
                continue
            self.released[uid] = None
            pod = self.pods_by_uid.get(uid)
            if pod is None or BARRIER_GATE not in pod.gates:
                continue
            pod = replace(pod, gates=tuple(g for g in pod.gates if g != BARRIER_GATE))
            self.pods_by_uid[uid] = pod
            held = self.pods_by_key.get(pod.key)
            if held is not None and held.uid == uid:
                self.pods_by_key[pod.key] = pod
            if uid in self.pending:
                self.pending[uid] = pod
            out.append(pod)
        if out:
            self.version += 1
            for listener in self.pod_released:
                listener(out)
        return out

    def released_pending(self) -> list[PodInfo]:
        """Pods released at the barrier and not bound yet (what a new watcher is sent)."""
        return [
            p
            for p in self.pending.values()
            if BARRIER_ANNOTATION in p.annotations and BARRIER_GATE not in p.gates
        ]

    def queue_event(self, kind: str, obj: Mapping[str, Any]) -> None:
        queue = queue_from_dict(obj)
        self.version += 1
        if kind == "DELETED":
            self.queues.pop(queue.name, None)
        else:
            self.queues[queue.name] = queue

    def replace_queues(self, items: Iterable[Mapping[str, Any]]) -> None:
        self.queues = {q.name: q for q in map(queue_from_dict, items)}
        self.synced_queues = True
        self.version += 1

    # -- hypernodes -------------------------------------------------------------
    def hypernode_event(self, kind: str, obj: Mapping[str, Any]) -> None:
        name = str((obj.get("metadata") or {}).get("name") or "")
        if kind == "DELETED":
            self.hypernodes.pop(name, None)
        else:
            try:
                self.hypernodes[name] = HyperNode.from_dict(obj)
            except ValueError as exc:
                log.warning("ignoring HyperNode %s: %s", name, exc)
                return
        self.topology_dirty = True

    def replace_hypernodes(self, items: Iterable[Mapping[str, Any]]) -> None:
        self.hypernodes = {}
        for obj in items:
            self.hypernode_event("ADDED", obj)
        self.topology_dirty = True

    def refresh_topology(self) -> None:
        """Each node's HyperNode per tier (tier 1 first) -> the GPU state's supernodes."""
        if not self.topology_dirty:
            return
        self.topology_dirty = False
        if not self.hypernodes:
            return
        labels = {n.name: n.labels for n in self.state.nodes if n is not None}
        by_tier: dict[str, dict[int, str]] = {}
        for hn in sorted(self.hypernodes.values(), key=lambda h: h.metadata.name):
            tier = int(hn.spec.tier or 0)
            for node in resolve_nodes(hn, labels, self.hypernodes):
                by_tier.setdefault(node, {}).setdefault(tier, hn.metadata.name)
        for name, row in self.state.index.items():
            tiers = by_tier.get(name, {})
            self.state.set_tiers(row, [tiers[t] for t in sorted(tiers)])
        self.version += 1

    def group_of(self, pod: PodInfo) -> str:
        """PodGroup key of a pod, or "" when it belongs to none. Interned: the cache's
        members and the actions loop's kept Tasks hold it for every pod, and all the
        pods of a group then share one string (a new one each was 6 MB per holder at
        100,000 pods)."""
        name = pod.group_name
        return sys.intern(f"{pod.namespace}/{name}") if name else ""

    def missing_group(self, pod: PodInfo) -> str:
        """Why a pod naming a PodGroup may not be placed or bound: the PodGroup is not
        known (not created yet, deleted, or our watch has not shown it); "" when the pod
        names none or it is known. As Volcano, a gang member never runs without its
        PodGroup: binding it alone would run part of a gang."""
        key = self.group_of(pod)
        if not key or key in self.groups:
            return ""
        return f"PodGroup {key} does not exist (yet): its pods wait for it"

    def succeeded_members(self, group_key: str) -> int:
        """Members of the PodGroup that Succeeded (and still exist)."""
        return self.succeeded.count(group_key)

    def member_pods(self, group_key: str) -> list[PodInfo]:
        pods = self.pods_by_uid
        return [pods[u] for u in self.members.uids(group_key) if u in pods]

    # -- nodes -------------------------------------------------------------
    def node_event(self, kind: str, obj: Mapping[str, Any]) -> None:
        try:
            node = node_from_dict(obj)
        except ObjectError as exc:
            log.warning("ignoring node event: %s", exc)
            return
        if kind == "DELETED":
            self.state.remove_node(node.name)
            self.node_problems.pop(node.name, None)
            return
        if node.name not in self.state.index:
            self.topology_dirty = True
        problems = tuple(self.state.set_node(node))
        if problems and self.node_problems.get(node.name) != problems:
            for w in problems:
                log.warning("node %s: %s", node.name, w)
        if problems:
            self.node_problems[node.name] = problems
        else:
            self.node_problems.pop(node.name, None)
        # pods whose node arrived after them
        for uid, pod in list(self.orphaned_pods.items()):
            if pod.node_name == node.name and self.state.add_pod(pod, node.name):
                del self.orphaned_pods[uid]

    def replace_nodes(self, items: Iterable[Mapping[str, Any]]) -> None:
        seen: set[str] = set()
        for obj in items:
            self.node_event("ADDED", obj)
            name = (obj.get("metadata") or {}).get("name")
            if isinstance(name, str):
                seen.add(name)
        for name in list(self.state.index):
            if name not in seen:
                self.state.remove_node(name)
        for name in [n for n in self.node_problems if n not in seen]:
            del self.node_problems[name]
        self.synced_nodes = True

    # -- pods --------------------------------------------------------------
    def pod_event(self, kind: str, obj: Mapping[str, Any]) -> None:
        try:
            pod = pod_from_dict(obj)
        except ObjectError as exc:
            log.warning("ignoring pod event: %s", exc)
            return
        self._apply_pod(kind, pod)

    def _gone(self, uid: str) -> None:
        if uid in self.deleted_uids:
            return
        self.deleted_uids[uid] = None
        if len(self.deleted_uids) > DELETED_MEMORY:
            del self.deleted_uids[next(iter(self.deleted_uids))]
        for listener in self.pod_gone:
            listener(uid)

    def _forget(self, pod: PodInfo) -> None:
        self._gone(pod.uid)
        self.released.pop(pod.uid, None)
        self.pending.pop(pod.uid, None)
        self.orphaned_pods.pop(pod.uid, None)
        self.pods_by_key.pop(pod.key, None)
        self.pods_by_uid.pop(pod.uid, None)
        group = self.group_of(pod)
        if group:
            self.members.discard(group, pod.uid)
        self.state.remove_pod(pod.uid)

    def _note_succeeded(self, kind: str, pod: PodInfo) -> None:
        group = self.group_of(pod)
        if not group:
            return
        if kind != "DELETED" and pod.phase == "Succeeded":
            self.succeeded.add(group, pod.uid)
        else:
            self.succeeded.discard(group, pod.uid)

    def _apply_pod(self, kind: str, pod: PodInfo) -> None:
        self.version += 1
        self._note_succeeded(kind, pod)
        if kind == "DELETED" or pod.terminated:
            self._forget(pod)
            if kind != "DELETED":
                self.pods_by_key[pod.key] = pod
            return
        pod = self._held(pod)
        self.pods_by_key[pod.key] = pod
        self.pods_by_uid[pod.uid] = pod
        if pod.deleting:
            for listener in self.pod_gone:
                listener(pod.uid)
        group = self.group_of(pod)
        if group:
            before = self.members.count(group)
            self.members.add(group, pod.uid)
            if self.gang_whole and before < self.members.count(group):
                self._note_whole(group)
        if pod.node_name:
            self.pending.pop(pod.uid, None)
            held = self.state.pods.get(pod.uid)
            assumed = held is not None and held.assumed  # add_pod clears it
            if not self.state.add_pod(pod, pod.node_name):
                self.orphaned_pods[pod.uid] = pod
            elif assumed:
                for confirm in self.pod_bound:
                    confirm(pod)
            return
        if pod.scheduler_name == self.scheduler_name:
            self.pending[pod.uid] = pod
        rec = self.state.pods.get(pod.uid)
        if rec is not None and not rec.assumed:
            # unbound again (should not happen); stop counting it
            self.state.remove_pod(pod.uid)

    @staticmethod
    def pods_of_page(items: list[dict[str, Any]]) -> list[Any]:
        """PodInfo of one LIST page (the informer runs this in its thread, page by
        page, so the page's dicts go before the next is decoded); bad pods are
        logged and left out."""
        pods: list[Any] = []
        for obj in items:
            try:
                pods.append(pod_from_dict(obj))
            except ObjectError as exc:
                log.warning("ignoring pod in list: %s", exc)
        return pods

    def replace_pods(self, items: Iterable[Mapping[str, Any] | PodInfo]) -> None:
        """The pods of a LIST, as documents or already converted (pods_of_page)."""
        seen: set[str] = set()
        self.succeeded.clear()  # rebuilt from the list below
        for obj in items:
            if isinstance(obj, PodInfo):
                pod = obj
            else:
                try:
                    pod = pod_from_dict(obj)
                except ObjectError as exc:
                    log.warning("ignoring pod in list: %s", exc)
                    continue
            seen.add(pod.uid)
            self._apply_pod("ADDED", pod)
        for uid, rec in list(self.state.pods.items()):
            if uid not in seen and not rec.assumed:
                self.state.remove_pod(uid)
        for uid in [u for u in self.pending if u not in seen]:
            del self.pending[uid]
        for key in [k for k, p in self.pods_by_key.items() if p.uid not in seen]:
            del self.pods_by_key[key]
        for uid in [u for u in self.pods_by_uid if u not in seen]:
            self._forget(self.pods_by_uid[uid])
        self.synced_pods = True

    # -- binds in flight -----------------------------------------------------
    def assume(self, pod: PodInfo, node_name: str) -> bool:
        """Count a pod on a node before the API server confirms the binding."""
        return self.state.add_pod(pod, node_name, assumed=True)

    def forget_assumed(self, uid: str) -> None:
        rec = self.state.pods.get(uid)
        if rec is not None and rec.assumed:
            self.state.remove_pod(uid)


def released_uids(group: GroupView) -> list[str]:
    """The pod uids a PodGroup's RELEASED_ANNOTATION lists."""
    raw = group.annotations.get(RELEASED_ANNOTATION, "")
    return [u for u in (part.strip() for part in raw.split(",")) if u]
