"""uvicorn servers that leave SIGTERM and SIGINT to the process.

uvicorn's ``Server.serve`` takes both signals for itself, shuts down, then raises
the signal again under the handler it replaced. Under Python's default handler that
ends the process at once, before the code after ``serve()`` runs: the sidecar's
leader never released its Lease, so after every rolling update (kubelet sends
SIGTERM) a standby waited a whole lease duration (15 s) before anyone admitted a
gang. Here the process's main (``pyextender.api.process.run_server``) owns the
signals and asks every server to stop; each ``serve()`` then returns and the
caller's clean-up runs to the end.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator

import uvicorn

_SERVERS: weakref.WeakSet[Server] = weakref.WeakSet()


class Server(uvicorn.Server):
    """``uvicorn.Server`` without its signal handlers (see the module docstring)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        _SERVERS.add(self)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def stop_servers() -> int:
    """Ask every server of this process to shut down gracefully; how many were asked
    (0: none left to stop)."""
    asked = 0
    for server in list(_SERVERS):
        if not server.should_exit:
            server.should_exit = True
            asked += 1
    return asked
