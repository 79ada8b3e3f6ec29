"""Builders for scheduling-core unit tests: a cache with nodes, pods, PodGroups, Queues."""

from __future__ import annotations

import itertools
from typing import Any

from pyextender.actions.cycle import run_cycle
from pyextender.actions.decisions import Decisions
from pyextender.cache.cluster import ClusterCache
from pyextender.framework.session import Session
from pyextender.framework.snapshot import build_session
from pyextender.plugins.registry import REGISTRY

_seq = itertools.count()

DEFAULT_TIERS = [
    ["priority", "gang", "conformance"],
    ["overcommit", "drf", "predicates", "proportion", "nodeorder", "binpack"],
]


def _ts(i: int) -> str:
    return f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}Z"


class World:
    """A ClusterCache filled from short descriptions."""

    def __init__(self, nodes: int = 2, gpus: int = 8) -> None:
        self.cache = ClusterCache()
        self.cache.replace_nodes(
            [
                {
                    "metadata": {"name": f"n{i}"},
                    "status": {
                        "allocatable": {
                            "cpu": "64",
                            "memory": "256Gi",
                            "pods": "110",
                            "nvidia.com/gpu": str(gpus),
                        }
                    },
                }
                for i in range(nodes)
            ]
        )
        self.cache.replace_pods([])
        self.cache.replace_groups([])
        self.cache.replace_queues([])

    def queue(self, name: str, weight: int = 1, **spec: Any) -> None:
        self.cache.queue_event(
            "ADDED", {"metadata": {"name": name}, "spec": {"weight": weight, **spec}}
        )

    def gang(
        self,
        name: str,
        size: int,
        gpus: int = 1,
        queue: str = "default",
        min_member: int | None = None,
        priority: int = 0,
        phase: str = "Pending",
        bound: list[str] | None = None,
        annotations: dict[str, str] | None = None,
        ns: str = "t",
    ) -> None:
        """A PodGroup and ``size`` pods; ``bound`` gives node names for the first pods."""
        t = next(_seq)
        self.cache.group_event(
            "ADDED",
            {
                "metadata": {
                    "name": name,
                    "namespace": ns,
                    "uid": f"pg-{name}",
                    "creationTimestamp": _ts(t),
                    "annotations": annotations or {},
                },
                "spec": {"minMember": size if min_member is None else min_member, "queue": queue},
                "status": {"phase": phase},
            },
        )
        bound = bound or []
        for i in range(size):
            node = bound[i] if i < len(bound) else None
            self.pod(
                f"{name}-{i}",
                gpus=gpus,
                group=name,
                node=node,
                priority=priority,
                gated=node is None and phase == "Pending",
                ns=ns,
                created=_ts(t),
            )

    def pod(
        self,
        name: str,
        gpus: int = 1,
        group: str = "",
        node: str | None = None,
        priority: int = 0,
        gated: bool = False,
        ns: str = "t",
        created: str | None = None,
        annotations: dict[str, str] | None = None,
    ) -> None:
        ann = dict(annotations or {})
        if group:
            ann["scheduling.k8s.io/group-name"] = group
        self.cache.pod_event(
            "ADDED",
            {
                "metadata": {
                    "name": name,
                    "namespace": ns,
                    "uid": f"uid-{ns}-{name}",
                    "annotations": ann,
                    "creationTimestamp": created or _ts(next(_seq)),
                },
                "spec": {
                    "schedulerName": "volcano",
                    "nodeName": node,
                    "priority": priority,
                    "schedulingGates": [{"name": "pyextender.io/gang"}] if gated else [],
                    "containers": [
                        {
                            "name": "c",
                            "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": str(gpus)}},
                        }
                    ],
                },
                "status": {"phase": "Running" if node else "Pending", "startTime": created},
            },
        )

    def session(
        self,
        tiers: list[list[str]] | None = None,
        now: float = 1767225600.0 + 3600,
        args: dict[str, Any] | None = None,
    ) -> Session:
        plugins = []
        for tier in tiers or DEFAULT_TIERS:
            built = []
            for name in tier:
                spec = REGISTRY[name]
                built.append(spec.factory((args or {}).get(name, spec.args_type())))
            plugins.append(built)
        return build_session(self.cache, plugins, now)

    def cycle(
        self,
        actions: tuple[str, ...] = ("enqueue", "allocate", "preempt", "reclaim", "backfill"),
        require_fit: bool = False,
        **kw: Any,
    ) -> Decisions:
        """``require_fit``: enqueue.requireFit (admit only gangs that fit now)."""
        ssn = self.session(**kw)
        sla = any(getattr(p, "name", "") == "sla" for t in ssn.tiers for p in t)
        return run_cycle(ssn, actions, sla, require_fit)
