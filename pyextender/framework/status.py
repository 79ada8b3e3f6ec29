"""Outcomes of plugin calls as values, not exceptions (kube-scheduler's Status)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class Code(IntEnum):
    """Ordered by severity: a node's verdict is the worst code any plugin gives."""

    SUCCESS = 0
    UNSCHEDULABLE = 1
    """Does not fit now; preemption or time may help."""
    UNRESOLVABLE = 2
    """Can never fit as the node is (wrong shape, cordoned, hard constraint)."""
    WAIT = 3
    """Permit only: hold the pod until its gang is ready."""
    ERROR = 4


@dataclass(frozen=True, slots=True)
class Status:
    """A code, the plugin that gave it, and reasons users will read."""

    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str = ""

    @property
    def ok(self) -> bool:
        return self.code == Code.SUCCESS

    def message(self) -> str:
        text = "; ".join(self.reasons)
        return f"{self.plugin}: {text}" if self.plugin and text else text


SUCCESS = Status()
