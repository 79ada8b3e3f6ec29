"""Applies list/watch results for nodes and pods to a ClusterState.

Called on one thread only (the event loop). Pods that are bound and not
terminated hold resources; pending pods of our scheduler are kept in
``pending`` for metrics and (later) gang bookkeeping.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from pyextender.api.names import SCHEDULER_NAME
from pyextender.api.objects import ObjectError, PodInfo, node_from_dict, pod_from_dict
from pyextender.cache.state import ClusterState

log = logging.getLogger(__name__)


class ClusterCache:
    """The sidecar's view of the cluster, fed by informers."""

    def __init__(self, scheduler_name: str = SCHEDULER_NAME) -> None:
        self.state = ClusterState()
        self.scheduler_name = scheduler_name
        self.pending: dict[str, PodInfo] = {}
        self.pods_by_key: dict[str, PodInfo] = {}
        self.synced_nodes = False
        self.synced_pods = False
        self.warnings: list[str] = []
        # pods bound by an extender call before the watch saw them bound
        self.orphaned_pods: dict[str, PodInfo] = {}

    @property
    def synced(self) -> bool:
        return self.synced_nodes and self.synced_pods

    # -- nodes -------------------------------------------------------------
    def node_event(self, kind: str, obj: Mapping[str, Any]) -> None:
        try:
            node = node_from_dict(obj)
        except ObjectError as exc:
            log.warning("ignoring node event: %s", exc)
            return
        if kind == "DELETED":
            self.state.remove_node(node.name)
            return
        warnings = self.state.set_node(node)
        for w in warnings:
            log.warning("node %s: %s", node.name, w)
        self.warnings.extend(warnings)
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
        self.synced_nodes = True

    # -- pods --------------------------------------------------------------
    def pod_event(self, kind: str, obj: Mapping[str, Any]) -> None:
        try:
            pod = pod_from_dict(obj)
        except ObjectError as exc:
            log.warning("ignoring pod event: %s", exc)
            return
        self._apply_pod(kind, pod)

    def _forget(self, pod: PodInfo) -> None:
        self.pending.pop(pod.uid, None)
        self.orphaned_pods.pop(pod.uid, None)
        self.pods_by_key.pop(pod.key, None)
        self.state.remove_pod(pod.uid)

    def _apply_pod(self, kind: str, pod: PodInfo) -> None:
        if kind == "DELETED" or pod.terminated:
            self._forget(pod)
            if kind != "DELETED":
                self.pods_by_key[pod.key] = pod
            return
        self.pods_by_key[pod.key] = pod
        if pod.node_name:
            self.pending.pop(pod.uid, None)
            if not self.state.add_pod(pod, pod.node_name):
                self.orphaned_pods[pod.uid] = pod
            return
        if pod.scheduler_name == self.scheduler_name:
            self.pending[pod.uid] = pod
        rec = self.state.pods.get(pod.uid)
        if rec is not None and not rec.assumed:
            # unbound again (should not happen); stop counting it
            self.state.remove_pod(pod.uid)

    def replace_pods(self, items: Iterable[Mapping[str, Any]]) -> None:
        seen: set[str] = set()
        for obj in items:
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
        self.synced_pods = True

    # -- binds in flight -----------------------------------------------------
    def assume(self, pod: PodInfo, node_name: str) -> bool:
        """Count a pod on a node before the API server confirms the binding."""
        return self.state.add_pod(pod, node_name, assumed=True)

    def forget_assumed(self, uid: str) -> None:
        rec = self.state.pods.get(uid)
        if rec is not None and rec.assumed:
            self.state.remove_pod(uid)
