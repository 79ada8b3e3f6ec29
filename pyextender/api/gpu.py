"""The node annotation ``pyextender.io/gpu-topology`` and a pod's GPU demand.

Schema, version 1 (JSON object)::

    {
      "version": 1,              # required, integer; only 1 is understood
      "count": 8,                # required, GPUs on the node, 1..16
      "model": "H100-SXM5-80GB", # required, non-empty string
      "memoryMiB": 81920,        # required, memory of each GPU in MiB, > 0
      "gpus": [                  # optional; when present exactly `count` entries
        {"index": 0,             # 0..count-1, each index once
         "nvlinkDomain": 0,      # GPUs sharing an NVLink/NVSwitch domain, integer >= 0
         "pcieSwitch": 0,        # PCIe switch id, integer >= 0
         "numaNode": 0}          # NUMA node id, integer >= 0
      ]
    }

Without ``gpus`` every GPU is in domain 0, switch 0, NUMA node 0 (one flat
domain: no topology preference). Unknown keys are rejected so that typos show
up instead of being ignored. Errors name the field, e.g.
``gpus[3].nvlinkDomain: must be an integer >= 0, got "a"``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pyextender.api.objects import PodInfo
from pyextender.api.resources import VOLCANO_GPU_MEMORY, gpu_count, gpu_resource_in

SCHEMA_VERSION = 1
MAX_GPUS_PER_NODE = 16
"""Widest node the schema accepts (the cache models this many GPU slots)."""

MILLI = 1000
"""milli-GPU in one whole GPU."""

_TOP_KEYS = frozenset({"version", "count", "model", "memoryMiB", "gpus"})
_GPU_KEYS = frozenset({"index", "nvlinkDomain", "pcieSwitch", "numaNode"})


class GpuTopologyError(ValueError):
    """An annotation that does not follow the schema; ``field`` names the culprit."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(frozen=True, slots=True)
class GpuTopology:
    """One node's GPUs. Tuples are indexed by GPU index."""

    count: int
    model: str
    memory_mib: int
    nvlink_domain: tuple[int, ...]
    pcie_switch: tuple[int, ...]
    numa_node: tuple[int, ...]
    version: int = SCHEMA_VERSION

    def to_json(self) -> str:
        """The annotation text for this topology (what devcluster writes on nodes)."""
        gpus = [
            {
                "index": i,
                "nvlinkDomain": self.nvlink_domain[i],
                "pcieSwitch": self.pcie_switch[i],
                "numaNode": self.numa_node[i],
            }
            for i in range(self.count)
        ]
        doc = {
            "version": self.version,
            "count": self.count,
            "model": self.model,
            "memoryMiB": self.memory_mib,
            "gpus": gpus,
        }
        return json.dumps(doc, separators=(",", ":"))


def flat_topology(count: int, model: str = "", memory_mib: int = 0) -> GpuTopology:
    """A node without topology information: one domain holding every GPU."""
    zeros = (0,) * count
    return GpuTopology(count, model, memory_mib, zeros, zeros, zeros)


def _int(value: Any, field: str, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise GpuTopologyError(field, f"must be an integer >= {low}, got {json.dumps(value)}")
    if value < low or (high is not None and value > high):
        bound = f"in {low}..{high}" if high is not None else f">= {low}"
        raise GpuTopologyError(field, f"must be an integer {bound}, got {value}")
    return value


def validate_gpu_topology(doc: Any) -> GpuTopology:
    """Check a decoded annotation against the schema. Raises GpuTopologyError."""
    if not isinstance(doc, dict):
        raise GpuTopologyError("<root>", "must be a JSON object")
    unknown = sorted(set(doc) - _TOP_KEYS)
    if unknown:
        raise GpuTopologyError(unknown[0], "unknown field")
    for key in ("version", "count", "model", "memoryMiB"):
        if key not in doc:
            raise GpuTopologyError(key, "is required")
    version = _int(doc["version"], "version", 1)
    if version != SCHEMA_VERSION:
        raise GpuTopologyError("version", f"unsupported version {version}, want {SCHEMA_VERSION}")
    count = _int(doc["count"], "count", 1, MAX_GPUS_PER_NODE)
    model = doc["model"]
    if not isinstance(model, str) or not model:
        raise GpuTopologyError("model", f"must be a non-empty string, got {json.dumps(model)}")
    memory = _int(doc["memoryMiB"], "memoryMiB", 1)
    gpus = doc.get("gpus")
    if gpus is None:
        return flat_topology(count, model, memory)
    if not isinstance(gpus, list):
        raise GpuTopologyError("gpus", "must be a list")
    if len(gpus) != count:
        raise GpuTopologyError("gpus", f"has {len(gpus)} entries, count is {count}")
    nvlink = [0] * count
    pcie = [0] * count
    numa = [0] * count
    seen: set[int] = set()
    for pos, entry in enumerate(gpus):
        where = f"gpus[{pos}]"
        if not isinstance(entry, dict):
            raise GpuTopologyError(where, "must be an object")
        extra = sorted(set(entry) - _GPU_KEYS)
        if extra:
            raise GpuTopologyError(f"{where}.{extra[0]}", "unknown field")
        for key in _GPU_KEYS:
            if key not in entry:
                raise GpuTopologyError(f"{where}.{key}", "is required")
        index = _int(entry["index"], f"{where}.index", 0, count - 1)
        if index in seen:
            raise GpuTopologyError(f"{where}.index", f"duplicate index {index}")
        seen.add(index)
        nvlink[index] = _int(entry["nvlinkDomain"], f"{where}.nvlinkDomain", 0)
        pcie[index] = _int(entry["pcieSwitch"], f"{where}.pcieSwitch", 0)
        numa[index] = _int(entry["numaNode"], f"{where}.numaNode", 0)
    return GpuTopology(count, model, memory, tuple(nvlink), tuple(pcie), tuple(numa), version)


def parse_gpu_topology(text: str) -> GpuTopology:
    """Parse and validate the annotation text. Raises GpuTopologyError."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise GpuTopologyError("<root>", f"not valid JSON ({exc})") from exc
    return validate_gpu_topology(doc)


@dataclass(frozen=True, slots=True)
class GpuDemand:
    """What a pod asks of GPUs.

    ``count`` GPUs with ``milli`` milli-GPU on each. A sharing pod has
    count 1 and milli < 1000; when its share is given as GPU memory
    (``volcano.sh/gpu-memory``, MiB) ``milli`` is 0 and ``memory_mib`` is set,
    and the share depends on the node's GPU memory (see ``milli_on``).
    """

    count: int = 0
    milli: int = 0
    memory_mib: int = 0
    resource: str = field(default="", compare=False)
    """The GPU resource a whole-GPU pod asks for (for reasons); "" for a share."""

    @property
    def none(self) -> bool:
        return self.count <= 0

    @property
    def whole(self) -> bool:
        return self.count > 0 and self.milli >= MILLI

    @property
    def sharing(self) -> bool:
        return self.count > 0 and not self.whole

    def milli_on(self, gpu_memory_mib: int) -> int:
        """Per-GPU milli on a node whose GPUs have this much memory (MiB).

        Memory shares round up; a node of unknown memory (0) gets MILLI + 1,
        i.e. nothing fits there.
        """
        if self.milli > 0 or self.memory_mib <= 0:
            return self.milli
        if gpu_memory_mib <= 0:
            return MILLI + 1
        return -(-self.memory_mib * MILLI // gpu_memory_mib)


def gpu_demand(pod: PodInfo) -> GpuDemand:
    """A pod's GPU demand: whole GPUs (any configured GPU resource, or
    ``volcano.sh/gpu-number``) win, then the milli annotation, then GPU memory."""
    whole = gpu_count(pod.requests)
    if whole > 0:
        return GpuDemand(count=whole, milli=MILLI, resource=gpu_resource_in(pod.requests))
    share = pod.gpu_milli
    if 0 < share < MILLI:
        return GpuDemand(count=1, milli=share)
    if share >= MILLI:
        return GpuDemand(count=1, milli=MILLI)
    memory = pod.requests.get(VOLCANO_GPU_MEMORY, 0)
    if memory > 0:
        return GpuDemand(count=1, memory_mib=memory)
    return GpuDemand()
