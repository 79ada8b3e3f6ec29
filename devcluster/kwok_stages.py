"""How pods live on kwok's fake nodes: the pod Stages devcluster gives kwok (``--config``).

kwok's built-in pod stages finish every pod owned by a kind "Job" the moment it
runs, and Volcano's Job is a kind "Job" too. A batch job that ends at once never
holds its queue's share and never drives a lifecycle policy, so devcluster uses
its own stages:

- every bound pod becomes Running (``pod-ready``);
- a pod of a ``batch/v1`` Job succeeds at once, as with kwok's defaults
  (``pod-complete``), unless it asks for a run time;
- a pod annotated ``pyextender.io/simulated-duration: 10m`` (a Go duration) ends
  that long after it started (``pod-simulated-end``): Succeeded with exit code 0, or
  Failed with the exit code of ``pyextender.io/simulated-exit-code`` when that is
  set and not "0" (an integer, as a string);
- every other pod (a Volcano Job's included) runs until it is deleted, like
  ``sleep infinity``;
- a deleted pod goes at once (``pod-delete``).

The end time is counted from the pod's ``status.startTime``, so it does not move
when kwok restarts or the pod is updated meanwhile.

Nodes get stages of ours too. kwok 0.7 picks its default node heartbeat the
wrong way round: with node Leases on it still rewrites every node's status every
20-25 s, all nodes in one burst (500 PATCHes in a few seconds on a 500-node
cluster), which lands in whatever a benchmark is measuring. Here:

- a node that is not Ready yet becomes Ready, with its addresses (``node-ready``);
  capacity, allocatable and nodeInfo stay as devcluster created the node;
- a Ready node's status heartbeat comes once per ``heartbeat_s`` seconds (up to
  10 % later, so nodes created together drift apart), the node Lease's length
  (``node-heartbeat``). Nothing here reads it (no node lifecycle controller
  runs); the Lease says the node is alive.
"""

from __future__ import annotations

from pathlib import Path

import yaml

DURATION_ANNOTATION = "pyextender.io/simulated-duration"
"""Go duration ("90s", "10m", "1h30m"): how long after it started the pod ends."""
EXIT_CODE_ANNOTATION = "pyextender.io/simulated-exit-code"
"""Exit code of the pod's containers when it ends; not "0" means the pod Failed."""

_NOT_DELETED = {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}
_RUNNING = {"key": ".status.phase", "operator": "In", "values": ["Running"]}
_POD = {"apiGroup": "v1", "kind": "Pod"}

# Go templates kwok renders into the pod's status (kwok's template functions:
# Now, Quote, NodeIPWith, PodIPWith).
_READY = """\
{{ $now := Now }}
conditions:
- {lastTransitionTime: {{ $now | Quote }}, status: "True", type: Initialized}
- {lastTransitionTime: {{ $now | Quote }}, status: "True", type: Ready}
- {lastTransitionTime: {{ $now | Quote }}, status: "True", type: ContainersReady}
{{ range .spec.readinessGates }}
- {lastTransitionTime: {{ $now | Quote }}, status: "True", type: {{ .conditionType | Quote }}}
{{ end }}
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: true
  restartCount: 0
  started: true
  state: {running: {startedAt: {{ $now | Quote }}}}
{{ end }}
initContainerStatuses:
{{ range .spec.initContainers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: true
  restartCount: 0
  {{ if eq .restartPolicy "Always" }}
  started: true
  state: {running: {startedAt: {{ $now | Quote }}}}
  {{ else }}
  state:
    terminated: {exitCode: 0, reason: Completed, startedAt: {{ $now | Quote }},
                 finishedAt: {{ $now | Quote }}}
  {{ end }}
{{ end }}
hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
podIP: {{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) \
( or .metadata.name "" ) ( or .metadata.namespace "" ) | Quote }}
phase: Running
startTime: {{ $now | Quote }}
"""

_ENDED = """\
{{ $now := Now }}
{{ $root := . }}
{{ $annotations := or .metadata.annotations dict }}
{{ $code := or ( index $annotations "EXIT_CODE_ANNOTATION" ) "0" }}
{{ $ok := eq $code "0" }}
conditions:
- {lastTransitionTime: {{ $now | Quote }}, status: "False", type: Ready}
- {lastTransitionTime: {{ $now | Quote }}, status: "False", type: ContainersReady}
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: false
  restartCount: 0
  started: false
  state:
    terminated:
      exitCode: {{ $code }}
      reason: {{ if $ok }}Completed{{ else }}Error{{ end }}
      startedAt: {{ or $root.status.startTime $now | Quote }}
      finishedAt: {{ $now | Quote }}
{{ end }}
phase: {{ if $ok }}Succeeded{{ else }}Failed{{ end }}
""".replace("EXIT_CODE_ANNOTATION", EXIT_CODE_ANNOTATION)


_NODE = {"apiGroup": "v1", "kind": "Node"}
_CONDITION = (
    "- {{type: {0}, status: {1!r}, reason: {2}, message: {3!r}, "
    "lastHeartbeatTime: {{{{ $now | Quote }}}}, lastTransitionTime: {{{{ $since | Quote }}}}}}"
)
_NODE_CONDITIONS = "\n".join(
    _CONDITION.format(*c)
    for c in (
        ("Ready", "True", "KubeletReady", "kwok node is ready"),
        ("MemoryPressure", "False", "KubeletHasSufficientMemory", "enough memory"),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure", "no disk pressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID", "enough PIDs"),
        ("NetworkUnavailable", "False", "RouteCreated", "routes created"),
    )
)
_NODE_HEARTBEAT = f"""\
{{{{ $now := Now }}}}
{{{{ $since := or .metadata.creationTimestamp $now }}}}
conditions:
{_NODE_CONDITIONS}
"""
_NODE_READY = (
    _NODE_HEARTBEAT
    + """\
addresses:
- {type: InternalIP, address: {{ NodeIP | Quote }}}
- {type: Hostname, address: {{ .metadata.name | Quote }}}
phase: Running
"""
)
_NODE_IS_READY = {
    "key": '.status.conditions.[] | select( .type == "Ready" ) | .status',
    "operator": "In",
    "values": ["True"],
}


def _stage(
    name: str, spec: dict[str, object], ref: dict[str, str] | None = None
) -> dict[str, object]:
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": name},
        "spec": {"resourceRef": ref or _POD, **spec},
    }


def node_stages(heartbeat_s: int) -> list[dict[str, object]]:
    """kwok Stage documents for nodes, as described in the module docstring."""
    return [
        _stage(
            "node-ready",
            {
                "selector": {"matchExpressions": [{**_NODE_IS_READY, "operator": "NotIn"}]},
                "next": {"statusTemplate": _NODE_READY},
            },
            _NODE,
        ),
        _stage(
            "node-heartbeat",
            {
                "selector": {"matchExpressions": [_NODE_IS_READY]},
                "delay": {
                    "durationMilliseconds": heartbeat_s * 1000,
                    "jitterDurationMilliseconds": heartbeat_s * 1100,
                },
                "next": {"statusTemplate": _NODE_HEARTBEAT},
            },
            _NODE,
        ),
    ]


def pod_stages() -> list[dict[str, object]]:
    """kwok Stage documents for pods, as described in the module docstring."""
    has_duration = {"key": f'.metadata.annotations["{DURATION_ANNOTATION}"]'}
    return [
        _stage(
            "pod-ready",
            {
                "selector": {
                    "matchExpressions": [
                        _NOT_DELETED,
                        {"key": ".status.podIP", "operator": "DoesNotExist"},
                    ]
                },
                "next": {"statusTemplate": _READY},
            },
        ),
        _stage(
            "pod-complete",
            {
                "selector": {
                    "matchExpressions": [
                        _NOT_DELETED,
                        _RUNNING,
                        {
                            "key": ".metadata.ownerReferences.[].kind",
                            "operator": "In",
                            "values": ["Job"],
                        },
                        {
                            "key": ".metadata.ownerReferences.[].apiVersion",
                            "operator": "In",
                            "values": ["batch/v1"],
                        },
                        {**has_duration, "operator": "DoesNotExist"},
                    ]
                },
                "next": {"statusTemplate": _ENDED},
            },
        ),
        _stage(
            "pod-simulated-end",
            {
                "selector": {
                    "matchExpressions": [
                        _NOT_DELETED,
                        _RUNNING,
                        {**has_duration, "operator": "Exists"},
                    ]
                },
                "delay": {
                    # time left until startTime + duration (negative: at once)
                    "durationFrom": {
                        "cel": {
                            "expression": (
                                "timestamp(self.status.startTime) + duration(self.metadata."
                                f'annotations["{DURATION_ANNOTATION}"]) - Now()'
                            )
                        }
                    },
                },
                "next": {"statusTemplate": _ENDED},
            },
        ),
        _stage(
            "pod-delete",
            {
                "selector": {
                    "matchExpressions": [
                        {"key": ".metadata.deletionTimestamp", "operator": "Exists"}
                    ]
                },
                "next": {"finalizers": {"empty": True}, "delete": True},
            },
        ),
    ]


def write_config(path: Path, heartbeat_s: int) -> Path:
    """Write the stages as one multi-document YAML file for ``kwok --config``;
    ``heartbeat_s``: seconds between a node's status heartbeats."""
    path.write_text(yaml.safe_dump_all([*node_stages(heartbeat_s), *pod_stages()], sort_keys=False))
    return path
