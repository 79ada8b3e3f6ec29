"""charts/pyextender rendered by the real helm (``helm template``): RBAC without
wildcards, the same webhooks as webhook/configuration.py, args our CLI accepts,
the pinned kube-scheduler, and clear errors for bad values."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import build
from pyextender.api.names import BARRIER_ANNOTATION, GANG_GATE
from pyextender.cli import build_parser
from pyextender.framework.config import load_config
from pyextender.plugins.defaults import DEFAULT_CONFIG
from pyextender.plugins.registry import REGISTRY
from webhook.configuration import (
    mutating_configuration,
    service_client_config,
    validating_configuration,
)

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "pyextender"
RBAC_KINDS = ("Role", "ClusterRole")


def helm_template(*args: str) -> subprocess.CompletedProcess[str]:
    helm = build.ensure_binaries(quiet=True, only=["helm"])["helm"]
    return subprocess.run(
        [str(helm), "template", "pyextender", str(CHART), "-n", "pyextender-system", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def render(*args: str) -> list[dict[str, Any]]:
    proc = helm_template(*args)
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if isinstance(d, dict)]


MODES = {
    "default": (),
    "existing": ("--set", "mode=existing"),
    "cert-manager": ("--set", "webhook.tls.mode=cert-manager"),
    "named-namespaces": ("--set", "adoption.namespaces={team-a,team-b}"),
    "framework": ("--set", "scheduler.framework.enabled=true"),
}


@pytest.fixture(scope="module", params=list(MODES))
def docs(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return render(*MODES[request.param])


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def test_no_rbac_rule_has_a_wildcard(docs: list[dict[str, Any]]) -> None:
    rules = [
        (d["metadata"]["name"], r) for d in docs if d["kind"] in RBAC_KINDS for r in d["rules"]
    ]
    assert len(rules) > 10
    for name, rule in rules:
        for field in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
            assert "*" not in (rule.get(field) or []), f"{name}: {field} {rule}"
        assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"]), (name, rule)


def _release_holders(docs: list[dict[str, Any]]) -> set[str]:
    """ClusterRoles granting the hold policy's verb: release on podgroups."""
    return {
        d["metadata"]["name"]
        for d in of_kind(docs, "ClusterRole")
        for r in d["rules"]
        if "release" in r["verbs"]
        and r["resources"] == ["podgroups"]
        and r["apiGroups"] == ["scheduling.volcano.sh"]
    }


def test_only_pyextender_lifts_its_hold_on_a_pod(docs: list[dict[str, Any]]) -> None:
    """The hold policy matches updates that remove our gate or barrier annotation (the
    names of pyextender.api.names, so a rename cannot leave it matching nothing) and
    asks for the verb that exactly the components which lift them are granted: the
    sidecar (gates of admitted gangs), the controllers (a namespace no longer adopted)
    and the uninstall hook; never the webhook."""
    (policy,) = of_kind(docs, "ValidatingAdmissionPolicy")
    bindings = of_kind(docs, "ValidatingAdmissionPolicyBinding")
    for binding in bindings:
        assert binding["spec"]["policyName"] == policy["metadata"]["name"]
        assert binding["spec"]["validationActions"] == ["Deny"]
    # only where the pod webhook holds pods: evaluating it costs every pod update there
    holding = [
        h["namespaceSelector"]
        for h in of_kind(docs, "MutatingWebhookConfiguration")[0]["webhooks"]
        if h["clientConfig"]["service"]["path"] == "/mutate/pods"
    ]
    assert [b["spec"]["matchResources"]["namespaceSelector"] for b in bindings] == holding
    spec = policy["spec"]
    assert spec["failurePolicy"] == "Fail"
    assert spec["matchConstraints"]["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["pods"]}
    ]
    (match,) = spec["matchConditions"]
    assert match["expression"].count(f"'{GANG_GATE}'") == 2
    assert match["expression"].count(f"'{BARRIER_ANNOTATION}'") == 2
    (rule,) = spec["validations"]
    assert ".resource('podgroups')" in rule["expression"]
    assert ".check('release')" in rule["expression"]
    assert _release_holders(docs) == {
        "pyextender-scheduler",
        "pyextender-controllers",
        "pyextender-uninstall",
    }


def _pod_verbs(docs: list[dict[str, Any]], role: str) -> set[str]:
    """Verbs ClusterRole ``role`` grants on core pods."""
    (found,) = [d for d in of_kind(docs, "ClusterRole") if d["metadata"]["name"] == role]
    return {
        v
        for r in found["rules"]
        if r["apiGroups"] == [""] and "pods" in r["resources"]
        for v in r["verbs"]
    }


def test_the_uninstall_hook_may_do_what_pyextender_release_does() -> None:
    """The pre-delete Job runs ``pyextender release`` (controllers/release.py) as its
    own ServiceAccount: list and patch pods to lift the gate (release_pods); in
    scheduler mode delete and create them to hand them over (hand_over), and get one
    whose delete met a changed resourceVersion (a status write, a bind: _read). A verb
    missing fails the uninstall only when that race happens."""
    scheduler = _pod_verbs(render(), "pyextender-uninstall")
    assert scheduler == {"list", "patch", "get", "delete", "create"}
    existing = _pod_verbs(render("--set", "mode=existing"), "pyextender-uninstall")
    assert existing == {"list", "patch"}


def test_the_hold_policy_can_be_left_out() -> None:
    docs = render("--set", "adoption.holdPolicy.enabled=false")
    assert not of_kind(docs, "ValidatingAdmissionPolicy")
    assert not of_kind(docs, "ValidatingAdmissionPolicyBinding")


def test_every_service_account_is_bound_and_used(docs: list[dict[str, Any]]) -> None:
    accounts = {d["metadata"]["name"] for d in of_kind(docs, "ServiceAccount")}
    bound = {
        s["name"]
        for d in docs
        if d["kind"] in ("RoleBinding", "ClusterRoleBinding")
        for s in d["subjects"]
    }
    used = {
        d["spec"]["template"]["spec"]["serviceAccountName"]
        for d in docs
        if d["kind"] in ("Deployment", "Job")
    }
    assert accounts == bound == used


def test_secrets_are_reachable_only_by_name(docs: list[dict[str, Any]]) -> None:
    for d in docs:
        if d["kind"] not in RBAC_KINDS:
            continue
        for r in d["rules"]:
            # create cannot be limited by name, and reveals no secret (the ssh plugin)
            if "secrets" in r["resources"] and set(r["verbs"]) != {"create"}:
                assert r.get("resourceNames"), (d["metadata"]["name"], r)


def test_pods_are_non_root_with_requests_and_pod_ip_probes(docs: list[dict[str, Any]]) -> None:
    for d in of_kind(docs, "Deployment"):
        spec = d["spec"]["template"]["spec"]
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert "podAntiAffinity" in spec["affinity"]
        for c in spec["containers"]:
            assert c["securityContext"]["allowPrivilegeEscalation"] is False
            assert c["resources"]["requests"]["cpu"], c["name"]
            assert "readinessProbe" in c and "livenessProbe" in c, c["name"]
            args = " ".join(c["args"])
            assert "$(POD_IP)" in args, (c["name"], args)


def test_our_containers_args_are_accepted_by_our_cli(docs: list[dict[str, Any]]) -> None:
    parser = build_parser()
    for d in docs:
        if d["kind"] not in ("Deployment", "Job"):
            continue
        for c in d["spec"]["template"]["spec"]["containers"]:
            if c["command"] == ["pyextender"]:
                args = parser.parse_args(c["args"])  # SystemExit on an unknown flag
                assert callable(args.func)


def test_kube_scheduler_is_stock_pinned_with_its_own_lease() -> None:
    docs = render()
    dep = next(
        d for d in of_kind(docs, "Deployment") if d["metadata"]["name"].endswith("scheduler")
    )
    containers = {c["name"]: c for c in dep["spec"]["template"]["spec"]["containers"]}
    ks = containers["kube-scheduler"]
    assert ks["image"] == f"registry.k8s.io/kube-scheduler:{build.KUBE_VERSION}"
    assert dep["spec"]["replicas"] == 2
    cm = next(d for d in of_kind(docs, "ConfigMap"))
    conf = yaml.safe_load(cm["data"]["kube-scheduler.yaml"])
    # not kube-scheduler's default 50 / 100, which caps it near 50 pods/s
    assert conf["clientConnection"] == {"qps": 500, "burst": 1000}
    assert conf["leaderElection"]["leaderElect"] is True
    assert conf["leaderElection"]["resourceName"] not in ("", "kube-scheduler")
    assert [p["schedulerName"] for p in conf["profiles"]] == ["volcano"]
    (ext,) = conf["extenders"]
    assert ext["urlPrefix"].startswith("http://127.0.0.1:")
    assert ext["bindVerb"] == "bind" and ext["nodeCacheCapable"] is True
    # the extender port is not a container port: never exposed outside the Pod
    ports = [p["containerPort"] for c in containers.values() for p in c.get("ports", [])]
    assert int(ext["urlPrefix"].rsplit(":", 1)[1]) not in ports
    upstream = {
        d["roleRef"]["name"] for d in docs if d["kind"] in ("RoleBinding", "ClusterRoleBinding")
    }
    assert {
        "system:kube-scheduler",
        "system:volume-scheduler",
        "extension-apiserver-authentication-reader",
    } <= upstream


def test_existing_mode_has_no_second_scheduler() -> None:
    docs = render("--set", "mode=existing")
    containers = [
        c["name"]
        for d in of_kind(docs, "Deployment")
        for c in d["spec"]["template"]["spec"]["containers"]
    ]
    assert "kube-scheduler" not in containers
    refs = {
        d["roleRef"]["name"] for d in docs if d["kind"] in ("RoleBinding", "ClusterRoleBinding")
    }
    assert "system:kube-scheduler" not in refs
    webhook = next(
        d for d in of_kind(docs, "Deployment") if d["metadata"]["name"].endswith("webhook")
    )
    args = webhook["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--mode=existing" in args and "--scheduler-name=default-scheduler" in args
    sched = next(
        d for d in of_kind(docs, "Deployment") if d["metadata"]["name"].endswith("scheduler")
    )
    (sidecar,) = sched["spec"]["template"]["spec"]["containers"]
    # the cluster's pods (default-scheduler) must never become the sidecar's jobs or victims
    assert "--scheduler-name=volcano" in sidecar["args"]


def _containers(docs: list[dict[str, Any]], component: str) -> dict[str, dict[str, Any]]:
    dep = next(d for d in of_kind(docs, "Deployment") if d["metadata"]["name"].endswith(component))
    return {c["name"]: c for c in dep["spec"]["template"]["spec"]["containers"]}


def test_framework_mode_runs_the_plugin_build_on_a_pod_socket() -> None:
    docs = render("--set", "scheduler.framework.enabled=true")
    sched = _containers(docs, "scheduler")
    ks, sidecar = sched["kube-scheduler"], sched["sidecar"]
    assert ks["command"] == ["kube-scheduler-pyextender"]
    assert ks["image"] == f"ghcr.io/pyextender/kube-scheduler-pyextender:{build.KUBE_VERSION}"
    cm = next(d for d in of_kind(docs, "ConfigMap"))
    conf = yaml.safe_load(cm["data"]["kube-scheduler.yaml"])
    assert "extenders" not in conf
    (profile,) = conf["profiles"]
    assert profile["schedulerName"] == "volcano"
    assert profile["plugins"]["multiPoint"]["enabled"] == [{"name": "Pyextender"}]
    assert profile["plugins"]["bind"]["enabled"] == [{"name": "Pyextender"}]
    (plugin,) = profile["pluginConfig"]
    assert plugin["args"]["callTimeout"] == "5s"
    target = plugin["args"]["target"]
    sock = next(a.split("=", 1)[1] for a in sidecar["args"] if a.startswith("--grpc-socket="))
    assert target == f"unix://{sock}"
    # Filter and Reserve on the cycle socket, which the sidecar serves beside it
    cycle = next(a.split("=", 1)[1] for a in sidecar["args"] if a.startswith("--cycle-socket="))
    assert plugin["args"]["cycleSocket"] == cycle and cycle != sock
    assert cycle.rsplit("/", 1)[0] == sock.rsplit("/", 1)[0]
    # the socket's folder is one emptyDir both containers mount, and nothing else is there
    mounts = [
        {m["name"] for m in c["volumeMounts"] if sock.startswith(m["mountPath"] + "/")}
        for c in (ks, sidecar)
    ]
    assert mounts[0] == mounts[1] == {"grpc"}
    dep = next(
        d for d in of_kind(docs, "Deployment") if d["metadata"]["name"].endswith("scheduler")
    )
    volumes = {v["name"]: v for v in dep["spec"]["template"]["spec"]["volumes"]}
    assert volumes["grpc"] == {"name": "grpc", "emptyDir": {}}
    for component in ("webhook", "controllers"):
        (c,) = _containers(docs, component).values()
        assert "--gang-barrier=scheduler" in c["args"], component
    # the extender install has none of it
    plain = render()
    assert _containers(plain, "scheduler")["kube-scheduler"]["command"] == ["kube-scheduler"]
    for component in ("webhook", "controllers", "scheduler"):
        for c in _containers(plain, component).values():
            assert not [a for a in c["args"] if "barrier" in a or "grpc" in a], c["args"]


def test_framework_mode_can_keep_the_scheduling_gate() -> None:
    framework = ("--set", "scheduler.framework.enabled=true")
    docs = render(*framework, "--set", "scheduler.framework.gangBarrier=false")
    for component in ("webhook", "controllers"):
        (c,) = _containers(docs, component).values()
        assert not [a for a in c["args"] if "barrier" in a], c["args"]


def test_the_framework_image_is_built_at_devclusters_kubernetes_version() -> None:
    """One Kubernetes version everywhere the plugin build is named: devcluster's build,
    the shim's go.mod, its Dockerfile and the chart's default image tag."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["scheduler"]["framework"]["image"]["tag"] == build.KUBE_VERSION
    assert values["scheduler"]["kubeScheduler"]["image"]["tag"] == build.KUBE_VERSION
    gomod = (REPO / "shim" / "go.mod").read_text()
    assert f"\tk8s.io/kubernetes {build.KUBE_VERSION}\n" in gomod
    dockerfile = (REPO / "shim" / "Dockerfile").read_text()
    major, minor = build.KUBE_VERSION.lstrip("v").split(".")[:2]
    for arg in (f"KUBE_VERSION={build.KUBE_VERSION}", f"KUBE_MAJOR={major}", f"KUBE_MINOR={minor}"):
        assert f"ARG {arg}\n" in dockerfile, arg
    assert "-o /out/kube-scheduler-pyextender pyextender.io/shim" in dockerfile


def _strip(hook: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in hook.items() if k not in ("clientConfig", "namespaceSelector")}


def test_webhooks_match_webhook_configuration_py() -> None:
    docs = render()
    cc = service_client_config("pyextender-system", "pyextender-webhook")
    for kind, expected in (
        ("MutatingWebhookConfiguration", mutating_configuration(cc)),
        ("ValidatingWebhookConfiguration", validating_configuration(cc)),
    ):
        (got,) = of_kind(docs, kind)
        assert [_strip(h) for h in got["webhooks"]] == [_strip(h) for h in expected["webhooks"]]
        assert [h["clientConfig"] for h in got["webhooks"]] == [
            h["clientConfig"] for h in expected["webhooks"]
        ]
        assert [h.get("namespaceSelector") for h in got["webhooks"]] == [
            h.get("namespaceSelector") for h in expected["webhooks"]
        ]


def test_crds_are_the_generated_ones() -> None:
    ours = sorted(p.name for p in (REPO / "manifests" / "crds").glob("*.yaml"))
    assert sorted(p.name for p in (CHART / "crds").glob("*.yaml")) == ours
    for name in ours:
        chart = (CHART / "crds" / name).read_text()
        assert chart == (REPO / "manifests" / "crds" / name).read_text(), name


def test_default_scheduler_config_is_the_built_in_one() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    shipped = load_config(values["schedulerConfig"], REGISTRY)
    builtin = load_config(DEFAULT_CONFIG, REGISTRY)
    assert shipped.actions == builtin.actions
    assert shipped.plugin_names == builtin.plugin_names


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--kube-version", "1.29.0"), "kubeVersion: >=1.30.0-0"),
        (("--set", "mode=second"), 'mode must be "scheduler" or "existing"'),
        (("--set", "webhook.tls.mode=vault"), 'webhook.tls.mode must be "self" or "cert-manager"'),
        (("--set", "logFormat=xml"), 'logFormat must be "text" or "json"'),
        (
            ("--set", "mode=existing", "--set", "scheduler.framework.enabled=true"),
            "scheduler.framework.enabled needs mode=scheduler",
        ),
        (
            ("--set", "scheduler.framework.enabled=true,scheduler.framework.callTimeout=5"),
            'scheduler.framework.callTimeout must be a duration such as 5s or 500ms, got "5"',
        ),
    ],
)
def test_bad_values_fail_with_a_clear_message(args: tuple[str, ...], message: str) -> None:
    proc = helm_template(*args)
    assert proc.returncode != 0
    assert message in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("args", "name"),
    [
        ((), "volcano"),
        (("--set", "schedulerName=batch"), "batch"),
        # existing mode has no profile of its own: bare pods naming Volcano's are ours
        (("--set", "mode=existing", "--set", "schedulerName=batch"), "volcano"),
    ],
)
def test_bare_pods_naming_our_scheduler_are_sent_to_the_pod_webhook(
    args: tuple[str, ...], name: str
) -> None:
    (conf,) = of_kind(render(*args), "MutatingWebhookConfiguration")
    for hook in conf["webhooks"][:2]:  # enforcing and shadow pod webhooks
        (ours, _) = hook["matchConditions"]
        assert ours["expression"].endswith(f"object.spec.schedulerName == '{name}')")
