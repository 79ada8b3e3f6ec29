"""Starts, inspects and stops a local control plane.

Everything of one cluster lives in one folder (default ``.devcluster/<name>``):
``state.json`` (ports, pids, paths), ``kubeconfig``, ``pki/``, ``etcd/`` data
and ``logs/``. Ports are free ports on 127.0.0.1, so clusters can run side by
side. ``down`` stops every process the state names, then any process still in
their process groups.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from devcluster import build, config, kwok_stages, pki, upstream_crds
from devcluster.nodes import NodeShape, node_manifest, supernode_of
from pyextender.api.client import body_of

ROOT_ENV = "PYEXTENDER_DEVCLUSTER_DIR"
APISERVER_PROFILING_ENV = "PYEXTENDER_APISERVER_PROFILING"
"""Set to 1: kube-apiserver serves /debug/pprof (CPU profiles; bench/e2e.py --profile-dir)."""
MODES = ("extender", "framework")
"""How the volcano-profile kube-scheduler reaches the sidecar: the stock binary with an
HTTP extender entry, or the shim-built binary whose plugin calls gRPC."""
MAX_SOCKET_PATH = 100  # bytes; sun_path holds 108 on Linux
CRD_DIR = Path(__file__).resolve().parent.parent / "manifests" / "crds"
VOLCANO_CRD_DIR = Path(__file__).resolve().parent / "volcano_crds"


def _folder(folder: Path) -> Callable[[], list[Path]]:
    return lambda: sorted(folder.glob("*.yaml"))


CRD_SETS: dict[str, Callable[[], list[Path]]] = {
    "ours": _folder(CRD_DIR),
    "volcano": _folder(VOLCANO_CRD_DIR),
    "volcano-release": lambda: upstream_crds.crd_files(CRD_DIR),
}
"""CRDs ``up`` can install: ours (manifests/crds); ``volcano``, generated stand-ins
for Volcano's (devcluster/volcano_crds: no PodGroup status subresource, ...); or
``volcano-release``, the files of a Volcano release itself, from the Go module
proxy (devcluster/upstream_crds.py)."""


def default_root() -> Path:
    return Path(os.environ.get(ROOT_ENV, ".devcluster")).resolve()


LISTEN_PORTS = (20000, 32767)
"""Where free_port looks first: below Linux's default ephemeral range (32768-60999),
from which every outgoing connection takes its local port. A port picked from that
range is free when picked but may be taken by some connection before the server
binds it (kube-apiserver then fails with "address already in use")."""

_handed_out: set[int] = set()


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_port() -> int:
    """A port on 127.0.0.1 nobody listens on, outside the ephemeral range when there is
    room, and never the same twice in one process (callers bind later, not at once)."""
    low, high = _ephemeral_range()
    candidates = [p for p in range(*LISTEN_PORTS) if not low <= p <= high]
    rng = random.Random()
    for port in rng.sample(candidates, min(200, len(candidates))):
        if port in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    with socket.socket() as s:  # the whole range is busy: any free port
        s.bind(("127.0.0.1", 0))
        got: int = s.getsockname()[1]
    _handed_out.add(got)
    return got


@dataclass(slots=True)
class ClusterState:
    name: str
    dir: str
    kubeconfig: str
    server: str
    extender_url: str
    extender_port: int
    ports: dict[str, int] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)
    nodes: int = 0
    logs: str = ""
    mode: str = "extender"
    """One of MODES."""
    grpc_socket: str = ""
    """Framework mode: the sidecar's gRPC socket, which the shim's plugin dials."""
    commands: dict[str, list[str]] = field(default_factory=dict)
    """Role -> the command it was started with (roles started with their own
    environment are not recorded), for ``Cluster.restart_role``."""

    def save(self) -> None:
        Path(self.dir, "state.json").write_text(json.dumps(asdict(self), indent=2))

    @staticmethod
    def load(folder: Path) -> ClusterState | None:
        path = folder / "state.json"
        if not path.exists():
            return None
        return ClusterState(**json.loads(path.read_text()))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child of ours counts as gone
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


class Cluster:
    """One local cluster, addressed by its folder."""

    def __init__(self, name: str = "default", root: Path | None = None) -> None:
        self.name = name
        self.dir = (root or default_root()) / name

    @property
    def state(self) -> ClusterState | None:
        return ClusterState.load(self.dir)

    def _say(self, msg: str) -> None:
        print(f"devcluster[{self.name}]: {msg}", file=sys.stderr, flush=True)

    def _spawn(
        self,
        st: ClusterState,
        role: str,
        cmd: list[str],
        env: dict[str, str] | None = None,
        user: tuple[int, int] | None = None,
    ) -> None:
        """Start ``role``; ``user`` (uid, gid) runs it as that user, with no other group
        (needs root; devcluster.runas)."""
        log = open(Path(st.logs) / f"{role}.log", "ab")  # noqa: SIM115 - child owns it
        as_user: dict[str, Any] = {}
        if user is not None:
            as_user = {"user": user[0], "group": user[1], "extra_groups": []}
        proc = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env or os.environ.copy(),
            **as_user,
        )
        log.close()
        st.pids[role] = proc.pid
        if env is None:
            st.commands[role] = list(cmd)
        st.save()

    def restart_role(self, role: str, sig: int = signal.SIGKILL, timeout: float = 120.0) -> int:
        """Stop ``role`` with ``sig`` (default: kill -9, no clean shutdown) and start it
        again with the command it was started with; returns the new pid. For
        kube-apiserver, returns once it answers /readyz again."""
        st = self.state
        if st is None:
            raise RuntimeError(f"cluster {self.name!r} is not up")
        cmd = st.commands.get(role)
        if cmd is None:
            raise RuntimeError(f"{role}: no recorded command to restart it with")
        if role in st.pids:
            _terminate(st.pids[role], sig)
        Cluster._spawn(self, st, role, cmd)  # the recorded command as is, no subclass edits
        if role == "kube-apiserver":
            self._wait_apiserver(st, Path(st.dir) / "pki", timeout)
        return st.pids[role]

    # -- up ----------------------------------------------------------------
    def up(
        self,
        nodes: int = 8,
        shape: NodeShape | None = None,
        supernodes: int = 0,
        extender_port: int | None = None,
        timeout: float = 120.0,
        mode: str = "extender",
        crds: str = "ours",
        node_lease_s: int = 40,
    ) -> ClusterState:
        """``node_lease_s``: kwok's node Lease duration; it renews every Lease at a
        quarter of it, all nodes in one burst (500 nodes: 500 PUTs within a second).
        Each node's status heartbeat comes as rarely (kwok_stages.node_stages)."""
        if crds not in CRD_SETS:
            raise ValueError(f"crds {crds!r}: expected one of {', '.join(CRD_SETS)}")
        if mode not in MODES:
            raise ValueError(f"mode {mode!r}: expected one of {', '.join(MODES)}")
        current = self.state
        if current is not None and any(_alive(p) for p in current.pids.values()):
            raise RuntimeError(
                f"cluster {self.name!r} is already running in {self.dir} "
                "(run 'python -m devcluster down' first)"
            )
        shape = shape or NodeShape()
        bins = build.ensure_binaries()
        if self.dir.exists():
            shutil.rmtree(self.dir)
        (self.dir / "logs").mkdir(parents=True)
        ports = {
            k: free_port()
            for k in ("etcd", "etcd_peer", "apiserver", "sched_default", "sched_volcano")
        }
        ext_port = extender_port or free_port()
        server = f"https://127.0.0.1:{ports['apiserver']}"
        st = ClusterState(
            name=self.name,
            dir=str(self.dir),
            kubeconfig=str(self.dir / "kubeconfig"),
            server=server,
            extender_url=f"http://127.0.0.1:{ext_port}",
            extender_port=ext_port,
            ports=ports,
            logs=str(self.dir / "logs"),
            nodes=nodes,
            mode=mode,
            grpc_socket=_socket_path(self.dir) if mode == "framework" else "",
        )
        st.save()
        pki_dir = self.dir / "pki"
        self._say("generating certificates")
        pki.generate(pki_dir, ["127.0.0.1", "localhost", "kubernetes", "kubernetes.default"])
        kc = Path(st.kubeconfig)
        kc.write_text(config.kubeconfig(server, pki_dir))
        try:
            self._start_etcd(st, bins["etcd"])
            self._start_apiserver(st, bins["kube-apiserver"], pki_dir, timeout)
            self._install_crds(st, timeout, CRD_SETS[crds]())
            self._create_nodes(st, nodes, shape, supernodes)
            stages = kwok_stages.write_config(self.dir / "kwok-stages.yaml", node_lease_s)
            self._spawn(
                st,
                "kwok",
                [
                    str(bins["kwok"]),
                    f"--kubeconfig={kc}",
                    f"--config={stages}",
                    "--manage-all-nodes=false",
                    "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                    "--cidr=10.64.0.0/12",
                    "--node-ip=127.0.0.1",
                    f"--node-lease-duration-seconds={node_lease_s}",
                ],
            )
            self._start_schedulers(st, bins, kc)
            self._wait_nodes_ready(st, nodes, timeout)
        except BaseException:
            self._say(f"start failed; logs in {st.logs}; stopping what started")
            self.down(quiet=True)
            raise
        where = f"gRPC at {st.grpc_socket}" if mode == "framework" else f"at {st.extender_url}"
        self._say(f"up ({mode} mode): {nodes} nodes, kubeconfig {kc}, sidecar expected {where}")
        return st

    def _start_etcd(self, st: ClusterState, etcd: Path) -> None:
        p = st.ports
        self._say(f"starting etcd on 127.0.0.1:{p['etcd']}")
        self._spawn(
            st,
            "etcd",
            [
                str(etcd),
                "--name=devcluster",
                f"--data-dir={self.dir / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{p['etcd']}",
                f"--advertise-client-urls=http://127.0.0.1:{p['etcd']}",
                f"--listen-peer-urls=http://127.0.0.1:{p['etcd_peer']}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{p['etcd_peer']}",
                f"--initial-cluster=devcluster=http://127.0.0.1:{p['etcd_peer']}",
                "--unsafe-no-fsync=true",  # test data; speed over durability
                "--quota-backend-bytes=4294967296",
                "--log-level=warn",
            ],
        )

    def _start_apiserver(
        self, st: ClusterState, binary: Path, pki_dir: Path, timeout: float
    ) -> None:
        p = st.ports
        self._say(f"starting kube-apiserver on {st.server}")
        self._spawn(
            st,
            "kube-apiserver",
            [
                str(binary),
                f"--etcd-servers=http://127.0.0.1:{p['etcd']}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={p['apiserver']}",
                f"--cert-dir={pki_dir}",
                f"--tls-cert-file={pki_dir / 'apiserver.crt'}",
                f"--tls-private-key-file={pki_dir / 'apiserver.key'}",
                f"--client-ca-file={pki_dir / 'ca.crt'}",
                f"--service-account-key-file={pki_dir / 'sa.pub'}",
                f"--service-account-signing-key-file={pki_dir / 'sa.key'}",
                "--service-account-issuer=https://kubernetes.default.svc",
                "--service-cluster-ip-range=10.96.0.0/16",
                "--authorization-mode=RBAC",
                # No controller-manager runs: nothing would create default
                # ServiceAccounts or lift the not-ready taint added at node creation.
                "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
                f"--requestheader-client-ca-file={pki_dir / 'ca.crt'}",
                "--requestheader-allowed-names=front-proxy-client",
                "--max-requests-inflight=2000",
                "--max-mutating-requests-inflight=1000",
                "--enable-priority-and-fairness=false",
                # off as in a locked-down cluster; benches turn it on to take CPU profiles
                f"--profiling={str(os.environ.get(APISERVER_PROFILING_ENV) == '1').lower()}",
                "--v=1",
            ],
        )
        self._wait_apiserver(st, pki_dir, timeout)

    def _wait_apiserver(self, st: ClusterState, pki_dir: Path, timeout: float) -> None:
        ctx = ssl.create_default_context(cafile=str(pki_dir / "ca.crt"))
        ctx.load_cert_chain(str(pki_dir / "admin.crt"), str(pki_dir / "admin.key"))
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            for role in ("etcd", "kube-apiserver"):
                if not _alive(st.pids[role]):
                    raise RuntimeError(f"{role} exited; see {st.logs}/{role}.log")
            try:
                with urllib.request.urlopen(f"{st.server}/readyz", context=ctx, timeout=2) as r:
                    if r.status == 200:
                        self._say("kube-apiserver is ready")
                        return
            except Exception as exc:
                last = str(exc)
            time.sleep(0.25)
        raise TimeoutError(f"kube-apiserver not ready after {timeout:.0f}s: {last}")

    def _client(self, st: ClusterState) -> Any:
        from kubernetes import client as k8s
        from kubernetes import config as k8s_config

        cfg = k8s.Configuration()
        k8s_config.load_kube_config(config_file=st.kubeconfig, client_configuration=cfg)
        return k8s.ApiClient(cfg)

    def _install_crds(
        self, st: ClusterState, timeout: float, files: list[Path] | None = None
    ) -> None:
        """Create each CRD file (default: ours) and wait until every CRD is Established."""
        import yaml
        from kubernetes import client as k8s

        files = sorted(CRD_DIR.glob("*.yaml")) if files is None else files
        ext = k8s.ApiextensionsV1Api(self._client(st))
        names = []
        for f in files:
            doc = yaml.safe_load(f.read_text())
            body_of(ext.create_custom_resource_definition(doc, _preload_content=False))
            names.append(doc["metadata"]["name"])
        self._say(f"installed {len(names)} CRDs")
        deadline = time.monotonic() + timeout
        for name in names:
            while True:
                crd = ext.read_custom_resource_definition(name)
                conds = {c.type: c.status for c in (crd.status.conditions or [])}
                if conds.get("Established") == "True":
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"CRD {name} not Established after {timeout:.0f}s")
                time.sleep(0.1)

    def _create_nodes(
        self, st: ClusterState, nodes: int, shape: NodeShape, supernodes: int
    ) -> None:
        from kubernetes import client as k8s

        self._say(f"creating {nodes} kwok nodes ({shape.gpus} GPUs each)")
        core = k8s.CoreV1Api(self._client(st))
        for i in range(nodes):
            body = node_manifest(f"kwok-node-{i}", shape, supernode_of(i, nodes, supernodes))
            body_of(core.create_node(body, _preload_content=False))
            if nodes >= 100 and (i + 1) % 100 == 0:
                self._say(f"  {i + 1}/{nodes} nodes")

    def _start_schedulers(self, st: ClusterState, bins: dict[str, Path], kc: Path) -> None:
        if st.mode == "framework":
            volcano = config.framework_scheduler(
                kc, f"unix://{st.grpc_socket}", cycle_socket=cycle_socket_path(st.grpc_socket)
            )
            volcano_bin = bins["kube-scheduler-pyextender"]
        else:
            volcano = config.volcano_scheduler(kc, st.extender_url)
            volcano_bin = bins["kube-scheduler"]
        for role, binary, text, port in (
            (
                "kube-scheduler-default",
                bins["kube-scheduler"],
                config.default_scheduler(kc),
                st.ports["sched_default"],
            ),
            ("kube-scheduler-volcano", volcano_bin, volcano, st.ports["sched_volcano"]),
        ):
            cfg_path = self.dir / f"{role}.yaml"
            cfg_path.write_text(text)
            self._say(f"starting {role} ({binary.name})")
            self._spawn(
                st,
                role,
                [
                    str(binary),
                    f"--config={cfg_path}",
                    "--bind-address=127.0.0.1",
                    f"--secure-port={port}",
                    f"--authentication-kubeconfig={kc}",
                    f"--authorization-kubeconfig={kc}",
                    "--v=2",
                ],
            )

    def _wait_nodes_ready(self, st: ClusterState, nodes: int, timeout: float) -> None:
        from kubernetes import client as k8s

        core = k8s.CoreV1Api(self._client(st))
        deadline = time.monotonic() + timeout
        ready = 0
        while time.monotonic() < deadline:
            if not _alive(st.pids["kwok"]):
                raise RuntimeError(f"kwok exited; see {st.logs}/kwok.log")
            items = core.list_node().items
            ready = sum(
                1
                for n in items
                if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
            )
            if ready >= nodes:
                self._say(f"{ready}/{nodes} nodes Ready")
                return
            time.sleep(0.5)
        raise TimeoutError(f"only {ready}/{nodes} nodes Ready after {timeout:.0f}s")

    # -- sidecar -------------------------------------------------------------
    def start_component(self, role: str, command: list[str], kubeconfig: str | None = None) -> int:
        """Run ``pyextender <command...> --kubeconfig=<ours>`` as process ``role``.

        Its output goes to ``logs/<role>.log``; ``down`` stops it with the rest.
        ``kubeconfig`` replaces the cluster's (e.g. one whose server is a proxy).
        Returns the pid.
        """
        st = self.state
        if st is None:
            raise RuntimeError(f"cluster {self.name!r} is not up")
        kc = kubeconfig or st.kubeconfig
        return self.start_process(
            role, [sys.executable, "-m", "pyextender.cli", *command, f"--kubeconfig={kc}"]
        )

    def start_process(self, role: str, command: list[str]) -> int:
        """Run ``command`` as process ``role``: its output in ``logs/<role>.log``, stopped
        by ``down`` with the rest. For a program a bench runs against the cluster (e.g.
        Volcano's own scheduler); returns the pid."""
        st = self.state
        if st is None:
            raise RuntimeError(f"cluster {self.name!r} is not up")
        if role in st.pids and _alive(st.pids[role]):
            raise RuntimeError(f"{role} is already running (pid {st.pids[role]})")
        self._spawn(st, role, command)
        return st.pids[role]

    def start_sidecar(
        self,
        extra_args: list[str] | None = None,
        role: str = "sidecar",
        kubeconfig: str | None = None,
    ) -> int:
        """Run ``pyextender serve`` on the extender port (and, in framework mode, the
        gRPC socket the shim dials); returns its pid. ``kubeconfig``: as in
        ``start_component``."""
        st = self.state
        if st is None:
            raise RuntimeError(f"cluster {self.name!r} is not up")
        grpc = (
            [
                f"--grpc-socket={st.grpc_socket}",
                f"--cycle-socket={cycle_socket_path(st.grpc_socket)}",
            ]
            if st.grpc_socket
            else []
        )
        return self.start_component(
            role, ["serve", f"--port={st.extender_port}", *grpc, *(extra_args or [])], kubeconfig
        )

    def wait_sidecar_ready(self, timeout: float = 60.0) -> None:
        st = self.state
        assert st is not None
        self.wait_ready("sidecar", f"{st.extender_url}/readyz", timeout)

    def wait_ready(self, role: str, url: str, timeout: float = 60.0) -> None:
        """Until ``url`` answers 200; fails at once if process ``role`` has exited. An
        https URL is our own devcluster's (self-signed serving certificate: not verified)."""
        st = self.state
        assert st is not None
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid = st.pids.get(role)
            if pid is not None and not _alive(pid):
                raise RuntimeError(f"{role} exited; see {st.logs}/{role}.log")
            try:
                with urllib.request.urlopen(url, timeout=1, context=insecure) as r:
                    if r.status == 200:
                        return
            except Exception:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"{role} not ready after {timeout:.0f}s; see {st.logs}/{role}.log")

    def stop_role(self, role: str, sig: int = signal.SIGTERM) -> None:
        st = self.state
        if st is None or role not in st.pids:
            return
        _terminate(st.pids[role], sig)
        del st.pids[role]
        st.save()

    # -- down / status -------------------------------------------------------
    def down(self, quiet: bool = False) -> None:
        st = self.state
        if st is None:
            if not quiet:
                self._say("not running")
            return
        for role in reversed(list(st.pids)):
            _terminate(st.pids[role], signal.SIGTERM)
            if not quiet:
                self._say(f"stopped {role}")
        st.pids = {}
        st.save()

    def status(self) -> dict[str, Any]:
        st = self.state
        if st is None:
            return {"name": self.name, "running": False}
        procs = {role: ("running" if _alive(pid) else "exited") for role, pid in st.pids.items()}
        return {
            "name": self.name,
            "running": bool(procs) and all(v == "running" for v in procs.values()),
            "dir": st.dir,
            "kubeconfig": st.kubeconfig,
            "server": st.server,
            "extender_url": st.extender_url,
            "mode": st.mode,
            "grpc_socket": st.grpc_socket,
            "nodes": st.nodes,
            "processes": procs,
            "logs": st.logs,
        }


def _socket_path(folder: Path) -> str:
    """``<cluster dir>/grpc.sock``, or a short path in /tmp when that is too long for
    a Unix socket address."""
    path = str(folder / "grpc.sock")
    if len(path.encode()) <= MAX_SOCKET_PATH:
        return path
    digest = hashlib.sha256(path.encode()).hexdigest()[:12]
    return f"/tmp/pyextender-{digest}.sock"


def cycle_socket_path(grpc_socket: str) -> str:
    """The sidecar's cycle socket beside its gRPC socket (``cycle.sock`` next to
    ``grpc.sock``), or a short path in /tmp when that is too long."""
    if grpc_socket.endswith("/grpc.sock"):
        path = str(Path(grpc_socket).with_name("cycle.sock"))
    else:
        path = grpc_socket.removesuffix(".sock") + "-cycle.sock"
    if len(path.encode()) <= MAX_SOCKET_PATH:
        return path
    digest = hashlib.sha256(path.encode()).hexdigest()[:12]
    return f"/tmp/pyextender-{digest}-cycle.sock"


def _terminate(pid: int, sig: int, grace: float = 10.0) -> None:
    """Signal a process group, wait, then SIGKILL whatever is left."""
    try:
        pgid = os.getpgid(pid)
    except ProcessLookupError:
        return
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _alive(pid):
        _reap(pid)
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    _reap(pid)


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
