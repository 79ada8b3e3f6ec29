"""Typed access to numba's ``njit`` (numba ships no type hints).

Kernels in this package are written once as loop functions over flat,
indexable sequences (numpy arrays or Python lists), that write into output
buffers and return nothing. ``compile_kernel`` gives the numba version; the
same function run by the interpreter on lists is the pure-Python reference
(the benchmark's baseline). Each kernel module adds a vectorised numpy
reference written independently.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from numba import njit

LoopKernel = Callable[..., None]


def compile_kernel(loops: LoopKernel) -> LoopKernel:
    """``@njit(cache=True, nogil=True)`` of a loop function, typed for mypy.

    cache: compiled code is stored next to the module (start-up reuses it);
    nogil: the sidecar calls kernels from threads.
    """
    compiled = njit(cache=True, nogil=True)(loops)
    return cast(LoopKernel, compiled)
