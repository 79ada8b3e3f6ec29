"""Resource names and the fixed order of resource columns in every array.

Columns 0..4 are fixed; extended resources (anything with a domain prefix,
e.g. ``example.com/fpga``) get further columns as the cache first sees them.
Units: cpu in milli-cores, memory and ephemeral-storage in bytes, pods and
GPUs in counts.

Which extended resources are GPUs is configuration (``pyextender serve
--gpu-resource``, the chart's ``gpuResourceNames``): every configured name is
a GPU to the GPU plugins (topology, sharing, supernode, the GPU indices
written at bind), each keeping its own column, so a pod asking for
``amd.com/gpu`` never lands on a node that only has ``nvidia.com/gpu``.
Volcano's ``volcano.sh/gpu-number`` (whole GPUs, from Volcano's GPU-sharing
device plugin) counts as the first configured name.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping

from pyextender.api.names import BATCH_RESOURCE
from pyextender.api.quantity import to_int, to_milli

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL = "ephemeral-storage"
GPU = "nvidia.com/gpu"
"""The default GPU resource; it keeps column 4 whatever is configured."""

CORE_RESOURCES: tuple[str, ...] = (CPU, MEMORY, PODS, EPHEMERAL, GPU)

KNOWN_GPU_RESOURCES: tuple[str, ...] = (
    "nvidia.com/gpu",
    "amd.com/gpu",
    "metax-tech.com/gpu",
    "huawei.com/Ascend910",
    "huawei.com/Ascend310",
    "gpu.intel.com/i915",
)
"""GPU resource names of the device plugins we know of (what the chart ships)."""

# Volcano's fractional-GPU resources (GPU sharing); handled by the GPU plugins,
# not as plain columns, because they are per-GPU rather than per-node amounts.
VOLCANO_GPU_MEMORY = "volcano.sh/gpu-memory"
VOLCANO_GPU_NUMBER = "volcano.sh/gpu-number"
PYEXTENDER_GPU_MILLI = "pyextender.io/gpu-milli"

_gpu_resources: tuple[str, ...] = (GPU,)


def gpu_resources() -> tuple[str, ...]:
    """The extended resource names counted as GPUs, the primary one first."""
    return _gpu_resources


def configure_gpu_resources(names: Iterable[str]) -> tuple[str, ...]:
    """Set the GPU resource names for this process (once, at start-up, before any
    node or pod is read); returns the previous ones. Raises ValueError naming a bad name."""
    global _gpu_resources
    cleaned: list[str] = []
    for raw in names:
        name = raw.strip()
        if name.count("/") != 1 or not all(name.split("/")) or name.startswith("kubernetes.io/"):
            raise ValueError(
                f"GPU resource {raw!r}: must be an extended resource name such as "
                f"{KNOWN_GPU_RESOURCES[1]} (domain/name)"
            )
        if name in (VOLCANO_GPU_MEMORY, VOLCANO_GPU_NUMBER, PYEXTENDER_GPU_MILLI):
            raise ValueError(f"GPU resource {name!r}: is a GPU-sharing resource, not a GPU count")
        if name not in cleaned:
            cleaned.append(name)
    if not cleaned:
        raise ValueError("at least one GPU resource name is needed")
    previous = _gpu_resources
    _gpu_resources = tuple(cleaned)
    return previous


def gpu_count(amounts: Mapping[str, int]) -> int:
    """Whole GPUs in a resource list (a pod's requests, a node's allocatable): the
    configured GPU resources summed, else ``volcano.sh/gpu-number``."""
    total = sum(amounts.get(name, 0) for name in _gpu_resources)
    return total or amounts.get(VOLCANO_GPU_NUMBER, 0)


def gpu_resource_in(amounts: Mapping[str, int]) -> str:
    """The GPU resource a resource list names (for reasons); the primary one if none."""
    for name in _gpu_resources:
        if amounts.get(name, 0) > 0:
            return name
    if amounts.get(VOLCANO_GPU_NUMBER, 0) > 0:
        return VOLCANO_GPU_NUMBER
    return _gpu_resources[0]


def with_gpu_number_folded(amounts: Mapping[str, int]) -> Mapping[str, int]:
    """``volcano.sh/gpu-number`` counted as the primary GPU resource, so it takes a
    column (fit, queues, binpack) like any GPU; unchanged when a GPU name is present."""
    number = amounts.get(VOLCANO_GPU_NUMBER, 0)
    if number <= 0 or any(amounts.get(name, 0) > 0 for name in _gpu_resources):
        return amounts
    folded = {k: v for k, v in amounts.items() if k != VOLCANO_GPU_NUMBER}
    folded[_gpu_resources[0]] = number
    return folded


QUOTA_PREFIXES: tuple[str, ...] = ("requests.", "limits.", "count/")
"""ResourceQuota names (``requests.cpu``, ``limits.memory``, ``count/pods``) that
Volcano's job controller writes into a PodGroup's minResources beside ``cpu``,
``memory``, ``pods`` and extended resources. They are not node resources: Volcano's
scheduler skips them, and so do we."""


def is_quota_name(name: str) -> bool:
    return name.startswith(QUOTA_PREFIXES)


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
    if isinstance(quantity, str):
        return _amount_of_text(name == CPU, quantity)
    if name == CPU:
        return to_milli(quantity)
    return to_int(quantity)


@functools.lru_cache(maxsize=4096)
def _amount_of_text(milli: bool, quantity: str) -> int:
    """``amount`` of a quantity string, remembered: a cluster's pods repeat a few dozen
    quantities ("1", "500m", "1Gi"), and every watch event of a pod parses its
    requests again (the Decimal parse was ~8 % of the sidecar's event loop per
    scheduled pod). Malformed strings raise each time (exceptions are not cached)."""
    return to_milli(quantity) if milli else to_int(quantity)


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
