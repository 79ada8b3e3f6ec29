"""One replay run: one policy, one seed, every pod through ClusterState + Profile.

The loop is the scheduler's cycle in miniature: filter all nodes, score the
feasible ones, take the top score (ties: lowest rank in the seed's node
permutation), let the policy pick GPU indices (the bind step's job), annotate
the pod with them and add it to the state. After every attempt it records
arrived demand, allocated GPU milli and the cluster's FGD fragmentation
(kept per node, updated only for the node that changed).

The metric always uses the protocol's task classes (REPLAY.md §4: the
original trace's, 95 % coverage). A policy either scores with those too (the
paper's baselines) or, like the sidecar, learns them online from the pods it
has placed so far (``learns_classes``): it never sees the trace ahead.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pyextender.api import names
from pyextender.api.objects import NodeInfo, PodInfo
from pyextender.api.resources import CPU, GPU, MEMORY, PODS, PYEXTENDER_GPU_MILLI
from pyextender.api.task_classes import (
    REBUILD_GROWTH,
    LearnedClasses,
    TaskClasses,
)
from pyextender.cache.state import ClusterState, tie_rank
from pyextender.framework.interfaces import IntArray, PodContext
from pyextender.framework.runtime import Profile, first_of_best
from pyextender.kernels.gpu_share import fgd_scores
from pyextender.plugins.gpu_rows import fgd_input
from pyextender.simulate.protocol import Curves, bucket, node_order, task_classes
from pyextender.simulate.trace import NodeRow, PodRow

F64 = npt.NDArray[np.float64]
MIB = 2**20

Chooser = Callable[[PodContext, int], tuple[int, ...]]
"""(pod context, chosen row) -> GPU indices written on the pod at bind."""


@dataclass(frozen=True, slots=True)
class Policy:
    """A named way to schedule: a Profile and a GPU chooser, built fresh per seed."""

    name: str
    build: Callable[[int], tuple[Profile, Chooser]]
    summary: str
    learns_classes: bool = False
    """Score with task classes learned online (the sidecar's model), not the
    protocol's classes of the whole trace."""
    learns_at: str = "arrival"
    """With learns_classes: learn from every pod that arrived so far ("arrival"),
    or from the pods placed so far ("bind")."""
    spares_idle_nodes: bool = False
    """Of equally scored nodes, take one in use before one whose GPUs are all free,
    as the sidecar's pick does (framework.runtime.first_of_best); otherwise the
    protocol's random order alone (§2.3)."""


class ReplayClasses(LearnedClasses):
    """The sidecar's online class model, rebuilt on sample growth alone: the replay
    starts from an empty cluster and must not depend on the machine's speed."""

    def __init__(self, growth: float = REBUILD_GROWTH) -> None:
        super().__init__(rebuild_s=math.inf, growth=growth)


@dataclass(frozen=True, slots=True)
class RunResult:
    policy: str
    seed: int
    pods: int
    placed: int
    curves: Curves
    seconds: float


def sidecar_order(nodes: Sequence[NodeRow]) -> IntArray:
    """The sidecar's order of equally scored nodes (ClusterState.tie_rank, a hash of
    each name) as ``replay``'s ``rank``."""
    ranks = np.fromiter((tie_rank(n.name) for n in nodes), dtype=np.int64, count=len(nodes))
    order: IntArray = np.argsort(np.argsort(ranks)).astype(np.int64)
    return order


def build_state(nodes: Sequence[NodeRow]) -> ClusterState:
    """A ClusterState of the trace's nodes (GPU model from the NFD label, flat topology)."""
    state = ClusterState(capacity=len(nodes))
    for node in nodes:
        labels = {names.GPU_MODEL_LABEL: node.model} if node.model else {}
        state.set_node(
            NodeInfo(
                name=node.name,
                allocatable={
                    CPU: node.cpu_milli,
                    MEMORY: node.memory_mib * MIB,
                    PODS: 1_000_000,  # the trace has no pod-count limit
                    GPU: node.gpus,
                },
                labels=labels,
            )
        )
    return state


def pod_info(pod: PodRow, uid: int) -> PodInfo:
    """The Kubernetes view of a trace pod: whole GPUs as nvidia.com/gpu, shares as milli."""
    requests = {CPU: pod.cpu_milli, MEMORY: pod.memory_mib * MIB}
    annotations: dict[str, str] = {}
    if pod.num_gpu > 0 and pod.gpu_milli >= 1000:
        requests[GPU] = pod.num_gpu
    elif pod.num_gpu > 0 and pod.gpu_milli > 0:
        annotations[PYEXTENDER_GPU_MILLI] = str(pod.gpu_milli)
    return PodInfo(
        namespace="replay",
        name=pod.name,
        uid=str(uid),
        scheduler_name=names.SCHEDULER_NAME,
        node_name="",
        phase="Pending",
        requests=requests,
        annotations=annotations,
        gpu_models=pod.gpu_spec,  # in a cluster: its nodeSelector or node affinity
    )


def _frag(state: ClusterState, rows: IntArray, classes: TaskClasses) -> npt.NDArray[np.int64]:
    """Weighted FGD fragmentation W of the rows for the protocol's classes."""
    ctx = PodContext(
        pod=pod_info(PodRow("", 0, 0, 0, 0, ()), -1),
        state=state,
        request=np.zeros(1, dtype=np.int64),
    )
    res = fgd_scores(fgd_input(ctx, rows), classes, 0, np.zeros(rows.shape[0], np.int64), 0)
    return res.before


def spec_rows(state: ClusterState, rows: IntArray, spec: tuple[str, ...]) -> IntArray:
    """The rows whose GPU model the pod accepts (REPLAY.md §3). In a cluster this is the
    pod's node affinity on the GPU model label, which kube-scheduler filters before it
    asks the extender, so the profile never sees the other nodes either."""
    ids = [state.gpu.model_id(m) for m in spec]
    kept: IntArray = rows[np.isin(state.gpu.model[rows], ids)]
    return kept


def replay(
    nodes: Sequence[NodeRow],
    original: Sequence[PodRow],
    arrivals: Sequence[PodRow],
    policy: Policy,
    seed: int,
    clock: Callable[[], float],
    rank: IntArray | None = None,
) -> RunResult:
    """Replay ``arrivals`` (the protocol's pods, in order) onto ``nodes`` with
    ``policy``. ``rank`` orders equally scored nodes, one int per node (lowest first);
    default the protocol's permutation of the seed (§2.3). ``sidecar_order(nodes)`` is
    the sidecar's own, to replay what a cluster does pod by pod."""
    start = clock()
    state = build_state(nodes)
    protocol = task_classes(original, state.gpu.model_id)
    if policy.learns_classes:
        state.gpu.learned = ReplayClasses()
        state.gpu.learn_on_bind = policy.learns_at == "bind"
    else:
        state.gpu.fixed_classes = protocol
    w_sum = protocol.weight_sum
    profile, choose = policy.build(seed)
    rows = state.live_rows()
    if rank is None:
        rank = node_order(rows.shape[0], seed)
    total_milli = 1000.0 * float(state.gpu.count[rows].sum())
    frag = _frag(state, rows, protocol)
    frag_sum = int(frag.sum())
    n = len(arrivals)
    arrived = np.empty(n)
    allocated = np.empty(n)
    frag_total = np.empty(n)
    a = u = 0
    placed = 0
    learn_arrivals = policy.learns_classes and not state.gpu.learn_on_bind
    for i, row_pod in enumerate(arrivals):
        pod = pod_info(row_pod, i)
        if learn_arrivals:
            state.gpu.learn(row_pod.cpu_milli, row_pod.gpu_milli, row_pod.num_gpu, row_pod.gpu_spec)
        ctx = PodContext(pod=pod, state=state, request=state.vector(pod.requests))
        candidates = rows if not row_pod.gpu_spec else spec_rows(state, rows, row_pod.gpu_spec)
        feasible = profile.filter(ctx, candidates).feasible()
        a += row_pod.demand
        if feasible.shape[0]:
            scores = profile.score(ctx, feasible)
            gpu_idle = state.gpu.idle_among(feasible) if policy.spares_idle_nodes else None
            row = int(feasible[first_of_best(scores, rank[feasible], gpu_idle)])
            gpus = choose(ctx, row)
            if gpus:
                pod.annotations[names.GPU_INDEX_ANNOTATION] = ",".join(map(str, gpus))
            pod.node_name = state.node_names[row]
            state.add_pod(pod, pod.node_name)
            u += row_pod.demand
            placed += 1
            one = np.asarray([row], dtype=np.int64)
            new = int(_frag(state, one, protocol)[0])
            frag_sum += new - int(frag[row])
            frag[row] = new
        arrived[i] = a
        allocated[i] = u
        frag_total[i] = frag_sum / w_sum
    idle = total_milli - allocated
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(idle > 0, 100.0 * frag_total / idle, 0.0)
    curves = bucket(
        100.0 * arrived / total_milli,
        100.0 * allocated / total_milli,
        100.0 * frag_total / total_milli,
        ratio,
    )
    return RunResult(policy.name, seed, n, placed, curves, clock() - start)
