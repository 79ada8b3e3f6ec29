"""The GPU models a pod accepts, read from its node constraints and learned with its class.

The learned workload model used to drop them: a node of a model that only some pods
may use looked like any other node, so pods that could go anywhere filled it first.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pyextender.api import names
from pyextender.api.objects import NodeInfo, PodInfo, pod_from_dict, required_gpu_models
from pyextender.api.resources import CPU, GPU
from pyextender.cache.state import ClusterState
from pyextender.framework.interfaces import PodContext
from pyextender.plugins import gpu_share

KEY = names.GPU_MODEL_LABEL


def _term(*exprs: dict[str, Any]) -> dict[str, Any]:
    return {"matchExpressions": list(exprs)}


def _required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
            }
        }
    }


def _in(*values: str, key: str = KEY) -> dict[str, Any]:
    return {"key": key, "operator": "In", "values": list(values)}


def test_models_come_from_the_node_selector_and_the_required_affinity() -> None:
    assert required_gpu_models({}) == ()
    assert required_gpu_models({"nodeSelector": {KEY: "T4"}}) == ("T4",)
    assert required_gpu_models(_required(_term(_in("V100M32", "V100M16")))) == (
        "V100M16",
        "V100M32",
    )
    # terms are alternatives: the union of what each accepts
    assert required_gpu_models(_required(_term(_in("T4")), _term(_in("P100")))) == ("P100", "T4")
    # expressions of one term all hold: the intersection
    assert required_gpu_models(_required(_term(_in("T4", "P100"), _in("P100", "G3")))) == ("P100",)
    # both the node selector and the affinity must hold
    both = {**_required(_term(_in("T4", "P100"))), "nodeSelector": {KEY: "P100"}}
    assert required_gpu_models(both) == ("P100",)


def test_constraints_that_do_not_name_models_leave_any_model() -> None:
    # one alternative without a model constraint takes any node
    assert required_gpu_models(_required(_term(_in("T4")), _term(_in("a", key="zone")))) == ()
    # NotIn / Exists are not read: a model of the workload, not a filter
    not_in = {"key": KEY, "operator": "NotIn", "values": ["T4"]}
    assert required_gpu_models(_required(_term(not_in))) == ()
    assert required_gpu_models(_required(_term({"key": KEY, "operator": "Exists"}))) == ()
    # ill-typed parts are ignored, not fatal
    assert required_gpu_models({"affinity": "T4", "nodeSelector": ["T4"]}) == ()
    assert required_gpu_models(_required("T4")) == ()  # type: ignore[arg-type]
    # a selector that contradicts the affinity: no model, read as any
    assert required_gpu_models({**_required(_term(_in("T4"))), "nodeSelector": {KEY: "G3"}}) == ()


def test_a_pod_document_carries_its_models() -> None:
    doc = {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
        "spec": {
            "nodeSelector": {KEY: "T4"},
            "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}],
        },
    }
    assert pod_from_dict(doc).gpu_models == ("T4",)


def _cluster() -> ClusterState:
    state = ClusterState()
    for name, model, gpus in (("t4-a", "T4", 4), ("p100", "P100", 4), ("t4-b", "T4", 8)):
        state.set_node(NodeInfo(name, {CPU: 64_000, GPU: gpus, "pods": 110}, labels={KEY: model}))
    return state


def _pod(uid: str, models: tuple[str, ...] = ()) -> PodInfo:
    return PodInfo("ns", f"p-{uid}", uid, "volcano", "", "Pending", {CPU: 1000, GPU: 1},
                   gpu_models=models)  # fmt: skip


def _scores(state: ClusterState) -> dict[str, float]:
    pod = _pod("new")
    ctx = PodContext(pod=pod, state=state, request=state.vector(pod.requests))
    rows = state.live_rows()
    scores = gpu_share.GpuShare(gpu_share.Args()).score(ctx, rows)
    return {
        state.node_names[int(r)]: float(s) for r, s in zip(rows, np.asarray(scores), strict=True)
    }


def test_the_learned_class_keeps_its_models_and_spares_the_scarce_model() -> None:
    state = _cluster()
    for i in range(6):  # the workload so far: one-GPU pods that only run on a T4
        state.add_pod(_pod(f"t{i}", ("T4",)), "t4-b")
    learned = state.gpu.classes()
    t4 = 1 << state.gpu.model_id("T4")
    assert learned.model_mask.tolist() == [t4]
    scores = _scores(state)
    # a pod that may go anywhere is better placed on the P100, where no T4 pod can go,
    # than on the free T4 node
    assert scores["p100"] > scores["t4-a"]

    # the same history without the constraint: the two nodes look alike
    blind = _cluster()
    for i in range(6):
        blind.add_pod(_pod(f"t{i}"), "t4-b")
    assert blind.gpu.classes().model_mask.tolist() == [0]
    scores = _scores(blind)
    assert scores["p100"] == scores["t4-a"]


def test_models_no_node_has_are_left_out_of_the_mask() -> None:
    state = _cluster()
    t4 = 1 << state.gpu.model_id("T4")
    assert state.gpu.model_mask(("T4", "H200")) == t4
    assert state.gpu.model_mask(("H200",)) == 0
    assert state.gpu.model_mask(()) == 0
