"""``pyextender webhook``'s process: TLS, the API client, readiness, uvicorn."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import uvicorn

from pyextender.api.client import api_client
from webhook.app import DEFAULT_MAX_BODY_BYTES, WebhookApp
from webhook.metrics import Metrics
from webhook.queues import ApiQueues, QueueLookupError

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
    queues = ApiQueues(api_client(opts.kubeconfig))
    state = {"api": "waiting for the API server"}

    def ready() -> tuple[bool, str]:
        if state["api"]:
            return False, state["api"]
        return True, "ok"

    app = WebhookApp(queues, ready, Metrics(), opts.max_body_bytes)
    config = uvicorn.Config(
        app,
        host=opts.address,
        port=opts.port,
        ssl_certfile=opts.tls_cert,
        ssl_keyfile=opts.tls_key,
        log_level="warning",
        access_log=False,
        lifespan="on",
        http="httptools",
        timeout_keep_alive=60,  # seconds; the API server reuses connections
    )
    server = uvicorn.Server(config)
    probe = asyncio.create_task(_wait_for_api(queues, state))
    log.info("serving admission webhook on https://%s:%d", opts.address, opts.port)
    try:
        await server.serve()
    finally:
        probe.cancel()
    return 0
