"""Files the control plane reads: kubeconfig and KubeSchedulerConfigurations."""

from __future__ import annotations

from pathlib import Path

import yaml


def kubeconfig(server: str, pki: Path) -> str:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "devcluster",
                "cluster": {"server": server, "certificate-authority": str(pki / "ca.crt")},
            }
        ],
        "users": [
            {
                "name": "admin",
                "user": {
                    "client-certificate": str(pki / "admin.crt"),
                    "client-key": str(pki / "admin.key"),
                },
            }
        ],
        "contexts": [{"name": "devcluster", "context": {"cluster": "devcluster", "user": "admin"}}],
        "current-context": "devcluster",
    }
    return yaml.safe_dump(doc, sort_keys=False)


def default_scheduler(kubeconfig_path: Path) -> str:
    """The stock scheduler: profile default-scheduler, no extender."""
    doc = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig_path), "qps": 500, "burst": 1000},
        "leaderElection": {"leaderElect": False},
        "percentageOfNodesToScore": 100,
        "profiles": [{"schedulerName": "default-scheduler"}],
    }
    return yaml.safe_dump(doc, sort_keys=False)


def volcano_scheduler(kubeconfig_path: Path, extender_url: str) -> str:
    """A second stock scheduler instance for profile ``volcano``, calling our extender.

    Extenders apply to every profile of a kube-scheduler process, so the
    ``volcano`` profile runs in its own process (as on a managed cluster) and
    default-scheduler pods never reach the extender.
    """
    doc = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig_path), "qps": 500, "burst": 1000},
        "leaderElection": {"leaderElect": False},
        "percentageOfNodesToScore": 100,
        "profiles": [{"schedulerName": "volcano"}],
        "extenders": [
            {
                "urlPrefix": extender_url,
                "filterVerb": "filter",
                "prioritizeVerb": "prioritize",
                "preemptVerb": "preempt",
                "bindVerb": "bind",
                "weight": 1,
                "enableHTTPS": False,
                "nodeCacheCapable": True,
                "ignorable": False,
                "httpTimeout": "30s",
            }
        ],
    }
    return yaml.safe_dump(doc, sort_keys=False)


KUBE_RESOURCE_SCORES = ("NodeResourcesFit", "NodeResourcesBalancedAllocation")
"""kube-scheduler score plugins off in framework mode's profile (their filters stay):
what they score, Volcano's nodeorder plugin scores in the sidecar."""


def framework_scheduler(
    kubeconfig_path: Path, grpc_target: str, call_timeout: str = "5s", cycle_socket: str = ""
) -> str:
    """Framework mode: the shim-built kube-scheduler (``kube-scheduler-pyextender``) for
    profile ``volcano``, with our Pyextender plugin at every extension point it
    implements. No extender entry: Filter/Score/Reserve/Permit go to the sidecar
    over gRPC, Permit holds gang members; Pyextender binds the profile's pods (with
    the annotations Reserve chose). kube-scheduler's resource scores are off, so the
    sidecar's score chooses the node (KUBE_RESOURCE_SCORES). With ``cycle_socket``
    the plugin sends Filter and Reserve to the sidecar's cycle socket there.
    """
    args = {"target": grpc_target, "callTimeout": call_timeout}
    if cycle_socket:
        args["cycleSocket"] = cycle_socket
    doc = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig_path), "qps": 500, "burst": 1000},
        "leaderElection": {"leaderElect": False},
        "percentageOfNodesToScore": 100,
        "profiles": [
            {
                "schedulerName": "volcano",
                "plugins": {
                    "multiPoint": {"enabled": [{"name": "Pyextender"}]},
                    # the node is our policy's, as extender mode's filter picks it:
                    # kube-scheduler's resource scores (least-allocated, balanced) would
                    # spread what our score packs; nodeorder has both if a config wants them
                    "score": {"disabled": [{"name": n} for n in KUBE_RESOURCE_SCORES]},
                    # before DefaultPreemption: a cycle narrowed to the sidecar's pick
                    # that found it taken is retried on every node, not preempted on one
                    "postFilter": {"enabled": [{"name": "Pyextender"}]},
                    # before DefaultBinder: our Bind carries the GPU indices on the Binding
                    "bind": {"enabled": [{"name": "Pyextender"}]},
                },
                "pluginConfig": [
                    {
                        "name": "Pyextender",
                        "args": args,
                    }
                ],
            }
        ],
    }
    return yaml.safe_dump(doc, sort_keys=False)
