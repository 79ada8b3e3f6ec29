"""Volcano Job plugins on a real cluster: the objects the controllers create, and each
pod's hostname, environment and mounted files as its kubelet would resolve them
(ConfigMap and Secret volumes with items and subPath, configMapKeyRef variables),
read back from the API server. Unknown plugins and arguments are refused by the
webhook naming the field.

Jobs use default-scheduler; the tests lift the gang gate themselves (the sidecar of
the shared cluster may lift it first). Pods run on kwok until deleted.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from kubernetes import client

from pyextender.api import names
from tests.e2e.kube import wait_for

pytestmark = pytest.mark.e2e

JOBS = ("batch.volcano.sh", "v1alpha1", "jobs")
MERGE = "application/merge-patch+json"


def job_body(name: str, plugins: dict[str, list[str]], tasks: dict[str, int]) -> dict[str, Any]:
    template = {
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}
            ],
            "initContainers": [{"name": "init", "image": "busybox"}],
        }
    }
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "minAvailable": 1,
            "schedulerName": "default-scheduler",
            "plugins": plugins,
            "tasks": [{"name": t, "replicas": n, "template": template} for t, n in tasks.items()],
        },
    }


def run_job(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str, body: dict[str, Any]
) -> list[Any]:
    """Create the job, lift the gates, and return its pods once all run (by name)."""
    co.create_namespaced_custom_object(*JOBS[:2], ns, JOBS[2], body)
    want = sum(t["replicas"] for t in body["spec"]["tasks"])
    return running_pods(core, ns, body["metadata"]["name"], want)


def running_pods(core: client.CoreV1Api, ns: str, job: str, want: int) -> list[Any]:
    def ready() -> list[Any] | None:
        pods = [
            p
            for p in core.list_namespaced_pod(
                ns, label_selector=f"{names.VOLCANO_JOB_NAME}={job}"
            ).items
            if not p.metadata.deletion_timestamp
        ]
        for p in pods:
            if p.spec.scheduling_gates:
                core.patch_namespaced_pod(
                    p.metadata.name, ns, {"spec": {"schedulingGates": None}}, _content_type=MERGE
                )
        if len(pods) == want and all(p.status.phase == "Running" for p in pods):
            return sorted(pods, key=lambda p: str(p.metadata.name))
        return None

    return wait_for(f"{want} running pods of {job}", ready, timeout=60)


# -- what a kubelet would give the container ------------------------------------------
def _volume_files(core: client.CoreV1Api, ns: str, volume: Any) -> dict[str, str]:
    """Path inside the volume -> content, for ConfigMap and Secret volumes."""
    if volume.config_map is not None:
        data = core.read_namespaced_config_map(volume.config_map.name, ns).data or {}
        items = volume.config_map.items
    elif volume.secret is not None:
        raw = core.read_namespaced_secret(volume.secret.secret_name, ns).data or {}
        data = {k: base64.b64decode(v).decode() for k, v in raw.items()}
        items = volume.secret.items
    else:
        return {}
    if items:
        return {i.path: data[i.key] for i in items}
    return dict(data)


def files(core: client.CoreV1Api, pod: Any, directory: str, container: int = 0) -> dict[str, str]:
    """File name -> content of ``directory`` as mounted in the pod's container."""
    c = pod.spec.containers[container]
    volumes = {v.name: v for v in pod.spec.volumes or []}
    out: dict[str, str] = {}
    for m in c.volume_mounts or []:
        if m.mount_path != directory:
            continue
        prefix = f"{m.sub_path}/" if m.sub_path else ""
        for path, content in _volume_files(core, pod.metadata.namespace, volumes[m.name]).items():
            if path.startswith(prefix):
                out[path[len(prefix) :]] = content
    return out


def env(core: client.CoreV1Api, pod: Any, container: Any = None) -> dict[str, str]:
    """The container's variables, configMapKeyRef ones resolved."""
    c = container or pod.spec.containers[0]
    out: dict[str, str] = {}
    for e in c.env or []:
        if e.value_from is not None and e.value_from.config_map_key_ref is not None:
            ref = e.value_from.config_map_key_ref
            cm = core.read_namespaced_config_map(ref.name, pod.metadata.namespace)
            out[e.name] = (cm.data or {})[ref.key]
        else:
            out[e.name] = e.value
    return out


def fqdn(pod: Any) -> str:
    return f"{pod.spec.hostname}.{pod.spec.subdomain}"


def task_of(pod: Any) -> str:
    return str(pod.metadata.annotations[names.VOLCANO_TASK_SPEC])


# -- tests --------------------------------------------------------------------------
def test_mpi_job_pods_find_each_other_and_ssh_without_password(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    """Volcano's MPI example: the master reads /etc/volcano/mpiworker.host."""
    body = job_body(
        "lm",
        {"mpi": ["--master=mpimaster", "--worker=mpiworker"]},
        {"mpimaster": 1, "mpiworker": 2},
    )
    pods = run_job(co, core, ns, body)
    workers = [p for p in pods if task_of(p) == "mpiworker"]
    (master,) = [p for p in pods if task_of(p) == "mpimaster"]
    # svc and ssh came along with mpi
    svc = core.read_namespaced_service("lm", ns)
    assert svc.spec.cluster_ip == "None"
    selected = core.list_namespaced_pod(
        ns, label_selector=",".join(f"{k}={v}" for k, v in svc.spec.selector.items())
    ).items
    assert {p.metadata.name for p in selected} == {p.metadata.name for p in pods}
    policy = client.NetworkingV1Api(core.api_client).read_namespaced_network_policy("lm", ns)
    assert policy.spec.pod_selector.match_labels == svc.spec.selector
    for p in pods:
        assert p.spec.hostname == p.metadata.name and p.spec.subdomain == "lm"
        hosts = files(core, p, "/etc/volcano")
        assert hosts["mpiworker.host"].split("\n") == [fqdn(w) for w in workers]
        assert hosts["mpimaster.host"] == fqdn(master)
        variables = env(core, p)
        assert variables["VC_MPIWORKER_HOSTS"] == ",".join(fqdn(w) for w in workers)
        assert variables["VC_MPIWORKER_NUM"] == "2" and variables["VC_MPIMASTER_NUM"] == "1"
        for c in [*p.spec.containers, *p.spec.init_containers]:
            assert [(x.name, x.container_port) for x in c.ports] == [("mpijob-port", 22)]
            assert "VC_MPIWORKER_HOSTS" in env(core, p, c)
    # MPI_HOST on the master only, the same hosts as the host file
    assert env(core, master)["MPI_HOST"] == ",".join(fqdn(w) for w in workers)
    assert "MPI_HOST" not in env(core, workers[0])
    # one key pair, in every pod's /root/.ssh: the master can log in to every worker
    ssh = [files(core, p, "/root/.ssh") for p in pods]
    assert all(s == ssh[0] for s in ssh)
    assert set(ssh[0]) == {"id_rsa", "id_rsa.pub", "authorized_keys", "config"}
    secret = core.read_namespaced_secret("lm-ssh", ns)
    mode = next(v.secret.default_mode for v in master.spec.volumes if v.name == "lm-ssh")
    assert mode == 0o600 and secret.metadata.owner_references[0].kind == "Job"
    key = serialization.load_pem_private_key(ssh[0]["id_rsa"].encode(), password=None)
    assert isinstance(key, rsa.RSAPrivateKey)
    for line in ssh[0]["authorized_keys"].splitlines():
        public = serialization.load_ssh_public_key(line.encode())
        assert isinstance(public, rsa.RSAPublicKey)
        sig = key.sign(b"nonce", padding.PKCS1v15(), hashes.SHA256())
        public.verify(sig, b"nonce", padding.PKCS1v15(), hashes.SHA256())
    config = ssh[0]["config"]
    assert "StrictHostKeyChecking no" in config
    for p in pods:
        assert f"Host {p.spec.hostname}\n  HostName {fqdn(p)}\n" in config
    job = co.get_namespaced_custom_object(*JOBS[:2], ns, JOBS[2], "lm")
    assert job["status"]["controlledResources"] == {
        "plugin-svc": "svc",
        "plugin-ssh": "ssh",
        "plugin-mpi": "mpi",
    }


def test_pytorch_job_env_is_right(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    body = job_body(
        "pt",
        {"pytorch": ["--master=master", "--worker=worker", "--port=23456"]},
        {"master": 1, "worker": 2},
    )
    pods = run_job(co, core, ns, body)
    (master,) = [p for p in pods if task_of(p) == "master"]
    ranks = {}
    for p in pods:
        e = env(core, p)
        # the master's address is a pod of this job behind the job's headless Service
        assert e["MASTER_ADDR"] == fqdn(master) == "pt-master-0.pt"
        assert core.read_namespaced_service(master.spec.subdomain, ns).spec.cluster_ip == "None"
        assert e["MASTER_PORT"] == "23456" and e["WORLD_SIZE"] == "3"
        ranks[p.metadata.name] = e["RANK"]
        ports = p.spec.containers[0].ports
        assert [(x.name, x.container_port) for x in ports] == [("pytorchjob-port", 23456)]
        assert "RANK" not in env(core, p, p.spec.init_containers[0])
    assert ranks == {"pt-master-0": "0", "pt-worker-0": "1", "pt-worker-1": "2"}


def test_tensorflow_and_env_plugins(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    body = job_body("tf", {"tensorflow": ["--port=2222"], "env": []}, {"ps": 1, "worker": 2})
    pods = run_job(co, core, ns, body)
    by_task: dict[str, list[str]] = {}
    for p in pods:
        by_task.setdefault(task_of(p), []).append(f"{fqdn(p)}:2222")
    for p in pods:
        e = env(core, p)
        index = p.metadata.annotations[names.VOLCANO_TASK_INDEX]
        assert e["VC_TASK_INDEX"] == e["VK_TASK_INDEX"] == index
        assert env(core, p, p.spec.init_containers[0])["VC_TASK_INDEX"] == index
        tf = json.loads(e["TF_CONFIG"])
        assert tf["task"] == {"type": task_of(p), "index": int(index)}
        assert tf["cluster"] == by_task


def test_svc_host_files_follow_a_rescaled_job(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    """Volcano: pkg/controllers/job/plugins/svc/svc.go (OnJobUpdate rewrites the host
    ConfigMap from the job's replicas on every sync; flags
    ``--publish-not-ready-addresses`` and ``--disable-network-policy``).

    The worker task is scaled up, down, to zero and back: every pod's
    /etc/volcano/w.host, VC_W_HOSTS and VC_W_NUM follow, the master's included while
    no worker exists."""
    body = job_body(
        "el",
        {"svc": ["--publish-not-ready-addresses", "--disable-network-policy"]},
        {"m": 1, "w": 2},
    )
    run_job(co, core, ns, body)
    svc = core.read_namespaced_service("el", ns)
    assert svc.spec.publish_not_ready_addresses is True
    with pytest.raises(client.ApiException) as info:
        client.NetworkingV1Api(core.api_client).read_namespaced_network_policy("el", ns)
    assert info.value.status == 404
    master, worker = body["spec"]["tasks"]
    for replicas in (3, 1, 0, 2):
        co.patch_namespaced_custom_object(
            *JOBS[:2],
            ns,
            JOBS[2],
            "el",
            {"spec": {"tasks": [master, {**worker, "replicas": replicas}]}},
        )
        pods = running_pods(core, ns, "el", 1 + replicas)
        want = [fqdn(p) for p in pods if task_of(p) == "w"]
        for p in pods:
            wait_for(
                f"{p.metadata.name}: host file with {replicas} workers",
                lambda w=want, p=p: (
                    files(core, p, "/etc/volcano").get("w.host", "x").split("\n") == (w or [""])
                ),
            )
            variables = env(core, p)
            assert variables["VC_W_NUM"] == str(replicas)
            assert variables["VC_W_HOSTS"] == ",".join(want)
            assert variables["VC_M_NUM"] == "1"


def test_ssh_key_file_path_and_default_network_policy(
    co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    """Volcano: pkg/controllers/job/plugins/ssh/ssh.go (``--ssh-key-file-path``: where
    the key Secret is mounted, in init containers too) and
    pkg/controllers/job/plugins/svc/svc.go (a NetworkPolicy admitting only the job's
    pods unless ``--disable-network-policy``; publishNotReadyAddresses off by
    default)."""
    body = job_body("sk", {"ssh": ["--ssh-key-file-path=/home/u/.ssh"], "svc": []}, {"w": 2})
    pods = run_job(co, core, ns, body)
    for p in pods:
        for c in [*p.spec.containers, *p.spec.init_containers]:
            mounts = {m.mount_path: m for m in c.volume_mounts or []}
            assert "/root/.ssh" not in mounts
            assert mounts["/home/u/.ssh"].name == "sk-ssh"
        assert set(files(core, p, "/home/u/.ssh")) == {
            "id_rsa",
            "id_rsa.pub",
            "authorized_keys",
            "config",
        }
    assert core.read_namespaced_service("sk", ns).spec.publish_not_ready_addresses in (None, False)
    policy = client.NetworkingV1Api(core.api_client).read_namespaced_network_policy("sk", ns)
    assert policy.spec.ingress[0]._from[0].pod_selector.match_labels == {
        names.VOLCANO_JOB_NAME: "sk",
        names.VOLCANO_JOB_NAMESPACE: ns,
    }


@pytest.mark.parametrize(
    ("plugins", "tasks", "expected"),
    [
        ({"ray": []}, {"w": 1}, "spec.plugins.ray: unsupported plugin"),
        (
            {"pytorch": ["--masters=m"]},
            {"master": 1},
            "spec.plugins.pytorch[0]: unknown argument --masters",
        ),
        (
            {"svc": ["--disable-network-policy=maybe"]},
            {"w": 1},
            "spec.plugins.svc[0]: --disable-network-policy: 'maybe' is not a boolean",
        ),
        ({"mpi": []}, {"worker": 2}, "spec.plugins.mpi: no task named 'master' for the master"),
        ({"env": ["1"]}, {"w": 1}, "spec.plugins.env[0]: '1' is not a flag"),
        ({"ssh": ["--ssh-private-key=x"]}, {"w": 1}, "spec.plugins.ssh: --ssh-private-key is not"),
    ],
)
def test_webhook_rejects_unknown_plugins_and_arguments(
    webhook: None,
    co: client.CustomObjectsApi,
    ns: str,
    plugins: dict[str, list[str]],
    tasks: dict[str, int],
    expected: str,
) -> None:
    with pytest.raises(client.ApiException) as info:
        co.create_namespaced_custom_object(*JOBS[:2], ns, JOBS[2], job_body("bad", plugins, tasks))
    assert info.value.status == 422
    message = json.loads(info.value.body)["message"]
    assert 'admission webhook "volcano-crds.pyextender.io" denied the request' in message
    assert expected in message, message
