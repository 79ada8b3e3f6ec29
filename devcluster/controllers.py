"""Run ``pyextender controllers`` against a devcluster.

``enable_controllers(cluster)`` starts the process as role ``controllers``
(logs in ``logs/controllers.log``, stopped by ``down`` with the rest) and waits
until its caches are synced and it holds the leader Lease. Calling it again
while that process is alive and ready does nothing.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request

from devcluster.cluster import Cluster, _alive, free_port

ROLE = "controllers"
PORT_KEY = "controllers_metrics"
"""Key in ClusterState.ports of the controllers' /healthz /readyz /metrics port."""
LEASE_ARGS = ["--lease-duration=4", "--renew-deadline=3", "--retry-period=0.5"]
"""Short lease timings (seconds) so a standby takes over quickly in tests."""


def controllers_url(cluster: Cluster) -> str:
    st = cluster.state
    if st is None or PORT_KEY not in st.ports:
        raise RuntimeError(f"controllers were never started on cluster {cluster.name!r}")
    return f"http://127.0.0.1:{st.ports[PORT_KEY]}"


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:
        return 0, str(e)


def is_leader(url: str) -> bool:
    code, text = _get(f"{url}/metrics")
    return code == 200 and "\npyextender_controllers_is_leader 1.0" in text


def start_controllers(
    cluster: Cluster, role: str = ROLE, port: int | None = None, extra: list[str] | None = None
) -> str:
    """Start one controllers process with leader election; returns its metrics URL."""
    st = cluster.state
    if st is None:
        raise RuntimeError(f"cluster {cluster.name!r} is not up")
    port = port or free_port()
    if role == ROLE:
        st.ports[PORT_KEY] = port
        st.save()
    cluster.start_component(
        role,
        [
            "controllers",
            f"--metrics-port={port}",
            "--leader-elect",
            f"--identity={role}-{port}",
            "--resync=20",
            *LEASE_ARGS,
            *(extra or []),
        ],
    )
    return f"http://127.0.0.1:{port}"


def wait_ready(cluster: Cluster, url: str, role: str, leader: bool, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        st = cluster.state
        pid = st.pids.get(role) if st else None
        if pid is not None and not _alive(pid):
            raise RuntimeError(f"{role} exited; see {st.logs if st else '?'}/{role}.log")
        code, last = _get(f"{url}/readyz")
        if code == 200 and (not leader or is_leader(url)):
            return
        time.sleep(0.2)
    raise TimeoutError(f"{role} not ready after {timeout:.0f}s: {last}")


def enable_controllers(
    cluster: Cluster, timeout: float = 60.0, extra: list[str] | None = None
) -> None:
    """Start the controllers if they are not running, and wait until they act. With
    ``extra`` arguments they are (re)started with them."""
    st = cluster.state
    if st is None:
        raise RuntimeError(f"cluster {cluster.name!r} is not up")
    pid = st.pids.get(ROLE)
    if extra is not None:
        if pid is not None:
            cluster.stop_role(ROLE)
        url = start_controllers(cluster, extra=extra)
    elif pid is not None and _alive(pid) and PORT_KEY in st.ports:
        url = controllers_url(cluster)
        if _get(f"{url}/readyz")[0] == 200 and is_leader(url):
            return
    else:
        if pid is not None:
            cluster.stop_role(ROLE)
        url = start_controllers(cluster)
    wait_ready(cluster, url, ROLE, leader=True, timeout=timeout)
