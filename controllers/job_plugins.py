"""Volcano Job plugins: what each one adds to the job's pods and which objects it creates.

The plugins and their typed arguments come from ``Job.spec.plugin_args``
(``pyextender/api/volcano/job_plugins.py``, which also rejects unknown ones).
Names, variables and paths are Volcano's:

- ``env``: ``VK_TASK_INDEX`` and ``VC_TASK_INDEX`` (the pod's index in its task).
- ``svc``: ``hostname``/``subdomain`` (``<job>-<task>-<i>.<job>``), a headless
  Service ``<job>``, a ConfigMap ``<job>-svc`` mounted at ``/etc/volcano`` with one
  ``<task>.host`` file per task (a host a line) and, as variables,
  ``VC_<TASK>_HOSTS`` (comma-separated) and ``VC_<TASK>_NUM``; a NetworkPolicy
  ``<job>`` letting only the job's pods in (unless ``--disable-network-policy``).
  The ConfigMap follows the job when a task is rescaled.
- ``ssh``: a Secret ``<job>-ssh`` with ``id_rsa``, ``id_rsa.pub``,
  ``authorized_keys`` and ``config`` (every host of the job, no host-key prompts),
  mounted at ``--ssh-key-file-path`` (``/root/.ssh``), mode 0600.
- ``pytorch``: ``MASTER_ADDR`` (first master host), ``MASTER_PORT``, ``WORLD_SIZE``
  (master + worker replicas), ``RANK`` (master 0, worker i + 1), container port
  ``pytorchjob-port``.
- ``mpi``: ``MPI_HOST`` (the worker hosts, comma-separated) on the master, container
  port ``mpijob-port`` (22) on every pod; the hostfile is ``/etc/volcano/<worker>.host``.
- ``tensorflow``: ``TF_CONFIG`` (JSON: hosts:port by role, this pod's role and index),
  except for a job of one pod.
"""

from __future__ import annotations

import json
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from controllers import job_pods
from pyextender.api import names
from pyextender.api.volcano import Job
from pyextender.api.volcano.job import TaskSpec
from pyextender.api.volcano.job_plugins import (
    MpiArgs,
    PluginArgs,
    PytorchArgs,
    SshArgs,
    SvcArgs,
    TensorflowArgs,
    load_private_key,
    public_key_of,
)

HOSTS_MOUNT_PATH = "/etc/volcano"
"""Where the svc plugin mounts the ConfigMap of task hosts."""
SSH_FILES = ("id_rsa", "id_rsa.pub", "authorized_keys", "config")
SSH_SUBPATH = ".ssh"
SSH_MODE = 0o600
RSA_BITS = 2048


# -- pod spec edits ------------------------------------------------------------------
def add_env(spec: dict[str, Any], env: list[dict[str, Any]], init: bool = True) -> None:
    for key in ("containers", "initContainers") if init else ("containers",):
        for c in spec.get(key) or []:
            c["env"] = [*(c.get("env") or []), *env]


def add_mount(
    spec: dict[str, Any], volume: dict[str, Any], mount: dict[str, Any], init: bool = True
) -> None:
    spec["volumes"] = [*(spec.get("volumes") or []), volume]
    for key in ("containers", "initContainers") if init else ("containers",):
        for c in spec.get(key) or []:
            c["volumeMounts"] = [*(c.get("volumeMounts") or []), dict(mount)]


def open_port(spec: dict[str, Any], name: str, port: int, init: bool) -> None:
    """Add a container port unless the container already has it."""
    for key in ("containers", "initContainers") if init else ("containers",):
        for c in spec.get(key) or []:
            ports = c.get("ports") or []
            if not any(p.get("containerPort") == port for p in ports):
                c["ports"] = [*ports, {"name": name, "containerPort": port}]


# -- hosts ---------------------------------------------------------------------------
def task_by_name(job: Job, name: str) -> TaskSpec | None:
    return next((t for t in job.spec.tasks if job_pods.task_name(t) == name), None)


def host(job: Job, task: TaskSpec, index: int) -> str:
    """``hostname.subdomain`` of pod ``index`` of ``task`` (the template's own, if set)."""
    tspec = task.template.get("spec") or {}
    name = tspec.get("hostname") or job_pods.pod_name(
        job.metadata.name, job_pods.task_name(task), index
    )
    return f"{name}.{tspec.get('subdomain') or job.metadata.name}"


def task_hosts(job: Job, task: TaskSpec) -> list[str]:
    """One host per replica; a template with a fixed hostname names one host (none
    while the task has no replicas)."""
    if task.replicas > 0 and (task.template.get("spec") or {}).get("hostname"):
        return [host(job, task, 0)]
    return [host(job, task, i) for i in range(task.replicas)]


def env_key(task: str) -> str:
    return task.replace("-", "_").upper()


def svc_configmap_name(job_name: str) -> str:
    return f"{job_name}-svc"


def ssh_secret_name(job_name: str) -> str:
    return f"{job_name}-ssh"


def svc_hosts(job: Job) -> dict[str, str]:
    """The svc ConfigMap's data: per task ``<task>.host``, ``VC_<TASK>_HOSTS``, ``_NUM``."""
    out: dict[str, str] = {}
    for task in job.spec.tasks:
        hosts = task_hosts(job, task)
        tname = job_pods.task_name(task)
        out[f"{tname.replace('-', '_')}.host"] = "\n".join(hosts)
        out[f"VC_{env_key(tname)}_HOSTS"] = ",".join(hosts)
        out[f"VC_{env_key(tname)}_NUM"] = str(len(hosts))
    return out


# -- per plugin: the pod ---------------------------------------------------------------
def _env_pod(spec: dict[str, Any], index: int) -> None:
    add_env(
        spec,
        [
            {"name": "VK_TASK_INDEX", "value": str(index)},
            {"name": "VC_TASK_INDEX", "value": str(index)},
        ],
    )


def _svc_pod(job: Job, spec: dict[str, Any], pod_name: str) -> None:
    spec.setdefault("hostname", pod_name)
    spec.setdefault("subdomain", job.metadata.name)
    cm = svc_configmap_name(job.metadata.name)
    keys = [
        f"VC_{env_key(job_pods.task_name(t))}_{what}"
        for t in job.spec.tasks
        for what in ("HOSTS", "NUM")
    ]
    add_env(
        spec, [{"name": k, "valueFrom": {"configMapKeyRef": {"name": cm, "key": k}}} for k in keys]
    )
    add_mount(
        spec, {"name": cm, "configMap": {"name": cm}}, {"name": cm, "mountPath": HOSTS_MOUNT_PATH}
    )


def _ssh_pod(job: Job, args: SshArgs, spec: dict[str, Any]) -> None:
    secret = ssh_secret_name(job.metadata.name)
    items = [{"key": f, "path": f"{SSH_SUBPATH}/{f}"} for f in SSH_FILES]
    add_mount(
        spec,
        {
            "name": secret,
            "secret": {"secretName": secret, "items": items, "defaultMode": SSH_MODE},
        },
        {"name": secret, "mountPath": args.key_file_path, "subPath": SSH_SUBPATH},
    )


def _pytorch_pod(job: Job, args: PytorchArgs, tname: str, index: int, spec: dict[str, Any]) -> None:
    master = task_by_name(job, args.master)
    if master is None:
        return  # the webhook and Job.check() reject this; nothing to point at
    world = sum(t.replicas for t in job.spec.tasks if t.name in (args.master, args.worker))
    env = [
        {"name": "MASTER_ADDR", "value": host(job, master, 0)},
        {"name": "MASTER_PORT", "value": str(args.port)},
        {"name": "WORLD_SIZE", "value": str(world)},
    ]
    if tname == args.master:
        env.append({"name": "RANK", "value": "0"})
    elif tname == args.worker:
        env.append({"name": "RANK", "value": str(index + 1)})
    open_port(spec, "pytorchjob-port", args.port, init=False)
    add_env(spec, env, init=False)


def _mpi_pod(job: Job, args: MpiArgs, tname: str, spec: dict[str, Any]) -> None:
    open_port(spec, "mpijob-port", args.port, init=True)
    worker = task_by_name(job, args.worker)
    if tname == args.master and worker is not None:
        add_env(spec, [{"name": "MPI_HOST", "value": ",".join(task_hosts(job, worker))}])


def tf_config(job: Job, args: TensorflowArgs, tname: str, index: int) -> str:
    """TF_CONFIG of pod ``index`` of task ``tname``, compact JSON as Go marshals it."""
    roles = {args.ps: "ps", args.worker: "worker", args.chief: "chief", args.evaluator: "evaluator"}
    cluster: dict[str, list[str]] = {}
    for task in job.spec.tasks:
        role = roles.get(task.name)
        if role:
            cluster[role] = [f"{host(job, task, i)}:{args.port}" for i in range(task.replicas)]
    order = ("ps", "worker", "chief", "evaluator")
    body = {
        "cluster": {r: cluster[r] for r in order if r in cluster},
        "task": {"type": roles.get(tname, tname), "index": index},
    }
    return json.dumps(body, separators=(",", ":"))


def _tensorflow_pod(
    job: Job, args: TensorflowArgs, tname: str, index: int, spec: dict[str, Any]
) -> None:
    tasks = job.spec.tasks
    if len(tasks) == 1 and tasks[0].replicas == 1:
        return  # a single pod needs no cluster spec
    add_env(spec, [{"name": "TF_CONFIG", "value": tf_config(job, args, tname, index)}], init=False)


def apply_to_pod(job: Job, task: TaskSpec, index: int, spec: dict[str, Any]) -> None:
    """Edit the pod spec of pod ``index`` of ``task`` as the job's plugins say."""
    tname = job_pods.task_name(task)
    pod_name = job_pods.pod_name(job.metadata.name, tname, index)
    for args in job.spec.plugin_args.values():
        if isinstance(args, SvcArgs):
            _svc_pod(job, spec, pod_name)
        elif isinstance(args, SshArgs):
            _ssh_pod(job, args, spec)
        elif isinstance(args, PytorchArgs):
            _pytorch_pod(job, args, tname, index, spec)
        elif isinstance(args, MpiArgs):
            _mpi_pod(job, args, tname, spec)
        elif isinstance(args, TensorflowArgs):
            _tensorflow_pod(job, args, tname, index, spec)
        else:
            _env_pod(spec, index)


# -- per plugin: objects -----------------------------------------------------------------
def _meta(job: Job, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": job.metadata.namespace,
        "ownerReferences": [job_pods.controller_ref(job)],
    }


def _job_selector(job: Job) -> dict[str, str]:
    return {
        names.VOLCANO_JOB_NAME: job.metadata.name,
        names.VOLCANO_JOB_NAMESPACE: job.metadata.namespace,
    }


def svc_configmap(job: Job) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(job, svc_configmap_name(job.metadata.name)),
        "data": svc_hosts(job),
    }


def _svc_objects(job: Job, args: SvcArgs) -> list[dict[str, Any]]:
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(job, job.metadata.name),
        "spec": {
            "clusterIP": "None",
            "selector": _job_selector(job),
            "publishNotReadyAddresses": args.publish_not_ready_addresses,
            "ports": [
                {"name": "placeholder-volcano", "port": 1, "protocol": "TCP", "targetPort": 1}
            ],
        },
    }
    out = [svc_configmap(job), service]
    if not args.disable_network_policy:
        out.append(
            {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "NetworkPolicy",
                "metadata": _meta(job, job.metadata.name),
                "spec": {
                    "podSelector": {"matchLabels": _job_selector(job)},
                    "ingress": [{"from": [{"podSelector": {"matchLabels": _job_selector(job)}}]}],
                    "policyTypes": ["Ingress"],
                },
            }
        )
    return out


def ssh_config(job: Job) -> str:
    """OpenSSH client config: no host-key prompts, every pod reachable by its hostname."""
    lines = ["StrictHostKeyChecking no", "UserKnownHostsFile /dev/null"]
    for task in job.spec.tasks:
        for fqdn in task_hosts(job, task):
            name = fqdn.split(".", 1)[0]
            lines += [f"Host {name}", f"  HostName {fqdn}"]
    return "\n".join(lines) + "\n"


def _ssh_keys(args: SshArgs) -> tuple[str, str]:
    """(private key PEM, public key line): the user's, or a new RSA pair."""
    if args.private_key:
        key = load_private_key(args.private_key)
        return args.private_key, args.public_key or public_key_of(key)
    key = rsa.generate_private_key(public_exponent=65537, key_size=RSA_BITS)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    return pem.decode(), public_key_of(key)


def _ssh_objects(job: Job, args: SshArgs) -> list[dict[str, Any]]:
    private, public = _ssh_keys(args)
    data = {
        "id_rsa": private,
        "id_rsa.pub": public,
        "authorized_keys": public,
        "config": ssh_config(job),
    }
    return [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": _meta(job, ssh_secret_name(job.metadata.name)),
            "type": "Opaque",
            "stringData": data,
        }
    ]


def plugin_objects(job: Job, args: PluginArgs) -> list[dict[str, Any]]:
    """The objects a plugin creates once for the job (none for most); ssh makes a new
    key pair on every call."""
    if isinstance(args, SvcArgs):
        return _svc_objects(job, args)
    if isinstance(args, SshArgs):
        return _ssh_objects(job, args)
    return []
