"""Shared gang arithmetic: which tasks a job still needs placed, and its minimum request."""

from __future__ import annotations

import numpy as np

from pyextender.framework.session import IntArray, Job, Session, Task


def needed_tasks(job: Job) -> list[Task]:
    """Unbound tasks that must be placed for the job to reach minMember (oldest first)."""
    missing = max(job.min_member - job.bound_count - job.succeeded, 0)
    pending = sorted(job.pending, key=lambda t: (t.pod.created, t.pod.name))
    return pending[:missing]


def min_request(ssn: Session, job: Job, tasks: list[Task]) -> IntArray:
    """PodGroup minResources when given, else the sum of the needed tasks' requests."""
    width = len(ssn.state.resources)
    group = job.group
    if group is not None and group.min_resources:
        vec = np.zeros(width, dtype=np.int64)
        for name, value in group.min_resources.items():
            col = ssn.state.column.get(name)
            if col is not None:
                vec[col] = value
        short: IntArray = np.maximum(vec - job.allocated, 0)
        return short
    total = np.zeros(width, dtype=np.int64)
    for t in tasks:
        total += t.request
    return total


def gang_message(job: Job, unplaced: int, reason: str) -> str:
    """Volcano's wording: "3/8 tasks in gang unschedulable: <why>"."""
    return f"{unplaced}/{job.min_member} tasks in gang unschedulable: {reason}"
