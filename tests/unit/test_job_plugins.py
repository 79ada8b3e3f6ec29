"""Volcano Job plugins: argument parsing (pyextender/api/volcano/job_plugins.py) and what
each plugin does to pods and objects (controllers/job_plugins.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from controllers import job_plugins, job_pods
from pyextender.api.volcano import FieldError, Job
from pyextender.api.volcano.job_plugins import (
    MpiArgs,
    PytorchArgs,
    SshArgs,
    SvcArgs,
    parse_plugins,
    public_key_of,
)


def make_job(plugins: dict[str, list[str]], tasks: dict[str, int]) -> Job:
    template = {"spec": {"containers": [{"name": "c", "image": "x"}]}}
    return Job.from_dict(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "dist", "namespace": "ns", "uid": "u-1"},
            "spec": {
                "plugins": plugins,
                "tasks": [
                    {"name": name, "replicas": n, "template": template} for name, n in tasks.items()
                ],
            },
        }
    )


def pod_spec(job: Job, task: str, index: int) -> dict[str, Any]:
    t = next(t for t in job.spec.tasks if t.name == task)
    spec: dict[str, Any] = job_pods.build_pod(job, t, index, gated=False)["spec"]
    return spec


def env_of(spec: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "<ref>") for e in spec["containers"][0].get("env", [])}


@pytest.mark.parametrize(
    ("plugins", "want"),
    [
        ({"pytorch": ["--master=m", "--worker", "w", "-port=1"]}, PytorchArgs("m", "w", 1)),
        ({"svc": ["--disable-network-policy"]}, SvcArgs(disable_network_policy=True)),
        ({"svc": ["--publish-not-ready-addresses=false"]}, SvcArgs()),
        ({"mpi": []}, MpiArgs()),
        ({"ssh": ["--ssh-key-file-path=/home/u/.ssh"]}, SshArgs(key_file_path="/home/u/.ssh")),
    ],
)
def test_arguments_parse_as_go_flags(plugins: dict[str, list[str]], want: object) -> None:
    parsed, problems = parse_plugins(plugins)
    assert problems == []
    assert parsed[next(iter(plugins))] == want


@pytest.mark.parametrize(
    ("plugins", "path", "message"),
    [
        ({"ray": []}, "plugins.ray", "unsupported plugin; supported: env, svc, ssh"),
        ({"env": ["--x=1"]}, "plugins.env[0]", "unknown argument --x; known: none"),
        ({"pytorch": ["--master"]}, "plugins.pytorch[0]", "--master needs a value"),
        ({"pytorch": ["--port=http"]}, "plugins.pytorch[0]", "is not a port"),
        ({"mpi": ["worker"]}, "plugins.mpi[0]", "'worker' is not a flag"),
        ({"svc": ["--disable-network-policy=yes"]}, "plugins.svc[0]", "is not a boolean"),
        ({"ssh": ["--ssh-public-key=k"]}, "plugins.ssh", "needs --ssh-private-key"),
        ({"ssh": ["--ssh-private-key=k"]}, "plugins.ssh", "not an unencrypted private key"),
    ],
)
def test_bad_arguments_are_problems_naming_the_field(
    plugins: dict[str, list[str]], path: str, message: str
) -> None:
    _, problems = parse_plugins(plugins)
    assert [p for p, m in problems if message in m] == [path], problems


def test_job_with_a_missing_role_task_does_not_decode() -> None:
    with pytest.raises(FieldError) as info:
        make_job({"pytorch": ["--master=chief"]}, {"worker": 2})
    assert "spec.plugins.pytorch: no task named 'chief' for the master" in str(info.value)


def test_implied_plugins_follow_volcano() -> None:
    parsed, _ = parse_plugins({"mpi": []})
    assert list(parsed) == ["svc", "ssh", "mpi"]
    parsed, _ = parse_plugins({"pytorch": [], "svc": ["--disable-network-policy"]})
    assert parsed["svc"] == SvcArgs(disable_network_policy=True)


def test_pytorch_env_rank_and_port() -> None:
    job = make_job(
        {"pytorch": ["--master=master", "--worker=worker", "--port=23456"]},
        {"master": 1, "worker": 2},
    )
    master, worker1 = pod_spec(job, "master", 0), pod_spec(job, "worker", 1)
    assert env_of(master)["MASTER_ADDR"] == "dist-master-0.dist"
    assert env_of(master)["MASTER_PORT"] == "23456"
    assert env_of(master)["WORLD_SIZE"] == "3"
    assert env_of(master)["RANK"] == "0"
    assert env_of(worker1)["RANK"] == "2"
    assert worker1["containers"][0]["ports"] == [
        {"name": "pytorchjob-port", "containerPort": 23456}
    ]
    assert worker1["hostname"] == "dist-worker-1" and worker1["subdomain"] == "dist"  # svc implied


def test_mpi_master_gets_worker_hosts_and_every_pod_the_port() -> None:
    job = make_job({"mpi": ["--port=2222"]}, {"master": 1, "worker": 2})
    master, worker = pod_spec(job, "master", 0), pod_spec(job, "worker", 0)
    assert env_of(master)["MPI_HOST"] == "dist-worker-0.dist,dist-worker-1.dist"
    assert "MPI_HOST" not in env_of(worker)
    assert worker["containers"][0]["ports"] == [{"name": "mpijob-port", "containerPort": 2222}]
    mounts = {m["mountPath"] for m in worker["containers"][0]["volumeMounts"]}
    assert mounts == {"/etc/volcano", "/root/.ssh"}  # svc and ssh implied


def test_tensorflow_config_per_role() -> None:
    job = make_job({"tensorflow": ["--port=2223"]}, {"ps": 1, "worker": 2})
    tf = json.loads(env_of(pod_spec(job, "worker", 1))["TF_CONFIG"])
    assert tf == {
        "cluster": {
            "ps": ["dist-ps-0.dist:2223"],
            "worker": ["dist-worker-0.dist:2223", "dist-worker-1.dist:2223"],
        },
        "task": {"type": "worker", "index": 1},
    }
    single = make_job({"tensorflow": []}, {"worker": 1})
    assert "TF_CONFIG" not in env_of(pod_spec(single, "worker", 0))


def test_ssh_secret_holds_a_working_key_pair_and_every_host() -> None:
    job = make_job({"ssh": []}, {"master": 1, "worker": 2})
    (secret,) = job_plugins.plugin_objects(job, SshArgs())
    data = secret["stringData"]
    key = serialization.load_pem_private_key(data["id_rsa"].encode(), password=None)
    assert isinstance(key, rsa.RSAPrivateKey)
    public = serialization.load_ssh_public_key(data["authorized_keys"].encode())
    assert isinstance(public, rsa.RSAPublicKey)
    signature = key.sign(b"challenge", padding.PKCS1v15(), hashes.SHA256())
    public.verify(signature, b"challenge", padding.PKCS1v15(), hashes.SHA256())
    assert data["id_rsa.pub"] == data["authorized_keys"] == public_key_of(key)
    assert "Host dist-worker-1\n  HostName dist-worker-1.dist\n" in data["config"]
    assert data["config"].startswith("StrictHostKeyChecking no\nUserKnownHostsFile /dev/null\n")


def test_ssh_uses_the_users_key() -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    job = make_job({"ssh": [f"--ssh-private-key={pem}"]}, {"worker": 1})
    (secret,) = job_plugins.plugin_objects(job, job.spec.plugin_args["ssh"])
    assert secret["stringData"]["id_rsa"] == pem
    assert secret["stringData"]["authorized_keys"] == public_key_of(key)
    wrong = public_key_of(rsa.generate_private_key(public_exponent=65537, key_size=2048))
    _, problems = parse_plugins({"ssh": [f"--ssh-private-key={pem}", f"--ssh-public-key={wrong}"]})
    assert problems == [
        ("plugins.ssh", "--ssh-public-key is not the public key of --ssh-private-key")
    ]


def test_svc_objects_and_disabled_network_policy() -> None:
    job = make_job({"svc": ["--publish-not-ready-addresses"]}, {"worker": 2})
    kinds = {o["kind"]: o for o in job_plugins.plugin_objects(job, job.spec.plugin_args["svc"])}
    assert set(kinds) == {"ConfigMap", "Service", "NetworkPolicy"}
    assert kinds["Service"]["spec"]["publishNotReadyAddresses"] is True
    assert kinds["ConfigMap"]["data"]["worker.host"] == "dist-worker-0.dist\ndist-worker-1.dist"
    job = make_job({"svc": ["--disable-network-policy"]}, {"worker": 2})
    objs = job_plugins.plugin_objects(job, job.spec.plugin_args["svc"])
    assert {o["kind"] for o in objs} == {"ConfigMap", "Service"}


def test_ssh_key_file_path_is_where_every_container_gets_the_keys() -> None:
    job = make_job({"ssh": ["--ssh-key-file-path=/home/mpi/.ssh"], "env": []}, {"worker": 1})
    spec = job_pods.build_pod(job, job.spec.tasks[0], 0, gated=False)["spec"]
    (volume,) = [v for v in spec["volumes"] if v["name"] == "dist-ssh"]
    assert volume["secret"]["defaultMode"] == 0o600
    assert [i["path"] for i in volume["secret"]["items"]] == [
        ".ssh/id_rsa",
        ".ssh/id_rsa.pub",
        ".ssh/authorized_keys",
        ".ssh/config",
    ]
    (mount,) = spec["containers"][0]["volumeMounts"]
    assert mount == {"name": "dist-ssh", "mountPath": "/home/mpi/.ssh", "subPath": ".ssh"}
