"""The cycle socket: the Cycle stream's messages on a plain Unix stream socket.

The shim's two calls per pod (Filter at PreFilter, and Reserve) are the hot
path of framework mode. On the gRPC Cycle stream each message costs grpc.aio
about 100 µs of CPU and ten thread wake-ups (its completion-queue poller and
event-engine threads hand every read and write to the event loop); on this
socket the event loop reads and answers a message itself, for about 20 µs and
one wake-up (bench/grpc_verbs.py measures both). The messages are the same
CycleRequest and CycleResponse (proto/pyextender/v1/scheduler.proto), each
written as its length (a varint) and then its bytes, and answered by the same
CycleStream code, in order, one at a time. A request that cannot be answered
gets a reply with ``refused_code`` and ``refused_message`` (the gRPC status a
stream would end with), and the connection is closed.

Everything else (Permit, Unreserve, WatchReleased, health) stays on gRPC.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

from pyextender.server.grpc_cycle import CycleStream, Refused, delimited, write_refusal

log = logging.getLogger(__name__)

_MAX_LENGTH_BYTES = 5
"""A varint of up to 5 bytes holds any length below 2**35."""


class FrameError(Exception):
    """The bytes on the socket are not a delimited message we accept."""


async def read_frame(reader: asyncio.StreamReader, max_bytes: int) -> bytes | None:
    """One delimited message; None when the peer closed the connection between
    messages. Raises FrameError (bad length) and asyncio.IncompleteReadError (the
    peer closed it inside a message)."""
    length = shift = 0
    for i in range(_MAX_LENGTH_BYTES):
        head = await reader.read(1)
        if not head:
            if i == 0:
                return None
            raise asyncio.IncompleteReadError(b"", None)
        byte = head[0]
        length |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
    else:
        raise FrameError("a message length longer than 5 bytes")
    if length > max_bytes:
        raise FrameError(f"a message of {length} bytes; the limit is {max_bytes}")
    return await reader.readexactly(length)


class CycleSocket:
    """``await start()`` listens on ``path``; ``await stop()`` closes it and every
    connection. ``cycles()`` gives each connection its own CycleStream (its own
    Filter name memo, which follows one sequence of requests)."""

    def __init__(
        self, path: str, cycles: Callable[[], CycleStream], metrics: Any, max_bytes: int
    ) -> None:
        self.path = path
        self.cycles = cycles
        self.metrics = metrics
        self.max_bytes = max_bytes
        self.server: asyncio.AbstractServer | None = None
        self._connections: set[asyncio.StreamWriter] = set()

    async def start(self) -> str:
        path = Path(self.path)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_socket():
            path.unlink()  # left by a previous (killed) sidecar
        self.server = await asyncio.start_unix_server(self._serve, str(path))
        log.info("serving the Cycle messages on unix://%s (cycle socket)", path)
        return f"cycle+unix://{path}"

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            for writer in list(self._connections):
                writer.close()
            await self.server.wait_closed()
            self.server = None
        Path(self.path).unlink(missing_ok=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.metrics.cycle_streams.labels("socket").inc()
        self._connections.add(writer)
        cycle = self.cycles()
        try:
            while True:
                try:
                    raw = await read_frame(reader, self.max_bytes)
                except FrameError as exc:
                    self.metrics.errors.labels("grpc_cycle", "invalid_argument").inc()
                    writer.write(
                        delimited(write_refusal(grpc.StatusCode.INVALID_ARGUMENT, str(exc)))
                    )
                    break
                if raw is None:
                    break
                try:
                    reply = await cycle.answer(raw)
                except Refused as exc:
                    writer.write(delimited(write_refusal(exc.code, exc.text)))
                    break
                writer.write(delimited(reply))
                if writer.transport.get_write_buffer_size() > self.max_bytes:
                    await writer.drain()  # a reader that stopped reading: do not buffer on
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the shim went away mid-message; it reconnects for its next call
        finally:
            self._connections.discard(writer)
            writer.close()
