"""Serving certificates that change while the webhook runs.

Two sources, one contract: ``current()`` returns the PEM pair to serve, and
``run(reload)`` calls ``reload`` whenever it changes.

- ``FileCerts``: ``--tls-cert``/``--tls-key`` files (cert-manager's Secret mounted
  as a volume; kubelet swaps the files atomically on renewal). Polled.
- ``SecretCerts``: ``--tls-secret``: the webhook manages its own CA and serving
  certificate (``webhook.certs``). The leader (Lease) issues and renews them,
  stores them in the Secret, and writes the CA bundle into both webhook
  configurations *before* storing a certificate from a new CA. Every replica
  polls the Secret and reloads what it finds.

Reloading is ``SSLContext.load_cert_chain`` on the context the server already
listens with: new TLS handshakes get the new certificate, open connections keep
theirs, nothing restarts.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import logging
import os
import ssl
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pyextender.api.client import body_of
from webhook import certs

log = logging.getLogger(__name__)

Reload = Callable[[bytes, bytes], None]
"""(certificate PEM, key PEM) -> None."""

STRATEGIC = "application/strategic-merge-patch+json"


def reload_context(ctx: ssl.SSLContext, folder: Path) -> Reload:
    """A Reload that writes the pair into ``folder`` and loads it into ``ctx``."""

    def reload(crt: bytes, key: bytes) -> None:
        cert_path, key_path = write_pair(folder, crt, key)
        ctx.load_cert_chain(str(cert_path), str(key_path))

    return reload


def write_pair(folder: Path, crt: bytes, key: bytes) -> tuple[Path, Path]:
    """Write tls.crt/tls.key into ``folder`` atomically (0600 key); return their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, data, mode in (("tls.crt", crt, 0o644), ("tls.key", key, 0o600)):
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, folder / name)
        out.append(folder / name)
    return out[0], out[1]


class FileCerts:
    """A certificate/key pair in files, reloaded when either file changes."""

    def __init__(self, cert: str, key: str, period: float) -> None:
        self.cert, self.key, self.period = Path(cert), Path(key), period
        self.loaded = self.current()

    def current(self) -> tuple[bytes, bytes]:
        return self.cert.read_bytes(), self.key.read_bytes()

    async def run(self, reload: Reload) -> None:
        while True:
            await asyncio.sleep(self.period)
            try:
                pair = await asyncio.to_thread(self.current)
                if pair != self.loaded:
                    reload(*pair)
                    self.loaded = pair
                    log.info("serving certificate reloaded from %s", self.cert)
            except (OSError, ssl.SSLError) as exc:
                # a half-written renewal: keep serving the last good pair
                log.warning("cannot reload %s / %s: %s", self.cert, self.key, exc)


@dataclass(frozen=True, slots=True)
class SecretSettings:
    namespace: str
    secret: str
    service: str
    """Service name the API server calls us by (the certificate's DNS names)."""
    configuration: str
    """metadata.name of both the Mutating- and the ValidatingWebhookConfiguration."""
    ca_validity: dt.timedelta
    cert_validity: dt.timedelta
    period: float
    """Seconds between checks of the Secret."""


def _decode(data: dict[str, str] | None) -> dict[str, bytes]:
    return {k: base64.b64decode(v) for k, v in (data or {}).items()}


class SecretCerts:
    """Self-managed certificates in a Secret (see the module docstring)."""

    def __init__(self, api: client.ApiClient, settings: SecretSettings) -> None:
        self.core = client.CoreV1Api(api)
        self.reg = client.AdmissionregistrationV1Api(api)
        self.s = settings
        self.names = certs.dns_names(settings.service, settings.namespace)
        self.loaded: tuple[bytes, bytes] = (b"", b"")
        self.rotations = 0

    # -- every replica ----------------------------------------------------------
    def read(self) -> tuple[certs.Bundle, str]:
        """The Secret's Bundle and resourceVersion; raises ApiException (404: no Secret)."""
        obj = self.core.read_namespaced_secret(self.s.secret, self.s.namespace)
        return certs.Bundle.from_data(_decode(obj.data)), obj.metadata.resource_version

    def current(self) -> tuple[bytes, bytes] | None:
        bundle, _ = self.read()
        if not bundle.tls_crt or not bundle.tls_key:
            return None
        return bundle.tls_crt, bundle.tls_key

    async def wait_first(self) -> tuple[bytes, bytes]:
        """Block until the Secret holds a certificate (the leader issues the first)."""
        while True:
            try:
                pair = await asyncio.to_thread(self.current)
            except ApiException as exc:
                log.warning("reading Secret %s/%s: %s", self.s.namespace, self.s.secret, exc)
                pair = None
            if pair is not None:
                self.loaded = pair
                return pair
            log.info("waiting for a serving certificate in Secret %s", self.s.secret)
            await asyncio.sleep(min(self.s.period, 1.0))

    async def run(self, reload: Reload) -> None:
        while True:
            await asyncio.sleep(self.s.period)
            try:
                pair = await asyncio.to_thread(self.current)
                if pair is not None and pair != self.loaded:
                    reload(*pair)
                    self.loaded = pair
                    self.rotations += 1
                    log.info(
                        "serving certificate reloaded (serial %x)", certs.serial_of(pair[0]) or 0
                    )
            except (ApiException, OSError, ssl.SSLError, ValueError) as exc:
                log.warning("certificate sync: %s; serving the last good pair", exc)

    # -- the leader -------------------------------------------------------------
    def ensure(self, now: dt.datetime | None = None) -> bool:
        """Issue or renew what is due, and keep both caBundles right. True if it wrote."""
        now = now or dt.datetime.now(dt.UTC)
        current, version = self.read()
        new = certs.plan(
            current, self.names, self.s.ca_validity, self.s.cert_validity, now, self.s.service
        )
        wrote = False
        if new is not None and new.ca_bundle != current.ca_bundle:
            # trust first, serve second: the API server must know a new CA before
            # any replica presents a certificate signed by it
            wrote |= self.ensure_ca_bundle(new.ca_bundle)
        if new is not None:
            body = {
                "metadata": {"name": self.s.secret, "resourceVersion": version},
                "data": {k: base64.b64encode(v).decode() for k, v in new.to_data().items()},
            }
            self.core.replace_namespaced_secret(self.s.secret, self.s.namespace, body)
            log.info(
                "stored a new serving certificate (serial %x)%s",
                certs.serial_of(new.tls_crt) or 0,
                " and a new CA" if new.ca_crt != current.ca_crt else "",
            )
            wrote = True
        bundle = (new or current).ca_bundle
        wrote |= self.ensure_ca_bundle(bundle)
        return wrote

    def ensure_ca_bundle(self, bundle: bytes) -> bool:
        """Set caBundle on every webhook of both configurations; True if any changed."""
        want = base64.b64encode(bundle).decode()
        changed = False
        for kind in ("mutating", "validating"):
            read: Any = getattr(self.reg, f"read_{kind}_webhook_configuration")
            patch: Any = getattr(self.reg, f"patch_{kind}_webhook_configuration")
            try:
                conf = read(self.s.configuration)
            except ApiException as exc:
                if exc.status == 404:
                    log.warning("%s webhook configuration %s not found", kind, self.s.configuration)
                    continue
                raise
            stale = [w.name for w in conf.webhooks or [] if w.client_config.ca_bundle != want]
            if not stale:
                continue
            body = {"webhooks": [{"name": n, "clientConfig": {"caBundle": want}} for n in stale]}
            body_of(
                patch(self.s.configuration, body, _content_type=STRATEGIC, _preload_content=False)
            )
            log.info("caBundle written to %s webhooks %s", kind, ", ".join(stale))
            changed = True
        return changed

    async def lead(self) -> None:
        """While leader: check every period (the Lease makes us the only writer)."""
        while True:
            try:
                await asyncio.to_thread(self.ensure)
            except ApiException as exc:
                # 409: another writer raced us (a former leader); re-read next time
                log.warning("certificate upkeep: %s %s", exc.status, exc.reason)
            except Exception:
                log.exception("certificate upkeep failed")
            await asyncio.sleep(self.s.period)
