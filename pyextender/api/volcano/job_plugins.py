"""A Volcano Job's ``spec.plugins``: which plugins exist, and their arguments, typed.

Volcano parses each plugin's argument list with Go's ``flag`` package and logs
(then ignores) what it does not understand. Here an unknown plugin, an unknown
argument or a bad value is a problem naming the field, so the webhook rejects
the Job instead of running it without what the user asked for.

Arguments follow Go's flag syntax: ``--name=value``, ``-name=value``,
``--name value``; a boolean flag alone means true (``--disable-network-policy``).

| plugin | arguments (defaults) |
|---|---|
| env | none |
| svc | ``--publish-not-ready-addresses`` (false), ``--disable-network-policy`` (false) |
| ssh | ``--ssh-key-file-path`` (/root/.ssh), ``--ssh-private-key``, ``--ssh-public-key`` |
| pytorch | ``--master`` (master), ``--worker`` (worker), ``--port`` (23456) |
| mpi | ``--master`` (master), ``--worker`` (worker), ``--port`` (22) |
| tensorflow | ``--ps`` (ps), ``--worker`` (worker), ``--chief`` (chief), |
| | ``--evaluator`` (evaluator), ``--port`` (2222) |

As Volcano's webhook does, ``mpi``, ``pytorch`` and ``tensorflow`` bring ``svc``
along (their host names need the headless Service), and ``mpi`` brings ``ssh``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization

Problem = tuple[str, str]

_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")
"""What Go's strconv.ParseBool accepts."""


@dataclass(frozen=True, slots=True)
class EnvArgs:
    """``env``: VK_TASK_INDEX / VC_TASK_INDEX in every container; no arguments."""


@dataclass(frozen=True, slots=True)
class SvcArgs:
    """``svc``: headless Service, host files, host-count variables, NetworkPolicy."""

    publish_not_ready_addresses: bool = field(
        default=False, metadata={"flag": "publish-not-ready-addresses"}
    )
    disable_network_policy: bool = field(default=False, metadata={"flag": "disable-network-policy"})


@dataclass(frozen=True, slots=True)
class SshArgs:
    """``ssh``: one key pair per job in a Secret, mounted in every container."""

    key_file_path: str = field(default="/root/.ssh", metadata={"flag": "ssh-key-file-path"})
    private_key: str = field(default="", metadata={"flag": "ssh-private-key"})
    """PEM private key to use instead of a generated one."""
    public_key: str = field(default="", metadata={"flag": "ssh-public-key"})
    """OpenSSH public key of ``private_key`` (derived from it when not given)."""


@dataclass(frozen=True, slots=True)
class PytorchArgs:
    """``pytorch``: MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK and the port."""

    master: str = field(default="master", metadata={"flag": "master"})
    worker: str = field(default="worker", metadata={"flag": "worker"})
    port: int = field(default=23456, metadata={"flag": "port"})


@dataclass(frozen=True, slots=True)
class MpiArgs:
    """``mpi``: MPI_HOST (the workers) on the master, the SSH port on every pod."""

    master: str = field(default="master", metadata={"flag": "master"})
    worker: str = field(default="worker", metadata={"flag": "worker"})
    port: int = field(default=22, metadata={"flag": "port"})


@dataclass(frozen=True, slots=True)
class TensorflowArgs:
    """``tensorflow``: TF_CONFIG (cluster by role, this pod's task) in every container."""

    ps: str = field(default="ps", metadata={"flag": "ps"})
    worker: str = field(default="worker", metadata={"flag": "worker"})
    chief: str = field(default="chief", metadata={"flag": "chief"})
    evaluator: str = field(default="evaluator", metadata={"flag": "evaluator"})
    port: int = field(default=2222, metadata={"flag": "port"})


PluginArgs = EnvArgs | SvcArgs | SshArgs | PytorchArgs | MpiArgs | TensorflowArgs

PLUGINS: dict[str, type[PluginArgs]] = {
    "env": EnvArgs,
    "svc": SvcArgs,
    "ssh": SshArgs,
    "pytorch": PytorchArgs,
    "mpi": MpiArgs,
    "tensorflow": TensorflowArgs,
}
"""Every Job plugin we run, in the order they change a pod."""

IMPLIED: dict[str, tuple[str, ...]] = {
    "mpi": ("svc", "ssh"),
    "pytorch": ("svc",),
    "tensorflow": ("svc",),
}
"""Plugins another plugin needs; added with default arguments when the Job lacks them."""


def _flags(cls: type[PluginArgs]) -> dict[str, dataclasses.Field[Any]]:
    return {f.metadata["flag"]: f for f in dataclasses.fields(cls)}


def _parse_one(
    cls: type[PluginArgs], args: Sequence[str], path: str, problems: list[Problem]
) -> PluginArgs:
    flags = _flags(cls)
    known = ", ".join(f"--{f}" for f in flags) or "none"
    values: dict[str, Any] = {}
    i = 0
    while i < len(args):
        here = f"{path}[{i}]"
        arg = args[i]
        i += 1
        if not arg.startswith("-") or arg in ("-", "--"):
            problems.append((here, f"{arg!r} is not a flag (--name=value); known: {known}"))
            continue
        name, eq, value = arg.lstrip("-").partition("=")
        f = flags.get(name)
        if f is None:
            problems.append((here, f"unknown argument --{name}; known: {known}"))
            continue
        if f.type in (bool, "bool"):
            if not eq:
                value = "true"
            if value not in _TRUE + _FALSE:
                problems.append((here, f"--{name}: {value!r} is not a boolean"))
                continue
            values[f.name] = value in _TRUE
            continue
        if not eq:
            if i >= len(args):
                problems.append((here, f"--{name} needs a value"))
                continue
            value = args[i]
            i += 1
        if f.type in (int, "int"):
            if not value.isdigit() or not 1 <= int(value) <= 65535:
                problems.append((here, f"--{name}: {value!r} is not a port (1-65535)"))
                continue
            values[f.name] = int(value)
        elif not value:
            problems.append((here, f"--{name} must not be empty"))
        else:
            values[f.name] = value
    return cls(**values)


def parse_plugins(
    plugins: Mapping[str, Sequence[str] | None], path: str = "plugins"
) -> tuple[dict[str, PluginArgs], list[Problem]]:
    """Typed arguments of every plugin the Job runs (implied ones included), and the
    problems found, with paths such as ``plugins.pytorch[1]``."""
    problems: list[Problem] = []
    out: dict[str, PluginArgs] = {}
    for name, args in plugins.items():
        cls = PLUGINS.get(name)
        if cls is None:
            problems.append(
                (f"{path}.{name}", f"unsupported plugin; supported: {', '.join(PLUGINS)}")
            )
            continue
        out[name] = _parse_one(cls, list(args or []), f"{path}.{name}", problems)
    for name in list(out):
        for dep in IMPLIED.get(name, ()):
            out.setdefault(dep, PLUGINS[dep]())
    ssh = out.get("ssh")
    if isinstance(ssh, SshArgs) and (ssh.private_key or ssh.public_key):
        problems += _check_keys(ssh, f"{path}.ssh")
    return {name: out[name] for name in PLUGINS if name in out}, problems


def _check_keys(ssh: SshArgs, path: str) -> list[Problem]:
    if not ssh.private_key:
        return [(path, "--ssh-public-key needs --ssh-private-key")]
    try:
        key = load_private_key(ssh.private_key)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        return [(path, f"--ssh-private-key is not an unencrypted private key ({exc})")]
    if ssh.public_key:
        derived = public_key_of(key)
        given = ssh.public_key.split()
        if given[:2] != derived.split()[:2]:
            return [(path, "--ssh-public-key is not the public key of --ssh-private-key")]
    return []


def load_private_key(text: str) -> Any:
    """A PEM (PKCS#1/PKCS#8) or OpenSSH private key without a passphrase."""
    data = text.encode()
    if b"OPENSSH PRIVATE KEY" in data:
        return serialization.load_ssh_private_key(data, password=None)
    return serialization.load_pem_private_key(data, password=None)


def public_key_of(private_key: Any) -> str:
    """The OpenSSH ``authorized_keys`` line of a private key."""
    raw: bytes = private_key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return raw.decode() + "\n"


def check_roles(
    plugins: Mapping[str, PluginArgs], tasks: Sequence[str], path: str = "plugins"
) -> list[Problem]:
    """Tasks the plugins' roles name must exist (Volcano would skip the plugin silently,
    or fail on every pod)."""
    have = set(tasks)
    problems: list[Problem] = []
    wanted: list[tuple[str, str, str]] = []
    p = plugins.get("pytorch")
    if isinstance(p, PytorchArgs):
        wanted.append(("pytorch", "master", p.master))
    m = plugins.get("mpi")
    if isinstance(m, MpiArgs):
        wanted += [("mpi", "master", m.master), ("mpi", "worker", m.worker)]
    for plugin, role, task in wanted:
        if task not in have:
            problems.append(
                (
                    f"{path}.{plugin}",
                    f"no task named {task!r} for the {role} (tasks: {', '.join(tasks)}); "
                    f"name it with --{role}=<task>",
                )
            )
    return problems
