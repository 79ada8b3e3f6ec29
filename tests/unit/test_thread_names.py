"""Our threads carry their Python names at the OS level (top -H, ps -L, bench/phase_cost).
Linux only, as the product (/proc, prctl)."""

from __future__ import annotations

import threading
from pathlib import Path

from pyextender.api.process import name_os_thread
from pyextender.server.threads import API_THREADS


def _comm() -> str:
    return Path(f"/proc/self/task/{threading.get_native_id()}/comm").read_text().strip()


def test_a_thread_gets_its_python_name_cut_to_the_kernels_15_bytes() -> None:
    seen: list[str] = []

    def run() -> None:
        before = _comm()
        name_os_thread()
        seen.extend([before, _comm()])

    thread = threading.Thread(target=run, name="informer-podgroups")
    thread.start()
    thread.join()
    assert seen[1] == "informer-podgro" and seen[0] != seen[1]


def test_the_api_pools_threads_are_named_as_they_start() -> None:
    assert API_THREADS.submit(_comm).result(timeout=10).startswith("kube-api_")
