"""Kubernetes client configuration, discovered in kubectl's order.

1. an explicit ``--kubeconfig`` path;
2. in-cluster service-account config (when running in a Pod);
3. ``$KUBECONFIG``;
4. ``~/.kube/config``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException


class ClientConfigError(RuntimeError):
    """No usable Kubernetes configuration was found."""


CONNECT_TIMEOUT_S = 5.0
"""Seconds to open a connection to the API server."""
READ_TIMEOUT_S = 20.0
"""Seconds to wait for a reply (between bytes) on an ordinary request. A hung
call must end: it holds a thread of the shared API pool, and the caller's
retry and fencing logic can only run once it returns."""
DEFAULT_TIMEOUT: tuple[float, float] = (CONNECT_TIMEOUT_S, READ_TIMEOUT_S)


class TimeoutApiClient(client.ApiClient):  # type: ignore[misc]
    """An ApiClient whose every request has a timeout unless the caller gives one.

    The generated client sends requests with no timeout at all by default, so a
    half-open connection blocks its thread forever. Watches pass their own
    (longer) read timeout.
    """

    def request(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("_request_timeout") is None:
            kwargs["_request_timeout"] = DEFAULT_TIMEOUT
        return super().request(*args, **kwargs)


def api_client(kubeconfig: str | None = None, qps_pool: int = 32) -> client.ApiClient:
    """An ApiClient for the first configuration source that exists."""
    cfg = client.Configuration()
    # the config loaders carry no type hints
    load_kube_config: Any = config.load_kube_config
    load_incluster_config: Any = config.load_incluster_config
    if kubeconfig:
        if not Path(kubeconfig).exists():
            raise ClientConfigError(f"kubeconfig {kubeconfig} does not exist")
        load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        load_incluster_config(client_configuration=cfg)
    else:
        path = os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
        if not Path(path).exists():
            raise ClientConfigError(
                "no Kubernetes configuration: pass --kubeconfig, run in a Pod, "
                f"or set KUBECONFIG (tried {path})"
            )
        load_kube_config(config_file=path, client_configuration=cfg)
    cfg.connection_pool_maxsize = qps_pool
    return TimeoutApiClient(cfg)


def body_of(resp: Any) -> bytes:
    """Read a raw (``_preload_content=False``) response and give its connection back.

    Without the explicit release urllib3 keeps the connection checked out, and
    the next request opens a new TLS connection: at a few hundred writes a
    second that handshake was a third of the sidecar's CPU.
    """
    try:
        data: bytes = resp.data
    finally:
        resp.release_conn()
    return data


def conflict(exc: BaseException) -> bool:
    """409: already exists, or a stale resourceVersion in an optimistic update."""
    return isinstance(exc, ApiException) and exc.status == 409


def refused(exc: BaseException) -> bool:
    """A 4xx that asking again unchanged will not mend: invalid, forbidden, or denied by
    an admission webhook. Not 404, 409 or 429 (gone, already there or stale, throttled),
    which callers tell apart themselves or retry."""
    status = exc.status if isinstance(exc, ApiException) else None
    return isinstance(status, int) and 400 <= status < 500 and status not in (404, 409, 429)
