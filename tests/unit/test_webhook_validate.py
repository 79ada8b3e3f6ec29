"""Validation of Volcano CRDs: verdicts and the messages users read, case by case."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.webhook_support import request
from webhook.queues import OPEN_ANSWER_S, ApiQueues, MemoryQueues, QueueInfo, QueueLookupError
from webhook.validate import validate

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def queue(name: str, parent: str = "", state: str = "", **spec: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": dict(spec),
    }
    if parent:
        doc["spec"]["parent"] = parent
    if state:
        doc["status"] = {"state": state}
    return doc


def podgroup(name: str = "pg", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"minMember": 2, **spec},
    }


def task(name: str, replicas: int = 2, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "replicas": replicas,
        "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
        **extra,
    }


def job(
    name: str = "train", tasks: list[dict[str, Any]] | None = None, **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {
            "queue": "default",
            "tasks": tasks if tasks is not None else [task("worker")],
            **spec,
        },
    }


def command(action: str | None, kind: str = "Job", name: str = "train") -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {"name": "cmd", "namespace": "ns"},
        "target": {"apiVersion": "v1", "kind": kind, "name": name, "uid": "u"},
    }
    if action:
        doc["action"] = action
    return doc


def hypernode(name: str, members: list[dict[str, Any]], tier: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {"tier": tier, "members": members},
    }


QUEUES = MemoryQueues(
    [
        queue("research", state="Open"),
        queue("team-a", parent="research"),
        queue("team-a-1", parent="team-a"),
        queue("closed", state="Closed"),
    ]
)

# (case, object, expected message fragments; [] means allowed)
CREATE_CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    ("podgroup ok", podgroup(queue="research"), []),
    ("podgroup default queue", podgroup(), []),
    ("podgroup missing queue", podgroup(queue="nope"), ["spec.queue", '"nope" does not exist']),
    (
        "podgroup queue that cannot be a name",
        podgroup(queue="%"),
        ["spec.queue", '"%" does not exist: a queue name is a DNS subdomain'],
    ),
    ("podgroup closed queue", podgroup(queue="closed"), ["spec.queue", "is Closed"]),
    ("podgroup negative minMember", podgroup(minMember=-1), ["spec.minMember", ">= 0"]),
    ("podgroup unknown field", podgroup(minMembers=3), ["spec.minMembers: unknown field"]),
    (
        "podgroup negative minTaskMember",
        podgroup(minTaskMember={"w": -1}),
        ["spec.minTaskMember[w]"],
    ),
    (
        "podgroup topology both tiers",
        podgroup(networkTopology={"highestTierAllowed": 1, "highestTierName": "rack"}),
        ["spec.networkTopology", "must not both be set"],
    ),
    ("queue ok", queue("new", parent="research", weight=2), []),
    ("queue weight 0", queue("new", weight=0), ["spec.weight: must be an integer >= 1, got 0"]),
    ("queue weight omitted", queue("new"), []),
    ("queue negative weight", queue("new", weight=-1), ["spec.weight", ">= 1"]),
    (
        "queue missing parent",
        queue("new", parent="ghost"),
        ["spec.parent", '"ghost" does not exist'],
    ),
    (
        "queue parent that cannot be a name",
        queue("new", parent="a/b"),
        ["spec.parent", 'parent queue "a/b" does not exist: a queue name is a DNS subdomain'],
    ),
    ("queue own parent", queue("new", parent="new"), ["spec.parent", "its own parent"]),
    (
        "queue deserved over capability",
        queue("new", capability={"cpu": "4"}, deserved={"cpu": "8"}),
        ["spec.deserved[cpu]: deserved[cpu]=8 must be <= capability[cpu]=4"],
    ),
    (
        "queue guarantee over deserved",
        queue("new", deserved={"nvidia.com/gpu": 2}, guarantee={"resource": {"nvidia.com/gpu": 4}}),
        [
            "spec.deserved[nvidia.com/gpu]: deserved[nvidia.com/gpu]=2 must be >= "
            "guarantee[nvidia.com/gpu]=4"
        ],
    ),
    (
        "queue guarantee without deserved",
        queue("new", guarantee={"resource": {"cpu": "2"}}),
        ["spec.deserved[cpu]: deserved[cpu] must be >= guarantee[cpu]=2"],
    ),
    (
        "queue guarantee of a resource deserved does not name",
        queue("new", deserved={"cpu": "4"}, guarantee={"resource": {"cpu": "2", "memory": "1Gi"}}),
        ["spec.deserved[memory]: deserved[memory] must be >= guarantee[memory]=1Gi"],
    ),
    (
        "queue guarantee <= deserved <= capability",
        queue(
            "new",
            capability={"cpu": "8"},
            deserved={"cpu": "4", "memory": "8Gi"},
            guarantee={"resource": {"cpu": "4"}},
        ),
        [],
    ),
    ("queue negative capability", queue("new", capability={"cpu": "-1"}), ["spec.capability[cpu]"]),
    ("queue bad quantity", queue("new", capability={"cpu": "lots"}), ["spec.capability[cpu]"]),
    (
        "root with parent",
        queue("root", parent="default"),
        ["spec.parent", "root queue has no parent"],
    ),
    ("root closed", queue("root", state="Closed"), ["status.state", "root queue cannot be closed"]),
    ("job ok", job(), []),
    ("job in research", job(queue="research"), []),
    ("job missing queue", job(queue="nope"), ["spec.queue", '"nope" does not exist']),
    (
        "job queue with upper case",
        job(queue="Research"),
        ["spec.queue: must match", 'got "Research"'],  # the Job schema's own pattern
    ),
    ("job closed queue", job(queue="closed"), ["spec.queue", "is Closed"]),
    ("job no tasks", job(tasks=[]), ["spec.tasks: at least one task"]),
    (
        "job minAvailable over replicas",
        job(minAvailable=5),
        ["spec.minAvailable: must be <= the sum of task replicas (2), got 5"],
    ),
    (
        "task minAvailable over replicas",
        job(tasks=[task("w", replicas=2, minAvailable=3)]),
        ["spec.tasks[0].minAvailable"],
    ),
    (
        "duplicate task names",
        job(tasks=[task("w"), task("w")]),
        ["spec.tasks[1].name", "duplicate task name"],
    ),
    ("task name not DNS", job(tasks=[task("Worker_1")]), ["spec.tasks[0].name", "must match"]),
    ("task name missing", job(tasks=[task("")]), ["spec.tasks[0].name: required"]),
    (
        "pod name too long",
        job(name="j" * 40, tasks=[task("t" * 30)]),
        ["spec.tasks[0].name", "more than 63"],
    ),
    (
        "task without containers",
        job(tasks=[{"name": "w", "replicas": 1, "template": {"spec": {}}}]),
        ["spec.tasks[0].template.spec.containers"],
    ),
    (
        "duplicate policy event",
        job(
            policies=[
                {"event": "PodEvicted", "action": "RestartJob"},
                {"events": ["PodEvicted"], "action": "AbortJob"},
            ]
        ),
        ["spec.policies[1].event", "already handled by spec.policies[0]"],
    ),
    (
        "wildcard policy with others",
        job(
            policies=[{"event": "*", "action": "RestartJob"}, {"exitCode": 3, "action": "AbortJob"}]
        ),
        ["spec.policies", "'*' must be the only policy"],
    ),
    (
        "internal event",
        job(policies=[{"event": "OutOfSync", "action": "RestartJob"}]),
        ["spec.policies[0].event", "raised internally"],
    ),
    (
        "duplicate exit code in task",
        job(
            tasks=[
                task(
                    "w",
                    policies=[
                        {"exitCode": 3, "action": "RestartJob"},
                        {"exitCode": 3, "action": "AbortJob"},
                    ],
                )
            ]
        ),
        ["spec.tasks[0].policies[1].exitCode"],
    ),
    (
        "exit code 0",
        job(policies=[{"exitCode": 0, "action": "RestartJob"}]),
        ["spec.policies[0].exitCode: must not be 0"],
    ),
    (
        "unknown action",
        job(policies=[{"event": "PodFailed", "action": "Explode"}]),
        ["spec.policies[0].action", "must be one of"],
    ),
    (
        "volume without claim",
        job(volumes=[{"mountPath": "/data"}]),
        ["spec.volumes[0]", "one of volumeClaim"],
    ),
    (
        "duplicate mount path",
        job(
            volumes=[
                {"mountPath": "/d", "volumeClaimName": "a"},
                {"mountPath": "/d", "volumeClaimName": "b"},
            ]
        ),
        ["spec.volumes[1].mountPath", "already mounted"],
    ),
    (
        "dependency on unknown task",
        job(tasks=[task("a", dependsOn={"name": ["ghost"]})]),
        ["spec.tasks[0].dependsOn.name", 'no task named "ghost"'],
    ),
    (
        "dependency cycle",
        job(tasks=[task("a", dependsOn={"name": ["b"]}), task("b", dependsOn={"name": ["a"]})]),
        ["spec.tasks: task dependencies form a cycle: a -> b -> a"],
    ),
    ("dependency dag", job(tasks=[task("a"), task("b", dependsOn={"name": ["a"]})]), []),
    (
        "partition policy is not implemented",
        job(tasks=[task("a", partitionPolicy={"totalPartitions": 2, "partitionSize": 1})]),
        ["spec.tasks[0].partitionPolicy: not supported"],
    ),
    (
        "a PVC to create",
        job(volumes=[{"mountPath": "/d", "volumeClaim": {"accessModes": ["ReadWriteOnce"]}}]),
        [],
    ),
    (
        "policy timeout and task maxRetry are implemented",
        job(
            tasks=[task("a", maxRetry=2)],
            policies=[{"event": "PodFailed", "action": "RestartJob", "timeout": "30s"}],
        ),
        [],
    ),
    (
        "a policy event we do not implement",
        job(policies=[{"event": "PodRunning", "action": "AbortJob"}]),
        ["spec.policies[0].event", "must be one of"],
    ),
    (
        "pod pending with a timeout",
        job(policies=[{"event": "PodPending", "action": "AbortJob", "timeout": "1m"}]),
        [],
    ),
    (
        "pod pending without a timeout",
        job(policies=[{"events": ["PodPending"], "action": "AbortJob"}]),
        ["spec.policies[0].timeout: required with PodPending"],
    ),
    (
        "restart task without a task",
        command("RestartTask"),
        ["metadata.annotations[volcano.sh/task-spec]", "name of the task"],
    ),
    ("command ok", command("AbortJob"), []),
    ("command open queue", command("OpenQueue", kind="Queue", name="closed"), []),
    ("command missing action", command(None), ["action: required"]),
    (
        "command wrong target",
        command("CloseQueue", kind="Job"),
        ["target.kind", "applies to a Queue"],
    ),
    ("close root", command("CloseQueue", kind="Queue", name="root"), ["target.name", "root queue"]),
    ("command unknown action", command("Explode"), ["action: must be one of"]),
    (
        "hypernode ok",
        hypernode("rack", [{"type": "Node", "selector": {"exactMatch": {"name": "n1"}}}]),
        [],
    ),
    (
        "hypernode empty exact name",
        hypernode("rack", [{"type": "Node", "selector": {"exactMatch": {"name": ""}}}]),
        ["spec.members[0].selector.exactMatch.name: required"],
    ),
    (
        "hypernode two selectors",
        hypernode(
            "rack",
            [
                {
                    "type": "Node",
                    "selector": {"exactMatch": {"name": "a"}, "regexMatch": {"pattern": "b"}},
                }
            ],
        ),
        ["spec.members[0].selector", "only one of"],
    ),
    (
        "hypernode bad regex",
        hypernode("rack", [{"type": "Node", "selector": {"regexMatch": {"pattern": "("}}}]),
        ["spec.members[0].selector.regexMatch.pattern", "invalid regular expression"],
    ),
    (
        "hypernode contains itself",
        hypernode(
            "spine", [{"type": "HyperNode", "selector": {"exactMatch": {"name": "spine"}}}], tier=2
        ),
        ["a HyperNode cannot contain itself"],
    ),
    (
        "hypernode bad member type",
        hypernode("rack", [{"type": "Switch", "selector": {"exactMatch": {"name": "a"}}}]),
        ["spec.members[0].type", "must be one of"],
    ),
]


@pytest.mark.parametrize(
    ("obj", "expected"), [c[1:] for c in CREATE_CASES], ids=[c[0] for c in CREATE_CASES]
)
def test_create(obj: dict[str, Any], expected: list[str]) -> None:
    verdict = validate(request(obj), QUEUES)
    if not expected:
        assert verdict.allowed, verdict.message
        return
    assert not verdict.allowed
    assert verdict.code == 422 and verdict.reason == "Invalid"
    assert verdict.message.startswith(f'{obj["kind"]} "{obj["metadata"]["name"]}" is invalid: ')
    for fragment in expected:
        assert fragment in verdict.message, verdict.message


def test_min_task_member_over_min_member_is_a_warning() -> None:
    verdict = validate(request(podgroup(minMember=2, minTaskMember={"a": 2, "b": 2})), QUEUES)
    assert verdict.allowed
    assert verdict.warnings and "adds up to 4" in verdict.warnings[0]


# ---------------------------------------------------------------- updates and deletes


def test_queue_parent_cycle_rejected_on_update() -> None:
    old = queue("research")
    new = queue("research", parent="team-a-1")
    verdict = validate(request(new, operation="UPDATE", old=old), QUEUES)
    assert not verdict.allowed
    assert "spec.parent" in verdict.message
    assert "research -> team-a-1 -> team-a -> research" in verdict.message


def test_queue_update_without_parent_change_skips_tree_walk() -> None:
    class Unreachable(MemoryQueues):
        def get(self, name: str, recent: bool = False) -> QueueInfo | None:
            raise QueueLookupError("API server down")

    old = queue("team-a", parent="research", weight=1)
    new = queue("team-a", parent="research", weight=3)
    assert validate(request(new, operation="UPDATE", old=old), Unreachable()).allowed


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("root", "the root queue cannot be deleted"),
        ("default", "the default queue cannot be deleted"),
        ("team-a", "has child queues (team-a-1)"),
        ("team-a-1", ""),
    ],
)
def test_queue_delete(name: str, expected: str) -> None:
    verdict = validate(request(None, operation="DELETE", old=queue(name), name=name), QUEUES)
    if not expected:
        assert verdict.allowed
        return
    assert not verdict.allowed and verdict.code == 403
    assert expected in verdict.message


def test_delete_of_other_kinds_allowed() -> None:
    assert validate(request(None, operation="DELETE", old=job(), name="train"), QUEUES).allowed


def test_job_update_rules() -> None:
    old = job(minAvailable=2)
    scaled = copy.deepcopy(old)
    scaled["spec"]["minAvailable"] = 3
    scaled["spec"]["tasks"][0]["replicas"] = 3
    scaled["metadata"]["labels"] = {"edited": "yes"}
    assert validate(request(scaled, operation="UPDATE", old=old), QUEUES).allowed

    moved = copy.deepcopy(old)
    moved["spec"]["queue"] = "research"
    moved["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["image"] = "other"
    verdict = validate(request(moved, operation="UPDATE", old=old), QUEUES)
    assert not verdict.allowed
    assert "changed: spec.queue, spec.tasks[0].template" in verdict.message

    grown = copy.deepcopy(old)
    grown["spec"]["tasks"].append(task("extra"))
    verdict = validate(request(grown, operation="UPDATE", old=old), QUEUES)
    assert "tasks may not be added or removed" in verdict.message


def test_job_update_to_closed_queue_is_not_rechecked() -> None:
    """Volcano checks the queue on CREATE only; a running job keeps its closed queue."""
    old = job(queue="closed")
    new = copy.deepcopy(old)
    new["spec"]["maxRetry"] = 5
    assert validate(request(new, operation="UPDATE", old=old), QUEUES).allowed


def test_generated_claim_name_is_not_an_edit() -> None:
    old = job(volumes=[{"mountPath": "/d", "volumeClaim": {"accessModes": ["ReadWriteOnce"]}}])
    new = copy.deepcopy(old)
    new["spec"]["volumes"][0]["volumeClaimName"] = "train-volume-abcde"
    # both set is a user mistake on CREATE, but the controller writes the name on UPDATE
    verdict = validate(request(new, operation="UPDATE", old=old), QUEUES)
    assert verdict.allowed, verdict.message


def test_podgroup_moved_to_missing_queue() -> None:
    old = podgroup(queue="research")
    new = podgroup(queue="ghost")
    verdict = validate(request(new, operation="UPDATE", old=old), QUEUES)
    assert not verdict.allowed and '"ghost" does not exist' in verdict.message


def test_lookup_failure_denies_with_503() -> None:
    class Down(MemoryQueues):
        def get(self, name: str, recent: bool = False) -> QueueInfo | None:
            raise QueueLookupError("cannot read queue 'x': connection refused")

    verdict = validate(request(job(queue="x")), Down())
    assert not verdict.allowed and verdict.code == 503
    assert "connection refused" in verdict.message


def test_api_queues_do_not_ask_for_names_no_queue_can_have() -> None:
    """A name the API server would refuse in a path (400 for ``%``) is a plain
    "does not exist", not a lookup failure (503): no request is sent for it."""
    from kubernetes import client

    config = client.Configuration()
    config.host = "http://127.0.0.1:9"  # discard port: nothing listens, a request would fail
    queues = ApiQueues(client.ApiClient(config), timeout=0.5)
    for name in ("%", "a/b", "..", "Upper", "-x", "x" * 254, ""):
        assert queues.get(name) is None, name
    with pytest.raises(QueueLookupError, match="cannot read queue 'research'"):
        queues.get("research")


def test_unknown_kind_is_a_configuration_error() -> None:
    obj = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}
    verdict = validate(request(obj), QUEUES)
    assert not verdict.allowed and verdict.code == 400
    assert "ValidatingWebhookConfiguration" in verdict.message


def test_wrong_version_of_known_kind() -> None:
    obj = queue("q")
    obj["apiVersion"] = "scheduling.volcano.sh/v1"
    assert validate(request(obj), QUEUES).code == 400


def test_missing_object() -> None:
    req = request(job())
    req = type(req)(**{**{f: getattr(req, f) for f in req.__slots__}, "object": None})
    verdict = validate(req, QUEUES)
    assert not verdict.allowed and "request.object is missing" in verdict.message


def test_builtin_queues_exist_without_api_objects() -> None:
    empty = MemoryQueues()
    assert empty.get("root") == QueueInfo("root", "", "Open")
    assert empty.get("default") == QueueInfo("default", "root", "Open")
    assert validate(request(job()), empty).allowed


# ---------------------------------------------------------------- Volcano's own YAML


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_examples_are_accepted(path: Path) -> None:
    queues = MemoryQueues(
        [d for d in yaml.safe_load_all(EXAMPLES.joinpath("queue.yaml").read_text()) if d]
    )
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    volcano = [d for d in docs if "volcano.sh/" in d.get("apiVersion", "")]
    for doc in volcano:
        verdict = validate(request(doc), queues)
        assert verdict.allowed, f"{path.name}: {verdict.message}"


def test_standing_problems_do_not_block_updates() -> None:
    """A Job stored before a rule existed stays updatable (finalizers, labels, scaling)."""
    old = job(name="j" * 40, tasks=[task("t" * 30)])  # pod names too long
    new = copy.deepcopy(old)
    new["metadata"]["finalizers"] = ["example.com/cleanup"]
    verdict = validate(request(new, operation="UPDATE", old=old), QUEUES)
    assert verdict.allowed
    assert "keeps problems it already had" in verdict.warnings[0]
    # a new problem still denies
    new["spec"]["policies"] = [{"exitCode": 0, "action": "RestartJob"}]
    assert not validate(request(new, operation="UPDATE", old=old), QUEUES).allowed


def test_standing_model_errors_do_not_block_updates() -> None:
    old = job(minAvailable=9)  # over the replicas: fails decoding
    new = copy.deepcopy(old)
    new["metadata"]["labels"] = {"a": "b"}
    verdict = validate(request(new, operation="UPDATE", old=old), QUEUES)
    assert verdict.allowed and "spec.minAvailable" in verdict.warnings[0]
    new["spec"]["minAvailable"] = 10
    assert not validate(request(new, operation="UPDATE", old=old), QUEUES).allowed


class CountingQueues:
    """CustomObjectsApi's queue reads, answered from a dict and counted."""

    def __init__(self, states: dict[str, str]) -> None:
        self.states = states
        self.reads = 0

    def get_cluster_custom_object(self, *where: Any, **kw: Any) -> dict[str, Any]:
        from kubernetes import client

        self.reads += 1
        name = where[-1]
        if name not in self.states:
            raise client.ApiException(status=404, reason="Not Found")
        return {"metadata": {"name": name}, "spec": {}, "status": {"state": self.states[name]}}


def _api_queues(states: dict[str, str]) -> tuple[ApiQueues, CountingQueues, list[float]]:
    from kubernetes import client

    now = [100.0]
    queues = ApiQueues(client.ApiClient(client.Configuration()), clock=lambda: now[0])
    api = CountingQueues(states)
    queues._objects = api  # type: ignore[assignment]
    return queues, api, now


def test_an_open_queue_is_read_once_a_second_for_new_gangs() -> None:
    """Standalone pods bring a PodGroup each, all of one queue: their validations share
    one read per OPEN_ANSWER_S, and every PodGroup is still checked against it."""
    queues, api, now = _api_queues({"research": "Open"})
    for _ in range(50):
        assert validate(request(podgroup("g", queue="research")), queues).allowed
    assert api.reads == 1
    now[0] += OPEN_ANSWER_S
    assert validate(request(podgroup("g", queue="research")), queues).allowed
    assert api.reads == 2


def test_only_an_open_answer_is_reused() -> None:
    """A queue that did not exist or was closed is read again at once: made or opened a
    moment later, it takes the next gang. One read as Open and then closed is refused as
    soon as it is read again (at most OPEN_ANSWER_S later)."""
    queues, api, now = _api_queues({})
    assert not validate(request(podgroup("g", queue="later")), queues).allowed
    api.states["later"] = "Closed"
    verdict = validate(request(podgroup("g", queue="later")), queues)
    assert not verdict.allowed and "Closed" in verdict.message
    api.states["later"] = "Open"
    assert validate(request(podgroup("g", queue="later")), queues).allowed
    assert api.reads == 3
    api.states["later"] = "Closed"
    assert validate(request(podgroup("g", queue="later")), queues).allowed  # within 1 s
    now[0] += OPEN_ANSWER_S
    assert not validate(request(podgroup("g", queue="later")), queues).allowed
    assert api.reads == 4


def test_queue_rules_always_read_afresh() -> None:
    """The queue tree's checks (a parent that exists and is open, no cycle) never use a
    remembered answer: only whether a queue takes new gangs does."""
    queues, api, _ = _api_queues({"research": "Open"})
    assert queues.get("research", recent=True) is not None
    assert queues.get("research") is not None
    assert queues.get("research") is not None
    assert api.reads == 3
