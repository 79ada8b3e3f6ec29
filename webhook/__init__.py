"""The admission webhook: gang pods of adopted namespaces are gated and routed to us;
Volcano's CRDs are validated with errors that name the field.

Modules, from the wire inwards:

- ``cli``, ``serve``: ``pyextender webhook`` (TLS, uvicorn, readiness);
- ``app``: the ASGI app (routes, body limits, metrics);
- ``review``: AdmissionReview v1 in and out;
- ``mutate_pod``: which pods get schedulerName ``volcano`` and the gang gate;
- ``validate`` and ``validate_<kind>``: Volcano CRD rules; ``queues`` reads queues;
- ``configuration``: the Mutating/ValidatingWebhookConfiguration (devcluster and
  ``manifests/webhook/``).

Depends only on ``pyextender.api`` (DESIGN.md §2).
"""

from __future__ import annotations

from webhook.mutate_pod import PodPlan, plan_pod, pod_patch
from webhook.review import AdmissionRequest, Verdict, encode_response, parse_review
from webhook.validate import validate

__all__ = [
    "AdmissionRequest",
    "PodPlan",
    "Verdict",
    "encode_response",
    "parse_review",
    "plan_pod",
    "pod_patch",
    "validate",
]
