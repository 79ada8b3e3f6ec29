"""Where one bench phase's work goes: CPU seconds per process of a devcluster and
the API server's requests, both as deltas over the phase, per pod.

The machine has 2 cores shared by every process of the cluster, so pods/s is set
by the CPU all of them spend per pod: this says which process spends it, and
which API requests (each one a write to etcd and a watch event to every
watcher) the phase made.
"""

from __future__ import annotations

import os
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client

HZ = os.sysconf("SC_CLK_TCK")
"""Clock ticks per second of /proc CPU times."""
_REQUEST = re.compile(r"^apiserver_request_total\{([^}]*)\} ([0-9.e+]+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')
MUTATING = ("POST", "PUT", "PATCH", "DELETE")


def _program(cmdline: list[str]) -> str:
    """A short name for a cluster process from its command line."""
    base = os.path.basename(cmdline[0])
    joined = " ".join(cmdline)
    if base.startswith("python"):
        for module, name in (
            ("pyextender.cli controllers", "controllers"),
            ("pyextender.cli webhook", "webhook"),
            ("pyextender", "sidecar"),
            ("controllers", "controllers"),
        ):
            if module in joined:
                return name
        return "python"
    if base.startswith("kube-scheduler"):
        return "kube-scheduler"  # both instances: the stock one and ours (or the shim)
    return base


def _processes() -> Iterator[tuple[int, list[str]]]:
    """(pid, command line) of every process that is still there."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # gone meanwhile
        args = [c.decode(errors="replace") for c in cmd if c]
        if args:
            yield int(entry), args


def _ticks(stat_path: str) -> int:
    """utime + stime from a /proc stat file, in clock ticks; OSError when it is gone."""
    stat = Path(stat_path).read_text()
    fields = stat[stat.rfind(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])


def _switches(status_path: str) -> int:
    """Voluntary + involuntary context switches of one thread so far (a /proc status
    file); OSError when it is gone."""
    total = 0
    for line in Path(status_path).read_text().splitlines():
        if line.startswith(("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:")):
            total += int(line.split()[1])
    return total


def _tasks(pid: int, read: Callable[[str], int]) -> Iterator[tuple[int, str, int]]:
    """(tid, thread name, ``read`` of the thread's /proc folder) of every thread of
    ``pid`` that is still there."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return
    for tid in tids:
        try:
            comm = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
            yield int(tid), comm, read(f"/proc/{pid}/task/{tid}")
        except OSError:
            continue  # the thread ended meanwhile (its counts are lost: small)


def context_switches(marker: str) -> tuple[Counter[str], Counter[str]]:
    """Context switches so far (voluntary: a thread blocked, e.g. to wait for a
    message; involuntary: the kernel preempted it) of every thread of every
    process whose command line contains ``marker``, by program; and of the
    sidecar's threads by group (see _thread_group). Each switch is a wake-up or a
    preemption on 2 shared cores: their count per pod says how many hand-offs
    between threads and processes a pod costs, beside the CPU."""
    by_program: Counter[str] = Counter()
    sidecar: Counter[str] = Counter()
    me = os.getpid()
    for pid, args in _processes():
        if pid != me and marker not in " ".join(args):
            continue
        program = "bench (client)" if pid == me else _program(args)
        for tid, comm, n in _tasks(pid, lambda task: _switches(f"{task}/status")):
            by_program[program] += n
            if program == "sidecar":
                sidecar[_thread_group(pid, tid, comm)] += n
    return by_program, sidecar


def cpu_ticks(marker: str) -> Counter[str]:
    """User + system CPU so far, in clock ticks (1/HZ s), of every process whose
    command line contains ``marker`` (the cluster's directory), by program; this
    process as "bench (client)". Integer ticks, summed exactly."""
    out: Counter[str] = Counter()
    me = os.getpid()
    for pid, args in _processes():
        if pid != me and marker not in " ".join(args):
            continue
        try:
            ticks = _ticks(f"/proc/{pid}/stat")
        except OSError:
            continue
        out["bench (client)" if pid == me else _program(args)] += ticks
    return out


def _thread_group(pid: int, tid: int, comm: str) -> str:
    """The sidecar's threads by role: its OS thread names are the Python ones
    (pyextender.api.process.name_os_thread); a pool's numbered threads count as one."""
    if tid == pid:
        return "event loop"  # the main thread: uvicorn, the verbs, the cache's events
    return re.sub(r"_\d+$", "", comm) or "?"


def sidecar_thread_ticks(marker: str) -> Counter[str]:
    """User + system CPU so far, in clock ticks, of each thread group of the sidecar
    process(es) whose command line contains ``marker`` (see _thread_group)."""
    out: Counter[str] = Counter()
    for pid, args in _processes():
        if marker not in " ".join(args) or _program(args) != "sidecar":
            continue
        for tid, comm, ticks in _tasks(pid, lambda task: _ticks(f"{task}/stat")):
            out[_thread_group(pid, tid, comm)] += ticks
    return out


def api_requests(api: client.ApiClient) -> Counter[str]:
    """The API server's request counts so far, by "VERB resource[/subresource]"."""
    resp = api.call_api("/metrics", "GET", _preload_content=False, auth_settings=["BearerToken"])
    text = resp.data.decode()
    out: Counter[str] = Counter()
    for line in text.splitlines():
        m = _REQUEST.match(line)
        if not m:
            continue
        labels = dict(_LABEL.findall(m.group(1)))
        what = labels.get("resource", "")
        if labels.get("subresource"):
            what += "/" + labels["subresource"]
        out[f"{labels.get('verb', '')} {what}"] += int(float(m.group(2)))
    return out


@dataclass
class PhaseCost:
    """Snapshots at start() and stop(); per_pod() gives the deltas divided by pods."""

    api: client.ApiClient
    marker: str
    profile_dir: Path | None = None
    """Where each phase's kube-apiserver CPU profile goes (None: none taken). The API
    server must serve /debug/pprof (devcluster: PYEXTENDER_APISERVER_PROFILING=1)."""
    profile_s: int = 5
    """Seconds each profile lasts from the phase's start: a phase shorter than this adds
    idle time (no samples), a longer one is cut."""
    _cpu: Counter[str] = field(default_factory=Counter)
    _threads: Counter[str] = field(default_factory=Counter)
    _requests: Counter[str] = field(default_factory=Counter)
    _switches: Counter[str] = field(default_factory=Counter)
    _sidecar_switches: Counter[str] = field(default_factory=Counter)
    _profile: threading.Thread | None = None
    _profile_path: str = ""
    _profile_error: str = ""

    def start(self, label: str = "phase") -> None:
        self._cpu = cpu_ticks(self.marker)
        self._threads = sidecar_thread_ticks(self.marker)
        self._switches, self._sidecar_switches = context_switches(self.marker)
        self._requests = api_requests(self.api)
        if self.profile_dir is not None:
            self.profile_dir.mkdir(parents=True, exist_ok=True)
            path = self.profile_dir / f"{label}-apiserver.pb"
            self._profile_path, self._profile_error = str(path), ""
            self._profile = threading.Thread(target=self._take_profile, args=(path,), daemon=True)
            self._profile.start()

    def _take_profile(self, path: Path) -> None:
        try:
            resp = self.api.call_api(
                "/debug/pprof/profile",
                "GET",
                query_params=[("seconds", str(self.profile_s))],
                _preload_content=False,
                _request_timeout=self.profile_s + 30,
                auth_settings=["BearerToken"],
            )
            path.write_bytes(resp.data)
        except Exception as exc:  # reported with the phase's figures
            self._profile_error = f"{type(exc).__name__}: {exc}"[:300]

    def stop(self, pods: int) -> dict[str, Any]:
        """{"cpu_ms_per_pod": {program: ms}, "sidecar_threads_ms_per_pod": {thread: ms},
        "writes_per_pod": {request: count}, "switches_per_pod": {program: count},
        "sidecar_thread_switches_per_pod": {thread: count},
        "reads_per_pod": {request: count}} (reads: GET, LIST and WATCH requests),
        and with profile_dir {"apiserver_profile": {"path" or "error": ...}}."""
        cpu = cpu_ticks(self.marker)
        cpu.subtract(self._cpu)
        threads = sidecar_thread_ticks(self.marker)
        threads.subtract(self._threads)
        switches, sidecar_switches = context_switches(self.marker)
        switches.subtract(self._switches)
        sidecar_switches.subtract(self._sidecar_switches)
        requests = api_requests(self.api)
        requests.subtract(self._requests)
        profile: dict[str, str] = {}
        if self._profile is not None:
            # the next phase starts once this one's profile is written
            self._profile.join(self.profile_s + 60)
            self._profile = None
            if self._profile_error:
                profile["error"] = self._profile_error
            else:
                profile["path"] = self._profile_path
        ms = {k: round(1000 * v / HZ / pods, 2) for k, v in cpu.most_common() if v > 0}
        ms["total"] = round(sum(ms.values()), 2)
        writes = {
            k: round(v / pods, 2)
            for k, v in requests.most_common()
            if v > 0 and k.split(" ")[0] in MUTATING
        }
        # reads too: a GET per pod costs the API server as much as a small write
        reads = {
            k: round(v / pods, 2)
            for k, v in requests.most_common()
            if v > 0 and k.split(" ")[0] not in MUTATING and v / pods >= 0.005
        }
        out: dict[str, Any] = {
            "cpu_ms_per_pod": ms,
            # where the sidecar's share goes (a thread that ended in the phase is missed)
            "sidecar_threads_ms_per_pod": {
                k: round(1000 * v / HZ / pods, 2) for k, v in threads.most_common() if v > 0
            },
            "writes_per_pod": writes,
            "reads_per_pod": reads,
            "switches_per_pod": _per_pod(switches, pods),
            "sidecar_thread_switches_per_pod": _per_pod(sidecar_switches, pods),
        }
        if profile:
            out["apiserver_profile"] = profile
        return out


def _per_pod(counts: Counter[str], pods: int) -> dict[str, float]:
    """Counts per pod, largest first, with their total; a thread or process that
    ended in the phase goes negative, and is left out."""
    out = {k: round(v / pods, 1) for k, v in counts.most_common() if v > 0}
    out["total"] = round(sum(v for v in counts.values() if v > 0) / pods, 1)
    return out
