"""PVCs of a Volcano Job's ``spec.volumes``, as Volcano's job controller makes them.

A volume with a ``volumeClaim`` (a PVC spec) and no ``volumeClaimName`` gets a
generated name ``<job>-volume-<12 random characters>``; the PVC is created with the
Job as its controller, and the name is written back into the Job's spec, so every
pod of every run mounts the same claim. Each claim is listed in
``status.controlledResources`` as ``volume-pvc-<name>``. A ``volumeClaimName``
given by the user is mounted as it is.
"""

from __future__ import annotations

import secrets
import string
from collections.abc import Mapping
from typing import Any

from controllers import job_pods
from pyextender.api.volcano import Job

_ALPHABET = string.ascii_lowercase + string.digits
SUFFIX_LENGTH = 12


def claim_name(job_name: str) -> str:
    suffix = "".join(secrets.choice(_ALPHABET) for _ in range(SUFFIX_LENGTH))
    return f"{job_name}-volume-{suffix}"


def pvc_body(job: Job, name: str, claim: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": name,
            "namespace": job.metadata.namespace,
            "ownerReferences": [job_pods.controller_ref(job)],
        },
        "spec": dict(claim),
    }


def unnamed_claims(job: Job) -> list[int]:
    """Indexes of volumes whose PVC is still to be created."""
    return [
        i
        for i, v in enumerate(job.spec.volumes)
        if v.volume_claim is not None and not v.volume_claim_name
    ]


def controlled(job: Job) -> dict[str, str]:
    """status.controlledResources entries for the job's claims."""
    return {
        f"volume-pvc-{v.volume_claim_name}": v.volume_claim_name
        for v in job.spec.volumes
        if v.volume_claim_name
    }


def without_generated_names(spec: Any) -> Any:
    """The spec without the claim names we write: our own edit is no user update."""
    if not isinstance(spec, Mapping) or not isinstance(spec.get("volumes"), list):
        return spec
    out = dict(spec)
    out["volumes"] = [
        {k: x for k, x in v.items() if k != "volumeClaimName"}
        if isinstance(v, Mapping) and v.get("volumeClaim") is not None
        else v
        for v in spec["volumes"]
    ]
    return out
