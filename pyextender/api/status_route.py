"""Status writes that work whichever CRDs are installed, ours or Volcano's.

Our CRDs (``manifests/crds``) give Queue, Job, CronJob and HyperNode a status
subresource. Volcano's CRDs as they ship give none to PodGroup (nor to Command),
and since the admission write carries a gang's barrier release neither do ours
(clusters installed earlier keep the PodGroup CRD they have: Helm never replaces
CRDs): there ``PATCH .../podgroups/<name>/status`` answers 404, and status is
written through the object itself. Where the subresource exists the reverse holds: the
object's own endpoint ignores changes to ``status``.

So a status write asks API discovery (``GET /apis/<group>/<version>``, which
lists ``podgroups/status`` only when the subresource exists) where to go, and
remembers the answer for ``ttl_s``. CRDs replaced under a running process are
followed at once, both ways: a 404 from ``/status`` (the subresource went away) and
a reply from the object that does not show the status we sent (the subresource
came: the object's endpoint ignores ``status`` now) forget the answer and ask
again; the second at most once per ``recheck_s``, so a field the CRD's schema
prunes does not cost a discovery request on every write. The body
is the same either way: a merge patch of ``status`` that may carry
``metadata.resourceVersion`` as a precondition, which the object's endpoint
honours as well (409 on a stale view).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import msgspec
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pyextender.api.client import body_of
from pyextender.api.raw_requests import MERGE_PATCH, RawApi, object_path

TTL_S = 60.0
"""Seconds a discovery answer is trusted before it is asked again."""
RECHECK_S = 5.0
"""Seconds between discovery requests made because the object's reply did not show
the status sent (a CRD that gained /status, or a field its schema prunes)."""


class _Version(msgspec.Struct):
    resourceVersion: str = ""


class _Status(msgspec.Struct):
    status: Any = None
    metadata: _Version = msgspec.field(default_factory=_Version)


_status_decoder = msgspec.json.Decoder(_Status)


def _shows(have: Any, sent: Any) -> bool:
    """``have`` (a reply's status) holds what merge-patching ``sent`` into it sets:
    every key of ``sent`` with its value, a null as absent, maps compared key by key."""
    if not isinstance(sent, dict):
        return bool(have == sent)
    if not isinstance(have, dict):
        return False
    for key, value in sent.items():
        if value is None:
            if have.get(key) is not None:
                return False
        elif not _shows(have.get(key), value):
            return False
    return True


def status_missed(reply: bytes, sent: Any) -> str | None:
    """None when the object in ``reply`` shows the status ``sent`` (or the reply cannot
    be read: nothing to go on); otherwise the resourceVersion the reply carries."""
    try:
        got = _status_decoder.decode(reply)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return None if _shows(got.status, sent) else got.metadata.resourceVersion


class StatusRoute:
    """Chooses ``/status`` or the object itself for each custom resource's status writes.

    Thread-safe: the actuator and the controllers call it from API worker threads.
    """

    def __init__(
        self, api: client.ApiClient, ttl_s: float = TTL_S, recheck_s: float = RECHECK_S
    ) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.ttl_s = ttl_s
        self.recheck_s = recheck_s
        self._lock = threading.Lock()
        self._known: dict[tuple[str, str], tuple[float, frozenset[str]]] = {}
        """(group, version) -> (when asked, the subresource paths served, e.g. podgroups/status)."""

    def has_status(self, group: str, version: str, plural: str) -> bool:
        """True when ``plural`` of ``group/version`` has a status subresource.

        When discovery cannot answer (an old or failing server) we assume it has
        one, as our own CRDs do; a 404 from ``/status`` will then ask again.
        """
        key = (group, version)
        now = time.monotonic()
        with self._lock:
            hit = self._known.get(key)
        if hit is None or now - hit[0] > self.ttl_s:
            try:
                paths = self._discover(group, version)
            except Exception:
                return True
            hit = (now, paths)
            with self._lock:
                self._known[key] = hit
        return f"{plural}/status" in hit[1]

    def forget(self, group: str, version: str) -> None:
        with self._lock:
            self._known.pop((group, version), None)

    def _older_than(self, group: str, version: str, seconds: float) -> bool:
        """The remembered answer for ``group/version`` was asked over ``seconds`` ago
        (or there is none)."""
        with self._lock:
            hit = self._known.get((group, version))
        return hit is None or time.monotonic() - hit[0] > seconds

    def _discover(self, group: str, version: str) -> frozenset[str]:
        resp = self.custom.get_api_resources(group, version, _preload_content=False)
        doc = msgspec.json.decode(body_of(resp) or b"{}")
        resources = doc.get("resources") if isinstance(doc, dict) else None
        names = (r.get("name") for r in resources or [] if isinstance(r, dict))
        return frozenset(n for n in names if isinstance(n, str) and "/" in n)

    def patch_status(
        self,
        raw: RawApi,
        group: str,
        version: str,
        plural: str,
        namespace: str,
        name: str,
        body: dict[str, Any],
    ) -> bytes:
        """Merge patch ``body`` (``status`` and optionally ``metadata.resourceVersion``)
        where the installed CRD accepts status, sent through ``raw``; the reply's bytes.
        ``namespace`` empty: a cluster-scoped object."""
        path = object_path(group, version, plural, namespace, name)

        if self.has_status(group, version, plural):
            try:
                return raw.patch(path + "/status", body, MERGE_PATCH)
            except ApiException as exc:
                if exc.status != 404:
                    raise
                # the object is gone, or the CRD no longer has /status: ask again
                self.forget(group, version)
                if self.has_status(group, version, plural):
                    raise
        reply = raw.patch(path, body, MERGE_PATCH)
        if "status" not in body or not self._older_than(group, version, self.recheck_s):
            return reply
        produced = status_missed(reply, body["status"])
        if produced is None:
            return reply
        # the object's endpoint ignored the status: the CRD may have gained /status
        self.forget(group, version)
        if not self.has_status(group, version, plural):
            return reply
        meta = body.get("metadata")
        if isinstance(meta, dict) and meta.get("resourceVersion") and produced:
            # the write just made moved the version (metadata it carried): the
            # precondition now names the object as that write left it
            body = {**body, "metadata": {**meta, "resourceVersion": produced}}
        try:
            return raw.patch(path + "/status", body, MERGE_PATCH)
        except ApiException as exc:
            if exc.status != 404:
                raise
            # no /status after all (discovery could not answer, so has_status assumed
            # one): the object write stands, as before the check
            self.forget(group, version)
            return reply
