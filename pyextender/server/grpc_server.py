"""The sidecar's gRPC server: pyextender.v1.Scheduler, health checking, reflection.

It runs on grpc.aio in the sidecar's own event loop, beside the HTTP server,
so both front ends read one cache without locks. Listens on a Unix domain
socket (shim and sidecar share a Pod) and, optionally, on TCP with TLS.
Health (grpc.health.v1) reports SERVING only while the sidecar is ready, for
the whole server ("") and for pyextender.v1.Scheduler.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from pyextender.server.cycle_socket import CycleSocket
from pyextender.server.grpc_service import SERVICE, SchedulerService

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 16 * 2**20
"""Largest request accepted (bytes); 10,000 node names are ~200 kB."""
READY_POLL_S = 0.5  # seconds between readiness checks for the health service


@dataclass(frozen=True, slots=True)
class GrpcOptions:
    socket: str | None = None
    """Unix domain socket path; None for none."""
    address: str | None = None
    """host:port for TCP; None for none."""
    tls_cert: str | None = None
    """PEM certificate for TCP (with tls_key); without both, TCP is plaintext."""
    tls_key: str | None = None
    cycle_socket: str | None = None
    """Unix socket path for the Cycle messages without gRPC (pyextender.server.
    cycle_socket); None for none. Beside a gRPC listener, never instead of one."""

    @property
    def enabled(self) -> bool:
        return bool(self.socket or self.address)


def _bind(server: grpc.aio.Server, opts: GrpcOptions) -> list[str]:
    where: list[str] = []
    if opts.socket:
        path = Path(opts.socket)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_socket():
            path.unlink()  # left by a previous (killed) sidecar
        server.add_insecure_port(f"unix://{path}")
        where.append(f"unix://{path}")
    if opts.address:
        if opts.tls_cert and opts.tls_key:
            creds = grpc.ssl_server_credentials(
                [(Path(opts.tls_key).read_bytes(), Path(opts.tls_cert).read_bytes())]
            )
            port = server.add_secure_port(opts.address, creds)
            where.append(f"tls://{opts.address.rsplit(':', 1)[0]}:{port}")
        else:
            port = server.add_insecure_port(opts.address)
            where.append(f"tcp://{opts.address.rsplit(':', 1)[0]}:{port}")
    return where


async def _follow_readiness(
    servicer: health.aio.HealthServicer, ready: Callable[[], tuple[bool, str]]
) -> None:
    last: bool | None = None
    while True:
        ok = ready()[0]
        if ok != last:
            status = (
                health_pb2.HealthCheckResponse.SERVING
                if ok
                else health_pb2.HealthCheckResponse.NOT_SERVING
            )
            for name in ("", SERVICE):
                await servicer.set(name, status)
            last = ok
        await asyncio.sleep(READY_POLL_S)


class GrpcServer:
    """Start with ``await start()``; ``await stop()`` on the way out."""

    def __init__(
        self, service: SchedulerService, opts: GrpcOptions, ready: Callable[[], tuple[bool, str]]
    ) -> None:
        self.service = service
        self.opts = opts
        self.ready = ready
        self.server: grpc.aio.Server | None = None
        self.addresses: list[str] = []
        self._health_task: asyncio.Task[None] | None = None
        self.cycle: CycleSocket | None = None

    async def start(self) -> list[str]:
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ]
        )
        server.add_generic_rpc_handlers((self.service.handler(),))
        checker = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(checker, server)
        reflection.enable_server_reflection(
            (SERVICE, health.SERVICE_NAME, reflection.SERVICE_NAME), server
        )
        self.addresses = _bind(server, self.opts)
        await server.start()
        self.server = server
        if self.opts.cycle_socket:
            self.cycle = CycleSocket(
                self.opts.cycle_socket,
                self.service.cycle_stream,
                self.service.ext.metrics,
                MAX_MESSAGE_BYTES,
            )
            self.addresses.append(await self.cycle.start())
        self._health_task = asyncio.create_task(_follow_readiness(checker, self.ready))
        log.info("serving gRPC %s on %s", SERVICE, ", ".join(self.addresses))
        return self.addresses

    async def stop(self, grace: float = 1.0) -> None:
        if self._health_task is not None:
            self._health_task.cancel()
        if self.cycle is not None:
            await self.cycle.stop()
            self.cycle = None
        if self.server is not None:
            await self.server.stop(grace)
        if self.opts.socket and os.path.exists(self.opts.socket):
            Path(self.opts.socket).unlink(missing_ok=True)
