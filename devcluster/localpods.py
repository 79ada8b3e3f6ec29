"""A stand-in kubelet: runs the containers of a rendered Pod template as local processes.

devcluster has no kubelet (kwok fakes the pods of workloads). To test the chart
*as installed*, each component's Pod template is run here the way kubelet would:

- **identity**: a ServiceAccount token from the TokenRequest API (the projected
  token kubelet mounts), in a kubeconfig the process finds through
  ``$KUBECONFIG`` (our processes) or its ``clientConnection`` (kube-scheduler),
  never the admin certificate;
- **network**: every pod gets its own loopback address (``127.x.y.n``), so
  replicas listen on the same ports side by side. The pod's ``127.0.0.1`` is
  its own address: occurrences in args and mounted config are rewritten;
- **files**: ConfigMap and Secret volumes are written under the pod's folder and
  mount paths in args are rewritten to it; emptyDirs are folders;
- **user**: as root, each container runs as its securityContext's ``runAsUser`` /
  ``runAsGroup``, with the files a pod of that user could touch
  (devcluster.runas); ``$TMPDIR`` is the volume mounted at ``/tmp``, if any;
- **env**: literal values and the downward API (``status.podIP``,
  ``metadata.name``, ``metadata.namespace``); ``$(VAR)`` expansion as kubelet does;
- **probes**: ``readinessProbe.httpGet`` decides when a pod is ready;
- **images**: a container's ``command[0]`` names the program (``pyextender``,
  ``kube-scheduler``, or ``kube-scheduler-pyextender``, the one built with our
  framework plugin); a kube-scheduler image tag must be the version devcluster
  builds. A ``unix://`` plugin target in its config is rewritten like a mount path.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import hashlib
import os
import random
import re
import shutil
import socket
import ssl
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from devcluster import build, runas
from devcluster.cluster import Cluster, _alive

TOKEN_SECONDS = 24 * 3600
"""Lifetime of the ServiceAccount tokens we request (the test's upper bound)."""

_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


SCHEDULERS = ("kube-scheduler", "kube-scheduler-pyextender")
"""Commands run as devcluster's builds: the stock kube-scheduler and the one built
with our framework plugin (shim/), both of devcluster's Kubernetes version."""

SHORT_DIRS = Path(tempfile.gettempdir())
"""Where emptyDir folders go when the pod's own folder path is too long for a Unix
socket inside it (108 bytes with the socket's name)."""


def pod_network() -> str:
    """A random 127.x.y.0/24 prefix for one cluster's pods (loopback, unroutable)."""
    return f"127.{random.randint(16, 250)}.{random.randint(1, 250)}"


def expand(text: str, env: Mapping[str, str]) -> str:
    """kubelet's $(VAR) expansion: defined names are replaced, $$ is a literal $."""
    out = _VAR.sub(lambda m: env.get(m.group(1), m.group(0)), text.replace("$$", "\0"))
    return out.replace("\0", "$")


def sa_kubeconfig(cluster: Cluster, namespace: str, sa: str, path: Path) -> Path:
    """A kubeconfig for ServiceAccount ``namespace/sa`` with a TokenRequest token."""
    from kubernetes import client

    st = cluster.state
    assert st is not None
    core = client.CoreV1Api(admin_api(cluster))
    req = {"spec": {"expirationSeconds": TOKEN_SECONDS}}
    token = core.create_namespaced_service_account_token(sa, namespace, req).status.token
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "devcluster",
                "cluster": {
                    "server": st.server,
                    # inline, as the CA a pod finds mounted: the pod's user may not
                    # be able to read the cluster's folder (devcluster.runas)
                    "certificate-authority-data": base64.b64encode(
                        (Path(st.dir) / "pki" / "ca.crt").read_bytes()
                    ).decode(),
                },
            }
        ],
        "users": [{"name": f"system:serviceaccount:{namespace}:{sa}", "user": {"token": token}}],
        "contexts": [
            {
                "name": sa,
                "context": {
                    "cluster": "devcluster",
                    "user": f"system:serviceaccount:{namespace}:{sa}",
                    "namespace": namespace,
                },
            }
        ],
        "current-context": sa,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    path.chmod(0o600)
    return path


def admin_api(cluster: Cluster) -> Any:
    """The test's own (admin) client: creates tokens and plays the cluster's controllers."""
    from kubernetes import client, config

    st = cluster.state
    assert st is not None
    cfg = client.Configuration()
    config.load_kube_config(config_file=st.kubeconfig, client_configuration=cfg)
    return client.ApiClient(cfg)


@dataclass
class LocalPod:
    """One Pod of a rendered template, running as local processes."""

    cluster: Cluster
    name: str
    namespace: str
    ip: str
    template: Mapping[str, Any]
    """The Deployment's (or Job's) spec.template."""
    roles: list[str] = field(default_factory=list)
    """Process roles in the cluster state (``<pod>.<container>``)."""
    short_dirs: list[Path] = field(default_factory=list)
    """Folders outside the cluster's (SHORT_DIRS), removed by ``stop``."""
    run_as: runas.Identity | None = None
    """(uid, gid) its containers run as (devcluster.runas); None: as this process."""
    as_root_because: str = ""
    """Why it runs as this process although its securityContext names a user."""

    @property
    def spec(self) -> Mapping[str, Any]:
        spec: Mapping[str, Any] = self.template["spec"]
        return spec

    @property
    def labels(self) -> Mapping[str, str]:
        labels: Mapping[str, str] = self.template.get("metadata", {}).get("labels", {})
        return labels

    @property
    def link(self) -> Path:
        """The pod's place in the cluster's folder (a link when its user runs it)."""
        st = self.cluster.state
        assert st is not None
        return Path(st.dir) / "pods" / self.name

    @property
    def folder(self) -> Path:
        """The pod's own folder: kubeconfig, volumes, tmp."""
        return self.link.resolve() if self.link.is_symlink() else self.link

    # -- start ------------------------------------------------------------------
    def start(self) -> None:
        st = self.cluster.state
        assert st is not None
        self.run_as = self._run_as()
        self._make_folder()
        sa = self.spec.get("serviceAccountName") or "default"
        kubeconfig = sa_kubeconfig(self.cluster, self.namespace, sa, self.folder / "kubeconfig")
        if self.run_as is not None:
            runas.own(kubeconfig, self.run_as, 0o600)  # the projected token is the pod's
        mounts = self._volumes()
        for c in self.spec["containers"]:
            env = self._env(c, kubeconfig, mounts)
            argv = [expand(a, env) for a in [*(c.get("command") or []), *(c.get("args") or [])]]
            argv = [self._rewrite(a, c, mounts) for a in argv]
            argv = self._program(argv, c, kubeconfig, mounts)
            role = f"{self.name}.{c['name']}"
            self.cluster._spawn(st, role, argv, env={**os.environ, **env}, user=self.run_as)
            self.roles.append(role)

    def _run_as(self) -> runas.Identity | None:
        """The user of the containers' securityContext, when this process can switch
        to it and that user can run the programs."""
        if not runas.can_switch():
            return None
        ids = {runas.identity(self.spec, c) for c in self.spec["containers"]}
        if len(ids) != 1:
            raise ValueError(f"{self.name}: containers run as different users {ids}")
        (who,) = ids
        if who is None:
            return None
        if any((c.get("command") or [""])[0] == "pyextender" for c in self.spec["containers"]):
            why = runas.python_reachable(who)
            if why:
                self.as_root_because = why
                print(f"localpods: {self.name} runs as root, not uid {who[0]}: {why}")
                return None
        return who

    def _make_folder(self) -> None:
        """A pod run as its user gets a folder that user can reach (the cluster's may be
        private, as pytest's are), root's and read-only to it, linked from the cluster's."""
        if self.run_as is not None and not self.link.is_dir():
            if self.link.is_symlink():
                self.link.unlink()  # left by an earlier start of this pod
            digest = hashlib.sha256(str(self.link).encode()).hexdigest()[:12]
            real = runas.shared_folder(f"pxl-pod-{digest}")
            self.short_dirs.append(real)
            atexit.register(shutil.rmtree, real, True)
            self.link.parent.mkdir(parents=True, exist_ok=True)
            self.link.symlink_to(real, target_is_directory=True)
        self.folder.mkdir(parents=True, exist_ok=True)

    def _volumes(self) -> dict[str, Path]:
        """Materialise volumes; volume name -> local folder."""
        from kubernetes import client

        core = client.CoreV1Api(admin_api(self.cluster))
        out: dict[str, Path] = {}
        for v in self.spec.get("volumes") or []:
            where = self.folder / "volumes" / v["name"]
            if "emptyDir" in v and len(str(where)) > 60:
                # a Unix socket in it (the framework plugin's gRPC) needs a short path;
                # the pod's folder links to it
                digest = hashlib.sha256(str(where).encode()).hexdigest()[:12]
                short = SHORT_DIRS / f"pxl-{digest}"
                short.mkdir(exist_ok=True)
                self.short_dirs.append(short)
                # a cluster torn down without stopping its pods leaves none behind
                atexit.register(shutil.rmtree, short, True)
                where.parent.mkdir(parents=True, exist_ok=True)
                if not where.is_symlink():
                    where.symlink_to(short, target_is_directory=True)
                where = short
            where.mkdir(parents=True, exist_ok=True)
            out[v["name"]] = where
            files: dict[str, bytes] = {}
            if "configMap" in v:
                cm = core.read_namespaced_config_map(v["configMap"]["name"], self.namespace)
                files = {k: s.encode() for k, s in (cm.data or {}).items()}
            elif "secret" in v:
                sec = core.read_namespaced_secret(v["secret"]["secretName"], self.namespace)
                files = {k: base64.b64decode(s) for k, s in (sec.data or {}).items()}
            for key, data in files.items():
                # the pod's loopback is its own address
                (where / key).write_bytes(data.replace(b"127.0.0.1", self.ip.encode()))
                (where / key).chmod(0o644)  # kubelet's defaultMode; root's, read-only to the pod
            if "emptyDir" in v and self.run_as is not None:
                runas.own(where, self.run_as, 0o755)
        return out

    def _env(
        self, container: Mapping[str, Any], kubeconfig: Path, mounts: dict[str, Path]
    ) -> dict[str, str]:
        fields = {
            "status.podIP": self.ip,
            "metadata.name": self.name,
            "metadata.namespace": self.namespace,
        }
        tmp = self.folder / "tmp"
        tmp.mkdir(exist_ok=True)
        if self.run_as is not None:
            runas.own(tmp, self.run_as, 0o700)
        for m in container.get("volumeMounts") or []:
            if m["mountPath"].rstrip("/") == "/tmp":
                tmp = mounts[m["name"]]  # what the process writes to /tmp lands there
        env: dict[str, str] = {
            # in-cluster config, as our processes discover it outside a cluster
            "KUBECONFIG": str(kubeconfig),
            # run as its user: root's folder, so as unwritable as the image user's no home
            "HOME": str(self.folder),
            "TMPDIR": str(tmp),
        }
        if self.run_as is not None and (container.get("command") or [""])[0] == "pyextender":
            # the image's ENV (Dockerfile): a kernel cache its user cannot write
            env["NUMBA_CACHE_DIR"] = str(runas.image_numba_cache())
            env.update(runas.python_for(self.run_as)[1])
        for e in container.get("env") or []:
            if "value" in e:
                env[e["name"]] = expand(str(e["value"]), env)
            elif "fieldRef" in (e.get("valueFrom") or {}):
                path = e["valueFrom"]["fieldRef"]["fieldPath"]
                if path not in fields:
                    raise ValueError(f"{self.name}: env {e['name']}: fieldRef {path} unsupported")
                env[e["name"]] = fields[path]
            else:
                raise ValueError(f"{self.name}: env {e['name']}: only value and fieldRef")
        return env

    def _rewrite(self, arg: str, container: Mapping[str, Any], mounts: dict[str, Path]) -> str:
        arg = arg.replace("127.0.0.1", self.ip)
        flag, eq, value = arg.partition("=") if arg.startswith("-") else ("", "", arg)
        for m in sorted(container.get("volumeMounts") or [], key=lambda m: -len(m["mountPath"])):
            mp = m["mountPath"].rstrip("/")
            if value == mp or value.startswith(mp + "/"):
                return flag + eq + str(mounts[m["name"]]) + value[len(mp) :]
        return arg

    def _program(
        self, argv: list[str], container: Mapping[str, Any], kc: Path, mounts: dict[str, Path]
    ) -> list[str]:
        prog = argv[0]
        if prog == "pyextender":
            python = sys.executable
            if self.run_as is not None:
                python = runas.python_for(self.run_as)[0]
            return [python, "-m", "pyextender.cli", *argv[1:]]
        if prog in SCHEDULERS:
            image = str(container.get("image", ""))
            if not image.endswith(":" + build.KUBE_VERSION):
                raise ValueError(f"{prog} image {image} is not {build.KUBE_VERSION}")
            args = self._scheduler_args(argv[1:], kc, container, mounts)
            binary = build.binary_path(prog)
            if self.run_as is not None:
                binary = runas.reachable_binary(binary, self.run_as)
            return [str(binary), *args]
        raise ValueError(f"{self.name}: no local program for command {prog!r}")

    def _scheduler_args(
        self, args: list[str], kc: Path, container: Mapping[str, Any], mounts: dict[str, Path]
    ) -> list[str]:
        """In-cluster client config for kube-scheduler: its config file's clientConnection,
        and the delegated authn/authz kubeconfigs it would find in the pod; a plugin's
        ``unix://`` target (and ``cycleSocket``) in a mounted volume points at that
        volume's folder."""
        out = []
        for a in args:
            if a.startswith("--config="):
                path = Path(a.split("=", 1)[1])
                doc = yaml.safe_load(path.read_text())
                doc.setdefault("clientConnection", {})["kubeconfig"] = str(kc)
                for profile in doc.get("profiles") or []:
                    for pc in profile.get("pluginConfig") or []:
                        plugin_args = pc.get("args") or {}
                        target = str(plugin_args.get("target", ""))
                        if target.startswith("unix://"):
                            sock = self._rewrite(target[len("unix://") :], container, mounts)
                            plugin_args["target"] = "unix://" + sock
                        if plugin_args.get("cycleSocket"):
                            plugin_args["cycleSocket"] = self._rewrite(
                                str(plugin_args["cycleSocket"]), container, mounts
                            )
                local = self.folder / "kube-scheduler-config.yaml"
                local.write_text(yaml.safe_dump(doc, sort_keys=False))
                a = f"--config={local}"
            out.append(a)
        return [*out, f"--authentication-kubeconfig={kc}", f"--authorization-kubeconfig={kc}"]

    # -- state ------------------------------------------------------------------
    def alive(self) -> bool:
        st = self.cluster.state
        return st is not None and all(r in st.pids and _alive(st.pids[r]) for r in self.roles)

    def ready(self) -> tuple[bool, str]:
        """Every container's readinessProbe (httpGet) answers 2xx."""
        for c in self.spec["containers"]:
            probe = c.get("readinessProbe") or {}
            get = probe.get("httpGet")
            if not get:
                continue
            port = get["port"]
            if isinstance(port, str):
                port = next(p["containerPort"] for p in c.get("ports", []) if p["name"] == port)
            scheme = get.get("scheme", "HTTP").lower()
            url = f"{scheme}://{self.ip}:{port}{get.get('path', '/')}"
            ctx = ssl._create_unverified_context() if scheme == "https" else None  # as kubelet
            try:
                with urllib.request.urlopen(url, timeout=2, context=ctx) as r:
                    if not 200 <= r.status < 400:
                        return False, f"{c['name']}: {url} -> {r.status}"
            except urllib.error.HTTPError as e:
                return False, f"{c['name']}: {url} -> {e.code} {e.read()[:200]!r}"
            except OSError as e:
                return False, f"{c['name']}: {url}: {e}"
        return True, "ready"

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        why = ""
        while time.monotonic() < deadline:
            if not self.alive():
                raise RuntimeError(f"pod {self.name} exited: see logs {self.roles}")
            ok, why = self.ready()
            if ok:
                return
            time.sleep(0.3)
        raise TimeoutError(f"pod {self.name} not ready after {timeout:.0f}s: {why}")

    def stop(self) -> None:
        for role in self.roles:
            self.cluster.stop_role(role)
        self.roles = []
        for d in self.short_dirs:
            shutil.rmtree(d, ignore_errors=True)
        self.short_dirs = []


def ip_is_free(ip: str, ports: list[int]) -> bool:
    for port in ports:
        with socket.socket() as s:
            try:
                s.bind((ip, port))
            except OSError:
                return False
    return True


def run_to_completion(pod: LocalPod, timeout: float) -> int:
    """Start a pod of a Job and wait for its (single) container to exit; its exit code."""
    pod.start()
    st = pod.cluster.state
    assert st is not None
    pid = st.pids[pod.roles[0]]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
        time.sleep(0.1)
    pod.stop()
    raise TimeoutError(f"{pod.name} did not finish in {timeout:.0f}s")
