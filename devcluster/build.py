"""Builds upstream binaries from the wrapper Go modules and caches them by version.

Cache: ``$PYEXTENDER_BIN_CACHE`` or ``~/.cache/pyextender/bin``, one folder per
component and version (``k8s-v1.36.3/kube-apiserver``). Only a missing binary
is built; Go's own build cache makes rebuilds after a version bump cheaper.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

GO_DIR = Path(__file__).resolve().parent / "go"


@dataclass(frozen=True, slots=True)
class Component:
    folder: str
    """Wrapper module folder under devcluster/go."""
    version: str
    """Upstream version; part of the cache key."""
    packages: tuple[tuple[str, str], ...]
    """(binary name, Go package path) pairs built from the module."""


KUBE_VERSION = "v1.36.3"
COMPONENTS = (
    Component("etcd", "v3.6.8", (("etcd", "go.etcd.io/etcd/server/v3"),)),
    Component(
        "kube",
        KUBE_VERSION,
        (
            ("kube-apiserver", "k8s.io/kubernetes/cmd/kube-apiserver"),
            ("kube-scheduler", "k8s.io/kubernetes/cmd/kube-scheduler"),
        ),
    ),
    Component("kwok", "v0.7.0", (("kwok", "sigs.k8s.io/kwok/cmd/kwok"),)),
)


def cache_dir() -> Path:
    env = os.environ.get("PYEXTENDER_BIN_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "pyextender" / "bin"


def binary_path(name: str) -> Path:
    for comp in COMPONENTS:
        for binary, _ in comp.packages:
            if binary == name:
                return cache_dir() / f"{comp.folder}-{comp.version}" / binary
    raise KeyError(f"unknown binary {name!r}")


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise SystemExit("Go is required to build the local cluster (https://go.dev/dl/)")
    return go


def ensure_binaries(quiet: bool = False) -> dict[str, Path]:
    """Build whatever is missing; return binary name -> path."""
    out: dict[str, Path] = {}
    for comp in COMPONENTS:
        target = cache_dir() / f"{comp.folder}-{comp.version}"
        missing = [(b, pkg) for b, pkg in comp.packages if not (target / b).exists()]
        for b, _ in comp.packages:
            out[b] = target / b
        if not missing:
            continue
        target.mkdir(parents=True, exist_ok=True)
        names = ", ".join(b for b, _ in missing)
        print(
            f"devcluster: building {names} {comp.version} from Go modules "
            "(first time only; a few minutes)...",
            file=sys.stderr,
            flush=True,
        )
        start = time.monotonic()
        tmp = target / ".partial"
        tmp.mkdir(exist_ok=True)
        cmd = [_go(), "build", "-trimpath", "-ldflags", "-s -w", "-o", str(tmp) + "/"]
        cmd += [pkg for _, pkg in missing]
        env = dict(os.environ, GOFLAGS="-mod=mod", CGO_ENABLED="0")
        proc = subprocess.Popen(
            cmd,
            cwd=GO_DIR / comp.folder,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            if not quiet:
                print(f"  go: {line.rstrip()}", file=sys.stderr, flush=True)
        if proc.wait() != 0:
            raise SystemExit(f"devcluster: building {names} failed (see output above)")
        for b, pkg in missing:
            built = tmp / b
            if not built.exists():
                built = tmp / pkg.rstrip("/").split("/")[-1]
            built.rename(target / b)
        shutil.rmtree(tmp, ignore_errors=True)
        print(
            f"devcluster: built {names} in {time.monotonic() - start:.0f}s -> {target}",
            file=sys.stderr,
            flush=True,
        )
    return out
