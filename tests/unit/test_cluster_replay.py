"""bench/cluster_replay.py feeds the sidecar the trace's pods and nodes as the
in-process replay builds them, so the two placements it sets side by side differ
only by what the deployed system does differently."""

from __future__ import annotations

import numpy as np

from bench.cluster_replay import node_body, pod_body, sample_nodes
from pyextender.api.objects import node_from_dict, pod_from_dict
from pyextender.simulate.replay import build_state, pod_info
from pyextender.simulate.trace import NodeRow, PodRow

PODS = [
    PodRow("cpu-only", 4000, 1024, 0, 0, ()),
    PodRow("share", 8000, 2048, 1, 470, ()),
    PodRow("whole", 16000, 4096, 2, 1000, ()),
    PodRow("picky", 6000, 0, 1, 1000, ("P100", "V100M16")),
]


def test_a_trace_pod_reaches_the_sidecar_as_the_replay_builds_it() -> None:
    for i, row in enumerate(PODS):
        body = pod_body(row, "ns", i)
        body["metadata"]["uid"] = f"uid-{i}"
        live = pod_from_dict(body)
        replayed = pod_info(row, i)
        assert live.requests == replayed.requests, row
        assert live.annotations == replayed.annotations, row
        assert live.gpu_models == replayed.gpu_models, row


def test_a_trace_node_reaches_the_sidecar_as_the_replay_builds_it() -> None:
    rows = [NodeRow("n-a", 96000, 786432, 8, "V100M16"), NodeRow("n-b", 64000, 262144, 2, "")]
    replayed = build_state(rows)
    live = build_state([])
    for row in rows:
        assert not live.set_node(node_from_dict(node_body(row)))  # no warnings
    for row in rows:
        a, b = replayed.index[row.name], live.index[row.name]
        for name in ("cpu", "memory", "nvidia.com/gpu"):
            col = replayed.column[name]
            assert replayed.alloc[a, col] == live.alloc[b, live.column[name]], (row, name)
        # flat GPUs of the same model: no topology annotation on either side
        assert replayed.gpu.count[a] == live.gpu.count[b] == row.gpus
        assert replayed.gpu.models[replayed.gpu.model[a]] == live.gpu.models[live.gpu.model[b]]
        assert (replayed.gpu.layout[a] == live.gpu.layout[b]).all()


def test_the_node_sample_keeps_the_list_order_and_differs_by_seed() -> None:
    rows = [NodeRow(f"n{i}", 1000, 1024, 8, "m") for i in range(100)]
    one, other = sample_nodes(rows, 0.2, 42), sample_nodes(rows, 0.2, 43)
    assert len(one) == len(other) == 20
    order = [int(n.name[1:]) for n in one]
    assert order == sorted(order)
    assert {n.name for n in one} != {n.name for n in other}
    assert sample_nodes(rows, 1.0, 42) == rows
    assert np.unique([n.name for n in one]).shape[0] == 20
