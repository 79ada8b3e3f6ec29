"""Where the kernels' compiled code is kept when the configured folder is read-only
(pyextender.kernels.jit): the container image's case, non-root on a read-only root."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pyextender.kernels import jit
from pyextender.kernels.jit import CACHE_COPY, compile_kernel, usable_cache_dir, writable

ROOT = Path(__file__).resolve().parents[2]


def test_a_writable_or_unset_folder_is_kept(tmp_path: Path) -> None:
    assert usable_cache_dir("", str(tmp_path)) == ""
    assert usable_cache_dir(str(tmp_path / "cache"), str(tmp_path / "scratch")) == str(
        tmp_path / "cache"
    )
    assert not (tmp_path / "scratch").exists()


def test_a_read_only_folder_is_copied_to_scratch(tmp_path: Path) -> None:
    built = tmp_path / "image-cache" / "kernels_abc"
    built.mkdir(parents=True)
    (built / "gpu_share.fgd_loops-79.py311.nbi").write_bytes(b"index")
    (built / "gpu_share.fgd_loops-79.py311.1.nbc").write_bytes(b"code")
    read_only = str(tmp_path / "image-cache")

    def can_write(path: str) -> bool:  # root ignores file modes: say which is read-only
        return path != read_only and writable(path)

    chosen = usable_cache_dir(read_only, str(tmp_path / "tmp"), can_write)
    assert chosen == str(tmp_path / "tmp" / CACHE_COPY)
    copied = sorted(p.name for p in (Path(chosen) / "kernels_abc").iterdir())
    assert copied == ["gpu_share.fgd_loops-79.py311.1.nbc", "gpu_share.fgd_loops-79.py311.nbi"]
    # a second start finds the copy there already
    assert usable_cache_dir(read_only, str(tmp_path / "tmp"), can_write) == chosen


def test_no_writable_folder_at_all_means_no_cache(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    # below a regular file nothing can be made, whoever asks (root included)
    assert not writable(str(blocker / "cache"))
    assert usable_cache_dir(str(blocker / "cache"), str(blocker / "tmp")) == ""


def test_a_kernel_numba_will_not_cache_is_compiled_without(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = jit.njit

    def refusing(**options: Any) -> Any:
        if options.get("cache"):
            raise RuntimeError("cannot cache function 'k': no locator available")
        return real(**options)

    monkeypatch.setattr(jit, "njit", refusing)

    def k(out: Any, x: int) -> None:
        out[0] = x * 2

    compiled = compile_kernel(k)
    out = np.zeros(1, dtype=np.int64)
    compiled(out, 21)
    assert out[0] == 42


START = textwrap.dedent(
    """
    import json, numpy as np
    import numba.core.config as config
    from pyextender.kernels import supernode
    from pyextender.kernels.jit import compile_kernel
    import kernel_here
    out = np.zeros(1, dtype=np.int64)
    kernel_here.k(out, 21)
    print(json.dumps({"cache_dir": config.CACHE_DIR, "result": int(out[0])}))
    """
)


def test_the_sidecars_kernels_load_where_no_cache_folder_is_writable(tmp_path: Path) -> None:
    """The image's situation without root's powers: NUMBA_CACHE_DIR, the sources'
    __pycache__ and the home folder all unusable (each below a regular file, which
    stops root too). numba then refused to define the kernels at import (RuntimeError:
    no locator available), so the sidecar could not start; now numba caches in a copy
    under the temporary directory."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    tree = tmp_path / "src"
    shutil.copytree(
        ROOT / "pyextender", tree / "pyextender", ignore=shutil.ignore_patterns("__pycache__")
    )
    for package in ("pyextender/kernels", "pyextender/api", "pyextender"):
        (tree / package / "__pycache__").write_text("")  # in-tree caches impossible
    (tree / "kernel_here.py").write_text(
        "from pyextender.kernels.jit import compile_kernel\n\n"
        "def _k(out, x):\n    out[0] = x * 2\n\nk = compile_kernel(_k)\n"
    )
    (tree / "__pycache__").write_text("")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": str(tree),
        "NUMBA_CACHE_DIR": str(blocker / "numba-cache"),
        "HOME": str(blocker / "home"),
        "XDG_CACHE_HOME": str(blocker / "xdg"),
        "TMPDIR": str(scratch),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    out = subprocess.run(
        [sys.executable, "-c", START], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["result"] == 42
    assert result["cache_dir"] == str(scratch / CACHE_COPY)
    cached = [p.name for p in (scratch / CACHE_COPY).rglob("*.nbi")]
    assert any(name.startswith("kernel_here._k") for name in cached), cached
