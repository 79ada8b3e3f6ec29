"""``vcctl job run``: the Job it builds from flags or reads from a file."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyextender.api.volcano import Job
from pyextender.vcctl import build_parser, job_from_flags, main, resource_list


def test_flags_make_volcanos_one_task_job() -> None:
    args = build_parser().parse_args(
        ["job", "run", "-N", "hello", "-n", "ml", "-i", "nginx", "-r", "3", "-m", "2",
         "-R", "cpu=500m,memory=1Gi", "-L", "cpu=1"]
    )  # fmt: skip
    body = job_from_flags(args)
    job = Job.from_dict(body)  # a valid Job
    assert job.metadata.name == "hello" and job.metadata.namespace == "ml"
    assert job.spec.min_available == 2 and job.spec.scheduler_name == "volcano"
    (task,) = job.spec.tasks
    assert task.name == "default0" and task.replicas == 3
    (c,) = task.template["spec"]["containers"]
    assert c["image"] == "nginx" and c["name"] == "hello"
    assert c["resources"] == {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1"}}
    assert task.template["spec"]["restartPolicy"] == "OnFailure"


def test_defaults_are_volcanos() -> None:
    body = job_from_flags(build_parser().parse_args(["job", "run", "-N", "x"]))
    (c,) = body["spec"]["tasks"][0]["template"]["spec"]["containers"]
    assert c["image"] == "busybox"
    assert c["resources"]["requests"] == {"cpu": "1000m", "memory": "100Mi"}
    assert body["metadata"]["namespace"] == "default" and body["spec"]["minAvailable"] == 1


def test_a_file_is_taken_as_it_is(tmp_path: Path) -> None:
    f = tmp_path / "job.yaml"
    f.write_text("apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {name: f}\n")
    body = job_from_flags(build_parser().parse_args(["job", "run", "-f", str(f)]))
    assert body["metadata"] == {"name": "f"}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["job", "run"], "job name cannot be left blank"),
        (["job", "run", "-N", "x", "-R", "cpu"], "'cpu' is not name=quantity"),
    ],
)
def test_bad_input_is_said_plainly(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_resource_list() -> None:
    assert resource_list("cpu=1, nvidia.com/gpu=2") == {"cpu": "1", "nvidia.com/gpu": "2"}
    assert resource_list("") == {}
