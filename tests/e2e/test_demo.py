"""``make run``'s demo, as a user meets it: it comes up, and what it prints works.

Runs the demo's entry point (the same one ``make run`` calls) on a cluster of
its own, reads the commands it prints at the end, and runs every one of them
in a shell from the repository, in order, as if pasted: kubectl (the one
devcluster built), curl on the sidecar, ``make cluster-status`` and finally
``make cluster-down``, after which no process of the cluster may be left.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from devcluster.cluster import Cluster, _alive

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
MARK = "=====8<===== "


def _printed_commands(stdout: str) -> list[str]:
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if "Look around" in line)
    return [line.strip() for line in lines[start + 1 :] if line.strip()]


def _without_comment(cmd: str) -> str:
    return cmd.split("    # ", 1)[0].strip()


def test_make_run_comes_up_and_every_printed_command_works(tmp_path: Path) -> None:
    name = f"demo-{os.getpid()}"
    env = dict(os.environ, PYEXTENDER_DEVCLUSTER_DIR=str(tmp_path), COLUMNS="200")
    cluster = Cluster(name, root=tmp_path)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "devcluster.demo", "--name", name, "--timeout", "60"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=420,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "sidecar ready" in proc.stdout and "admission webhook ready" in proc.stdout
        # the last table: the long job runs on, the 20 s one completed, the queue holds GPUs
        assert "pretrain Running" in proc.stdout and "sweep Completed" in proc.stdout
        assert "queues: default holds " in proc.stdout
        commands = _printed_commands(proc.stdout)
        assert commands[-1].startswith(f"make cluster-down NAME={name}")
        st = cluster.state
        assert st is not None
        pids = list(st.pids.values())

        # one shell, commands in the printed order, each output fenced off
        script = ["set -euo pipefail"]
        for cmd in commands:
            script.append(f"echo '{MARK}{cmd}'")
            script.append(cmd)
        run = subprocess.run(
            ["bash", "-c", "\n".join(script)],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert run.returncode == 0, f"a printed command failed:\n{run.stdout[-3000:]}\n{run.stderr}"
        outputs = {
            _without_comment(chunk.split("\n", 1)[0]): chunk.split("\n", 1)[1]
            if "\n" in chunk
            else ""
            for chunk in run.stdout.split(MARK)[1:]
        }
        assert len(outputs) == len(commands), "a printed command produced no fenced output"
        pods = outputs["kubectl get pods -n demo -o wide"]
        assert "train-0" in pods and "kwok-node-" in pods
        vcjobs = outputs["kubectl get vcjob,podgroups -n demo"]
        assert "job.batch.volcano.sh/pretrain" in vcjobs and "job.batch.volcano.sh/sweep" in vcjobs
        assert "default" in outputs["kubectl get queues"]
        describe = next(v for k, v in outputs.items() if k.startswith("kubectl describe pod"))
        assert "Namespace:" in describe and "demo" in describe
        asked, why = next((k, v) for k, v in outputs.items() if "vcctl explain" in k)
        explained = asked.split()[-1]
        assert f"pod demo/{explained}:" in why and "podgroup demo/" in why, why
        assert "SUPERNODE" in outputs["kubectl get nodes -L pyextender.io/supernode"]
        metrics = next(v for k, v in outputs.items() if k.endswith("grep ^pyextender_"))
        assert "pyextender_verb_requests_total" in metrics
        asked, decisions = next((k, v) for k, v in outputs.items() if "/debug/decisions" in k)
        # the example names a pod the sidecar decided about: its answer is not empty
        about = asked.rsplit("pod=", 1)[1].rstrip("'")
        rows = json.loads(decisions)
        assert rows and all(r["pod"] == about for r in rows), (asked, decisions[:500])
        assert {r["verb"] for r in rows} & {"filter", "bind", "pick"}
        status = next(v for k, v in outputs.items() if k.startswith("make cluster-status"))
        assert '"running": true' in status
        assert not [p for p in pids if _alive(p)], "make cluster-down left processes"
    finally:
        cluster.down(quiet=True)
