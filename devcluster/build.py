"""Builds upstream binaries from the wrapper Go modules and caches them by version.

Cache: ``$PYEXTENDER_BIN_CACHE`` or ``~/.cache/pyextender/bin``, one folder per
component and version (``kube-v1.36.3/kube-apiserver``). Only a missing binary
is built; Go's own module and build caches make rebuilds cheap.

Every binary is built on its own (``go build -o FILE PKG``), so its file name is
ours, never guessed from the package path (Go would name
``go.etcd.io/etcd/server/v3`` ``server``). The build writes a temporary file
beside the final one, runs it with ``--version``, and only then renames it into
place: a cache entry exists only for a binary that was built whole and runs.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

GO_DIR = Path(__file__).resolve().parent / "go"
SHIM_DIR = Path(__file__).resolve().parent.parent / "shim"
"""The framework shim's Go module (kube-scheduler + the Pyextender plugin)."""
KUBE_VERSION = "v1.36.3"
HELM_VERSION = "v3.22.0"
VOLCANO_VERSION = "v1.10.0"
"""Volcano's scheduler for bench/e2e.py --mode volcano: the release whose CRDs the
devcluster installs with crds="volcano-release" (newer tags answer 403 on the Go
module proxy reachable here)."""
VERSION_CHECK_TIMEOUT = 60.0  # seconds; a cold start of a 100 MB binary is well under it


@dataclass(frozen=True, slots=True)
class Binary:
    name: str
    """File name in the cache, and the name every caller uses."""
    package: str
    """Go package path of the ``main`` package."""
    ldflags: tuple[str, ...] = ()
    """Extra ``-X`` flags (version stamping), without the ``-X`` itself."""
    version_args: tuple[str, ...] = ("--version",)
    """Arguments that make the binary print its version and exit 0."""


@dataclass(frozen=True, slots=True)
class Component:
    folder: str
    """Cache folder prefix, and the wrapper module folder under devcluster/go
    unless ``module_dir`` says otherwise."""
    version: str
    """Upstream version (or a content hash for our own Go code); part of the cache key."""
    binaries: tuple[Binary, ...]
    module_dir: Path | None = None
    """Where ``go build`` runs; default ``devcluster/go/<folder>``."""
    on_demand: bool = False
    """Built only when asked for by name (``only``): a tool of one bench, not part of
    the local cluster, so neither ``make binaries`` nor CI spends minutes on it."""

    @property
    def workdir(self) -> Path:
        return self.module_dir if self.module_dir is not None else GO_DIR / self.folder


def source_hash(
    folder: Path,
    suffixes: tuple[str, ...] = (".go", ".mod", ".sum"),
    skip: tuple[str, ...] = (),
) -> str:
    """A short content hash of a Go module's sources: the cache key of our own binaries,
    so an edited source can never be served from a stale cache entry. Test files and
    the sub-folders in ``skip`` (programs not linked into the binary) do not count."""
    h = hashlib.sha256()
    for f in sorted(folder.rglob("*")):
        rel = f.relative_to(folder)
        if (rel.parts and rel.parts[0] in skip) or f.name.endswith("_test.go"):
            continue
        if f.is_file() and f.suffix in suffixes:
            h.update(str(f.relative_to(folder)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:12]


def _kube_stamp(version: str) -> tuple[str, ...]:
    # Without these, upstream binaries report v0.0.0-master and clients that
    # check the server version (helm's kubeVersion, kubectl skew warnings) fail.
    major, minor = version.lstrip("v").split(".")[:2]
    base = "k8s.io/component-base/version"
    return (
        f"{base}.gitVersion={version}",
        f"{base}.gitMajor={major}",
        f"{base}.gitMinor={minor}",
        f"{base}.gitTreeState=clean",
    )


def _kube(name: str) -> Binary:
    return Binary(name, f"k8s.io/kubernetes/cmd/{name}", _kube_stamp(KUBE_VERSION))


COMPONENTS: tuple[Component, ...] = (
    Component("etcd", "v3.6.8", (Binary("etcd", "go.etcd.io/etcd/server/v3"),)),
    Component(
        "kube",
        KUBE_VERSION,
        (
            _kube("kube-apiserver"),
            _kube("kube-scheduler"),
            Binary(
                "kubectl",
                "k8s.io/kubernetes/cmd/kubectl",
                _kube_stamp(KUBE_VERSION),
                ("version", "--client"),
            ),
        ),
    ),
    Component("kwok", "v0.7.0", (Binary("kwok", "sigs.k8s.io/kwok/cmd/kwok"),)),
    # kube-scheduler built with our plugin; keyed by our sources, so an edit rebuilds it
    Component(
        "shim",
        f"{KUBE_VERSION}-{source_hash(SHIM_DIR, skip=('benchclient',))}",
        (Binary("kube-scheduler-pyextender", "pyextender.io/shim", _kube_stamp(KUBE_VERSION)),),
        module_dir=SHIM_DIR,
    ),
    Component(
        "helm",
        HELM_VERSION,
        (
            Binary(
                "helm",
                "helm.sh/helm/v3/cmd/helm",
                (
                    f"helm.sh/helm/v3/internal/version.version={HELM_VERSION}",
                    # what `helm template` assumes without a cluster; upstream's Makefile
                    # derives it from client-go (v0.37 -> 1.37)
                    "helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1",
                    "helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=37",
                    "helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1",
                    "helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=37",
                ),
                ("version", "--short"),
            ),
        ),
    ),
    # Volcano's own scheduler, to measure it on the same devcluster (bench/e2e.py)
    Component(
        "volcano",
        VOLCANO_VERSION,
        (
            Binary(
                "vc-scheduler",
                "volcano.sh/volcano/cmd/scheduler",
                (f"volcano.sh/volcano/pkg/version.Version={VOLCANO_VERSION}",),
            ),
        ),
        on_demand=True,
    ),
)


def cache_dir() -> Path:
    env = os.environ.get("PYEXTENDER_BIN_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "pyextender" / "bin"


def _find(name: str) -> tuple[Component, Binary]:
    for comp in COMPONENTS:
        for b in comp.binaries:
            if b.name == name:
                return comp, b
    known = ", ".join(b.name for c in COMPONENTS for b in c.binaries)
    raise KeyError(f"unknown binary {name!r} (known: {known})")


def binary_path(name: str) -> Path:
    comp, b = _find(name)
    return cache_dir() / f"{comp.folder}-{comp.version}" / b.name


def build_command(go: str, binary: Binary, out: Path) -> list[str]:
    """The one ``go build`` that produces exactly the file ``out``."""
    ldflags = " ".join(["-s", "-w", *(f"-X {flag}" for flag in binary.ldflags)])
    return [go, "build", "-trimpath", "-ldflags", ldflags, "-o", str(out), binary.package]


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise SystemExit(
            "devcluster: Go is required to build the local cluster's binaries "
            "(Debian: apt-get install golang-go; or https://go.dev/dl/)"
        )
    return go


def _log(msg: str) -> None:
    print(f"devcluster: {msg}", file=sys.stderr, flush=True)


def check_runs(path: Path, binary: Binary) -> str:
    """Run the binary's version command; return its first line or raise."""
    try:
        proc = subprocess.run(
            [str(path), *binary.version_args],
            capture_output=True,
            text=True,
            timeout=VERSION_CHECK_TIMEOUT,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RuntimeError(f"{binary.name} {' '.join(binary.version_args)}: {e}") from e
    if proc.returncode != 0:
        raise RuntimeError(
            f"{binary.name} {' '.join(binary.version_args)} exited {proc.returncode}: "
            f"{(proc.stderr or proc.stdout).strip()[:500]}"
        )
    text = (proc.stdout or proc.stderr).strip()
    return text.splitlines()[0] if text else "(no output)"


def build_one(comp: Component, binary: Binary, quiet: bool = False) -> Path:
    """Build one binary into the cache atomically; return its path."""
    final = binary_path(binary.name)
    final.parent.mkdir(parents=True, exist_ok=True)
    # Same folder as the final file, so the rename is atomic; a dot name so a
    # crash leaves nothing that looks like a cache entry.
    tmp = final.parent / f".{binary.name}.partial-{os.getpid()}"
    cmd = build_command(_go(), binary, tmp)
    env = dict(os.environ, GOFLAGS="-mod=mod", CGO_ENABLED="0")
    start = time.monotonic()
    _log(f"building {binary.name} {comp.version} ({binary.package}) ...")
    try:
        proc = subprocess.Popen(
            cmd,
            cwd=comp.workdir,
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
            raise SystemExit(f"devcluster: building {binary.name} failed (see go's output above)")
        if not tmp.is_file():
            raise SystemExit(f"devcluster: go build reported success but wrote no {tmp}")
        try:
            version = check_runs(tmp, binary)
        except RuntimeError as e:
            raise SystemExit(
                f"devcluster: the freshly built {binary.name} does not run: {e}"
            ) from e
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)
    _log(f"built {binary.name} in {time.monotonic() - start:.0f}s: {version}")
    return final


def ensure_binaries(
    quiet: bool = False, only: Iterable[str] | None = None, force: bool = False
) -> dict[str, Path]:
    """Build whatever is missing (or everything named in ``only`` when ``force``).

    Returns binary name -> path for every known binary but the on-demand ones (or
    for those in ``only``).
    """
    wanted = set(only) if only is not None else None
    if wanted is not None:
        for name in wanted:
            _find(name)  # a clear KeyError for a typo
    out: dict[str, Path] = {}
    announced = False
    for comp in COMPONENTS:
        for b in comp.binaries:
            if wanted is None and comp.on_demand:
                continue
            if wanted is not None and b.name not in wanted:
                continue
            path = binary_path(b.name)
            out[b.name] = path
            if path.is_file() and not force:
                continue
            if not announced:
                _log(f"building into {cache_dir()} (first time only; a few minutes)")
                announced = True
            build_one(comp, b, quiet)
    return out
