"""Validation of Volcano's CRDs: the typed models first, then each kind's own rules.

Decoding through ``pyextender.api.volcano`` reports every bad field by path
(wrong types, unknown fields, out-of-range numbers, cross-field rules of the
models); the rule modules add what needs more context: the old object, or
other queues read from the API server. A denial names the fields:
``Job "train" is invalid: spec.minAvailable: must be <= ...``.

Lookups that fail (API server unreachable) deny the request: the
configuration says ``failurePolicy: Fail`` for these kinds, and letting an
unchecked object through would break the same promise.
"""

from __future__ import annotations

from typing import Any

from pyextender.api.volcano import (
    RESOURCES,
    Command,
    CronJob,
    FieldError,
    HyperNode,
    Job,
    PodGroup,
    Queue,
)
from pyextender.api.volcano.codec import Problem, Resource
from webhook.findings import Findings, describe
from webhook.queues import QueueLookupError, QueueSource
from webhook.review import AdmissionRequest, Verdict, allow, deny
from webhook.validate_command import check_command
from webhook.validate_cronjob import check_cronjob
from webhook.validate_hypernode import check_hypernode
from webhook.validate_job import check_job
from webhook.validate_podgroup import check_podgroup
from webhook.validate_queue import check_queue, check_queue_delete

_BY_GROUP_KIND: dict[tuple[str, str], type[Resource]] = {
    (r.KIND.group, r.KIND.kind): r for r in RESOURCES
}


def _title(req: AdmissionRequest) -> str:
    obj = req.object or req.old_object or {}
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    name = req.name or meta.get("name") or (f"{meta.get('generateName', '')}*")
    return f'{req.kind} "{name}"'


def _spec(obj: dict[str, Any] | None) -> dict[str, Any]:
    spec = (obj or {}).get("spec")
    return spec if isinstance(spec, dict) else {}


def _rules(
    obj: Resource,
    old: Resource | None,
    op: str,
    raw: dict[str, Any],
    old_raw: dict[str, Any] | None,
    queues: QueueSource,
) -> Findings:
    """Each kind's own rules; ``raw``/``old_raw`` are the documents as sent."""
    if isinstance(obj, Queue):
        old_queue = old if isinstance(old, Queue) else None
        return check_queue(obj, old_queue, op, queues)
    if isinstance(obj, PodGroup):
        return check_podgroup(obj, old if isinstance(old, PodGroup) else None, op, queues)
    if isinstance(obj, Job):
        if op == "UPDATE" and old_raw is not None:
            return check_job(obj, op, queues, _spec(old_raw), _spec(raw))
        return check_job(obj, op, queues)
    if isinstance(obj, CronJob):
        return check_cronjob(obj, op, queues)
    if isinstance(obj, Command):
        return check_command(obj)
    if isinstance(obj, HyperNode):
        return check_hypernode(obj)
    return Findings()


def _ratchet(problems: list[Problem], before: list[Problem], title: str) -> Verdict | None:
    """On UPDATE, problems the stored object already had do not block the update.

    Objects stored before this webhook (or a rule) existed must stay updatable,
    or controllers could no longer add finalizers or touch labels. The user
    is warned instead. Returns None when a new problem remains.
    """
    if not problems or not set(problems) <= set(before):
        return None
    return allow([f"{title} keeps problems it already had: {describe(problems)}"])


def validate(req: AdmissionRequest, queues: QueueSource) -> Verdict:
    """The verdict on one CREATE/UPDATE/DELETE of a Volcano object."""
    cls = _BY_GROUP_KIND.get((req.group, req.kind))
    if cls is None or req.version != cls.KIND.version:
        known = ", ".join(f"{r.KIND.api_version} {r.KIND.kind}" for r in RESOURCES)
        return deny(
            f"this webhook validates {known}; got {req.api_version} {req.kind} "
            "(check the ValidatingWebhookConfiguration rules)",
            code=400,
            reason="BadRequest",
        )
    title = _title(req)
    op = req.operation
    if op == "DELETE":
        try:
            why = check_queue_delete(req.name, queues) if cls is Queue else ""
        except QueueLookupError as exc:
            return deny(f"{title} cannot be checked now: {exc}", 503, "ServiceUnavailable")
        return deny(f"{title} cannot be deleted: {why}", 403, "Forbidden") if why else allow()
    if op not in ("CREATE", "UPDATE"):
        return allow()
    if req.object is None:
        return deny(f"{title}: request.object is missing", code=400, reason="BadRequest")
    old_raw = req.old_object if op == "UPDATE" else None
    old: Resource | None = None
    old_problems: list[Problem] = []
    if old_raw is not None:
        try:
            old = cls.from_dict(old_raw)
        except FieldError as exc:
            old_problems = exc.problems
    try:
        obj = cls.from_dict(req.object)
    except FieldError as exc:
        return _ratchet(exc.problems, old_problems, title) or deny(f"{title} is invalid: {exc}")
    try:
        found = _rules(obj, old, op, req.object, old_raw, queues)
        if found.problems and old is not None and old_raw is not None:
            # the stored object judged as if unchanged: only its own standing problems
            old_problems = _rules(old, old, op, old_raw, old_raw, queues).problems
    except QueueLookupError as exc:
        return deny(f"{title} cannot be checked now: {exc}", code=503, reason="ServiceUnavailable")
    if found.problems:
        ratcheted = _ratchet(found.problems, old_problems, title)
        if ratcheted is not None:
            ratcheted.warnings[:0] = found.warnings
            return ratcheted
        verdict = deny(f"{title} is invalid: {describe(found.problems)}")
        verdict.warnings = found.warnings
        return verdict
    return allow(found.warnings)
