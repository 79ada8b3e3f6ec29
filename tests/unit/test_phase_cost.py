"""bench/phase_cost counts what a phase costs per pod from /proc: here, the
context switches of the processes it watches (Linux only, as the devcluster)."""

from __future__ import annotations

import subprocess
import sys
import uuid

from bench.phase_cost import context_switches

CHILD = """import sys, time
print("ready", flush=True)
sys.stdin.readline()
for _ in range(300):
    time.sleep(0.001)  # blocks: a voluntary switch each
print("done", flush=True)
sys.stdin.readline()
"""


def test_context_switches_count_the_wake_ups_of_the_marked_processes_only() -> None:
    marker = f"phase-cost-{uuid.uuid4().hex}"
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, marker],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        assert proc.stdout.readline().strip() == "ready"
        before, _ = context_switches(marker)
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "done"
        after, _ = context_switches(marker)
        proc.stdin.write("bye\n")
        proc.stdin.flush()
        proc.wait(timeout=30)
    finally:
        proc.kill()
    assert set(before) == set(after) == {"python", "bench (client)"}
    assert after["python"] - before["python"] >= 300
    # a process without the marker is never counted; the bench itself always is
    others, sidecar = context_switches(f"no-such-{marker}")
    assert set(others) == {"bench (client)"} and not sidecar
