"""The sidecar runs each scheduler config Volcano ships, schedules a gang with it and
exposes what it ignores.

The configs are Volcano's own files (``tests/fixtures/volcano-configs``, origins in
its README: ``installer/helm/chart/volcano/config/*.conf``, ``docs/user-guide/*``,
``docs/design/*``). Volcano's behaviour read in ``pkg/scheduler/framework/framework.go``
(OpenSession skips a plugin it has no builder for, with an error log) and
``pkg/scheduler/util.go`` (UnmarshalSchedulerConf). Ours: the names we do not run are
ignored with a warning log line and ``pyextender_config_ignored_total{kind,name}``.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from devcluster.cluster import Cluster, ClusterState
from tests.e2e.kube import bound_of, gang, metrics, wait_for
from tests.fixtures.volcano_configs import FOLDER, IGNORED

IGNORED_METRIC = "pyextender_config_ignored_total"


@pytest.fixture(scope="module")
def restore_default_sidecar(cluster: Cluster) -> Iterator[Cluster]:
    """Other modules expect the sidecar with its built-in config: put it back after."""
    yield cluster
    cluster.stop_role("sidecar")
    cluster.start_sidecar()
    cluster.wait_sidecar_ready()


def _ignored_series(url: str) -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = {}
    for key, value in metrics(url).items():
        if key.startswith(IGNORED_METRIC + "{"):
            labels = dict(
                part.split("=", 1) for part in key[len(IGNORED_METRIC) + 1 : -1].split(",")
            )
            out[(labels["kind"].strip('"'), labels["name"].strip('"'))] = value
    return out


def _event_naming(core: client.CoreV1Api, ignored: set[tuple[str, str]]) -> bool:
    events = core.list_namespaced_event(
        "kube-system", field_selector="reason=ConfigIgnored,involvedObject.kind=Lease"
    ).items
    return any(
        e.type == "Warning"
        and e.involved_object.name == "pyextender-scheduler"
        and all(f'"{n}" ignored' in e.message for _k, n in ignored)
        and f"ignores {len(ignored)} name" in e.message
        for e in events
    )


@pytest.mark.parametrize("name", sorted(IGNORED))
def test_sidecar_runs_volcanos_config_and_counts_what_it_ignores(
    name: str,
    restore_default_sidecar: Cluster,
    state: ClusterState,
    core: client.CoreV1Api,
    api: client.ApiClient,
    namespace: str,
) -> None:
    cluster = restore_default_sidecar
    started = time.monotonic()
    cluster.stop_role("sidecar")
    cluster.start_sidecar(extra_args=[f"--config={FOLDER / name}"])
    cluster.wait_sidecar_ready()
    url = state.extender_url
    assert _ignored_series(url) == dict.fromkeys(IGNORED[name], 1.0)
    log = (Path(state.logs) / "sidecar.log").read_text()
    for kind, ignored in IGNORED[name]:
        assert f'"{ignored}" ignored' in log, (kind, ignored)
    if IGNORED[name]:  # and a Warning event on the scheduler's Lease names them all
        wait_for("the ConfigIgnored event", lambda: _event_naming(core, IGNORED[name]))
    # all or nothing still: a gang of two whole-GPU pods is placed together
    names = gang(core, api, namespace, "vc", size=2, gpus=1)
    wait_for("the gang bound", lambda: bound_of(core, namespace, names) == 2, timeout=60)
    assert time.monotonic() - started < 60


def test_validate_config_prints_what_the_sidecar_ignores(tmp_path: Path) -> None:
    """``pyextender validate-config`` as a user runs it: one warning line per ignored name,
    exit 0, or 1 with --strict; a typo of a Volcano name is a problem (exit 1)."""
    path = FOLDER / "chart-volcano-scheduler-capacity-card-ci.conf"
    cmd = [sys.executable, "-m", "pyextender.cli", "validate-config"]
    done = subprocess.run([*cmd, str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stdout.splitlines() if line.strip().startswith("warning:")]
    assert len(warned) == len(IGNORED[path.name]), done.stdout
    for _kind, name in IGNORED[path.name]:
        assert any(f'"{name}" ignored' in line for line in warned), (name, done.stdout)
    strict = subprocess.run([*cmd, "--strict", str(path)], capture_output=True, timeout=60)
    assert strict.returncode == 1
    typo = path.read_text().replace("network-topology-aware", "network-topology-awar")
    bad = tmp_path / "typo.conf"
    bad.write_text(typo)
    failed = subprocess.run([*cmd, str(bad)], capture_output=True, text=True, timeout=60)
    assert failed.returncode == 1
    assert 'did you mean "network-topology-aware"' in failed.stderr, failed.stderr
