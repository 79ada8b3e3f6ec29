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
from typing import Any, cast

from numba import njit, types
from numba.extending import intrinsic, overload

LoopKernel = Callable[..., None]


def compile_kernel(loops: LoopKernel) -> LoopKernel:
    """``@njit(cache=True, nogil=True)`` of a loop function, typed for mypy.

    cache: compiled code is stored next to the module (start-up reuses it);
    nogil: the sidecar calls kernels from threads.
    """
    compiled = njit(cache=True, nogil=True)(loops)
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
