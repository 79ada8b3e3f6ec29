"""The Job status document we write, and the merge patch that gets it there."""

from __future__ import annotations

import datetime as dt
from typing import Any

from controllers.job_state import Counts


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str | None) -> float | None:
    """RFC 3339 -> POSIX seconds; None when absent or malformed."""
    if not text:
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def go_duration(seconds: float) -> str:
    """Seconds as a Go duration string metav1.Duration accepts ("1h2m3.5s")."""
    seconds = max(seconds, 0.0)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    out = ""
    if h:
        out += f"{int(h)}h"
    if h or m:
        out += f"{int(m)}m"
    return out + f"{s:.3f}".rstrip("0").rstrip(".") + "s"


def replace_with_nulls(old: Any, new: Any) -> Any:
    """A merge patch that turns ``old`` into exactly ``new``.

    JSON merge patch merges nested maps, so keys that disappear must be sent
    as null; lists and scalars replace.
    """
    if not isinstance(old, dict) or not isinstance(new, dict):
        return new
    out: dict[str, Any] = {k: None for k in old if k not in new}
    for k, v in new.items():
        out[k] = replace_with_nulls(old.get(k), v)
    return out


def counts_status(c: Counts, min_available: int) -> dict[str, Any]:
    return {
        "pending": c.pending,
        "running": c.running,
        "succeeded": c.succeeded,
        "failed": c.failed,
        "terminating": c.terminating,
        "unknown": c.unknown,
        "minAvailable": min_available,
        "taskStatusCount": {task: {"phase": dict(per)} for task, per in sorted(c.tasks.items())},
    }


def with_phase(
    status: dict[str, Any], phase: str, reason: str, message: str, now: str
) -> dict[str, Any]:
    """``status`` moved to ``phase``, with the transition appended to conditions."""
    out = dict(status)
    out["state"] = {
        "phase": phase,
        "reason": reason,
        "message": message,
        "lastTransitionTime": now,
    }
    out["conditions"] = [
        *(status.get("conditions") or []),
        {"status": phase, "lastTransitionTime": now},
    ]
    return out
