"""Reading the openb trace CSVs (Alibaba cluster-trace-gpu-v2023) into plain rows.

Only the columns the replay protocol uses are kept (REPLAY.md §1): nodes by
CPU (milli-cores), memory (MiB), GPU count and model; pods by CPU, memory,
GPU count, milli-GPU per GPU and accepted models. Every pod list of the
family loads: only ``POD_COLUMNS`` are required; ``gpu_spec`` (empty = any
model) and the columns the protocol ignores (``qos``, ``pod_phase``, times)
are optional, as in the reference simulator (REPLAY.md §8). So is
``memory_mib``: the family's ``nomem`` lists drop it, and memory is only ever a
hard constraint (REPLAY.md §3), so a pod without it asks for none.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path


def default_traces() -> Path:
    """Where the openb trace lives: ``$PYEXTENDER_TRACES``, else ``shared/traces``
    beside the checkout (the project's layout; CI clones next to ``shared/``)."""
    env = os.environ.get("PYEXTENDER_TRACES")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3] / "shared" / "traces"


class TraceError(ValueError):
    """A trace file that is missing columns or has malformed values."""


@dataclass(frozen=True, slots=True)
class NodeRow:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str


@dataclass(frozen=True, slots=True)
class PodRow:
    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int  # per GPU; 1000 = whole GPU
    gpu_spec: tuple[str, ...]  # accepted models; () = any

    @property
    def demand(self) -> int:
        """GPU demand in milli-GPU (num_gpu × gpu_milli)."""
        return self.num_gpu * self.gpu_milli

    @property
    def sharing(self) -> bool:
        return self.num_gpu == 1 and 0 < self.gpu_milli < 1000


def _read(path: Path, columns: tuple[str, ...]) -> list[dict[str, str]]:
    try:
        with path.open(newline="") as fh:
            reader = csv.DictReader(fh)
            missing = [c for c in columns if c not in (reader.fieldnames or [])]
            if missing:
                raise TraceError(f"{path}: missing column(s) {', '.join(missing)}")
            return list(reader)
    except OSError as exc:
        raise TraceError(f"{path}: {exc.strerror or exc}") from exc


def _int(row: dict[str, str], key: str, path: Path, line: int) -> int:
    raw = (row.get(key) or "").strip()
    try:
        return int(raw or "0")
    except ValueError as exc:
        raise TraceError(f"{path}:{line}: column {key}: not an integer: {raw!r}") from exc


NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "num_gpu", "gpu_milli")
"""Required pod columns; ``memory_mib`` (absent: 0, no memory asked) and ``gpu_spec``
are read when present."""


def load_nodes(path: Path) -> list[NodeRow]:
    rows = _read(path, NODE_COLUMNS)
    return [
        NodeRow(
            name=r["sn"],
            cpu_milli=_int(r, "cpu_milli", path, i + 2),
            memory_mib=_int(r, "memory_mib", path, i + 2),
            gpus=_int(r, "gpu", path, i + 2),
            model=(r.get("model") or "").strip(),
        )
        for i, r in enumerate(rows)
    ]


def load_pods(path: Path) -> list[PodRow]:
    rows = _read(path, POD_COLUMNS)
    out = []
    for i, r in enumerate(rows):
        spec = tuple(s for s in (r.get("gpu_spec") or "").split("|") if s)
        out.append(
            PodRow(
                name=r["name"],
                cpu_milli=_int(r, "cpu_milli", path, i + 2),
                memory_mib=_int(r, "memory_mib", path, i + 2),
                num_gpu=_int(r, "num_gpu", path, i + 2),
                gpu_milli=_int(r, "gpu_milli", path, i + 2),
                gpu_spec=spec,
            )
        )
    return out
