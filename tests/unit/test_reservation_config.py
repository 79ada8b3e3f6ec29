"""A config listing the ``reservation`` action gets the filter that keeps other jobs off
held nodes (sla's), even without the sla plugin in its tiers (Volcano's ``reserve``
configs have none); no default waiting time comes with it."""

from __future__ import annotations

from pyextender.framework.config import load_config
from pyextender.plugins.defaults import plugins_of
from pyextender.plugins.registry import REGISTRY

TIERS = """
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: predicates
"""


def names(actions: str) -> list[str]:
    cfg = load_config(f'actions: "{actions}"\n{TIERS}', REGISTRY)
    return [spec.name for spec, _ in plugins_of(cfg)]


def test_reservation_action_brings_the_keep_off_filter() -> None:
    assert names("enqueue, allocate, reservation") == ["priority", "gang", "predicates", "sla"]
    cfg = load_config(f'actions: "enqueue, reservation"\n{TIERS}', REGISTRY)
    assert plugins_of(cfg)[-1][1].sla_waiting_time is None


def test_without_the_action_nothing_is_added() -> None:
    assert names("enqueue, allocate") == ["priority", "gang", "predicates"]


def test_a_configured_sla_is_not_doubled() -> None:
    cfg = load_config(
        'actions: "enqueue, reservation"\ntiers:\n- plugins:\n  - name: sla\n', REGISTRY
    )
    assert [spec.name for spec, _ in plugins_of(cfg)] == ["sla"]
