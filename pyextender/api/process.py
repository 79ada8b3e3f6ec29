"""How every pyextender process starts: logging, the event loop, exit codes."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Coroutine
from typing import Any

LOG_LEVELS = ("debug", "info", "warning", "error")


def add_log_level(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log-level", default="info", choices=LOG_LEVELS, help="log verbosity (default info)"
    )


LOG_FORMAT_ENV = "PYEXTENDER_LOG_FORMAT"
"""``text`` (default) or ``json`` (one object per line: time, level, logger, message)."""


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {
            "time": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out)


def setup_logging(level: str) -> None:
    fmt = os.environ.get(LOG_FORMAT_ENV, "text")
    if fmt not in ("text", "json"):
        print(f"${LOG_FORMAT_ENV} must be text or json, got {fmt!r}; using text", file=sys.stderr)
    logging.basicConfig(
        level=getattr(logging, level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if fmt == "json":
        for handler in logging.getLogger().handlers:
            handler.setFormatter(JsonFormatter())


_PR_SET_NAME = 15  # prctl(2): the calling thread's name, 15 bytes and a NUL


def name_os_thread() -> None:
    """Give the calling thread's Python name to the OS (``/proc/<pid>/task/<tid>/comm``,
    cut to 15 bytes), so ``top -H``, ``ps -L`` and bench/phase_cost tell our threads
    apart (CPython sets it only from 3.14). Run first thing on each thread; a no-op
    where prctl is missing."""
    name = threading.current_thread().name.encode(errors="replace")[:15]
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_NAME, ctypes.c_char_p(name), 0, 0, 0)


async def _stopped_by_signals(main: Coroutine[Any, Any, int]) -> int:
    """``main``, stopped cleanly by SIGTERM or SIGINT: kubelet stops a container with
    SIGTERM (a rolling update, a drained node). The first signal asks the process's
    HTTP servers to shut down (``asgi_server``), so ``main`` returns through its
    clean-up (the sidecar's leader releases its Lease and a standby takes over at
    once); without a server, or at a second signal, ``main`` is cancelled. A process
    that installs its own handlers (the controllers) replaces these."""
    from pyextender.api.asgi_server import stop_servers

    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(main)
    signalled: list[int] = []

    def stop(sig: int) -> None:
        if signalled or not stop_servers():
            task.cancel()
        signalled.append(sig)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop, sig)
    try:
        return await task
    except asyncio.CancelledError:
        if task.cancelled() and signalled:
            return 0
        raise
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)


def run_server(prog: str, main: Coroutine[Any, Any, int]) -> int:
    """Run ``main`` on uvloop. A missing Kubernetes configuration is a clear
    message and exit code 2; Ctrl-C and SIGTERM a clean exit 0."""
    from pyextender.api.client import ClientConfigError

    try:
        import uvloop

        return uvloop.run(_stopped_by_signals(main))
    except ClientConfigError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
