"""devcluster's kwok node stages: the heartbeat follows the node Lease's length."""

from __future__ import annotations

from pathlib import Path

import yaml

from devcluster import kwok_stages


def test_the_node_heartbeat_comes_once_per_lease_length() -> None:
    ready, heartbeat = kwok_stages.node_stages(3600)
    assert ready["metadata"] == {"name": "node-ready"}
    assert heartbeat["spec"]["delay"] == {  # type: ignore[index]
        "durationMilliseconds": 3_600_000,
        "jitterDurationMilliseconds": 3_960_000,
    }
    for stage in (ready, heartbeat):
        assert stage["spec"]["resourceRef"] == {"apiGroup": "v1", "kind": "Node"}  # type: ignore[index]
    # Ready nodes get the heartbeat; the others become Ready first
    [cond] = heartbeat["spec"]["selector"]["matchExpressions"]  # type: ignore[index]
    [not_ready] = ready["spec"]["selector"]["matchExpressions"]  # type: ignore[index]
    assert (cond["operator"], not_ready["operator"]) == ("In", "NotIn")
    assert cond["key"] == not_ready["key"] and cond["values"] == ["True"]


def test_the_config_has_node_stages_so_kwok_uses_none_of_its_own(tmp_path: Path) -> None:
    docs = list(yaml.safe_load_all(kwok_stages.write_config(tmp_path / "s.yaml", 40).read_text()))
    kinds = [d["spec"]["resourceRef"]["kind"] for d in docs]
    assert kinds.count("Node") == 2 and kinds.count("Pod") == len(kwok_stages.pod_stages())
    # the templates are YAML once kwok has filled in its functions
    for d in docs[:2]:
        text = d["spec"]["next"]["statusTemplate"]
        filled = text.replace("{{ $now | Quote }}", '"t"').replace("{{ $since | Quote }}", '"t"')
        filled = filled.replace("{{ NodeIP | Quote }}", '"1.2.3.4"').replace(
            "{{ .metadata.name | Quote }}", '"n"'
        )
        body = yaml.safe_load("\n".join(x for x in filled.splitlines() if "{{" not in x))
        assert {c["type"] for c in body["conditions"]} >= {"Ready", "MemoryPressure"}
