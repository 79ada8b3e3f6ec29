"""Resource names and the fixed order of resource columns in every array.

Columns 0..4 are fixed; extended resources (anything with a domain prefix,
e.g. ``example.com/fpga``) get further columns as the cache first sees them.
Units: cpu in milli-cores, memory and ephemeral-storage in bytes, pods and
GPUs in counts.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyextender.api.names import BATCH_RESOURCE
from pyextender.api.quantity import to_int, to_milli

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL = "ephemeral-storage"
GPU = "nvidia.com/gpu"

CORE_RESOURCES: tuple[str, ...] = (CPU, MEMORY, PODS, EPHEMERAL, GPU)

# Volcano's fractional-GPU resources (GPU sharing); handled by the GPU plugins,
# not as plain columns, because they are per-GPU rather than per-node amounts.
VOLCANO_GPU_MEMORY = "volcano.sh/gpu-memory"
VOLCANO_GPU_NUMBER = "volcano.sh/gpu-number"
PYEXTENDER_GPU_MILLI = "pyextender.io/gpu-milli"


def is_tracked(name: str) -> bool:
    """Whether a resource name gets a column: core ones and extended ones."""
    if name in CORE_RESOURCES:
        return True
    if name in (VOLCANO_GPU_MEMORY, VOLCANO_GPU_NUMBER, PYEXTENDER_GPU_MILLI, BATCH_RESOURCE):
        return False
    return (
        "/" in name and not name.startswith("kubernetes.io/") and not name.startswith("requests.")
    )


def amount(name: str, quantity: str | int | float) -> int:
    """Integer amount of a resource in its column's unit."""
    if name == CPU:
        return to_milli(quantity)
    return to_int(quantity)


def parse_resource_list(raw: Mapping[str, object] | None) -> dict[str, int]:
    """``{"cpu": "500m", "memory": "1Gi"}`` -> ``{"cpu": 500, "memory": 1073741824}``.

    Raises ValueError naming the resource when a quantity is malformed.
    """
    out: dict[str, int] = {}
    if not raw:
        return out
    for name, value in raw.items():
        if not isinstance(value, str | int | float):
            raise ValueError(f"resource {name!r}: quantity must be a string, got {value!r}")
        try:
            out[name] = amount(name, value)
        except ValueError as exc:
            raise ValueError(f"resource {name!r}: {exc}") from exc
    return out


def format_amount(name: str, value: int) -> str:
    """Human text for a column amount (used in reasons and events)."""
    if name == CPU:
        return f"{value}m" if value % 1000 else str(value // 1000)
    if name in (MEMORY, EPHEMERAL) and value >= 2**20 and value % 2**20 == 0:
        gib = value / 2**30
        return f"{gib:g}Gi" if value % 2**30 == 0 else f"{value // 2**20}Mi"
    return str(value)
