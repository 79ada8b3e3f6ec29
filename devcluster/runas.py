"""The user a local pod's processes run as, as kubelet would start them.

The chart's pods run as uid/gid 65532 on a read-only root filesystem, with an
emptyDir on ``/tmp`` (values ``podSecurityContext``, ``containerSecurityContext``).
Run as root from the test's virtualenv, a process can write anywhere and read
anything, and a bug that only a non-root container shows passes every test: the
sidecar once could not start in the chart's pods at all (numba refused a read-only
kernel cache), and only reading the Dockerfile found it.

So when this process is root, devcluster.localpods starts each container as the
``runAsUser`` / ``runAsGroup`` of its securityContext. What the process may touch
then follows from ownership, as in the container: its pod's folder and ConfigMap
volumes are root's (readable, not writable, like the image's files), its token and
emptyDirs are its own, and the rest of this machine is root's, so writable only
where everyone may write. ``$HOME`` is the pod's folder (the image's user has no
home). ``pyextender`` containers get the image's ``NUMBA_CACHE_DIR``: a root-owned
kernel cache compiled beforehand, as the Dockerfile's build stage does.

Programs must be reachable by that user: the Python environment (checked; when
it is not, the pod runs as root and says why) and the Go binaries (copied out of
a private cache). ``PYEXTENDER_LOCALPODS_AS_ROOT=1`` turns all of this off.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(tempfile.gettempdir())
"""Where folders every local pod's user must reach go (mode 0755, root's)."""
AS_ROOT_ENV = "PYEXTENDER_LOCALPODS_AS_ROOT"

Identity = tuple[int, int]


def can_switch() -> bool:
    """Whether containers can run as their own user here (root, not turned off)."""
    return os.geteuid() == 0 and os.environ.get(AS_ROOT_ENV, "") in ("", "0")


def identity(spec: Mapping[str, Any], container: Mapping[str, Any]) -> Identity | None:
    """(uid, gid) of the container's securityContext over its pod's; None when no
    runAsUser is set (the image's user, root for every image we run)."""
    pod = spec.get("securityContext") or {}
    own = container.get("securityContext") or {}
    uid = own.get("runAsUser", pod.get("runAsUser"))
    if uid is None:
        return None
    gid = own.get("runAsGroup", pod.get("runAsGroup", uid))
    return int(uid), int(gid)


def unreachable(path: Path, who: Identity, execute: bool = False) -> str:
    """Why ``who`` cannot read (and with ``execute``, run) ``path``: the first folder
    on the way it may not enter, or the file's own mode; "" when it can."""
    path = path.resolve()
    for folder in reversed(path.parents):
        if not _allowed(folder, who, stat.S_IXUSR):
            return f"{folder} is not open to uid {who[0]}"
    need = stat.S_IRUSR | (stat.S_IXUSR if execute or path.is_dir() else 0)
    if not _allowed(path, who, need):
        return f"{path} is not {'executable' if execute else 'readable'} by uid {who[0]}"
    return ""


def _allowed(path: Path, who: Identity, user_bits: int) -> bool:
    """Mode bits as the kernel checks them for a non-root user (owner, group, other)."""
    st = path.stat()
    if st.st_uid == who[0]:
        shift = 0
    elif st.st_gid == who[1]:
        shift = 3
    else:
        shift = 6
    bits = user_bits >> shift
    return st.st_mode & bits == bits


def site_packages() -> Path:
    """This environment's site-packages (the virtualenv's, with our editable install)."""
    import sysconfig

    return Path(sysconfig.get_paths()["purelib"])


def python_reachable(who: Identity) -> str:
    """Why ``who`` cannot import our code and its dependencies ("" if it can)."""
    for path in (REPO / "pyextender", site_packages()):
        why = unreachable(path, who)
        if why:
            return why
    return ""


_PYTHONS: dict[Identity, tuple[str, dict[str, str]]] = {}


def python_for(who: Identity) -> tuple[str, dict[str, str]]:
    """(interpreter, extra env) that runs this environment's code as ``who``.

    This interpreter, when ``who`` can run it. Otherwise (a Python installed in
    root's home, as pyenv does) the image's equivalent: a copy of the base
    installation's interpreter, shared library and standard library, and a
    virtualenv on it whose one ``.pth`` adds this environment's site-packages (their
    own ``.pth`` files, our editable install's included, are processed)."""
    if who in _PYTHONS:
        return _PYTHONS[who]
    exe = Path(sys.executable)
    base = Path(sys.base_prefix)
    if not unreachable(exe, who, execute=True) and not unreachable(base, who):
        _PYTHONS[who] = (str(exe), {})
        return _PYTHONS[who]
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    key = f"{os.getpid()}-{hashlib.sha256(str(site_packages()).encode()).hexdigest()[:8]}"
    copy = shared_folder(f"pxl-python-{key}")
    if not (copy / "bin" / version).exists():
        _copy_base(base, copy, version)
    venv = shared_folder(f"pxl-venv-{key}")
    (venv / "bin").mkdir(mode=0o755, exist_ok=True)
    site = venv / "lib" / version / "site-packages"
    site.mkdir(mode=0o755, parents=True, exist_ok=True)
    for folder in (venv / "lib", venv / "lib" / version):
        folder.chmod(0o755)
    (venv / "pyvenv.cfg").write_text(
        f"home = {copy / 'bin'}\ninclude-system-site-packages = false\n"
        f"version = {'.'.join(map(str, sys.version_info[:3]))}\n"
    )
    (site / "pxl-env.pth").write_text(f"import site; site.addsitedir({str(site_packages())!r})\n")
    python = venv / "bin" / version
    if not python.is_symlink():
        python.symlink_to(copy / "bin" / version)
    # the copy's own shared library before the one its RUNPATH names (unreachable)
    _PYTHONS[who] = (str(python), {"LD_LIBRARY_PATH": str(copy / "lib")})
    return _PYTHONS[who]


def _copy_base(base: Path, copy: Path, version: str) -> None:
    """The interpreter, libpython and the standard library (not site-packages or its
    tests) of the installation at ``base``, world-readable, renamed into place whole."""
    part = copy.with_name(copy.name + ".part")
    shutil.rmtree(part, ignore_errors=True)
    (part / "bin").mkdir(parents=True)
    shutil.copy2(base / "bin" / version, part / "bin" / version)
    (part / "lib").mkdir()
    for lib in (base / "lib").glob("libpython*.so*"):
        shutil.copy2(lib, part / "lib" / lib.name, follow_symlinks=False)
    shutil.copytree(
        base / "lib" / version,
        part / "lib" / version,
        symlinks=True,
        ignore=shutil.ignore_patterns("site-packages", "test", "idlelib", "tkinter"),
    )
    for p in [part, *part.rglob("*")]:
        if not p.is_symlink():
            p.chmod(0o755 if p.is_dir() or os.access(p, os.X_OK) else 0o644)
    shutil.rmtree(copy)
    part.rename(copy)


def shared_folder(name: str, keep: bool = False) -> Path:
    """A root-owned folder under SHARED that everyone may enter (0755), removed when
    this process exits unless ``keep``."""
    folder = SHARED / name
    if not folder.exists() and not keep:
        atexit.register(shutil.rmtree, folder, True)
    folder.mkdir(mode=0o755, exist_ok=True)
    folder.chmod(0o755)
    return folder


def reachable_binary(binary: Path, who: Identity) -> Path:
    """``binary``, or a copy ``who`` can run when its cache folder is private (as
    ``mktemp -d`` makes CI's): the image's copy of the program."""
    if not unreachable(binary, who, execute=True):
        return binary
    st = binary.stat()
    key = hashlib.sha256(f"{binary}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:8]
    key = f"{os.getpid()}-{key}"
    copy = shared_folder(f"pxl-bin-{key}") / binary.name
    if not copy.exists():
        part = copy.with_suffix(".part")
        shutil.copy2(binary, part)
        part.chmod(0o755)
        part.rename(copy)
    return copy


_WARM = (
    "from pyextender.plugins.defaults import load, plugins_of\n"
    "from pyextender.framework.runtime import build_profile\n"
    "from pyextender.server.warmup import warm_up\n"
    "warm_up(build_profile(plugins_of(load(None)), lambda *a: None))\n"
)


_warmed: list[Path] = []


def image_numba_cache() -> Path:
    """The image's NUMBA_CACHE_DIR: root-owned, compiled by the same ``warm_up`` as the
    Dockerfile's build stage, once per test process (numba itself recompiles what
    changed since a previous one)."""
    if _warmed:
        return _warmed[0]
    key = hashlib.sha256(str(REPO).encode()).hexdigest()[:12]
    # kept: compiling takes seconds, loading it a fraction (numba checks each entry)
    folder = shared_folder(f"pxl-numba-{key}", keep=True)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(folder)}
    proc = subprocess.run(
        [sys.executable, "-c", _WARM], env=env, capture_output=True, text=True, timeout=600
    )
    if proc.returncode != 0:
        raise RuntimeError(f"compiling the image's kernel cache in {folder}: {proc.stderr[-2000:]}")
    _warmed.append(folder)
    return folder


def own(path: Path, who: Identity, mode: int) -> None:
    """``path`` (and what is in it) belongs to ``who``, with ``mode`` on ``path`` itself."""
    for p in [path, *(path.rglob("*") if path.is_dir() else [])]:
        os.chown(p, who[0], who[1], follow_symlinks=False)
    path.chmod(mode)
