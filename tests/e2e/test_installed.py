"""pyextender as installed by its Helm chart (issue 8), on a devcluster of its own.

``helm install`` puts every object of the chart through the real API server; then
each Deployment's Pod template runs as local processes (devcluster.localpods)
under its own ServiceAccount token, with the chart's args, env and mounted
ConfigMaps, and the stock kube-scheduler with the chart's KubeSchedulerConfiguration.
Nothing runs with the admin certificate but the test itself (the user).

The core scenarios of test_gangs.py run here unchanged (imported, with this
module's fixtures). The webhook runs with self-managed TLS and short certificate
lifetimes, so its certificates (and CA) rotate many times during this module,
and every test doubles as a check that admission keeps working across rotations.
The last tests upgrade and uninstall the release.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from devcluster import runas
from devcluster.installed import NAMESPACE, InstalledCluster, Release
from devcluster.nodes import NodeShape
from pyextender.api.names import (
    ENABLED_LABEL,
    GANG_GATE,
    GROUP_NAME_ANNOTATION,
    OWN_PODGROUP_ANNOTATION,
    POD_QUEUE_ANNOTATION,
)
from tests.e2e.conftest import Env
from tests.e2e.kube import (
    GROUP,
    bound,
    bound_of,
    condition,
    events_for,
    pod,
    podgroup,
    queue,
    read_podgroup,
    wait_for,
)
from tests.e2e.test_gangs import (  # the core scenarios, run against the installed system
    test_gang_all_or_nothing,
    test_priority_preemption_evicts_victim_gangs_whole,
    test_queue_weights_converge_and_capability_holds,
    test_two_gangs_that_fit_alone_but_not_together,
)
from tests.e2e.waits import Sampler

pytestmark = pytest.mark.e2e

__all__ = [
    "test_gang_all_or_nothing",
    "test_priority_preemption_evicts_victim_gangs_whole",
    "test_queue_weights_converge_and_capability_holds",
    "test_two_gangs_that_fit_alone_but_not_together",
]

# Short enough that the rotation test sees two renewals and a new CA, long enough
# that a renewal due at a third of the lifetime left survives a stall of the loaded
# 2-core CI machine (24 s / 60 s let a serving certificate lapse once, right after
# the helm upgrade restarted the webhooks).
CERT_VALIDITY_S = 45
CA_VALIDITY_S = 90
"""Short lifetimes: the serving certificate renews every ~16 s, the CA every ~40 s."""

VALUES: dict[str, Any] = {
    "logLevel": "info",
    # one scheduler pod and one controllers pod: the machine is small; the webhook
    # keeps its two replicas (rotation is judged across both)
    "scheduler": {"replicas": 1},
    "controllers": {"replicas": 1},
    "webhook": {
        "replicas": 2,
        "tls": {
            "caValidity": f"{CA_VALIDITY_S}s",
            "certValidity": f"{CERT_VALIDITY_S}s",
            "syncPeriod": 1,
        },
    },
}

_ns = itertools.count()
timings: dict[str, float] = {}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Release]:
    root: Path = tmp_path_factory.mktemp("installed")
    c = InstalledCluster(f"inst-{os.getpid()}", root=root, mode="scheduler")
    c.up(nodes=2, shape=NodeShape(cpu="32", memory="256Gi", gpus=8))
    release = Release(c, VALUES)
    try:
        start = time.monotonic()
        release.install()
        timings["helm_install_s"] = time.monotonic() - start
        release.run_components()
        timings["components_ready_s"] = time.monotonic() - start
        _first_gang(release)
        timings["install_to_first_gang_s"] = time.monotonic() - start
        print(f"\ninstalled system timings: {timings}")
        yield release
    finally:
        c.down(quiet=True)


def _admin(release: Release) -> client.ApiClient:
    st = release.cluster.state
    assert st is not None
    cfg = client.Configuration()
    config.load_kube_config(config_file=st.kubeconfig, client_configuration=cfg)
    return client.ApiClient(cfg)


def _adopted_namespace(core: client.CoreV1Api, prefix: str) -> str:
    name = f"{prefix}-{next(_ns)}"
    core.create_namespace({"metadata": {"name": name, "labels": {ENABLED_LABEL: "true"}}})
    return name


def _member(namespace: str, group: str, i: int, gpus: int) -> dict[str, Any]:
    """A gang member as a user writes it: no gate, default scheduler (the webhook decides)."""
    m = pod(f"{group}-{i}", namespace, gpus=gpus, scheduler="")
    del m["spec"]["schedulerName"]
    m["metadata"]["annotations"] = {GROUP_NAME_ANNOTATION: group}
    return m


def _first_gang(release: Release) -> None:
    api = _admin(release)
    core = client.CoreV1Api(api)
    ns = _adopted_namespace(core, "first")
    podgroup(api, ns, "first", 2, "default", None)
    for i in range(2):
        core.create_namespaced_pod(ns, _member(ns, "first", i, gpus=1))
    wait_for("the first gang bound", lambda: len(bound(core, ns)) == 2, timeout=120)
    # the scenarios below expect empty nodes
    core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    wait_for("the first gang gone", lambda: not core.list_namespaced_pod(ns).items)


# -- fixtures the imported scenarios use (they override conftest's session cluster) ------


@pytest.fixture(scope="module")
def api(installed: Release) -> client.ApiClient:
    return _admin(installed)


@pytest.fixture(scope="module")
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture
def sidecar(installed: Release) -> str:
    """The extender URL of the (single) scheduler pod's sidecar: its pod address."""
    return f"http://{installed.pod('scheduler').ip}:8888"


@pytest.fixture
def namespace(core: client.CoreV1Api, api: client.ApiClient) -> Iterator[str]:
    """A fresh, not adopted namespace (the scenarios create their pods gated themselves)."""
    name = f"s{os.getpid()}-{next(_ns)}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    client.CustomObjectsApi(api).delete_collection_namespaced_custom_object(
        "scheduling.volcano.sh", "v1beta1", name, "podgroups"
    )
    core.delete_collection_namespaced_pod(name, grace_period_seconds=0)


@pytest.fixture
def env(
    installed: Release, api: client.ApiClient, core: client.CoreV1Api, namespace: str, sidecar: str
) -> Env:
    """What the imported scenarios take: here, the installed system (one mode)."""
    return Env("installed", installed.cluster, api, core, namespace, sidecar)


# -- the install itself ------------------------------------------------------------------


def test_components_run_under_their_own_service_accounts(installed: Release) -> None:
    for component in ("scheduler", "controllers", "webhook"):
        for p in installed.pods[installed.deployment(component)["metadata"]["name"]]:
            assert p.alive() and p.ready()[0], p.name
            kc = (p.folder / "kubeconfig").read_text()
            assert f"system:serviceaccount:{NAMESPACE}:pyextender-{component}" in kc
            assert "client-certificate" not in kc and "token:" in kc
    sched = installed.pod("scheduler")
    argv = _argv(installed, sched.roles[0])
    assert argv[0].endswith("/kube-scheduler"), argv


def test_components_run_as_the_charts_non_root_user(installed: Release) -> None:
    """Every container runs as the chart's podSecurityContext says (65532:65532, no
    other group), as kubelet would start it, so nothing of ours may write outside its
    volumes; the sidecar loads its kernels from a copy, in its /tmp emptyDir, of the
    image's kernel cache, which it cannot write (pyextender/kernels/jit.py)."""
    if not runas.can_switch():
        pytest.skip("this test process is not root: local pods run as its own user")
    st = installed.cluster.state
    assert st is not None
    pods = [p for group in installed.pods.values() for p in group]
    for p in pods:
        if p.as_root_because:  # e.g. a checkout in a folder only root may enter
            pytest.skip(f"{p.name} runs as root here: {p.as_root_because}")
    roles = [role for p in pods for role in p.roles]
    for role in roles:
        fields = dict(
            line.split(":", 1)
            for line in Path(f"/proc/{st.pids[role]}/status").read_text().splitlines()
        )
        assert fields["Uid"].split() == ["65532"] * 4, (role, fields["Uid"])
        assert fields["Gid"].split() == ["65532"] * 4, (role, fields["Gid"])
        assert fields["Groups"].split() == [], (role, fields["Groups"])
    assert len(roles) >= 3  # webhook, controllers, sidecar (and the Pod's kube-scheduler)
    sched = installed.pod("scheduler")
    copy = sched.folder / "volumes" / "tmp" / "pyextender-numba-cache"
    loaded = [f for f in copy.rglob("*.nbi")]
    assert loaded, f"no kernel index in the sidecar's copy {copy}"
    sidecar_log = (Path(st.logs) / f"{sched.name}.sidecar.log").read_text()
    assert "is read-only: using a copy in" in sidecar_log
    assert "compiles without a cache" not in sidecar_log
    image_cache = runas.image_numba_cache()
    assert {f.stat().st_uid for f in image_cache.rglob("*")} == {0}  # never written by the pod


def _argv(release: Release, role: str) -> list[str]:
    st = release.cluster.state
    assert st is not None
    return Path(f"/proc/{st.pids[role]}/cmdline").read_bytes().decode().split("\0")[:-1]


def test_extender_listens_on_the_pod_loopback_only(installed: Release) -> None:
    """The sidecar's verbs are on the pod's own address (its 127.0.0.1); probes and
    metrics on the pod IP's metrics port; nothing else of the sidecar is reachable."""
    sched = installed.pod("scheduler")
    argv = _argv(installed, next(r for r in sched.roles if r.endswith(".sidecar")))
    assert f"--address={sched.ip}" in argv and f"--metrics-address={sched.ip}" in argv
    ports = {c["name"]: c.get("ports", []) for c in sched.spec["containers"]}
    assert [p["containerPort"] for p in ports["sidecar"]] == [8080]  # no extender port


def test_webhook_gates_and_routes_gang_pods_of_adopted_namespaces(
    installed: Release, core: client.CoreV1Api, api: client.ApiClient
) -> None:
    ns = _adopted_namespace(core, "adopt")
    podgroup(api, ns, "big", 4, "default", None)
    for i in range(4):  # 4 x 8 GPUs never fit 2 x 8: the gate stays
        core.create_namespaced_pod(ns, _member(ns, "big", i, gpus=8))
    p = core.read_namespaced_pod("big-0", ns)
    assert p.spec.scheduler_name == "volcano"
    assert [g.name for g in p.spec.scheduling_gates] == [GANG_GATE]


def _podgroup_if_any(api: client.ApiClient, ns: str, name: str) -> dict[str, Any] | None:
    try:
        return read_podgroup(api, ns, name)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def _bare_pod_in_a_capped_queue(core: client.CoreV1Api, api: client.ApiClient, ns: str) -> Any:
    """Pod ``big`` (2 CPUs, schedulerName volcano, no PodGroup) in a new queue capped at
    100m CPU; returns the pod as created (what the webhook made of it) once its PodGroup
    exists and names the capped queue as why it is not admitted."""
    tiny = f"tiny{ns.replace('-', '')}"
    queue(api, tiny, capability={"cpu": "100m"})
    big = pod("big", ns, cpu="2")
    big["metadata"]["annotations"] = {POD_QUEUE_ANNOTATION: tiny}
    core.create_namespaced_pod(ns, big)
    created = core.read_namespaced_pod("big", ns)
    # the webhook named its own PodGroup in its creation (its uid is not known then)
    annotations = created.metadata.annotations
    group = annotations.get(GROUP_NAME_ANNOTATION)
    assert group and group.startswith("podgroup-") and group != f"podgroup-{created.metadata.uid}"
    assert annotations.get(OWN_PODGROUP_ANNOTATION) == "true"
    pg = wait_for(  # the PodGroup controller makes it, owned by the pod
        "the pod's own PodGroup made",
        lambda: _podgroup_if_any(api, ns, group),
        timeout=30,
    )
    assert [(o["kind"], o["uid"]) for o in pg["metadata"]["ownerReferences"]] == [
        ("Pod", created.metadata.uid)
    ]
    assert core.read_namespaced_pod("big", ns).metadata.resource_version == (
        created.metadata.resource_version
    ), "the pod was written to after its creation"
    wait_for(
        "the capped queue named on the held pod's PodGroup",
        lambda: f'queue "{tiny}" capability exceeded' in condition(api, ns, group, "Unschedulable"),
        timeout=30,
    )
    return created


def _raise_the_cap_and_see_it_bound(core: client.CoreV1Api, api: client.ApiClient, ns: str) -> None:
    tiny = f"tiny{ns.replace('-', '')}"
    client.CustomObjectsApi(api).patch_cluster_custom_object(
        *GROUP, "queues", tiny, {"spec": {"capability": {"cpu": "4"}}}
    )
    wait_for("the pod bound once its queue has room", lambda: "big" in bound(core, ns), timeout=60)


def test_a_bare_pod_waits_for_its_queue_as_with_volcano(
    installed: Release, core: client.CoreV1Api, api: client.ApiClient
) -> None:
    """A pod that names volcano and no PodGroup gets one of its own, and runs only once
    its queue admits it: here a queue capped at 100m CPU holds a 2-CPU pod (gated, the
    PodGroup saying why) while a pod of the default queue runs, until the cap is raised.
    Before the webhook held such pods, this one ran at once, its queue at 20x its cap."""
    ns = _adopted_namespace(core, "bare")
    sampler = Sampler(lambda: int("big" in bound(core, ns)))
    core.create_namespaced_pod(ns, pod("small", ns, cpu="1"))
    created = _bare_pod_in_a_capped_queue(core, api, ns)
    assert [g.name for g in created.spec.scheduling_gates or []] == [GANG_GATE]
    wait_for("the default queue's bare pod bound", lambda: "small" in bound(core, ns), timeout=60)
    held = core.read_namespaced_pod("big", ns)
    assert [g.name for g in held.spec.scheduling_gates] == [GANG_GATE]
    assert max(sampler.close()) == 0, "the pod ran past its queue's capability"
    _raise_the_cap_and_see_it_bound(core, api, ns)


def _explain_pod(installed: Release, ns: str, name: str) -> str:
    """What ``vcctl explain -n NS pod NAME`` prints on the installed cluster."""
    st = installed.cluster.state
    assert st is not None
    return subprocess.run(
        [sys.executable, "-m", "pyextender.vcctl", f"--kubeconfig={st.kubeconfig}",
         "explain", "-n", ns, "pod", name],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip


def test_a_bare_pod_naming_a_missing_queue_is_told_why_it_waits(
    installed: Release, core: client.CoreV1Api, api: client.ApiClient
) -> None:
    """Its PodGroup names the queue of its annotation; our webhook refuses a PodGroup of a
    queue that does not exist. The pod stays held and gets a Warning with the refusal
    (only the controllers' log said so before); once the queue exists, the retried
    create goes through and the pod runs."""
    ns = _adopted_namespace(core, "noqueue")
    missing = f"later{ns.replace('-', '')}"
    lost = pod("lost", ns, cpu="100m")
    lost["metadata"]["annotations"] = {POD_QUEUE_ANNOTATION: missing}
    core.create_namespaced_pod(ns, lost)
    warned = wait_for(
        "a FailedCreatePodGroup warning on the pod",
        lambda: [e for e in events_for(core, ns, "lost") if e.startswith("FailedCreatePodGroup")],
        timeout=30,
    )
    assert f'queue "{missing}" does not exist' in warned[0], warned
    held = core.read_namespaced_pod("lost", ns)
    assert [g.name for g in held.spec.scheduling_gates] == [GANG_GATE]
    explained = _explain_pod(installed, ns, "lost")
    assert "event Warning FailedCreatePodGroup: cannot create its PodGroup" in explained
    assert "not found (the pod's own, not made yet" in explained, explained
    queue(api, missing)
    wait_for("the pod bound once its queue exists", lambda: "lost" in bound(core, ns), timeout=60)


def _namespace_user(api: client.ApiClient, ns: str, user: str = "alice") -> client.ApiClient:
    """The admin's connection impersonating ``user``, who may read and update pods in
    ``ns``, as a team member may. (A Role of our own: the built-in ``edit`` is filled in
    by kube-controller-manager's aggregation, which a devcluster does not run.)"""
    rbac = client.RbacAuthorizationV1Api(api)
    rbac.create_namespaced_role(
        ns,
        {
            "metadata": {"name": "pod-editor"},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["pods"],
                    "verbs": ["get", "list", "patch", "update"],
                }
            ],
        },
    )
    rbac.create_namespaced_role_binding(
        ns,
        {
            "metadata": {"name": f"{user}-pod-editor"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "pod-editor",
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        },
    )
    as_user = client.ApiClient(api.configuration)
    as_user.set_default_header("Impersonate-User", user)
    as_user.set_default_header("Impersonate-Group", "system:authenticated")
    review = {
        "spec": {"resourceAttributes": {"verb": "patch", "resource": "pods", "namespace": ns}}
    }
    wait_for(  # the authorizer's informer sees a new RoleBinding a moment later
        f"{user} allowed to patch pods in {ns}",
        lambda: (
            client.AuthorizationV1Api(as_user)
            .create_self_subject_access_review(review)
            .status.allowed
        ),
        timeout=30,
    )
    return as_user


def _lifting_the_hold_by_hand_is_refused(
    api: client.ApiClient, ns: str, name: str, lift: list[dict[str, Any]]
) -> None:
    """A namespace user who may edit pod ``name`` tries the JSON patch ``lift`` (removing
    our gate or barrier annotation): the chart's hold policy refuses it, naming the
    permission it takes. Another change to the same pod goes through, so the refusal is
    the policy's, not RBAC's."""
    pods = client.CoreV1Api(_namespace_user(api, ns))
    with pytest.raises(client.ApiException) as refused:
        pods.patch_namespaced_pod(name, ns, lift)
    assert refused.value.status == 403, refused.value
    said = json.loads(refused.value.body)["message"]
    assert "alice may not lift pyextender's hold on this pod" in said, said
    assert f'the verb "release" on podgroups.scheduling.volcano.sh in namespace {ns}' in said
    pods.patch_namespaced_pod(name, ns, {"metadata": {"labels": {"touched-by": "alice"}}})


def test_only_pyextender_lifts_its_hold(
    installed: Release, core: client.CoreV1Api, api: client.ApiClient
) -> None:
    """Anyone who may update a pod may remove a scheduling gate. Before the hold policy,
    a team member could start a pod past its queue by removing ours (a 2-CPU pod in a
    queue capped at 100m CPU ran at once). Now the API server refuses it, the pod stays
    held, and the sidecar (its ServiceAccount has the verb) still lifts it once the
    queue has room."""
    ns = _adopted_namespace(core, "hold")
    _bare_pod_in_a_capped_queue(core, api, ns)
    _lifting_the_hold_by_hand_is_refused(
        api, ns, "big", [{"op": "remove", "path": "/spec/schedulingGates/0"}]
    )
    held = core.read_namespaced_pod("big", ns)
    assert [g.name for g in held.spec.scheduling_gates] == [GANG_GATE]
    assert held.metadata.labels["touched-by"] == "alice"
    _raise_the_cap_and_see_it_bound(core, api, ns)


def _replicaset(
    api: client.ApiClient,
    core: client.CoreV1Api,
    ns: str,
    name: str,
    replicas: int,
    annotations: dict[str, str] | None = None,
    created: list[Any] | None = None,
) -> str:
    """A ReplicaSet naming volcano and its pods, created by hand as its controller
    would (the devcluster runs no controller-manager); returns its uid. The pods as
    their creation returned them go to ``created``."""
    labels = {"app": name}
    template = {
        "metadata": {"labels": labels},
        "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "busybox"}]},
    }
    rs = client.AppsV1Api(api).create_namespaced_replica_set(
        ns,
        {
            "metadata": {"name": name, "annotations": annotations or {}},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": labels},
                "template": template,
            },
        },
    )
    owner = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": name,
        "uid": rs.metadata.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    for i in range(replicas):
        body = pod(f"{name}-{i}", ns, cpu="1")
        body["metadata"].update(labels=labels, ownerReferences=[owner])
        made = core.create_namespaced_pod(ns, body)
        if created is not None:
            created.append(made)
    return str(rs.metadata.uid)


def test_a_replicasets_bare_pods_share_one_podgroup_and_all_run(
    installed: Release, core: client.CoreV1Api, api: client.ApiClient
) -> None:
    """Pods of one ReplicaSet that name volcano share ``podgroup-<its uid>`` (minMember 1,
    as Volcano's PodGroup controller makes it): the PodGroup is admitted on one pod's
    worth and every replica is let in as it fits (members beyond minMember), not only
    the first."""
    ns = _adopted_namespace(core, "replicas")
    uid = _replicaset(api, core, ns, "web", 3)
    wait_for("every replica bound", lambda: len(bound(core, ns)) == 3, timeout=60)
    groups = {
        p.metadata.annotations[GROUP_NAME_ANNOTATION] for p in core.list_namespaced_pod(ns).items
    }
    assert groups == {f"podgroup-{uid}"}


def test_a_replicasets_pods_name_their_podgroup_from_creation(
    installed: Release, core: client.CoreV1Api, api: client.ApiClient
) -> None:
    """The webhook names an owned pod's PodGroup (``podgroup-<owner uid>``) in the pod's
    own creation, so the PodGroup controller only creates the PodGroup: no write to each
    pod (Volcano's controller patches the annotation onto every pod after its creation,
    which kept replicas from their owner's PodGroup until it landed)."""
    ns = _adopted_namespace(core, "named")
    created: list[Any] = []
    uid = _replicaset(api, core, ns, "web", 2, created=created)
    group = f"podgroup-{uid}"
    assert [(p.metadata.annotations or {}).get(GROUP_NAME_ANNOTATION) for p in created] == [
        group,
        group,
    ]
    wait_for("both replicas bound", lambda: len(bound(core, ns)) == 2, timeout=60)
    pg = client.CustomObjectsApi(api).get_namespaced_custom_object(
        "scheduling.volcano.sh", "v1beta1", ns, "podgroups", group
    )
    assert [r["uid"] for r in pg["metadata"]["ownerReferences"]] == [uid]


def test_replicas_run_while_new_podgroups_keep_arriving(
    installed: Release, core: client.CoreV1Api, api: client.ApiClient
) -> None:
    """Bare pods arrive one every 0.7 s, each with a PodGroup of its own, while a
    ReplicaSet's three pods wait: replicas beyond its minMember (1) must not wait for a
    pause in new PodGroups, which may never come. They run once they have waited out
    the newcomer grace (3 s), while the stream goes on."""
    ns = _adopted_namespace(core, "stream")
    stop = threading.Event()

    def stream() -> None:
        for i in itertools.count():
            if stop.wait(0.7):
                return
            core.create_namespaced_pod(ns, pod(f"bare-{i}", ns, cpu="100m"))

    streamer = threading.Thread(target=stream, daemon=True)
    streamer.start()
    try:
        time.sleep(2.0)  # the stream is on before the ReplicaSet comes
        _replicaset(api, core, ns, "web", 3)
        wait_for(
            "every replica bound while bare pods keep coming",
            lambda: len([n for n in bound(core, ns) if n.startswith("web-")]) == 3,
            timeout=20,
        )
        assert streamer.is_alive()
        bare = [n for n in bound(core, ns) if n.startswith("bare-")]
        assert len(bare) >= 3, bare  # the stream's own pods ran meanwhile
    finally:
        stop.set()
        streamer.join(timeout=10)


def test_a_statefulset_that_cannot_fill_its_gang_says_why(
    installed: Release, core: client.CoreV1Api, api: client.ApiClient
) -> None:
    """A StatefulSet asks for a gang of 2 (group-min-member) but makes its pods one at a
    time (OrderedReady, the default): pod 0 is held for a gang that can never fill, as
    with Volcano, and a Warning on the pod says why and what to change."""
    ns = _adopted_namespace(core, "ordered")
    labels = {"app": "db"}
    sts = client.AppsV1Api(api).create_namespaced_stateful_set(
        ns,
        {
            "metadata": {
                "name": "db",
                "annotations": {"scheduling.volcano.sh/group-min-member": "2"},
            },
            "spec": {
                "replicas": 2,
                "serviceName": "db",
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "schedulerName": "volcano",
                        "containers": [{"name": "c", "image": "busybox"}],
                    },
                },
            },
        },
    )
    body = pod("db-0", ns, cpu="100m")  # what its controller would make first
    owner = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db",
             "uid": sts.metadata.uid, "controller": True}  # fmt: skip
    body["metadata"].update(labels=labels, ownerReferences=[owner])
    core.create_namespaced_pod(ns, body)
    warned = wait_for(
        "a MinMemberUnreachable event on db-0",
        lambda: [e for e in events_for(core, ns, "db-0") if e.startswith("MinMemberUnreachable")],
        timeout=30,
    )
    assert "podManagementPolicy: Parallel" in warned[0], warned
    held = core.read_namespaced_pod("db-0", ns)
    assert GANG_GATE in [g.name for g in held.spec.scheduling_gates or []]
    assert not held.spec.node_name
    # what a user asks first: vcctl explain shows the Warning on the pod and its PodGroup
    explained = _explain_pod(installed, ns, "db-0")
    assert explained.count("event Warning MinMemberUnreachable: StatefulSet db") == 2, explained


def test_a_replicaset_scaled_below_its_min_member_says_so(
    installed: Release, core: client.CoreV1Api, api: client.ApiClient
) -> None:
    """A ReplicaSet with group-min-member 2 runs its gang of two; scaled to one replica,
    its PodGroup can never gather two members again (a pod of it that is replaced waits
    for ever, as with Volcano): a Warning on the PodGroup says so, once, however often
    the ReplicaSet changes after that."""
    ns = _adopted_namespace(core, "scaled")
    min_member = {"scheduling.volcano.sh/group-min-member": "2"}
    uid = _replicaset(api, core, ns, "web", 2, annotations=min_member)
    wait_for(
        "both replicas bound",
        lambda: all(core.read_namespaced_pod(f"web-{i}", ns).spec.node_name for i in range(2)),
        timeout=30,
    )
    group = f"podgroup-{uid}"
    assert not [e for e in events_for(core, ns, group) if "MinMemberUnreachable" in e]
    apps = client.AppsV1Api(api)
    apps.patch_namespaced_replica_set("web", ns, {"spec": {"replicas": 1}})
    warned = wait_for(
        f"a MinMemberUnreachable event on {group}",
        lambda: [e for e in events_for(core, ns, group) if e.startswith("MinMemberUnreachable")],
        timeout=30,
    )
    assert "ReplicaSet web has 1 replicas, fewer than" in warned[0], warned
    assert "scale it to 2 or more" in warned[0], warned
    # more changes to the ReplicaSet (its controller writes status often): no repeats
    for n in range(3):
        apps.patch_namespaced_replica_set("web", ns, {"metadata": {"labels": {"edit": str(n)}}})
    time.sleep(3)
    evs = core.list_namespaced_event(
        ns, field_selector=f"involvedObject.name={group},reason=MinMemberUnreachable"
    ).items
    assert len(evs) == 1 and (evs[0].count or 1) == 1, [(e.message, e.count) for e in evs]


def test_webhook_validates_volcano_objects(api: client.ApiClient, installed: Release) -> None:
    co = client.CustomObjectsApi(api)
    body = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "bad-deserved"},
        "spec": {"capability": {"cpu": "1"}, "deserved": {"cpu": "2"}},
    }
    with pytest.raises(client.ApiException) as err:
        co.create_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", body)
    assert err.value.status == 422
    assert "deserved[cpu]=2 must be" in json.loads(err.value.body)["message"]


def test_webhook_fills_volcano_job_defaults(api: client.ApiClient, installed: Release) -> None:
    """The chart registers the defaults webhook (Volcano's mutate_job.go): an unnamed task
    becomes default0 before validation sees it."""
    co = client.CustomObjectsApi(api)
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "unnamed"},
        "spec": {
            "tasks": [
                {"replicas": 2, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}
            ]
        },
    }
    made = co.create_namespaced_custom_object(
        "batch.volcano.sh", "v1alpha1", "default", "jobs", job, dry_run="All"
    )
    assert made["spec"]["tasks"][0]["name"] == "default0"
    assert made["spec"]["minAvailable"] == 2 and made["spec"]["schedulerName"] == "volcano"


def test_volcano_job_from_submit_to_completion(
    installed: Release, core: client.CoreV1Api, api: client.ApiClient
) -> None:
    ns = _adopted_namespace(core, "vcjob")
    co = client.CustomObjectsApi(api)
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "train"},
        "spec": {
            "minAvailable": 3,
            "schedulerName": "volcano",
            "tasks": [
                {
                    "name": "worker",
                    "replicas": 3,
                    "template": {
                        # kwok ends the pods 1 s after they start (devcluster/kwok_stages.py)
                        "metadata": {"annotations": {"pyextender.io/simulated-duration": "1s"}},
                        "spec": {
                            "terminationGracePeriodSeconds": 0,
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "busybox",
                                    "resources": {
                                        "requests": {"cpu": "1", "nvidia.com/gpu": "1"},
                                        "limits": {"nvidia.com/gpu": "1"},
                                    },
                                }
                            ],
                        },
                    },
                }
            ],
        },
    }
    co.create_namespaced_custom_object("batch.volcano.sh", "v1alpha1", ns, "jobs", job)

    def phase() -> str:
        got = co.get_namespaced_custom_object("batch.volcano.sh", "v1alpha1", ns, "jobs", "train")
        return str(((got.get("status") or {}).get("state") or {}).get("phase", ""))

    wait_for("the Job Completed", lambda: phase() == "Completed", timeout=120)
    done = [p for p in core.list_namespaced_pod(ns).items if p.spec.node_name]
    assert len(done) == 3 and all(p.spec.scheduler_name == "volcano" for p in done)


def test_certificates_rotate_without_a_failed_create(
    installed: Release, core: client.CoreV1Api, api: client.ApiClient
) -> None:
    """Gang pods are created non-stop through two serving-certificate renewals
    (one with a new CA); every create is admitted and mutated."""
    ns = _adopted_namespace(core, "rotate")
    podgroup(api, ns, "never", 1000, "default", None)  # never admitted: pods stay gated
    hooks = [p for p in installed.pods[installed.deployment("webhook")["metadata"]["name"]]]
    seen: dict[str, set[int]] = {p.ip: set() for p in hooks}
    cas: set[str] = set()
    failures: list[str] = []
    created = 0
    stop = threading.Event()

    def watch_certs() -> None:
        while not stop.is_set():
            for p in hooks:
                serial, issuer = _served_cert(p.ip, 9443)
                seen[p.ip].add(serial)
                cas.add(issuer)
            time.sleep(0.5)

    t = threading.Thread(target=watch_certs, daemon=True)
    t.start()
    deadline = time.monotonic() + CA_VALIDITY_S * 1.2
    i = 0
    while time.monotonic() < deadline:
        try:
            created_pod = core.create_namespaced_pod(ns, _member(ns, "never", i, gpus=1))
            created += 1
            if [g.name for g in created_pod.spec.scheduling_gates or []] != [GANG_GATE]:
                failures.append(f"pod {i} not gated")
        except client.ApiException as exc:
            failures.append(f"pod {i}: {exc.status} {exc.body}")
        i += 1
        time.sleep(0.2)
    stop.set()
    t.join(5)
    assert not failures, failures[:5]
    assert created > 50
    assert all(len(s) >= 3 for s in seen.values()), seen  # two renewals each, at least
    assert len(cas) >= 2, cas  # the CA was replaced too


def _served_cert(ip: str, port: int) -> tuple[int, str]:
    from cryptography import x509

    ctx = ssl._create_unverified_context()
    with socket.create_connection((ip, port), timeout=2) as s, ctx.wrap_socket(s) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    cert = x509.load_der_x509_certificate(der)
    return cert.serial_number, cert.issuer.rfc4514_string()


def test_removing_the_adoption_label_releases_gated_pods(
    installed: Release, core: client.CoreV1Api, api: client.ApiClient
) -> None:
    ns = _adopted_namespace(core, "unadopt")
    podgroup(api, ns, "stuck", 10, "default", None)
    for i in range(3):
        core.create_namespaced_pod(ns, _member(ns, "stuck", i, gpus=8))
    assert all(p.spec.scheduling_gates for p in core.list_namespaced_pod(ns).items)
    core.patch_namespace(ns, {"metadata": {"labels": {ENABLED_LABEL: None}}})

    def released() -> bool:
        return not any(p.spec.scheduling_gates for p in core.list_namespaced_pod(ns).items)

    wait_for("gates lifted after the label went", released, timeout=30)


def _can(api: client.ApiClient, sa: str, verb: str, resource: str, **extra: str) -> bool:
    """The real authorizer's answer for ServiceAccount ``sa`` of the release."""
    attrs = {"verb": verb, "resource": resource, **extra}
    review = client.AuthorizationV1Api(api).create_subject_access_review(
        {
            "spec": {
                "user": f"system:serviceaccount:{NAMESPACE}:{sa}",
                "groups": ["system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}"],
                "resourceAttributes": attrs,
            }
        }
    )
    return bool(review.status.allowed)


@pytest.mark.parametrize(
    ("sa", "verb", "resource", "extra", "allowed"),
    [
        ("pyextender-webhook", "get", "queues", {"group": "scheduling.volcano.sh"}, True),
        ("pyextender-webhook", "list", "pods", {}, False),
        ("pyextender-webhook", "get", "secrets", {"namespace": "kube-system"}, False),
        ("pyextender-webhook", "get", "secrets", {"namespace": NAMESPACE, "name": "other"}, False),
        (
            "pyextender-webhook",
            "update",
            "secrets",
            {"namespace": NAMESPACE, "name": "pyextender-webhook-tls"},
            True,
        ),
        ("pyextender-controllers", "create", "pods", {"namespace": "x"}, True),
        ("pyextender-controllers", "create", "bindings", {"namespace": "x"}, False),
        ("pyextender-controllers", "get", "secrets", {"namespace": "x"}, False),
        ("pyextender-scheduler", "create", "pods/eviction", {"namespace": "x"}, True),
        ("pyextender-scheduler", "patch", "nodes", {}, False),
        ("pyextender-scheduler", "get", "secrets", {"namespace": "x"}, False),
        (
            "pyextender-scheduler",
            "update",
            "leases",
            {"group": "coordination.k8s.io", "namespace": "kube-system", "name": "kube-scheduler"},
            True,  # upstream system:kube-scheduler grants it; our config never uses it
        ),
        ("pyextender-scheduler", "delete", "jobs", {"group": "batch.volcano.sh"}, False),
        # the hold policy's verb: the components that lift our hold have it, no other
        ("pyextender-scheduler", "release", "podgroups", {"group": "scheduling.volcano.sh"}, True),
        (
            "pyextender-controllers",
            "release",
            "podgroups",
            {"group": "scheduling.volcano.sh"},
            True,
        ),
        ("pyextender-webhook", "release", "podgroups", {"group": "scheduling.volcano.sh"}, False),
    ],
)
def test_least_privilege_as_the_api_server_sees_it(
    installed: Release,
    api: client.ApiClient,
    sa: str,
    verb: str,
    resource: str,
    extra: dict[str, str],
    allowed: bool,
) -> None:
    sub = ""
    if "/" in resource:
        resource, sub = resource.split("/", 1)
    attrs = {**extra, **({"subresource": sub} if sub else {})}
    assert _can(api, sa, verb, resource, **attrs) is allowed


def test_no_component_was_refused_by_rbac(installed: Release) -> None:
    """Every API call each component made so far was allowed: RBAC denials read
    "forbidden" in every component's log (Python: 403 Forbidden; Go: ... is forbidden)."""
    st = installed.cluster.state
    assert st is not None
    refused = []
    for pods in installed.pods.values():
        for p in pods:
            for role in p.roles:
                text = (Path(st.logs) / f"{role}.log").read_text(errors="replace")
                refused += [
                    f"{role}: {line[:300]}"
                    for line in text.splitlines()
                    if re.search(r"forbidden", line, re.IGNORECASE)
                ]
    assert not refused, "\n".join(refused[:20])


def test_helm_upgrade_keeps_queues_jobs_and_running_gangs(
    installed: Release, core: client.CoreV1Api, api: client.ApiClient
) -> None:
    ns = _adopted_namespace(core, "upgrade")
    co = client.CustomObjectsApi(api)
    co.create_cluster_custom_object(
        "scheduling.volcano.sh",
        "v1beta1",
        "queues",
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": f"keep-{ns}"},
            "spec": {"weight": 2},
        },
    )
    podgroup(api, ns, "running", 2, "default", None)
    for i in range(2):
        core.create_namespaced_pod(ns, _member(ns, "running", i, gpus=1))
    names = ["running-0", "running-1"]
    wait_for("the gang bound", lambda: bound_of(core, ns, names) == 2, timeout=60)
    nodes = bound(core, ns)
    secret = core.read_namespaced_secret("pyextender-webhook-tls", NAMESPACE).data
    values = {**VALUES, "logLevel": "debug", "queues": {"default": {"weight": 3}}}
    installed.upgrade(values)
    assert bound(core, ns) == nodes  # the running gang was not touched
    co.get_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", f"keep-{ns}")
    kept = core.read_namespaced_secret("pyextender-webhook-tls", NAMESPACE).data
    assert kept and set(kept) >= {"ca.crt", "tls.crt"} and secret  # certificates kept
    # the upgraded system keeps scheduling gangs
    podgroup(api, ns, "after", 2, "default", None)
    for i in range(2):
        core.create_namespaced_pod(ns, _member(ns, "after", i, gpus=1))
    wait_for(
        "a gang bound after the upgrade",
        lambda: bound_of(core, ns, ["after-0", "after-1"]) == 2,
        timeout=120,
    )


def test_helm_uninstall_leaves_no_gated_pod(
    installed: Release, core: client.CoreV1Api, api: client.ApiClient
) -> None:
    ns = _adopted_namespace(core, "uninstall")
    podgroup(api, ns, "waiting", 10, "default", None)
    for i in range(3):
        core.create_namespaced_pod(ns, _member(ns, "waiting", i, gpus=8))
    gated = [p for p in core.list_pod_for_all_namespaces().items if p.spec.scheduling_gates]
    assert len(gated) >= 3
    installed.uninstall()
    left = [
        f"{p.metadata.namespace}/{p.metadata.name}"
        for p in core.list_pod_for_all_namespaces().items
        if any(g.name == GANG_GATE for g in p.spec.scheduling_gates or [])
    ]
    assert not left, left
    # volcano goes away with the release: unbound pods that named it are now the
    # default scheduler's (bare pods recreated as they were)
    stranded = [
        f"{p.metadata.namespace}/{p.metadata.name}"
        for p in core.list_pod_for_all_namespaces().items
        if p.spec.scheduler_name == "volcano" and not p.spec.node_name
    ]
    assert not stranded, stranded[:10]
    waiting = core.read_namespaced_pod("waiting-0", ns)
    assert waiting.spec.scheduler_name == "default-scheduler"
    assert GROUP_NAME_ANNOTATION in waiting.metadata.annotations
    reg = client.AdmissionregistrationV1Api(api)
    mutating = [c.metadata.name for c in reg.list_mutating_webhook_configuration().items]
    assert "pyextender-webhook" not in mutating
