"""AdmissionReview v1 decoding and encoding."""

from __future__ import annotations

import base64
import json

from tests.unit.webhook_support import body, review
from webhook.review import Verdict, deny, encode_response, parse_review


def test_parse_fields() -> None:
    doc = review({"metadata": {"name": "p"}}, operation="UPDATE", namespace="ns", name="p")
    doc["request"]["dryRun"] = True
    req = parse_review(body(doc))
    assert (req.uid, req.kind, req.group, req.version) == ("uid-1", "Pod", "", "v1")
    assert req.operation == "UPDATE" and req.namespace == "ns" and req.dry_run
    assert req.label == "Pod ns/p" and req.user == "tester"
    assert req.api_version == "v1"


def test_encode_denial() -> None:
    doc = json.loads(encode_response("u", deny("spec.x: bad")))
    assert doc["response"] == {
        "uid": "u",
        "allowed": False,
        "status": {"status": "Failure", "message": "spec.x: bad", "code": 422, "reason": "Invalid"},
    }


def test_encode_patch_and_long_warning() -> None:
    verdict = Verdict(
        allowed=True, patch=[{"op": "add", "path": "/a", "value": 1}], warnings=["w" * 300]
    )
    resp = json.loads(encode_response("u", verdict))["response"]
    assert json.loads(base64.b64decode(resp["patch"])) == verdict.patch
    assert len(resp["warnings"][0]) == 256 and resp["warnings"][0].endswith("...")
