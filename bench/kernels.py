"""Benchmark of the GPU placement kernels: numba vs numpy reference vs pure Python.

    .venv/bin/python bench/kernels.py [--sizes 1000,5000,10000] [--quick]

Clusters of N nodes × 8 GPUs with three NVLink layouts and random usage. Per
kernel and size: per-call p50/p99 (µs) for the numba kernel, the vectorised
numpy reference and the pure-Python reference (the same loops run by the
interpreter over lists), the speed-ups from this run, and whether all
returned identical results.

Deduplication is reported apart from compilation. The topology kernel
computes each distinct (layout, free mask) once per call, and the domains,
loss and score once per distinct (layout, free GPUs per domain) among those;
so do its references: the pure-Python one runs the same memoised loops, and
the numpy one (``numpy``) evaluates only the distinct pairs and, for all but
the chosen GPUs, the distinct counts among them (np.unique), and scatters
back. ``numpy_nodedup`` is the numpy reference over every node, so
``dedup_gain_numpy`` = numpy_nodedup / numpy is what deduplication buys and
``speedup_vs_numpy`` = numpy / numba what compilation buys, both against the
best straightforward implementation. The FGD kernel computes each distinct row
(free CPU, model, free milli per GPU, the pod's milli) once per call and copies it
to the rest (this cluster's rows rarely repeat: its worst case);
its pure-Python reference runs the same loops, and its numpy reference
(``numpy``) evaluates the distinct rows (np.unique) and scatters back, with
``numpy_nodedup`` over every node, as for the topology kernel.

numba rows also report the calling thread's CPU time (``*_cpu_*``): on a
shared machine wall-clock p99 mostly measures other processes' time slices.
``numba_fit`` is the topology call as filter and score make it (``full=False``:
domains and score only; the chosen sets and losses are for the bind).
The noise floor is a loop of fixed work sized to the cold call's p50: its
p99 / p50 is the tail this machine adds to any call of that length.

Compile time and cache-hit start-up time are measured in fresh subprocesses
(cold numba cache dir, then the same dir). Budget (DESIGN.md §5):
topology-loss + supernode at 10,000 nodes p50 ≤ 60 µs, p99 ≤ 100 µs, ≥ 5×
numpy; FGD ≤ 1 ms per call. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from numba import njit

from pyextender.api.task_classes import TaskClass, TaskClasses
from pyextender.kernels.gpu_share import (
    FgdInput,
    fgd_scores,
    fgd_scores_numpy,
    fgd_scores_numpy_dedup,
    fgd_scores_python,
)
from pyextender.kernels.supernode import (
    GangShape,
    plan_supernodes,
    plan_supernodes_numpy,
    plan_supernodes_python,
)
from pyextender.kernels.topology_loss import (
    Layouts,
    TopologyKernel,
    topology_numpy,
    topology_numpy_dedup,
)

STRIDE = 16  # GPU slots per node row, as in GpuState
GPUS = 8
NODES_PER_SUPERNODE = 32
LAYOUTS = ([0, 0, 0, 0, 1, 1, 1, 1], [0] * 8, [0, 0, 1, 1, 2, 2, 3, 3])


def cluster(n: int, seed: int = 7) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    count = np.full(n, GPUS, dtype=np.int32)
    used = rng.random((n, GPUS)) < 0.4
    partial = rng.random((n, GPUS)) < 0.15
    free = np.where(used, 0, 1000)
    free = np.where(partial & ~used, rng.choice([200, 500, 700], size=(n, GPUS)), free)
    free_milli = np.zeros((n, STRIDE), dtype=np.int32)
    free_milli[:, :GPUS] = free
    mask = ((free_milli[:, :GPUS] >= 1000).astype(np.int64) << np.arange(GPUS)).sum(axis=1)
    lay_dom = np.zeros((len(LAYOUTS), STRIDE), dtype=np.int32)
    for i, d in enumerate(LAYOUTS):
        lay_dom[i, :GPUS] = d
    return {
        "free_milli": free_milli,
        "mask": mask.astype(np.int64),
        "layout": rng.integers(0, len(LAYOUTS), n).astype(np.int32),
        "layouts": Layouts(np.full(len(LAYOUTS), GPUS, dtype=np.int32), lay_dom),
        "count": count,
        "cpu": rng.integers(0, 96_000, n).astype(np.int64),
        "model": rng.integers(0, 3, n).astype(np.int32),
        "sn": (np.arange(n) // NODES_PER_SUPERNODE).astype(np.int32),
    }


def classes() -> TaskClasses:
    """35 classes shaped like the openb trace's (CPU-only, shares, 1/2/4/8 GPUs)."""
    counts: dict[TaskClass, int] = {}
    rng = np.random.default_rng(3)
    shapes = [(0, 0)] * 5 + [(1, m) for m in (100, 200, 250, 300, 460, 500, 700)] * 3
    shapes += [(1, 1000)] * 6 + [(2, 1000), (4, 1000), (8, 1000)]
    for i, (num, milli) in enumerate(shapes[:35]):
        counts[TaskClass(int(rng.integers(1, 32)) * 1000 + i, milli, num)] = int(
            rng.integers(5, 500)
        )
    return TaskClasses.build(counts)


def timed(
    fn: Callable[[], Any], calls: int, between: Callable[[], None] | None = None
) -> tuple[list[float], list[float], Any]:
    """Per-call wall times and CPU times of this thread in µs, and the last result.

    On a shared machine the wall time of a 50 µs call includes whole scheduler
    slices given to other processes (p99 in milliseconds); the thread's CPU time
    does not, so both are reported."""
    out = None
    times = []
    cpu = []
    for _ in range(calls):
        c0 = time.thread_time_ns()
        t0 = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - t0) * 1e6)
        cpu.append((time.thread_time_ns() - c0) / 1e3)
        if between is not None:
            between()
    return times, cpu, out


def same(a: Any, b: Any, fields: tuple[str, ...] = ()) -> bool:
    """Every output (or those in ``fields``) of ``a`` equal to that of ``b``."""
    names = getattr(a, "_fields", None) or a.__dataclass_fields__  # named tuple or dataclass
    for name in fields or names:
        x, y = getattr(a, name), getattr(b, name)
        if isinstance(x, np.ndarray):
            if not np.array_equal(x, y):
                return False
        elif x != y:
            return False
    return True


def cold(kernel: TopologyKernel) -> TopologyKernel:
    """The kernel with its memo forgotten: the next call computes every pair afresh."""
    kernel.forget()
    return kernel


def kernels_for(c: dict[str, Any]) -> dict[str, dict[str, Callable[[], Any]]]:
    topo = TopologyKernel()
    topo_py = TopologyKernel()
    topo_warm = TopologyKernel()
    topo_seq = TopologyKernel()
    topo_fit = TopologyKernel()
    sizes = np.asarray([1, 2, 4, 8], np.int64)
    weights = np.asarray([60, 25, 10, 5], np.int64)
    t_args = (c["mask"], c["layout"], c["layouts"], 2, sizes, weights, 1.0, 1.0)
    cls = classes()
    nodes = FgdInput(c["cpu"], c["free_milli"], c["count"], c["model"])
    n = c["mask"].shape[0]
    milli = np.full(n, 500, dtype=np.int64)
    sn = c["sn"]
    s_count = int(sn.max()) + 1
    slots = np.asarray([bin(int(m)).count("1") for m in c["mask"].tolist()]) // 8
    slots = slots.astype(np.int64)
    dom = np.zeros(n, dtype=np.int32)
    gang = GangShape(pods=32, unit=4, atomic=2)
    s_args = (sn, slots, dom, s_count, 1, gang)
    return {
        "topology_loss": {
            # cold: every distinct (layout, free mask) computed afresh, as on the first
            # pod of a new size; warm: the memo of the previous call with the same request
            "numba": lambda: cold(topo).run(*t_args),
            # what filter and score call: domains and score only (cold as well)
            "numba_fit": lambda: cold(topo_fit).run(*t_args, full=False),
            "numba_warm": lambda: topo_warm.run(*t_args),
            "numba_seq": Sequence(c, topo_seq, sizes, weights),
            "numpy": lambda: topology_numpy_dedup(*t_args),
            "numpy_nodedup": lambda: topology_numpy(*t_args),
            "python": lambda: cold(topo_py).run_python(*t_args),
        },
        "supernode": {
            "numba": lambda: plan_supernodes(*s_args),
            "numpy": lambda: plan_supernodes_numpy(*s_args),
            "python": lambda: plan_supernodes_python(*s_args),
        },
        "gpu_share_fgd": {
            "numba": lambda: fgd_scores(nodes, cls, 4000, milli, 1),
            "numpy": lambda: fgd_scores_numpy_dedup(nodes, cls, 4000, milli, 1),
            "numpy_nodedup": lambda: fgd_scores_numpy(nodes, cls, 4000, milli, 1),
            "python": lambda: fgd_scores_python(nodes, cls, 4000, milli, 1),
        },
    }


CALLS = {
    # 3,000 calls of 10-100 µs: the p99 is the 30th slowest call, not the 3rd (300 calls
    # let two or three calls hit by a timer tick or another process decide it)
    "numba": 3000,
    "numba_warm": 3000,
    "numba_fit": 3000,
    "numba_seq": 3000,
    "numpy": 30,
    "numpy_nodedup": 30,
    "python": 3,
}
SEQ_K = (1, 1, 2, 1, 4, 1, 1, 8, 2, 1)
"""GPU counts of successive pods in the sidecar-like sequence (openb-like mix)."""


class Sequence:
    """One call per pod as the sidecar makes them: k varies from pod to pod, and
    between calls a bind takes k free GPUs of one node (a cache delta). Calling
    runs the kernel (timed); ``bind()`` applies the last result (not timed: it is
    the cache's work, not the kernel's)."""

    def __init__(
        self, c: dict[str, Any], kern: TopologyKernel, sizes: np.ndarray, weights: np.ndarray
    ) -> None:
        self.c, self.kern, self.sizes, self.weights = c, kern, sizes, weights
        self.masks = c["mask"].copy()
        self.rng = np.random.default_rng(11)
        self.step = 0
        self.last: Any = None

    def __call__(self) -> Any:
        k = SEQ_K[self.step % len(SEQ_K)]
        self.step += 1
        c = self.c
        self.last = self.kern.run(
            self.masks, c["layout"], c["layouts"], k, self.sizes, self.weights, 1.0, 1.0
        )
        return self.last

    def bind(self) -> None:
        res = self.last
        fits = np.flatnonzero(res.domains > 0)
        if fits.shape[0]:
            row = int(fits[self.rng.integers(fits.shape[0])])
            self.masks[row] &= ~int(res.mask[row])  # the bind
            if self.masks[row] == 0:
                self.masks[row] = 0xFF  # the node's pods finished: keep the cluster from filling


def bench_size(n: int, quick: bool) -> dict[str, dict[str, float | bool]]:
    c = cluster(n)
    out: dict[str, dict[str, float | bool]] = {}
    for kernel, impls in kernels_for(c).items():
        row: dict[str, float | bool] = {}
        results = {}
        for impl, fn in impls.items():
            fn()  # warm-up (compile, caches)
            calls = CALLS[impl]
            if quick:
                calls = max(1, calls // 10)
            if kernel == "gpu_share_fgd" and impl == "python":
                calls = 1  # ~1 µs per (node, GPU, class): seconds per call
            times, cpu, res = timed(fn, calls, getattr(fn, "bind", None))
            results[impl] = res
            row[f"{impl}_p50_us"] = round(float(np.percentile(times, 50)), 1)
            row[f"{impl}_p99_us"] = round(float(np.percentile(times, 99)), 1)
            if impl.startswith("numba"):
                row[f"{impl}_cpu_p50_us"] = round(float(np.percentile(cpu, 50)), 1)
                row[f"{impl}_cpu_p99_us"] = round(float(np.percentile(cpu, 99)), 1)
        row["identical"] = all(
            same(r, results["numba"], ("domains", "score"))
            if impl == "numba_fit"
            else same(results["numba"], r)
            for impl, r in results.items()
            if impl != "numba_seq"
        )
        row["speedup_vs_numpy"] = round(float(row["numpy_p50_us"]) / float(row["numba_p50_us"]), 1)
        row["speedup_vs_python"] = round(
            float(row["python_p50_us"]) / float(row["numba_p50_us"]), 1
        )
        if "numpy_nodedup_p50_us" in row:
            row["dedup_gain_numpy"] = round(
                float(row["numpy_nodedup_p50_us"]) / float(row["numpy_p50_us"]), 1
            )
        out[kernel] = row
    return out


@njit(cache=False, nogil=True)
def _fixed_work(a: np.ndarray, rounds: int) -> int:
    total = 0
    for r in range(rounds):
        for i in range(a.shape[0]):
            total += (a[i] * 31) ^ r
    return total


def noise_floor(target_us: float, calls: int) -> dict[str, float]:
    """The machine's own tail: per-call times of a loop whose work never changes
    (the same passes over the same 10,000-element array), sized to take about
    ``target_us``. Its p99 / p50 is what this machine adds to any call of that
    length (other processes, the hypervisor, timer ticks), not the kernel's."""
    a = np.arange(10_000, dtype=np.int64)
    _fixed_work(a, 1)  # compile
    one = float(np.median([timed(lambda: _fixed_work(a, 20), 1)[0][0] for _ in range(50)])) / 20
    rounds = max(1, round(target_us / one))
    times, cpu, _ = timed(lambda: _fixed_work(a, rounds), calls)
    p50, p99 = float(np.percentile(times, 50)), float(np.percentile(times, 99))
    return {
        "p50_us": round(p50, 1),
        "p99_us": round(p99, 1),
        "cpu_p99_us": round(float(np.percentile(cpu, 99)), 1),
        "p99_over_p50": round(p99 / p50, 2),
    }


_STARTUP = """
import time
t0 = time.perf_counter()
import numpy as np
from bench.kernels import cluster, kernels_for
c = cluster(1000)
ks = kernels_for(c)
t1 = time.perf_counter()
out = {}
for name, impls in ks.items():
    t = time.perf_counter()
    impls["numba"]()
    out[name] = (time.perf_counter() - t) * 1e3
print(repr((out, (t1 - t0) * 1e3)))
"""


def startup() -> dict[str, float]:
    """First-call time per kernel in fresh processes: cold cache (compile), then cache hit."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, PYTHONPATH=root)
        for phase in ("compile", "cache_hit"):
            proc = subprocess.run(
                [sys.executable, "-c", _STARTUP],
                env=env, cwd=root, capture_output=True, text=True, check=True,
            )  # fmt: skip
            per_kernel, imports = eval(proc.stdout.strip().splitlines()[-1])
            for name, ms in per_kernel.items():
                figures[f"{name}_{phase}_ms"] = round(ms, 1)
            figures[f"import_{phase}_ms"] = round(imports, 1)
            figures[f"all_kernels_ready_{phase}_ms"] = round(sum(per_kernel.values()), 1)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,5000,10000")
    parser.add_argument("--quick", action="store_true", help="fewer calls (smoke test)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    report: dict[str, Any] = {"gpus_per_node": GPUS, "sizes": {}}
    for n in sizes:
        print(f"benchmarking {n} nodes x {GPUS} GPUs ...", file=sys.stderr, flush=True)
        report["sizes"][str(n)] = bench_size(n, args.quick)
    print("measuring compile and cache-hit start-up in subprocesses ...", file=sys.stderr)
    report["startup"] = startup()
    head = (
        f"{'kernel':<15} {'nodes':>6} {'numba p50/p99 µs':>18} {'warm p50':>9} "
        f"{'seq p50/p99 µs':>16} "
        f"{'numpy p50/p99 µs':>19} {'no-dedup p50':>13} {'python p50 µs':>14} "
        f"{'x numpy':>8} {'x dedup':>8} {'x python':>9} {'same':>5}"
    )
    print(head)
    print("-" * len(head))
    for n, kernels in report["sizes"].items():
        for name, r in kernels.items():
            warm = f"{r['numba_warm_p50_us']:.1f}" if "numba_warm_p50_us" in r else "-"
            seq = (
                f"{r['numba_seq_p50_us']:.1f}/{r['numba_seq_p99_us']:.1f}"
                if "numba_seq_p50_us" in r
                else "-"
            )
            nodedup = f"{r['numpy_nodedup_p50_us']:.1f}" if "numpy_nodedup_p50_us" in r else "-"
            dedup = f"{r['dedup_gain_numpy']:.1f}" if "dedup_gain_numpy" in r else "-"
            print(
                f"{name:<15} {n:>6} "
                f"{r['numba_p50_us']:>8.1f}/{r['numba_p99_us']:<9.1f} {warm:>9} {seq:>16} "
                f"{r['numpy_p50_us']:>9.1f}/{r['numpy_p99_us']:<9.1f} {nodedup:>13} "
                f"{r['python_p50_us']:>14.0f} {r['speedup_vs_numpy']:>8.1f} {dedup:>8} "
                f"{r['speedup_vs_python']:>9.1f} {'yes' if r['identical'] else 'NO':>5}"
            )
    print(
        "numba: cold call (every (layout, mask) pair computed afresh); warm: the same request "
        "again; seq: pods of varying k, a bind (untimed) between calls (memo banks per request)\n"
        "x numpy: numba vs the numpy reference, both deduplicated (the JIT gain); "
        "x dedup: numpy without vs with deduplication"
    )
    top = max(sizes)
    both = [report["sizes"][str(top)][k] for k in ("topology_loss", "supernode")]

    def total(field: str) -> float:
        return float(sum(float(r[field]) for r in both))

    budget: dict[str, Any] = {
        "nodes": top,
        "numba_p50_us": round(total("numba_p50_us"), 1),
        "numba_p99_us": round(total("numba_p99_us"), 1),
        "speedup_vs_numpy": round(total("numpy_p50_us") / total("numba_p50_us"), 1),
        "speedup_vs_python": round(total("python_p50_us") / total("numba_p50_us"), 1),
        "seq_p50_us": round(float(both[0]["numba_seq_p50_us"]) + float(both[1]["numba_p50_us"]), 1),
        "seq_p99_us": round(float(both[0]["numba_seq_p99_us"]) + float(both[1]["numba_p99_us"]), 1),
        "cpu_p50_us": round(total("numba_cpu_p50_us"), 1),
        "cpu_p99_us": round(total("numba_cpu_p99_us"), 1),
        "seq_cpu_p50_us": round(
            float(both[0]["numba_seq_cpu_p50_us"]) + float(both[1]["numba_cpu_p50_us"]), 1
        ),
        "seq_cpu_p99_us": round(
            float(both[0]["numba_seq_cpu_p99_us"]) + float(both[1]["numba_cpu_p99_us"]), 1
        ),
        "fit_p50_us": round(float(both[0]["numba_fit_p50_us"]) + float(both[1]["numba_p50_us"]), 1),
        "fit_p99_us": round(float(both[0]["numba_fit_p99_us"]) + float(both[1]["numba_p99_us"]), 1),
    }
    floor = noise_floor(budget["numba_p50_us"], 1 if args.quick else CALLS["numba"])
    budget["noise_floor"] = floor
    report["topology_plus_supernode"] = budget
    print(
        f"\ntopology-loss + supernode (cold) at {top} nodes: p50 {budget['numba_p50_us']} µs, "
        f"p99 {budget['numba_p99_us']} µs (budget p50 60, p99 100), "
        f"x{budget['speedup_vs_numpy']} numpy (budget 5), "
        f"x{budget['speedup_vs_python']} pure Python\n"
        f"the same as filter and score call it (domains and score only, cold): "
        f"p50 {budget['fit_p50_us']} µs, p99 {budget['fit_p99_us']} µs\n"
        f"topology-loss (pod sequence) + supernode at {top} nodes: p50 {budget['seq_p50_us']} "
        f"µs, p99 {budget['seq_p99_us']} µs\n"
        f"the same in CPU time of the calling thread (excludes time other processes ran): "
        f"cold p50 {budget['cpu_p50_us']} / p99 {budget['cpu_p99_us']} µs, "
        f"sequence p50 {budget['seq_cpu_p50_us']} / p99 {budget['seq_cpu_p99_us']} µs\n"
        f"this machine's tail: a loop of fixed work sized to the cold p50 took p50 "
        f"{floor['p50_us']} / p99 {floor['p99_us']} µs (p99/p50 {floor['p99_over_p50']}, "
        f"CPU p99 {floor['cpu_p99_us']} µs)"
    )
    print("start-up in a fresh process (first call; the first kernel called also pays numba's")
    print("one-time runtime initialisation):")
    for key, value in report["startup"].items():
        print(f"  {key:<34} {value:>9.1f} ms")
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
