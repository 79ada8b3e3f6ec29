"""Typed access to numba's ``njit`` (numba ships no type hints).

Kernels in this package are written once as loop functions over flat,
indexable sequences (numpy arrays or Python lists), that write into output
buffers and return nothing. ``compile_kernel`` gives the numba version; the
same function run by the interpreter on lists is the pure-Python reference
(the benchmark's baseline). Each kernel module adds a vectorised numpy
reference written independently.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any, cast

import numpy as np
from numba import njit, types
from numba.core import config as _numba_config
from numba.extending import intrinsic, overload

LoopKernel = Callable[..., None]

log = logging.getLogger(__name__)

numba_config: Any = _numba_config
"""numba's settings (CACHE_DIR is set from the environment at run time: no static type)."""

CACHE_COPY = "pyextender-numba-cache"
"""Folder (in the temporary directory) that a read-only NUMBA_CACHE_DIR is copied to."""


def writable(path: str) -> bool:
    """numba's own test for a cache folder: it exists (or can be made) and a file can
    be created in it."""
    try:
        os.makedirs(path, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError:
        return False
    return True


def usable_cache_dir(
    configured: str, scratch: str, can_write: Callable[[str], bool] = writable
) -> str:
    """Where numba should keep compiled kernels, given NUMBA_CACHE_DIR ``configured``.

    numba uses a cache folder only if it can write there, even to read what is in it,
    and with no usable folder it refuses to define a cached function at all (a
    RuntimeError at import). The container image ships kernels compiled at build time
    in a folder its non-root user cannot write, on a read-only root filesystem: used
    as it is, the sidecar could not start. So a folder we cannot write is copied to
    ``scratch``/CACHE_COPY (the chart mounts an emptyDir on /tmp) and used from there,
    which keeps the build's kernels. "" when no folder is usable: kernels are then
    compiled at every start, without a cache (``compile_kernel``)."""
    if not configured or can_write(configured):
        return configured
    copy = os.path.join(scratch, CACHE_COPY)
    if not can_write(copy):
        return ""
    if os.path.isdir(configured):
        try:
            shutil.copytree(configured, copy, dirs_exist_ok=True)
        except OSError as exc:  # a partial copy is still a cache: numba checks each entry
            log.warning("copying the numba cache %s to %s: %s", configured, copy, exc)
    return copy


def _settle_cache_dir() -> None:
    configured = str(numba_config.CACHE_DIR or "")
    chosen = usable_cache_dir(configured, tempfile.gettempdir())
    if chosen != configured:
        numba_config.CACHE_DIR = chosen
        if chosen:
            log.info("numba cache %s is read-only: using a copy in %s", configured, chosen)
        else:
            log.warning("no writable numba cache folder: kernels compile at every start")


_settle_cache_dir()


def compile_kernel(loops: LoopKernel) -> LoopKernel:
    """``@njit(cache=True, nogil=True)`` of a loop function, typed for mypy.

    cache: compiled code is stored next to the module, or in NUMBA_CACHE_DIR (start-up
    reuses it); nogil: the sidecar calls kernels from threads. Where numba finds no
    folder it can write (read-only sources, no usable NUMBA_CACHE_DIR or home), it
    refuses cache=True with a RuntimeError; the kernel is then compiled without a
    cache rather than the sidecar failing to start.
    """
    try:
        compiled = njit(cache=True, nogil=True)(loops)
    except RuntimeError as exc:
        log.warning("kernel %s compiles without a cache: %s", loops.__name__, exc)
        compiled = njit(nogil=True)(loops)
    return cast(LoopKernel, compiled)


def popcount(x: int) -> int:
    """Set bits of a non-negative int: in a kernel one CPU instruction (LLVM ctpop; a
    branch-free bit-twiddling count is ~12 instructions), in the interpreter bin()."""
    return bin(x).count("1")


def _ctpop_typer(typingctx: Any, x: Any) -> tuple[Any, Callable[..., Any]]:
    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.ctpop(args[0])

    return types.int64(types.int64), codegen


_ctpop = intrinsic(_ctpop_typer)


def _popcount_overload(x: Any) -> Callable[[Any], Any]:
    # numba compares the parameters (names and annotations) of this and impl, and
    # compiles impl: numba's globals only (no typing.cast)
    def impl(x: Any) -> Any:
        return _ctpop(x)  # type: ignore[call-arg]  # numba passes the typing context

    return impl


overload(popcount, inline="always")(_popcount_overload)


def unsigned(x: int) -> int:
    """A non-negative int as an index that needs no wrap-around: in a kernel a uint64
    (numba checks every signed index for a negative value, a compare and select per
    access that also keeps loops from vectorising), in the interpreter ``x`` itself."""
    return x


def _unsigned_overload(x: Any) -> Callable[[Any], Any]:
    def impl(x: Any) -> Any:
        return np.uint64(x)

    return impl


overload(unsigned, inline="always")(_unsigned_overload)


def index_slots(scratch: Any, start: int, stop: int) -> Any:
    """``stop - start`` slots for unsigned indices: in a kernel ``scratch[start:stop]``
    seen as uint64 (no allocation), in the interpreter a new list (a list slice would
    be a copy anyway). Every slot must be written before it is read."""
    return [0] * (stop - start)


def _index_slots_overload(scratch: Any, start: Any, stop: Any) -> Callable[..., Any]:
    def impl(scratch: Any, start: Any, stop: Any) -> Any:
        return scratch[start:stop].view(np.uint64)

    return impl


overload(index_slots, inline="always")(_index_slots_overload)


def signed(x: int) -> int:
    """An index from ``unsigned`` back as an int64, for arithmetic with signed values
    (numba turns uint64 − int64 into a float); in the interpreter ``x`` itself."""
    return x


def _signed_overload(x: Any) -> Callable[[Any], Any]:
    def impl(x: Any) -> Any:
        return np.int64(x)

    return impl


overload(signed, inline="always")(_signed_overload)


def compiled_as_is(helper: Callable[..., Any]) -> None:
    """Let kernels call ``helper``, an interpreter function, compiled as it is (numba
    compiles the function itself; the interpreted reference calls it directly). The
    typing function must show numba the helper's own parameters: functools.wraps
    gives it them (inspect.signature follows __wrapped__)."""

    @functools.wraps(helper)
    def typing(*args: Any) -> Callable[..., Any]:
        return helper

    overload(helper)(typing)
