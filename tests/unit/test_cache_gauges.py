"""The cache gauges read the cache at scrape time (pyextender.server.app.read_cache_gauges)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from pyextender.api.objects import NodeInfo, PodInfo
from pyextender.cache.cluster import ClusterCache
from pyextender.server.app import read_cache_gauges
from pyextender.server.metrics import Metrics

GPU = "nvidia.com/gpu"


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def _pod(uid: str, gpus: int, node: str = "") -> PodInfo:
    return PodInfo("ns", f"p-{uid}", uid, "volcano", node, "Pending", {"cpu": 1000, GPU: gpus})


def test_a_scrape_shows_the_cache_as_it_is_now() -> None:
    """No sampling loop runs here: every reading comes from the cache at that moment,
    so a scrape right after the first sync shows the nodes (the once-a-second sample
    showed 0 nodes for up to a second after /readyz turned 200)."""
    cache = ClusterCache()
    metrics = Metrics()
    read_cache_gauges(cache, metrics)
    r = metrics.registry
    assert _value(r, "pyextender_cache_nodes") == 0
    for name in ("a", "b"):
        cache.state.set_node(NodeInfo(name, {"cpu": 64_000, GPU: 8, "pods": 110}))
    assert _value(r, "pyextender_cache_nodes") == 2
    assert _value(r, "pyextender_cache_gpus", resource=GPU, state="allocatable") == 16
    assert _value(r, "pyextender_cache_gpus", resource=GPU, state="allocated") == 0

    assert cache.assume(_pod("u1", 3), "a")
    assert _value(r, "pyextender_cache_pods") == 1
    assert _value(r, "pyextender_cache_gpus", resource=GPU, state="allocated") == 3
    cache.forget_assumed("u1")
    assert _value(r, "pyextender_cache_pods") == 0
    assert _value(r, "pyextender_cache_gpus", resource=GPU, state="allocated") == 0

    cache.pending["u2"] = _pod("u2", 1)
    assert _value(r, "pyextender_cache_pending_pods") == 1
    cache.state.remove_node("b")
    assert _value(r, "pyextender_cache_nodes") == 1
    assert _value(r, "pyextender_cache_gpus", resource=GPU, state="allocatable") == 8


def test_a_scrape_shows_the_task_class_model_without_rebuilding_it() -> None:
    cache = ClusterCache()
    metrics = Metrics()
    read_cache_gauges(cache, metrics)
    r = metrics.registry
    gpu = cache.state.gpu
    for cpu in (1000, 2000, 3000):  # one GPU shape asked with three CPU sizes
        gpu.learn(cpu, 1000, 1, ())
    for cpu in (500, 700):  # two CPU-only classes: one class in the model
        gpu.learn(cpu, 0, 0, ())
    assert _value(r, "pyextender_task_classes", state="seen") == 5
    assert _value(r, "pyextender_task_classes", state="kept") == 0  # not built yet
    assert gpu.classes().size == 4
    assert _value(r, "pyextender_task_classes", state="kept") == 4
