"""SIGTERM stops our processes through their clean-up, as Ctrl-C does.

kubelet stops a container with SIGTERM. uvicorn used to take the signal, shut its
server down and raise it again under Python's default handler, which ended the
process before the code after ``serve()`` ran: the sidecar's leader never released
its Lease. Each case runs in a fresh interpreter that gets a real SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

SERVER = """
import asyncio, sys
import uvicorn
from pyextender.api.asgi_server import Server
from pyextender.api.process import run_server

async def app(scope, receive, send):
    pass

async def main() -> int:
    server = Server(uvicorn.Config(app, host="127.0.0.1", port=0, lifespan="off",
                                   log_level="warning"))
    task = asyncio.ensure_future(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    print("serving", flush=True)
    try:
        await task
    finally:
        await asyncio.sleep(0.2)  # clean-up that needs the loop, as a Lease release
        print("cleaned up", flush=True)
    return 0

sys.exit(run_server("probe", main()))
"""

NO_SERVER = """
import asyncio, sys
from pyextender.api.process import run_server

async def main() -> int:
    print("serving", flush=True)
    try:
        await asyncio.sleep(3600)
    finally:
        print("cleaned up", flush=True)
    return 0

sys.exit(run_server("probe", main()))
"""


@pytest.mark.parametrize("script", [SERVER, NO_SERVER], ids=["uvicorn-server", "no-server"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_runs_the_clean_up_and_exits_0(script: str, sig: signal.Signals) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    line = proc.stdout.readline()
    assert line.strip() == "serving", (line, proc.stderr.read() if proc.stderr else "")
    assert time.monotonic() < deadline
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert "cleaned up" in out, (out, err)
    assert proc.returncode == 0, (proc.returncode, err)
    assert "Traceback" not in err, err
