"""Invariants of a running cluster, checked by a thread every ~200 ms.

Each sample lists nodes, pods, PodGroups and Volcano Jobs (raw JSON, short
client timeouts) and records a violation when:

- a gang is partly bound (0 < bound members < minMember) in two consecutive
  samples: one sample may land between the binds of a gang's burst, two cannot
  (a gang being torn down, pods or PodGroup deleting, is skipped);
- a node is over-committed: the requests (cpu, nvidia.com/gpu) of its bound,
  unfinished pods sum to more than its allocatable;
- a Volcano Job is lost or duplicated: an unfinished Job with no PodGroup after
  JOB_GRACE_S, two PodGroups owned by one Job, or two live pods of one Job with
  the same task and index;
- it cannot sample: no successful sample for MAX_GAP_S (an API server being
  restarted is expected to be away for less).

``samples`` and ``failed`` count what was taken; a test asserts a minimum.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from kubernetes import client
from kubernetes.utils import parse_quantity

from pyextender.api.names import GROUP_NAME_ANNOTATION, VOLCANO_TASK_INDEX, VOLCANO_TASK_SPEC

INTERVAL_S = 0.2
MAX_GAP_S = 30.0
JOB_GRACE_S = 60.0
FINISHED_JOB_PHASES = ("Completed", "Failed", "Aborted", "Terminated")
RESOURCES = ("cpu", "nvidia.com/gpu")
TIMEOUT = (3, 5)
"""(connect, read) seconds of each sampling call."""


def _list(call: Callable[..., Any], *args: Any) -> list[dict[str, Any]]:
    resp = call(*args, _preload_content=False, _request_timeout=TIMEOUT)
    items: list[dict[str, Any]] = json.loads(resp.data)["items"]
    return items


@dataclass
class Snapshot:
    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    podgroups: list[dict[str, Any]]
    jobs: list[dict[str, Any]]


def take(api: client.ApiClient) -> Snapshot:
    core = client.CoreV1Api(api)
    co = client.CustomObjectsApi(api)
    return Snapshot(
        nodes=_list(core.list_node),
        pods=_list(core.list_pod_for_all_namespaces),
        podgroups=_list(
            co.list_cluster_custom_object, "scheduling.volcano.sh", "v1beta1", "podgroups"
        ),
        jobs=_list(co.list_cluster_custom_object, "batch.volcano.sh", "v1alpha1", "jobs"),
    )


def requests_of(pod: dict[str, Any]) -> dict[str, Decimal]:
    out: dict[str, Decimal] = {}
    for c in pod["spec"].get("containers") or []:
        req = (c.get("resources") or {}).get("requests") or {}
        for r in RESOURCES:
            if r in req:
                out[r] = out.get(r, Decimal(0)) + parse_quantity(req[r])
    return out


def finished(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def overcommitted(snap: Snapshot) -> list[str]:
    used: dict[str, dict[str, Decimal]] = {}
    for p in snap.pods:
        node = p["spec"].get("nodeName")
        if not node or finished(p):
            continue
        for r, q in requests_of(p).items():
            used.setdefault(node, {})[r] = used.setdefault(node, {}).get(r, Decimal(0)) + q
    out = []
    for n in snap.nodes:
        alloc = (n.get("status") or {}).get("allocatable") or {}
        for r in RESOURCES:
            have = parse_quantity(alloc.get(r, "0"))
            want = used.get(n["metadata"]["name"], {}).get(r, Decimal(0))
            if want > have:
                out.append(f"node {n['metadata']['name']}: {r} requests {want} > {have}")
    return out


def gang_counts(snap: Snapshot) -> dict[str, tuple[int, int]]:
    """ns/podgroup -> (bound members, minMember), for gangs not being torn down."""
    members: dict[str, list[dict[str, Any]]] = {}
    for p in snap.pods:
        group = (p["metadata"].get("annotations") or {}).get(GROUP_NAME_ANNOTATION)
        if group:
            members.setdefault(f"{p['metadata']['namespace']}/{group}", []).append(p)
    out = {}
    for pg in snap.podgroups:
        key = f"{pg['metadata']['namespace']}/{pg['metadata']['name']}"
        pods = members.get(key, [])
        if pg["metadata"].get("deletionTimestamp") or any(
            p["metadata"].get("deletionTimestamp") for p in pods
        ):
            continue
        bound = sum(1 for p in pods if p["spec"].get("nodeName"))
        out[key] = (bound, int(pg["spec"].get("minMember") or 1))
    return out


def job_problems(snap: Snapshot, first_seen: dict[str, float], now: float) -> list[str]:
    pgs_of: Counter[str] = Counter()
    for pg in snap.podgroups:
        for ref in pg["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == "Job":
                pgs_of[ref["uid"]] += 1
    tasks: Counter[tuple[str, str, str]] = Counter()
    for p in snap.pods:
        if p["metadata"].get("deletionTimestamp"):
            continue
        ann = p["metadata"].get("annotations") or {}
        for ref in p["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == "Job" and VOLCANO_TASK_INDEX in ann:
                tasks[(ref["uid"], ann.get(VOLCANO_TASK_SPEC, ""), ann[VOLCANO_TASK_INDEX])] += 1
    out = []
    names = {}
    for job in snap.jobs:
        uid, name = job["metadata"]["uid"], job["metadata"]["name"]
        names[uid] = f"{job['metadata']['namespace']}/{name}"
        first_seen.setdefault(uid, now)
        if pgs_of[uid] > 1:
            out.append(f"job {names[uid]}: {pgs_of[uid]} PodGroups")
        phase = ((job.get("status") or {}).get("state") or {}).get("phase", "")
        if phase in FINISHED_JOB_PHASES:
            continue  # a finished Job's PodGroup may be gone
        if pgs_of[uid] == 0 and now - first_seen[uid] > JOB_GRACE_S:
            out.append(f"job {names[uid]}: no PodGroup after {JOB_GRACE_S:.0f}s")
    for (uid, task, index), n in tasks.items():
        if n > 1:
            out.append(f"job {names.get(uid, uid)}: {n} live pods for task {task} index {index}")
    return out


@dataclass
class Checker:
    """Samples in a thread until ``close``; violations and counts for the test to assert."""

    api: client.ApiClient
    interval_s: float = INTERVAL_S
    max_gap_s: float = MAX_GAP_S
    samples: int = 0
    failed: int = 0
    longest_gap_s: float = 0.0
    violations: list[str] = field(default_factory=list)
    last: Snapshot | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Checker:
        self._thread = threading.Thread(target=self._run, name="invariants", daemon=True)
        self._thread.start()
        return self

    def _violate(self, what: str) -> None:
        if what not in self.violations:
            self.violations.append(what)

    def _run(self) -> None:
        partial_before: set[str] = set()
        first_seen: dict[str, float] = {}
        last_ok = time.monotonic()
        last_error = ""
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                snap = take(self.api)
            except Exception as exc:
                self.failed += 1
                last_error = f"{type(exc).__name__}: {exc}"[:300]
                gap = time.monotonic() - last_ok
                self.longest_gap_s = max(self.longest_gap_s, gap)
                if gap > self.max_gap_s:
                    self._violate(
                        f"could not sample for over {self.max_gap_s:.0f}s "
                        f"({self.failed} failures; last: {last_error})"
                    )
            else:
                now = time.monotonic()
                self.longest_gap_s = max(self.longest_gap_s, now - last_ok)
                last_ok = now
                self.samples += 1
                self.last = snap
                partial = {
                    key for key, (bound, need) in gang_counts(snap).items() if 0 < bound < need
                }
                for key in partial & partial_before:
                    b, need = gang_counts(snap)[key]
                    self._violate(f"gang {key}: {b}/{need} bound in consecutive samples")
                partial_before = partial
                for v in overcommitted(snap):
                    self._violate(v)
                for v in job_problems(snap, first_seen, now):
                    self._violate(v)
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - started)))

    def close(self) -> Checker:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(15)
        return self

    def summary(self) -> str:
        return (
            f"{self.samples} samples, {self.failed} failed, longest gap "
            f"{self.longest_gap_s:.1f}s, {len(self.violations)} violations"
        )
