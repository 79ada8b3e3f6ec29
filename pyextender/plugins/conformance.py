"""conformance: never evict critical system pods."""

from __future__ import annotations

from pyextender.framework.plugin_args import arguments
from pyextender.framework.registry import PluginSpec
from pyextender.framework.session import Job, Session, Task

SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
"""system-cluster-critical / system-node-critical priority classes are at or above this."""

PROTECTED_NAMESPACES = frozenset({"kube-system"})


@arguments
class Args:
    """conformance takes no arguments."""


def _evictable(t: Task) -> bool:
    return t.pod.namespace not in PROTECTED_NAMESPACES and t.pod.priority < SYSTEM_CRITICAL_PRIORITY


class Conformance:
    name = "conformance"

    def __init__(self, args: Args) -> None:
        self.args = args

    def preemptable(self, ssn: Session, preemptor: Job, victims: list[Task]) -> list[Task]:
        return [t for t in victims if _evictable(t)]

    def reclaimable(self, ssn: Session, reclaimer: Job, victims: list[Task]) -> list[Task]:
        return [t for t in victims if _evictable(t)]


SPEC = PluginSpec(
    name="conformance",
    args_type=Args,
    factory=Conformance,
    summary="Never evict kube-system or system-critical pods.",
)
