"""A Warning event when the scheduler config in use ignores names (Volcano's plugins,
arguments, switches or actions we do not run), so ``kubectl get events`` shows it
next to the sidecar's other events, not only its log and metrics.

The event is about the scheduler's Lease (``kube-system/pyextender-scheduler`` by
default): a config file is no API object, and the Lease names the scheduler that
runs it. Reason ``ConfigIgnored``; one event per (re)load that ignores anything.
"""

from __future__ import annotations

from datetime import UTC, datetime

from kubernetes import client

from pyextender.api.client import body_of
from pyextender.framework.config import SchedulerConfig

REASON = "ConfigIgnored"
MAX_MESSAGE = 1024
"""Characters; the API server keeps at most this much of an event's message."""


def ignored_message(config: SchedulerConfig) -> str:
    """ "scheduler config ignores 2 names: <warning>; <warning>", cut to MAX_MESSAGE."""
    ignored = config.ignored
    head = f"scheduler config ignores {len(ignored)} name{'s' if len(ignored) != 1 else ''}: "
    text = head + "; ".join(w.message for w in ignored)
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."


def post_config_event(
    core: client.CoreV1Api, namespace: str, lease: str, config: SchedulerConfig
) -> bool:
    """Create the event when ``config`` ignores anything; True when one was created."""
    if not config.ignored:
        return False
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = {
        "metadata": {"generateName": f"{lease}.", "namespace": namespace},
        "involvedObject": {
            "kind": "Lease",
            "apiVersion": "coordination.k8s.io/v1",
            "name": lease,
            "namespace": namespace,
        },
        "type": "Warning",
        "reason": REASON,
        "message": ignored_message(config),
        "source": {"component": "pyextender"},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    body_of(core.create_namespaced_event(namespace, body, _preload_content=False))
    return True
