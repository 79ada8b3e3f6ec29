"""devcluster's build from nothing: every binary a fresh machine needs, and that it runs.

CI points ``PYEXTENDER_BIN_CACHE`` at an empty folder, so ``make test``'s
``binaries`` step built them on the first-run path just before these tests; the
first test checks each of them runs and reports the pinned version. The second
builds etcd (its package path ends in ``/v3``, the case that once broke a
fresh machine) into a brand-new empty cache through the CLI a user runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from devcluster import build

pytestmark = pytest.mark.e2e

EXPECTED_VERSION = {
    "etcd": "3.6.8",
    "kube-apiserver": build.KUBE_VERSION,
    "kube-scheduler": build.KUBE_VERSION,
    "kubectl": build.KUBE_VERSION,
    "kwok": "0.7.0",
}


def test_every_cached_binary_runs_and_reports_its_version() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "devcluster", "build"],
        capture_output=True,
        text=True,
        timeout=1800,
        check=True,
    )
    listed = dict(line.split(": ", 1) for line in out.stdout.splitlines())
    for name, version in EXPECTED_VERSION.items():
        assert name in listed, f"{name} missing from 'devcluster build' output"
        path = Path(listed[name])
        assert path == build.binary_path(name) and path.is_file()
        _, binary = build._find(name)
        proc = subprocess.run(
            [str(path), *binary.version_args], capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, f"{name}: {proc.stderr}"
        assert version in proc.stdout + proc.stderr, f"{name}: {proc.stdout}{proc.stderr}"


def test_build_into_an_empty_cache_names_the_binary_right(tmp_path: Path) -> None:
    cache = tmp_path / "empty-cache"
    env = dict(os.environ, PYEXTENDER_BIN_CACHE=str(cache))
    proc = subprocess.run(
        [sys.executable, "-m", "devcluster", "build", "--only", "etcd"],
        capture_output=True,
        text=True,
        timeout=1800,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    etcd = cache / "etcd-v3.6.8" / "etcd"
    assert proc.stdout.strip() == f"etcd: {etcd}"
    assert "built etcd" in proc.stderr
    # the cache folder holds the binary and nothing half-written
    assert sorted(p.name for p in etcd.parent.iterdir()) == ["etcd"]
    ver = subprocess.run([str(etcd), "--version"], capture_output=True, text=True, timeout=60)
    assert ver.returncode == 0 and "etcd Version: 3.6.8" in ver.stdout
    # a second run finds it cached and builds nothing
    again = subprocess.run(
        [sys.executable, "-m", "devcluster", "build", "--only", "etcd"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert again.returncode == 0 and "building" not in again.stderr
