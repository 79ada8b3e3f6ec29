"""Why a pod is not bound: a PodGroup condition or event, or a FailedScheduling event."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from pyextender.api.names import GROUP_NAME_ANNOTATION

PGS = ("scheduling.volcano.sh", "v1beta1", "podgroups")


def unexplained(api: client.ApiClient, namespace: str) -> list[str]:
    """Pods of ``namespace`` that are neither bound, finished, nor explained."""
    core = client.CoreV1Api(api)
    co = client.CustomObjectsApi(api)
    events = core.list_namespaced_event(namespace).items
    said: dict[str, set[str]] = {}
    for e in events:
        said.setdefault(e.involved_object.name, set()).add(e.reason)
    groups: dict[str, Any] = {
        g["metadata"]["name"]: g
        for g in co.list_namespaced_custom_object(*PGS[:2], namespace, PGS[2])["items"]
    }
    out = []
    for p in core.list_namespaced_pod(namespace).items:
        if p.spec.node_name or p.status.phase in ("Succeeded", "Failed"):
            continue
        if "FailedScheduling" in said.get(p.metadata.name, set()):
            continue
        group = (p.metadata.annotations or {}).get(GROUP_NAME_ANNOTATION, "")
        pg = groups.get(group) or {}
        conds = [
            c
            for c in (pg.get("status") or {}).get("conditions") or []
            if c.get("type") == "Unschedulable" and c.get("status") == "True"
        ]
        if conds or said.get(group, set()) - {"Enqueued"}:
            continue
        # enough state to tell a scheduling bug from a test race when this fails
        gates = [g.name for g in p.spec.scheduling_gates or []]
        out.append(
            f"{namespace}/{p.metadata.name} (group {group or '-'}: "
            f"{'phase ' + str((pg.get('status') or {}).get('phase')) if pg else 'no PodGroup'}, "
            f"events {sorted(said.get(group, set()))}; pod created "
            f"{p.metadata.creation_timestamp}, gates {gates}, "
            f"deleting {p.metadata.deletion_timestamp is not None})"
        )
    return out
