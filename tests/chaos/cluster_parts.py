"""Starting and waiting for our components on a chaos cluster."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import urllib3
from kubernetes import client

from devcluster.cluster import Cluster, free_port

LEASE_ARGS = ["--lease-duration=6", "--renew-deadline=4", "--retry-period=1"]
"""Sidecar Lease timings (seconds): a restarted leader's successor acts within ~6 s."""


def get(url: str, timeout: float = 2.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:
        return 0, str(e)


def metric(url: str, name: str) -> float | None:
    """One sample's value from ``url``/metrics (None when absent or unreachable)."""
    code, text = get(f"{url}/metrics")
    if code != 200:
        return None
    total = None
    for line in text.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            if key == name or key.startswith(name + "{"):
                total = (total or 0.0) + float(value)
    return total


def writes(url: str, result: str) -> float | None:
    """Sum of ``pyextender_api_writes_total`` over every op, for one result."""
    code, text = get(f"{url}/metrics")
    if code != 200:
        return None
    prefix = "pyextender_api_writes_total{"
    return sum(
        float(line.rpartition(" ")[2])
        for line in text.splitlines()
        if line.startswith(prefix) and f'result="{result}"' in line
    )


def wait_until(
    what: str, check: Callable[[], object], timeout: float, interval: float = 0.2
) -> None:
    """Polls ``check`` until it is true; an exception counts as not yet (the API
    server may be restarting) and is named if the wait times out."""
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        try:
            if check():
                return
        except (OSError, client.ApiException, urllib3.exceptions.HTTPError) as exc:
            last = f"; last error: {type(exc).__name__}: {exc}"[:300]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}{last}")
        time.sleep(interval)


def start_replica(
    cluster: Cluster, role: str, kubeconfig: str | None = None, extra: list[str] | None = None
) -> str:
    """A sidecar replica on a port of its own; returns its URL."""
    port = free_port()
    cluster.start_sidecar(
        [f"--port={port}", *LEASE_ARGS, "--log-level=info", *(extra or [])],
        role=role,
        kubeconfig=kubeconfig,
    )
    return f"http://127.0.0.1:{port}"


def wait_ready(cluster: Cluster, url: str, role: str, timeout: float = 60.0) -> None:
    def ready() -> bool:
        st = cluster.state
        if st is not None and cluster.status()["processes"].get(role) == "exited":
            raise RuntimeError(f"{role} exited; see {st.logs}/{role}.log")
        return get(f"{url}/readyz")[0] == 200

    wait_until(f"{role} ready", ready, timeout)


def proxied_kubeconfig(cluster: Cluster, port: int, path: Path) -> str:
    """The cluster's kubeconfig (same credentials) with the server at 127.0.0.1:<port>."""
    st = cluster.state
    assert st is not None
    text = Path(st.kubeconfig).read_text()
    assert st.server in text, "kubeconfig does not name the API server as expected"
    path.write_text(text.replace(st.server, f"https://127.0.0.1:{port}"))
    return str(path)
