"""``pyextender webhook``'s process: TLS (reloaded on change), the API client, readiness,
leader election for self-managed certificates, uvicorn."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import uvicorn

from pyextender.api.asgi_server import Server
from pyextender.api.client import api_client
from pyextender.api.leader import KubeLeases, LeaderElector, LeaseConfig
from webhook.app import DEFAULT_MAX_BODY_BYTES, WebhookApp
from webhook.metrics import Metrics
from webhook.mutate_pod import Adoption
from webhook.queues import ApiQueues, QueueLookupError
from webhook.tls import FileCerts, SecretCerts, SecretSettings, reload_context, write_pair

log = logging.getLogger(__name__)

PROBE_INTERVAL = 2.0
"""Seconds between API server checks while not yet ready."""


@dataclass(frozen=True, slots=True)
class WebhookOptions:
    kubeconfig: str | None
    address: str
    port: int
    tls_cert: str
    tls_key: str
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    adoption: Adoption = field(default_factory=Adoption)
    secret: SecretSettings | None = None
    """Self-managed certificates in this Secret (instead of tls_cert/tls_key files)."""
    tls_dir: str = ""
    """Where a self-managed pair is written for the TLS library (tls.crt, tls.key)."""
    file_period: float = 10.0
    """Seconds between checks of tls_cert/tls_key for a renewal."""
    lease: LeaseConfig | None = None
    """Leader election among replicas (who writes the self-managed certificates)."""


async def _wait_for_api(queues: ApiQueues, state: dict[str, str]) -> None:
    """Readiness: the API server answered once (queue validation needs it)."""
    while True:
        try:
            await asyncio.to_thread(queues.children, "root")
        except QueueLookupError as exc:
            state["api"] = f"waiting for the API server: {exc}"
            await asyncio.sleep(PROBE_INTERVAL)
            continue
        state["api"] = ""
        log.info("API server reachable; ready")
        return


async def serve(opts: WebhookOptions) -> int:
    api = api_client(opts.kubeconfig)
    queues = ApiQueues(api)
    state = {"api": "waiting for the API server"}

    def ready() -> tuple[bool, str]:
        if state["api"]:
            return False, state["api"]
        return True, "ok"

    tasks: list[asyncio.Task[None]] = []
    source: FileCerts | SecretCerts
    if opts.secret is not None:
        source = SecretCerts(api, opts.secret)
        if opts.lease is not None:
            elector = LeaderElector(KubeLeases(api), opts.lease)
            tasks.append(asyncio.create_task(elector.run(source.lead)))
        else:
            tasks.append(asyncio.create_task(source.lead()))
        # no listener until there is a certificate to serve (the leader issues the first)
        crt, key = await source.wait_first()
        cert_path, key_path = write_pair(Path(opts.tls_dir), crt, key)
    else:
        source = FileCerts(opts.tls_cert, opts.tls_key, opts.file_period)
        cert_path, key_path = Path(opts.tls_cert), Path(opts.tls_key)

    app = WebhookApp(queues, ready, Metrics(), opts.max_body_bytes, opts.adoption)
    config = uvicorn.Config(
        app,
        host=opts.address,
        port=opts.port,
        ssl_certfile=str(cert_path),
        ssl_keyfile=str(key_path),
        log_level="warning",
        access_log=False,
        lifespan="on",
        http="httptools",
        timeout_keep_alive=60,  # seconds; the API server reuses connections
    )
    config.load()  # creates config.ssl, the context every new handshake uses
    assert isinstance(config.ssl, ssl.SSLContext)
    if opts.secret is not None:
        reload = reload_context(config.ssl, Path(opts.tls_dir))
    else:
        reload = _file_reload(config.ssl, opts.tls_cert, opts.tls_key)
    tasks.append(asyncio.create_task(source.run(reload)))
    server = Server(config)
    tasks.append(asyncio.create_task(_wait_for_api(queues, state)))
    log.info("serving admission webhook on https://%s:%d", opts.address, opts.port)
    try:
        await server.serve()
    finally:
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
    return 0


def _file_reload(ctx: ssl.SSLContext, cert: str, key: str) -> Callable[[bytes, bytes], None]:
    """Reload from the files themselves (they changed on disk)."""

    def reload(_crt: bytes, _key: bytes) -> None:
        ctx.load_cert_chain(cert, key)

    return reload
