"""vcctl's command tree, flags and rows as Volcano's (``cmd/cli/vcctl.go``, ``cmd/cli/job.go``,
``cmd/cli/queue.go``, ``cmd/cli/pod.go``, ``pkg/cli/util/util.go``, ``pkg/cli/job/list.go``,
``pkg/cli/queue/list.go``, ``pkg/cli/pod/pod.go``), without a cluster."""

from __future__ import annotations

import contextlib
import io
from datetime import UTC, datetime
from typing import Any

import pytest

from pyextender import vcctl


def parse(*argv: str) -> Any:
    return vcctl.build_parser().parse_args(argv)


@pytest.mark.parametrize(
    "argv",
    [
        ("--kubeconfig", "/k", "-n", "ml", "job", "list"),
        ("job", "list", "--kubeconfig", "/k", "-n", "ml"),
        ("-k", "/k", "job", "list", "--namespace", "ml"),
        ("--namespace", "ml", "job", "list", "-k", "/k"),
    ],
)
def test_global_flags_before_or_after_the_command(argv: tuple[str, ...]) -> None:
    args = parse(*argv)
    assert (args.kubeconfig, args.namespace, args.group, args.cmd) == ("/k", "ml", "job", "list")


def test_a_flag_after_the_command_wins_and_queue_n_is_the_queue_name() -> None:
    args = parse("-n", "a", "job", "view", "-N", "j", "-n", "b")
    assert args.namespace == "b" and args.name == "j"
    args = parse("-n", "ml", "-s", "https://api:6443", "queue", "create", "-n", "research")
    assert args.name == "research" and args.namespace == "ml"
    assert args.master == "https://api:6443"
    assert parse("queue", "create").name == "test"  # Volcano's default queue name
    args = parse("queue", "get", "-n", "q", "--kubeconfig", "/k", "--master", "m")
    assert (args.name, args.kubeconfig, args.master) == ("q", "/k", "m")
    assert not hasattr(parse("job", "list"), "kubeconfig")  # as kubectl finds it


def help_of(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
        parse(*argv, "--help")
    assert done.value.code == 0
    return out.getvalue()


@pytest.mark.parametrize(
    ("level", "commands"),
    [
        ((), ["job", "queue", "pod", "jobflow", "jobtemplate", "explain", "version"]),
        (("job",), ["run", "list", "view", "suspend", "resume", "delete"]),
        (("queue",), ["create", "delete", "operate", "list", "get"]),
        (("pod",), ["list"]),
        (("jobflow",), ["create", "list", "get", "delete", "describe"]),
        (("jobtemplate",), ["create", "list", "get", "delete", "describe"]),
    ],
)
def test_help_at_each_level_lists_its_commands(level: tuple[str, ...], commands: list[str]) -> None:
    text = help_of(*level)
    assert "{" + ",".join(commands) + "}" in text, text
    for command in commands:
        assert f"\n    {command} " in text, (command, text)


def test_every_command_takes_the_global_flags() -> None:
    for argv in (("job", "run"), ("pod", "list"), ("queue", "operate"), ("explain",)):
        text = help_of(*argv)
        assert "--kubeconfig" in text and "--master" in text, argv


@pytest.mark.parametrize("group", ["jobflow", "jobtemplate"])
def test_jobflow_and_jobtemplate_say_not_supported(
    group: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in ([group], [group, "create", "-f", "flow.yaml"], ["-n", "x", group, "list"]):
        assert vcctl.main(argv) == vcctl.NOT_SUPPORTED
        err = capsys.readouterr().err
        assert f"vcctl {group}: not supported" in err and "dependsOn" in err, err


def test_a_bad_flag_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as done, contextlib.redirect_stderr(io.StringIO()):
        parse("queue", "operate", "-n", "q", "-a", "shut")
    assert done.value.code == 2


NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def test_rows_have_volcanos_columns() -> None:
    job = {
        "metadata": {"name": "train", "namespace": "ml",
                     "creationTimestamp": "2026-11-23T10:00:00Z"},
        "spec": {"minAvailable": 2, "queue": "q",
                 "tasks": [{"replicas": 2}, {"replicas": 1}]},
        "status": {"state": {"phase": "Running"}, "minAvailable": 2, "running": 3,
                   "retryCount": 1},
    }  # fmt: skip
    assert vcctl.job_row(job, all_namespaces=False) == [
        "train", "2026-11-23", "Running", "Batch", "3", "2", "0", "3", "0", "0", "0", "1",
    ]  # fmt: skip
    assert vcctl.job_row(job, all_namespaces=True)[:2] == ["ml", "train"]
    assert len(vcctl.JOB_COLUMNS) == len(vcctl.job_row(job, False))
    queue = {"metadata": {"name": "q"}, "spec": {"weight": 3},
             "status": {"state": "Open", "inqueue": 1, "pending": 2}}  # fmt: skip
    assert vcctl.queue_row(queue) == ["q", "3", "Open", "1", "2", "0", "0"]
    pod = {
        "metadata": {"name": "train-worker-0", "creationTimestamp": "2026-11-23T09:30:00Z"},
        "spec": {"containers": [{"name": "a"}, {"name": "b"}]},
        "status": {"phase": "Running", "containerStatuses": [
            {"ready": True, "restartCount": 2, "state": {"running": {}}},
            {"ready": False, "restartCount": 1,
             "state": {"waiting": {"reason": "CrashLoopBackOff"}}},
        ]},
    }  # fmt: skip
    assert vcctl.pod_row(pod, NOW) == ["train-worker-0", "1/2", "CrashLoopBackOff", "3", "2h30m"]
    gated = {"metadata": {"name": "g"}, "spec": {"containers": [{}], "schedulingGates": [{}]},
             "status": {"phase": "Pending"}}  # fmt: skip
    assert vcctl.pod_row(gated, NOW)[2] == "SchedulingGated"


def test_job_view_prints_volcanos_sections() -> None:
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": "train", "namespace": "ml", "uid": "u1"},
        "spec": {"minAvailable": 1, "schedulerName": "volcano", "tasks": [
            {"name": "worker", "replicas": 1, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox",
                                "resources": {"requests": {"cpu": "1"}}}]}}}]},
        "status": {"state": {"phase": "Running"}, "running": 1},
    }  # fmt: skip
    event = {"type": "Normal", "reason": "ExecuteAction", "message": "Start to execute action",
             "count": 1, "source": {"component": "vc-controller"}}  # fmt: skip
    text = vcctl.describe_job(job, [event])
    lines = text.splitlines()
    for section in ("Name:", "Namespace:", "Labels:", "Annotations:", "API Version:", "Kind:",
                    "Metadata:", "Spec:", "Status:", "Events:"):  # fmt: skip
        assert any(line.startswith(section) for line in lines), (section, text)
    assert "    Phase:  Running" in lines and "  - Name:      worker" in lines
    assert "      Requests: cpu=1" in lines
    assert any(line.split()[:2] == ["Normal", "ExecuteAction"] for line in lines), text
    assert vcctl.describe_job(job, []).endswith("Events:  <none>")
