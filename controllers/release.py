"""Release gated pods that nobody will ungate any more.

Our webhook gates the gang pods of adopted namespaces (``pyextender.io/gang``);
the sidecar lifts the gate when the whole gang fits. Two events end that
arrangement for a pod that is still gated, and both release it (lift the gate,
leaving its other gates alone):

- its namespace stops being adopted (the adoption label is removed): the
  controllers notice the namespace is outside the pod webhook's namespaceSelector
  and lift the gate of the pods the webhook gated (``AdoptionWatch``, run by the
  leader);
- pyextender is uninstalled: the chart's pre-delete hook runs ``pyextender
  release --all-namespaces``, which deletes both webhook configurations first (no
  new pod gets gated) and then releases every gated pod. With a second scheduler
  (chart mode=scheduler) it also hands the unbound pods that name it to the
  cluster's scheduler (``hand_over``): a pod's schedulerName cannot change, so a
  bare pod is recreated as it was, and an owned pod is deleted for its owner to
  recreate (no webhook routes it to us any more).

A pod held at the framework shim's barrier instead of a gate (annotation
``pyextender.io/gang-barrier``, with ``--gang-barrier=scheduler``) is released
the same way: the annotation comes off.

Which namespaces are adopted is read from the live MutatingWebhookConfiguration,
so the chart's values (label selector, names) are the single source.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pyextender.api.names import BARRIER_ANNOTATION, GANG_GATE, GATED_BY_WEBHOOK_ANNOTATION

log = logging.getLogger(__name__)

ADOPTING_PATH = "/mutate/pods"
"""Webhook path of enforcing pod mutation (shadow namespaces gate nothing)."""

Selector = Mapping[str, Any]


def _expression_matches(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, op = expr.get("key", ""), expr.get("operator", "")
    values = list(expr.get("values") or [])
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    raise ValueError(f"unknown label selector operator {op!r}")


def selector_matches(selector: Selector | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector semantics; an empty selector matches everything."""
    if not selector:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    return all(_expression_matches(e, labels) for e in selector.get("matchExpressions") or [])


def adopting_selectors(configuration: Mapping[str, Any]) -> list[Selector]:
    """namespaceSelectors of the webhooks that gate pods (path /mutate/pods)."""
    out: list[Selector] = []
    for hook in configuration.get("webhooks") or []:
        cc = hook.get("clientConfig") or {}
        path = (cc.get("service") or {}).get("path") or ""
        url = cc.get("url") or ""
        if path == ADOPTING_PATH or url.endswith(ADOPTING_PATH):
            out.append(hook.get("namespaceSelector") or {})
    return out


def adopted(namespaces: Iterable[Mapping[str, Any]], selectors: list[Selector]) -> set[str]:
    """Names of the namespaces any adopting webhook applies to."""
    out = set()
    for ns in namespaces:
        md = ns.get("metadata") or {}
        labels = md.get("labels") or {}
        if any(selector_matches(s, labels) for s in selectors):
            out.add(md.get("name", ""))
    return out


def _at_barrier(pod: Mapping[str, Any]) -> bool:
    """Unbound and held by the framework shim's barrier annotation."""
    md = pod.get("metadata") or {}
    return bool((md.get("annotations") or {}).get(BARRIER_ANNOTATION)) and not (
        (pod.get("spec") or {}).get("nodeName")
    )


def gated(pod: Mapping[str, Any]) -> bool:
    """Held by us: our scheduling gate, or (unbound) the barrier annotation."""
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    return any(g.get("name") == GANG_GATE for g in gates) or _at_barrier(pod)


def release_patch(pod: Mapping[str, Any]) -> dict[str, Any]:
    """JSON merge patch: the pod's gates without ours and without the barrier annotation
    (optimistic on resourceVersion)."""
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    md = pod.get("metadata") or {}
    patch: dict[str, Any] = {"metadata": {"resourceVersion": md.get("resourceVersion")}}
    if any(g.get("name") == GANG_GATE for g in gates):
        patch["spec"] = {"schedulingGates": [g for g in gates if g.get("name") != GANG_GATE]}
    if _at_barrier(pod):
        patch["metadata"]["annotations"] = {BARRIER_ANNOTATION: None}
    return patch


MERGE = "application/merge-patch+json"


def release_pods(core: client.CoreV1Api, pods: Iterable[Mapping[str, Any]]) -> int:
    """Lift our gate from each pod; returns how many were released."""
    done = 0
    for pod in pods:
        if not gated(pod):
            continue
        md = pod.get("metadata") or {}
        ns, name = md.get("namespace", ""), md.get("name", "")
        try:
            core.patch_namespaced_pod(
                name, ns, release_patch(pod), _content_type=MERGE, _preload_content=False
            )
        except ApiException as exc:
            if exc.status in (404, 409):  # gone, or changed (the sidecar lifted it)
                continue
            raise
        log.info("released %s/%s (gate %s / %s lifted)", ns, name, GANG_GATE, BARRIER_ANNOTATION)
        done += 1
    return done


class AdoptionWatch:
    """The controllers' side: release the pods our webhook gated (annotation
    GATED_BY_WEBHOOK_ANNOTATION) whose namespace is no longer adopted.

    Pods gated by anyone else are left alone, and the check needs no memory of
    earlier states, so a label removed while the controllers were down is caught
    at the next check. A namespace the informer has not seen is skipped.
    """

    def __init__(
        self,
        read_configuration: Callable[[], Mapping[str, Any] | None],
        namespaces: Callable[[], Sequence[Mapping[str, Any]]],
        pods: Callable[[], Sequence[Mapping[str, Any]]],
        release: Callable[[Sequence[Mapping[str, Any]]], int],
        period: float = 2.0,
    ) -> None:
        self.read_configuration = read_configuration
        self.namespaces = namespaces
        self.pods = pods
        self.release = release
        self.period = period

    def check(self) -> int:
        conf = self.read_configuration()
        if conf is None:  # not installed yet, or being uninstalled (the hook releases)
            return 0
        spaces = self.namespaces()
        known = {(n.get("metadata") or {}).get("name") for n in spaces}
        now = adopted(spaces, adopting_selectors(conf))
        orphans = []
        for p in self.pods():
            md = p.get("metadata") or {}
            ns = md.get("namespace")
            ours = (md.get("annotations") or {}).get(GATED_BY_WEBHOOK_ANNOTATION) == "true"
            if ours and ns in known and ns not in now and gated(p):
                orphans.append(p)
        if not orphans:
            return 0
        left = sorted({(p.get("metadata") or {}).get("namespace", "") for p in orphans})
        log.info("namespaces no longer adopted: %s", ", ".join(left))
        return self.release(orphans)

    async def run(self) -> None:
        while True:
            try:
                await asyncio.to_thread(self.check)
            except Exception as exc:
                log.warning("adoption check: %s", exc)
            await asyncio.sleep(self.period)


# -- handing pods to another scheduler (uninstall in mode=scheduler) ------------------

_DROP_METADATA = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "managedFields",
    "generation",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
)


def controller_of(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            out: Mapping[str, Any] = ref
            return out
    return None


def handover_plan(pod: Mapping[str, Any], ours: str) -> str:
    """What to do with a released pod that names our scheduler, which is going away:
    "recreate" (a bare pod: same pod, the cluster's scheduler), "delete" (its owner
    recreates it, without our webhook), or "" (leave it: bound already, not ours,
    or owned by a Volcano Job, whose controller is ours and goes away too)."""
    spec = pod.get("spec") or {}
    if spec.get("schedulerName") != ours or spec.get("nodeName"):
        return ""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return ""
    owner = controller_of(pod)
    if owner is None:
        return "recreate"
    if str(owner.get("apiVersion", "")).startswith("batch.volcano.sh/"):
        return ""
    return "delete"


def recreated(pod: Mapping[str, Any], scheduler: str) -> dict[str, Any]:
    """The same pod for another scheduler: no server-set metadata, no status."""
    md = {k: v for k, v in (pod.get("metadata") or {}).items() if k not in _DROP_METADATA}
    annotations = dict(md.get("annotations") or {})
    annotations.pop(GATED_BY_WEBHOOK_ANNOTATION, None)
    annotations.pop(BARRIER_ANNOTATION, None)
    md["annotations"] = annotations
    spec = {**(pod.get("spec") or {}), "schedulerName": scheduler}
    spec.pop("nodeName", None)
    gates = [g for g in spec.get("schedulingGates") or [] if g.get("name") != GANG_GATE]
    if gates:
        spec["schedulingGates"] = gates
    else:
        spec.pop("schedulingGates", None)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec}


def hand_over(
    core: client.CoreV1Api, pods: Iterable[Mapping[str, Any]], ours: str, scheduler: str
) -> int:
    """Give every unbound pod that names ``ours`` to ``scheduler``; returns how many."""
    done = 0
    for listed in pods:
        pod: Mapping[str, Any] | None = listed
        action = ""
        for _ in range(5):
            assert pod is not None
            action = handover_plan(pod, ours)
            if not action or _delete_as_seen(core, pod):
                break
            pod = _read(core, pod)  # changed since (a status write, a bind): look again
            if pod is None:
                action = ""  # gone
                break
        else:
            action = ""
        if not action or pod is None:
            continue
        md = pod.get("metadata") or {}
        ns, name = md.get("namespace", ""), md.get("name", "")
        if action == "recreate":
            for _ in range(50):  # the name is free once the old pod is gone
                try:
                    core.create_namespaced_pod(ns, recreated(pod, scheduler))
                    break
                except ApiException as exc:
                    if exc.status != 409:
                        raise
                    time.sleep(0.2)
            else:
                raise RuntimeError(f"could not recreate {ns}/{name} for {scheduler}")
        log.info("handed %s/%s to %s (%s)", ns, name, scheduler, action)
        done += 1
    return done


def _delete_as_seen(core: client.CoreV1Api, pod: Mapping[str, Any]) -> bool:
    """Delete ``pod`` only as it was seen (uid and resourceVersion): never a pod that a
    scheduler bound since, nor a recreated one of the same name. False on 404 or 409."""
    md = pod.get("metadata") or {}
    pre = {"uid": md.get("uid"), "resourceVersion": md.get("resourceVersion")}
    try:
        core.delete_namespaced_pod(
            md.get("name", ""),
            md.get("namespace", ""),
            body={"preconditions": pre, "gracePeriodSeconds": 0},
        )
    except ApiException as exc:
        if exc.status in (404, 409):
            return False  # gone (its owner's doing) or changed: the caller looks again
        raise
    return True


def _read(core: client.CoreV1Api, pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    md = pod.get("metadata") or {}
    try:
        fresh = core.read_namespaced_pod(md.get("name", ""), md.get("namespace", ""))
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    out: Mapping[str, Any] = core.api_client.sanitize_for_serialization(fresh)
    if (out.get("metadata") or {}).get("uid") != md.get("uid"):
        return None  # another pod of that name now: not the one we listed
    return out
