"""pyextender installed by its Helm chart on a devcluster, each component run as the chart
defines it.

    cluster = InstalledCluster("e2e", root, mode="scheduler")
    cluster.up(nodes=2, shape=...)
    release = Release(cluster, values={...})
    release.install()         # helm install: every object validated by the real API server
    release.run_components()  # the Deployments' pods as local processes (devcluster.localpods)
    ...
    release.uninstall()       # helm uninstall, its pre-delete hook Job run like kubelet would

What devcluster adds to play the parts of a real cluster's nodes and network:

- the API server routes Service-addressed webhooks to endpoints
  (``--enable-aggregator-routing``), and ``Release`` writes the EndpointSlices of
  the chart's Services from the ready local pods (the endpoint-slice controller's job);
- ``mode="scheduler"``: only devcluster's default kube-scheduler keeps running; the
  chart brings the ``volcano`` one. ``mode="existing"``: devcluster's schedulers stop
  and a single kube-scheduler runs the default profile plus the extender entry of
  ``manifests/extender/`` (``start_cluster_scheduler``).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from devcluster import build
from devcluster.cluster import Cluster, ClusterState, free_port
from devcluster.localpods import LocalPod, admin_api, ip_is_free, pod_network, run_to_completion
from devcluster.nodes import NodeShape
from devcluster.portforward import Forwarder, host_address

REPO = Path(__file__).resolve().parent.parent
CHART = REPO / "charts" / "pyextender"
EXTENDER_SNIPPET = REPO / "manifests" / "extender" / "kube-scheduler-config.yaml"
NAMESPACE = "pyextender-system"
RELEASE = "pyextender"
MANAGED_BY = "endpointslice.kubernetes.io/managed-by=devcluster.localpods"


class InstalledCluster(Cluster):
    """A devcluster ready for the chart (see the module docstring)."""

    def __init__(self, name: str, root: Path | None = None, mode: str = "scheduler") -> None:
        super().__init__(name, root)
        if mode not in ("scheduler", "existing"):
            raise ValueError(f"mode must be scheduler or existing, got {mode!r}")
        self.mode = mode
        self.network = pod_network()
        self._next_ip = 1

    def _spawn(
        self,
        st: ClusterState,
        role: str,
        cmd: list[str],
        env: dict[str, str] | None = None,
        user: tuple[int, int] | None = None,
    ) -> None:
        if role == "kube-apiserver":
            cmd = [*cmd, "--enable-aggregator-routing=true"]
        super()._spawn(st, role, cmd, env, user)

    def up(self, *args: Any, **kwargs: Any) -> ClusterState:
        """devcluster's ``up``, minus the schedulers the chart (or the cluster's own
        scheduler, mode=existing) replaces: the volcano one, and in mode=existing all."""
        st = super().up(*args, **kwargs)
        for role in list(st.pids):
            if role.startswith("kube-scheduler") and (
                self.mode == "existing" or role != "kube-scheduler-default"
            ):
                self.stop_role(role)
        state = self.state
        assert state is not None
        return state

    def start_cluster_scheduler(self, extender_url: str) -> None:
        """mode=existing: the cluster's only kube-scheduler, default profile plus our
        documented extender entry (manifests/extender/kube-scheduler-config.yaml)."""
        st = self.state
        assert st is not None
        doc = yaml.safe_load(EXTENDER_SNIPPET.read_text())
        doc["clientConnection"] = {"kubeconfig": st.kubeconfig, "qps": 500, "burst": 1000}
        doc["leaderElection"] = {"leaderElect": False}
        for ext in doc["extenders"]:
            ext["urlPrefix"] = extender_url
        path = self.dir / "kube-scheduler-cluster.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        self._say(f"starting the cluster's kube-scheduler with our extender at {extender_url}")
        self._spawn(
            st,
            "kube-scheduler-cluster",
            [
                str(build.binary_path("kube-scheduler")),
                f"--config={path}",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                f"--authentication-kubeconfig={st.kubeconfig}",
                f"--authorization-kubeconfig={st.kubeconfig}",
                "--v=2",
            ],
        )

    def allocate_ip(self) -> str:
        while True:
            ip = f"{self.network}.{self._next_ip}"
            self._next_ip += 1
            if self._next_ip > 254:
                raise RuntimeError(f"pod network {self.network}.0/24 exhausted")
            if ip_is_free(ip, [8080, 8888, 8899, 9443, 10259]):
                return ip


def helm_env(cluster: Cluster) -> dict[str, str]:
    st = cluster.state
    assert st is not None
    home = Path(st.dir) / "helm"
    return {
        **os.environ,
        "KUBECONFIG": st.kubeconfig,
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }


def helm(cluster: Cluster, *args: str, timeout: float = 300.0) -> str:
    """Run helm against the cluster (as the admin who installs the chart); its stdout."""
    binary = build.ensure_binaries(quiet=True, only=["helm"])["helm"]
    proc = subprocess.run(
        [str(binary), *args],
        env=helm_env(cluster),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"helm {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout


def documents(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]


class Release:
    """The chart installed into an InstalledCluster, and its pods as local processes."""

    def __init__(self, cluster: InstalledCluster, values: Mapping[str, Any] | None = None) -> None:
        self.cluster = cluster
        self.values: dict[str, Any] = dict(values or {})
        self.pods: dict[str, list[LocalPod]] = {}
        """Deployment name -> its running pods."""
        self.manifest: list[dict[str, Any]] = []
        self.forwarders: dict[tuple[str, int], Forwarder] = {}
        """(pod ip, container port) -> the forwarder its EndpointSlice points at."""
        self.host_ip = host_address()

    # -- helm ---------------------------------------------------------------------
    def _values_file(self) -> Path:
        st = self.cluster.state
        assert st is not None
        path = Path(st.dir) / "values.yaml"
        path.write_text(yaml.safe_dump(self.values, sort_keys=False))
        return path

    def install(self) -> None:
        helm(
            self.cluster,
            "install",
            RELEASE,
            str(CHART),
            "--namespace",
            NAMESPACE,
            "--create-namespace",
            "--values",
            str(self._values_file()),
        )
        self.refresh()

    def upgrade(self, values: Mapping[str, Any]) -> None:
        """helm upgrade with new values; pods whose template changed are replaced
        (one at a time, the new one ready before the old one stops: a rolling update)."""
        self.values = dict(values)
        before = {d["metadata"]["name"]: d for d in self.deployments()}
        helm(
            self.cluster,
            "upgrade",
            RELEASE,
            str(CHART),
            "--namespace",
            NAMESPACE,
            "--values",
            str(self._values_file()),
        )
        self.refresh()
        for dep in self.deployments():
            name = dep["metadata"]["name"]
            if name in self.pods and before.get(name) != dep:
                old = self.pods.pop(name)
                self.run_deployment(name)
                for p in old:
                    p.stop()
                self.publish_endpoints()

    def refresh(self) -> None:
        self.manifest = documents(helm(self.cluster, "get", "manifest", RELEASE, "-n", NAMESPACE))

    def objects(self, kind: str) -> list[dict[str, Any]]:
        return [d for d in self.manifest if d.get("kind") == kind]

    def deployments(self) -> list[dict[str, Any]]:
        return self.objects("Deployment")

    def deployment(self, component: str) -> dict[str, Any]:
        for d in self.deployments():
            labels = d["spec"]["template"]["metadata"]["labels"]
            if labels.get("app.kubernetes.io/component") == component:
                return d
        raise KeyError(f"no Deployment for component {component!r} in the release")

    # -- pods -----------------------------------------------------------------------
    def run_deployment(self, name: str, timeout: float = 180.0) -> list[LocalPod]:
        """Start the Deployment's replicas as local pods; wait until every one is ready
        (readinessProbe), then publish them in the EndpointSlices of matching Services."""
        dep = next(d for d in self.deployments() if d["metadata"]["name"] == name)
        template = dep["spec"]["template"]
        pods = []
        for i in range(int(dep["spec"].get("replicas", 1))):
            suffix = f"{int(time.time() * 1000) % 100000:05d}{i}"
            pod = LocalPod(
                self.cluster, f"{name}-{suffix}", NAMESPACE, self.cluster.allocate_ip(), template
            )
            pod.start()
            pods.append(pod)
        self.pods[name] = pods
        for pod in pods:
            pod.wait_ready(timeout)
        self.publish_endpoints()
        return pods

    def run_components(self, timeout: float = 240.0) -> None:
        """Webhook (validates what the others write), controllers, then the scheduler pod."""
        for component in ("webhook", "controllers", "scheduler"):
            self.run_deployment(self.deployment(component)["metadata"]["name"], timeout)

    def pod(self, component: str, index: int = 0) -> LocalPod:
        return self.pods[self.deployment(component)["metadata"]["name"]][index]

    def publish_endpoints(self) -> None:
        """The EndpointSlices of the release's Services: per ready local pod, one slice
        ``<host ip>:<forwarder>`` relaying to the pod (loopback addresses are refused in
        slices; see devcluster.portforward)."""
        from kubernetes import client

        api = client.DiscoveryV1Api(admin_api(self.cluster))
        for svc in self.objects("Service"):
            name = svc["metadata"]["name"]
            selector = svc["spec"]["selector"]
            old = api.list_namespaced_endpoint_slice(
                NAMESPACE, label_selector=f"kubernetes.io/service-name={name},{MANAGED_BY}"
            )
            for sl in old.items:
                api.delete_namespaced_endpoint_slice(sl.metadata.name, NAMESPACE)
            for p in (p for pods in self.pods.values() for p in pods):
                if not all(p.labels.get(k) == v for k, v in selector.items()) or not p.alive():
                    continue
                ports = []
                for sp in svc["spec"]["ports"]:
                    target = sp.get("targetPort", sp["port"])
                    if isinstance(target, str):
                        target = next(
                            cp["containerPort"]
                            for c in p.spec["containers"]
                            for cp in c.get("ports", [])
                            if cp["name"] == target
                        )
                    key = (p.ip, int(target))
                    if key not in self.forwarders:
                        self.forwarders[key] = Forwarder(key, self.host_ip)
                    fwd = self.forwarders[key].port
                    ports.append({"name": sp.get("name", ""), "port": fwd, "protocol": "TCP"})
                body = {
                    "metadata": {
                        "name": f"{name}-{p.name}"[:63],
                        "namespace": NAMESPACE,
                        "labels": {
                            "kubernetes.io/service-name": name,
                            "endpointslice.kubernetes.io/managed-by": "devcluster.localpods",
                        },
                    },
                    "addressType": "IPv4",
                    "endpoints": [{"addresses": [self.host_ip], "conditions": {"ready": True}}],
                    "ports": ports,
                }
                api.create_namespaced_endpoint_slice(NAMESPACE, body)

    def stop_pods(self) -> None:
        for pods in self.pods.values():
            for p in pods:
                p.stop()
        self.pods = {}
        for f in self.forwarders.values():
            f.close()
        self.forwarders = {}

    # -- uninstall --------------------------------------------------------------------
    def uninstall(self, timeout: float = 300.0) -> str:
        """helm uninstall; its pre-delete hook Job runs here as kubelet and the Job
        controller would run it (a local pod, then the Job's status). Returns helm's output."""
        from kubernetes import client

        api = admin_api(self.cluster)
        batch = client.BatchV1Api(api)
        result: dict[str, Any] = {}

        def run_helm() -> None:
            try:
                result["out"] = helm(
                    self.cluster, "uninstall", RELEASE, "-n", NAMESPACE, timeout=timeout
                )
            except Exception as exc:
                result["error"] = exc

        thread = threading.Thread(target=run_helm, daemon=True)
        thread.start()
        hooks_run: set[str] = set()
        deadline = time.monotonic() + timeout
        while thread.is_alive() and time.monotonic() < deadline:
            for job in batch.list_namespaced_job(NAMESPACE).items:
                if job.metadata.uid in hooks_run or job.status.completion_time:
                    continue
                hooks_run.add(job.metadata.uid)
                self._run_job(api, job)
            time.sleep(0.2)
        thread.join(5)
        self.stop_pods()
        if "error" in result:
            raise RuntimeError(str(result["error"]))
        return str(result.get("out", ""))

    def _run_job(self, api: Any, job: Any) -> None:
        from kubernetes import client

        template = api.sanitize_for_serialization(job.spec.template)
        name = job.metadata.name
        pod = LocalPod(self.cluster, f"{name}-run", NAMESPACE, self.cluster.allocate_ip(), template)
        started = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        code = run_to_completion(pod, 120.0)
        pod.stop()
        if code != 0:
            raise RuntimeError(f"hook Job {name} failed with exit code {code}; see its log")
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        status = {
            "status": {
                "startTime": started,
                "completionTime": now,
                "succeeded": 1,
                "conditions": [
                    {
                        "type": t,
                        "status": "True",
                        "lastProbeTime": now,
                        "lastTransitionTime": now,
                        "reason": "CompletionsReached",
                        "message": "Reached expected number of succeeded pods",
                    }
                    for t in ("SuccessCriteriaMet", "Complete")
                ],
            }
        }
        client.BatchV1Api(api).patch_namespaced_job_status(name, NAMESPACE, status)


@contextlib.contextmanager
def installed_release(
    root: Path, name: str, values: Mapping[str, Any], mode: str = "scheduler"
) -> Iterator[Release]:
    """A two-node devcluster (8 GPUs each) with the chart installed with ``values``
    and its Deployments' pods running and ready; torn down on exit. The test modules'
    installs (each module's own values and mode)."""
    cluster = InstalledCluster(name, root=root, mode=mode)
    cluster.up(nodes=2, shape=NodeShape(cpu="32", memory="256Gi", gpus=8))
    try:
        release = Release(cluster, values)
        release.install()
        release.run_components()
        yield release
    finally:
        cluster.down(quiet=True)
