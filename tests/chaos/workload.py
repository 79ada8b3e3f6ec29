"""A stream of gangs (PodGroup + gated members) and Volcano Jobs, in a thread.

Every create is retried until it succeeds (a component being killed may refuse
it for a while: the webhook's failurePolicy is Fail); AlreadyExists counts as
done, since a create whose answer was lost may have been stored. Gangs that
have been fully bound for ``keep_s`` are deleted to free room, after being
marked ``deleting`` (the invariant checker skips gangs being torn down).
"""

from __future__ import annotations

import functools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import urllib3
from kubernetes import client

from pyextender.api.names import GANG_GATE, GROUP_NAME_ANNOTATION
from tests.e2e.kube import pod

JOBS = ("batch.volcano.sh", "v1alpha1", "jobs")
PGS = ("scheduling.volcano.sh", "v1beta1", "podgroups")
CREATE_TIMEOUT_S = 90.0
TIMEOUT = (3, 10)


def retried(what: str, call: Callable[[], Any], deadline_s: float = CREATE_TIMEOUT_S) -> int:
    """Runs ``call`` until it succeeds (409 counts); returns how many attempts failed."""
    deadline = time.monotonic() + deadline_s
    failures = 0
    while True:
        try:
            call()
            return failures
        except client.ApiException as exc:
            if exc.status == 409:
                return failures
            last = f"{exc.status} {exc.reason}"
        except Exception as exc:
            last = f"{type(exc).__name__}: {exc}"
        failures += 1
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: still failing after {deadline_s:.0f}s: {last}")
        time.sleep(0.3)


def job_body(name: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "minAvailable": replicas,
            "schedulerName": "volcano",
            "tasks": [
                {
                    "name": "worker",
                    "replicas": replicas,
                    "template": {
                        # pods succeed as soon as they run (devcluster/kwok_stages.py)
                        "metadata": {"annotations": {"pyextender.io/simulated-duration": "0s"}},
                        "spec": {
                            "terminationGracePeriodSeconds": 0,
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "busybox",
                                    "resources": {"requests": {"cpu": "250m"}},
                                }
                            ],
                        },
                    },
                }
            ],
        },
    }


@dataclass
class Workload:
    api: client.ApiClient
    namespace: str
    gang_size: int = 3
    gang_gpus: int = 1
    gang_every_s: float = 1.5
    job_every_s: float | None = 3.0
    """None: no Jobs."""
    job_replicas: int = 2
    keep_s: float = 4.0
    gangs: list[str] = field(default_factory=list)
    jobs: list[str] = field(default_factory=list)
    created_at: dict[str, float] = field(default_factory=dict)
    deleting: set[str] = field(default_factory=set)
    deleted: list[str] = field(default_factory=list)
    create_failures: int = 0
    list_failures: int = 0
    last_list_failure: str = ""
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _no_more: threading.Event = field(default_factory=threading.Event)
    _creating: threading.Lock = field(default_factory=threading.Lock)
    """Held while a gang or Job is being created (see stop_creating)."""
    _thread: threading.Thread | None = None

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def co(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    def start(self) -> Workload:
        self._thread = threading.Thread(target=self._run, name="workload", daemon=True)
        self._thread.start()
        return self

    def stop_creating(self) -> Workload:
        """No more gangs or Jobs; bound gangs are still deleted after keep_s. Returns
        once a creation in flight has finished, so ``gangs`` and ``jobs`` are final:
        a gang whose PodGroup was being created as this was called would otherwise
        join the list after a caller had found every gang settled."""
        self._no_more.set()
        with self._creating:
            pass
        return self

    def settled(self) -> bool:
        """Every gang fully bound (or deleted, which it only is once fully bound)."""
        counts = self.bound_counts()
        return all(counts.get(g, 0) >= self.gang_size for g in self.gangs if g not in self.deleting)

    def stop(self) -> Workload:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(CREATE_TIMEOUT_S * 2)
        return self

    def _run(self) -> None:
        next_gang = next_job = time.monotonic()
        bound_since: dict[str, float] = {}
        while not self._stop.is_set():
            now = time.monotonic()
            try:
                with self._creating:
                    if self._no_more.is_set():
                        pass
                    elif now >= next_gang:
                        self.create_gang(f"g{len(self.gangs)}")
                        next_gang = now + self.gang_every_s
                    if (
                        not self._no_more.is_set()
                        and self.job_every_s is not None
                        and now >= next_job
                    ):
                        self.create_job(f"j{len(self.jobs)}")
                        next_job = now + self.job_every_s
                self._recycle(bound_since)
            except (client.ApiException, urllib3.exceptions.HTTPError) as exc:
                # a list for recycling failed (the API server may be restarting): next round
                self.list_failures += 1
                self.last_list_failure = f"{type(exc).__name__}: {exc}"[:300]
            except Exception as exc:  # reported by the test
                self.errors.append(f"{type(exc).__name__}: {exc}"[:300])
            self._stop.wait(0.1)

    def create_gang(self, name: str) -> None:
        ns = self.namespace
        body = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name},
            "spec": {"minMember": self.gang_size, "queue": "default"},
        }
        self.create_failures += retried(
            f"PodGroup {name}",
            lambda: self.co.create_namespaced_custom_object(
                *PGS[:2], ns, PGS[2], body, _request_timeout=TIMEOUT
            ),
        )
        self.gangs.append(name)
        self.created_at[name] = time.monotonic()
        for i in range(self.gang_size):
            m = pod(f"{name}-{i}", ns, gpus=self.gang_gpus, cpu="1")
            m["metadata"]["annotations"] = {GROUP_NAME_ANNOTATION: name}
            m["spec"]["schedulingGates"] = [{"name": GANG_GATE}]
            self.create_failures += retried(
                f"pod {name}-{i}",
                functools.partial(self.core.create_namespaced_pod, ns, m, _request_timeout=TIMEOUT),
            )

    def create_job(self, name: str) -> None:
        body = job_body(name, self.job_replicas)
        self.create_failures += retried(
            f"Job {name}",
            lambda: self.co.create_namespaced_custom_object(
                *JOBS[:2], self.namespace, JOBS[2], body, _request_timeout=TIMEOUT
            ),
        )
        self.jobs.append(name)
        self.created_at[name] = time.monotonic()

    def _recycle(self, bound_since: dict[str, float]) -> None:
        """Delete gangs fully bound for keep_s."""
        live = [g for g in self.gangs if g not in self.deleting]
        if not live:
            return
        counts = self.bound_counts()
        now = time.monotonic()
        for g in live:
            if counts.get(g, 0) < self.gang_size:
                continue
            since = bound_since.setdefault(g, now)
            if now - since < self.keep_s:
                continue
            self.deleting.add(g)
            self.delete_gang(g)
            self.deleted.append(g)

    def delete_gang(self, g: str) -> None:
        core, co, ns = self.core, self.co, self.namespace
        for i in range(self.gang_size):
            name = f"{g}-{i}"
            retried(
                f"delete {name}",
                functools.partial(
                    _ok_if_gone,
                    functools.partial(
                        core.delete_namespaced_pod,
                        name,
                        ns,
                        grace_period_seconds=0,
                        _request_timeout=TIMEOUT,
                    ),
                ),
            )
        retried(
            f"delete PodGroup {g}",
            lambda: _ok_if_gone(
                lambda: co.delete_namespaced_custom_object(
                    *PGS[:2], ns, PGS[2], g, _request_timeout=TIMEOUT
                )
            ),
        )

    def clean_up(self) -> None:
        """Delete everything the workload made (Jobs first, so none is recreated)."""
        co, ns = self.co, self.namespace
        co.delete_collection_namespaced_custom_object(*JOBS[:2], ns, JOBS[2])
        self.core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
        co.delete_collection_namespaced_custom_object(*PGS[:2], ns, PGS[2])

    def bound_counts(self) -> dict[str, int]:
        """Gang name -> bound members, this namespace."""
        resp = self.core.list_namespaced_pod(
            self.namespace, _preload_content=False, _request_timeout=TIMEOUT
        )
        out: dict[str, int] = {}
        for p in json.loads(resp.data)["items"]:
            group = (p["metadata"].get("annotations") or {}).get(GROUP_NAME_ANNOTATION, "")
            if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp"):
                out[group] = out.get(group, 0) + 1
        return out

    def job_phases(self) -> dict[str, str]:
        items = self.co.list_namespaced_custom_object(
            *JOBS[:2], self.namespace, JOBS[2], _request_timeout=TIMEOUT
        )["items"]
        return {
            j["metadata"]["name"]: ((j.get("status") or {}).get("state") or {}).get("phase", "")
            for j in items
        }


def _ok_if_gone(call: Callable[[], Any]) -> None:
    try:
        call()
    except client.ApiException as exc:
        if exc.status != 404:
            raise
