"""Where a gang's time goes, stage by stage (bench/e2e.py --stages).

Two watches on the gang phase's namespace, one for pods and one for PodGroups,
note when each stage of every gang is first seen (monotonic seconds, on this
client: the watch's delivery delay is in every stage alike):

  created   the last of its pods exists (the client creates them one by one)
  admitted  its PodGroup shows phase Inqueue (or later)
  let in    its members may be scheduled: the PodGroup's released-pods
            annotation lists them (framework mode's barrier), or the last
            member is seen without the scheduling gate (the gate, extender mode)
  bound     its first and its last member have a node

Each stage is reported from the PodGroup's creation, as p50 / p90 over the
gangs, and as the step from the stage before it (p50 of the differences). The
two watches add to the API server's load, so a run with --stages says where a
gang waits, not how fast the cluster goes.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import msgspec
import numpy as np
from kubernetes import client

from pyextender.api.names import GANG_GATE, GROUP_NAME_ANNOTATION, RELEASED_ANNOTATION

STAGES = ("created", "admitted", "let_in", "first_bound", "last_bound")


class GangStages:
    """Stage times per gang of one namespace, from two watches (module docstring)."""

    def __init__(self, api: client.ApiClient, namespace: str, size: int) -> None:
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.ns, self.size = namespace, size
        self.group_seen: dict[str, float] = {}
        self.stamps: dict[str, dict[str, float]] = {}
        self.pods: dict[str, dict[str, set[str]]] = {}
        """group -> {"added": pod names, "gated": still gated, "bound": with a node}"""
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [
            threading.Thread(target=self._run, args=(kind,), daemon=True)
            for kind in ("pods", "podgroups")
        ]
        for t in self.threads:
            t.start()

    def _stamp(self, group: str, stage: str) -> None:
        self.stamps.setdefault(group, {}).setdefault(stage, time.monotonic())

    def _stream(self, kind: str, rv: str) -> Any:
        if kind == "pods":
            return self.core.list_namespaced_pod(
                self.ns, watch=True, resource_version=rv, timeout_seconds=5,
                _preload_content=False,
            )  # fmt: skip
        return self.custom.list_namespaced_custom_object(
            "scheduling.volcano.sh", "v1beta1", self.ns, "podgroups", watch=True,
            resource_version=rv, timeout_seconds=5, _preload_content=False,
        )  # fmt: skip

    def _run(self, kind: str) -> None:
        rv = ""
        while not self.stop.is_set():
            try:
                resp = self._stream(kind, rv)
                for line in resp:
                    obj = msgspec.json.decode(line).get("object") or {}
                    meta = obj.get("metadata") or {}
                    rv = meta.get("resourceVersion", rv)
                    with self.lock:
                        (self._pod if kind == "pods" else self._group)(obj, meta)
                    if self.stop.is_set():
                        break
            except Exception:  # the cluster going down at the end: stop quietly
                if self.stop.is_set():
                    return
                time.sleep(0.2)

    def _group(self, obj: dict[str, Any], meta: dict[str, Any]) -> None:
        name = meta.get("name", "")
        self.group_seen.setdefault(name, time.monotonic())
        if (obj.get("status") or {}).get("phase") in ("Inqueue", "Running"):
            self._stamp(name, "admitted")
        if (meta.get("annotations") or {}).get(RELEASED_ANNOTATION):
            self._stamp(name, "let_in")

    def _pod(self, obj: dict[str, Any], meta: dict[str, Any]) -> None:
        group = (meta.get("annotations") or {}).get(GROUP_NAME_ANNOTATION)
        if not group:
            return
        name = meta.get("name", "")
        sets = self.pods.setdefault(group, {"added": set(), "gated": set(), "bound": set()})
        spec = obj.get("spec") or {}
        gates = {g.get("name") for g in spec.get("schedulingGates") or []}
        if name not in sets["added"]:
            sets["added"].add(name)
            if GANG_GATE in gates:
                sets["gated"].add(name)
            if len(sets["added"]) == self.size:
                self._stamp(group, "created")
        if name in sets["gated"] and GANG_GATE not in gates:
            sets["gated"].discard(name)
            if not sets["gated"] and len(sets["added"]) == self.size:
                self._stamp(group, "let_in")
        if spec.get("nodeName") and name not in sets["bound"]:
            sets["bound"].add(name)
            if len(sets["bound"]) == 1:
                self._stamp(group, "first_bound")
            if len(sets["bound"]) == self.size:
                self._stamp(group, "last_bound")

    def close(self) -> dict[str, Any]:
        """Stops the watches; the stages as seconds from each PodGroup's creation."""
        self.stop.set()
        with self.lock:
            rows = [
                {s: st[s] - self.group_seen[g] for s in STAGES if s in st}
                for g, st in self.stamps.items()
                if g in self.group_seen
            ]
        out: dict[str, Any] = {"gangs": len(rows)}
        prev = ""
        for s in STAGES:
            at = [r[s] for r in rows if s in r]
            if not at:
                continue
            out[f"{s}_p50_s"] = round(float(np.percentile(at, 50)), 3)
            out[f"{s}_p90_s"] = round(float(np.percentile(at, 90)), 3)
            if prev:
                steps = [r[s] - r[prev] for r in rows if s in r and prev in r]
                out[f"{prev}_to_{s}_p50_s"] = round(float(np.percentile(steps, 50)), 3)
            prev = s
        return out


def report(mode: str, stages: dict[str, Any]) -> None:
    """One line per stage: p50 / p90 from the PodGroup's creation, and the step."""
    print(f"{mode}: gang stages over {stages['gangs']} gangs, s from the PodGroup's creation")
    prev = ""
    for s in STAGES:
        if f"{s}_p50_s" not in stages:
            continue
        step = stages.get(f"{prev}_to_{s}_p50_s")
        extra = f"   step from {prev} p50 {step:.3f}" if step is not None else ""
        print(f"  {s:<12} p50 {stages[f'{s}_p50_s']:.3f}  p90 {stages[f'{s}_p90_s']:.3f}{extra}")
        prev = s
