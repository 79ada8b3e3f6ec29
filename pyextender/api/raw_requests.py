"""API requests on the hot path, sent through libcurl (pycurl).

The sidecar writes to the API server once or twice per pod it schedules (the
Binding, a gang member's gate, its PodGroup's status and release, an event).
Through the generated client each write cost ~0.45-0.75 ms of CPU on a 2-core
machine even when idle: nearly all of it in urllib3 and http.client (header
parsing through the email package), not in the client's own layers (~20 us).
The same write through one kept-alive libcurl handle per thread costs
~0.12-0.21 ms (bench: ``python bench/api_writes.py``). On a busy 2-core node that
is CPU the API server and kube-scheduler get back.

``RawApi.request`` takes a body we have encoded and returns the reply's bytes;
callers decode only what they need. It reads the connection settings the
generated client resolved (``client.Configuration``: host, CA, client
certificate, bearer token with its refresh hook, proxy, TLS server name), so
every config source ``pyextender.api.client`` accepts works the same here.

Errors keep the generated client's shape, so callers' handling is unchanged:
an HTTP error status raises ``ApiException`` (``status``, ``reason`` = the
Status message naming the problem, ``body``); a connection failure or timeout
raises ``RequestFailed`` (an ``OSError``), which callers treat as transient.
"""

from __future__ import annotations

import io
import threading
from typing import Any
from urllib.parse import quote, urlsplit

import msgspec
import pycurl
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pyextender.api.client import DEFAULT_TIMEOUT

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
USER_AGENT = "pyextender"
REASON_CHARS = 512
"""Longest API server message kept as an error's reason (the whole reply is its body)."""


class RequestFailed(OSError):
    """No HTTP reply: the connection failed, was dropped, or timed out."""


class RawApi:
    """Requests to the API server of ``cfg``; thread-safe (one handle per thread)."""

    def __init__(
        self, cfg: client.Configuration, timeout: tuple[float, float] = DEFAULT_TIMEOUT
    ) -> None:
        self.cfg = cfg
        self.connect_ms = int(timeout[0] * 1000)
        self.total_ms = int(sum(timeout) * 1000)
        """libcurl has no read timeout between bytes: the whole exchange gets the
        connect and read budgets together."""
        parts = urlsplit(cfg.host)
        self.base = cfg.host.rstrip("/")
        self.connect_to: list[str] = []
        server_name = getattr(cfg, "tls_server_name", None)
        if server_name and parts.hostname:
            # verify (and send SNI for) server_name while connecting to the real host
            port = parts.port or (443 if parts.scheme == "https" else 80)
            self.base = f"{parts.scheme}://{server_name}:{port}{parts.path.rstrip('/')}"
            self.connect_to = [f"{server_name}:{port}:{parts.hostname}:{port}"]
        self._local = threading.local()

    def _handle(self) -> pycurl.Curl:
        curl: pycurl.Curl | None = getattr(self._local, "curl", None)
        if curl is not None:
            return curl
        cfg = self.cfg
        curl = pycurl.Curl()
        curl.setopt(pycurl.NOSIGNAL, 1)  # timeouts without SIGALRM: we run in threads
        curl.setopt(pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_1_1)  # h2 cost more CPU
        curl.setopt(pycurl.CONNECTTIMEOUT_MS, self.connect_ms)
        curl.setopt(pycurl.TIMEOUT_MS, self.total_ms)
        curl.setopt(pycurl.TCP_KEEPALIVE, 1)
        curl.setopt(pycurl.USERAGENT, USER_AGENT)
        if cfg.ssl_ca_cert:
            curl.setopt(pycurl.CAINFO, cfg.ssl_ca_cert)
        if cfg.cert_file:
            curl.setopt(pycurl.SSLCERT, cfg.cert_file)
        if cfg.key_file:
            curl.setopt(pycurl.SSLKEY, cfg.key_file)
        if not cfg.verify_ssl:
            curl.setopt(pycurl.SSL_VERIFYPEER, 0)
            curl.setopt(pycurl.SSL_VERIFYHOST, 0)
        elif cfg.assert_hostname is False:
            curl.setopt(pycurl.SSL_VERIFYHOST, 0)
        if self.connect_to:
            curl.setopt(pycurl.CONNECT_TO, self.connect_to)
        if cfg.proxy:
            curl.setopt(pycurl.PROXY, cfg.proxy)
            if cfg.no_proxy:
                curl.setopt(pycurl.NOPROXY, cfg.no_proxy)
        else:
            curl.setopt(pycurl.PROXY, "")  # no proxy from the environment: as the client
        self._local.curl = curl
        return curl

    def _headers(self, content_type: str) -> list[str]:
        headers = [f"Content-Type: {content_type}", f"Accept: {JSON}"]
        # auth_settings() calls the config's refresh hook: a rotated token is read
        for auth in self.cfg.auth_settings().values():
            if auth.get("in") == "header" and auth.get("value"):
                headers.append(f"{auth['key']}: {auth['value']}")
        return headers

    def request(
        self, method: str, path: str, body: bytes | None = None, content_type: str = JSON
    ) -> bytes:
        """``method path`` with ``body``; the reply body of a 2xx status."""
        curl = self._handle()
        out = io.BytesIO()
        curl.setopt(pycurl.URL, self.base + path)
        if body is None:
            curl.setopt(pycurl.HTTPGET, 1)  # a reused handle may still carry a body
        else:
            curl.setopt(pycurl.POSTFIELDS, body)
        curl.setopt(pycurl.CUSTOMREQUEST, method)
        curl.setopt(pycurl.HTTPHEADER, self._headers(content_type))
        curl.setopt(pycurl.WRITEDATA, out)
        try:
            curl.perform()
        except pycurl.error as exc:
            # a failed exchange may leave the connection half-used: start clean
            curl.close()
            self._local.curl = None
            code, message = exc.args if len(exc.args) == 2 else (0, str(exc))
            raise RequestFailed(f"{method} {path}: {message} (curl error {code})") from None
        status = int(curl.getinfo(pycurl.RESPONSE_CODE))
        data = out.getvalue()
        if status >= 400:
            raise _api_error(status, data)
        return data

    def post(self, path: str, obj: Any) -> bytes:
        return self.request("POST", path, msgspec.json.encode(obj), JSON)

    def patch(self, path: str, patch: Any, content_type: str = MERGE_PATCH) -> bytes:
        return self.request("PATCH", path, msgspec.json.encode(patch), content_type)


def object_path(group: str, version: str, plural: str, namespace: str, name: str = "") -> str:
    """REST path of a custom resource collection (``namespace`` "" for cluster-scoped
    kinds), or of one object of it."""
    where = f"/namespaces/{quote(namespace, safe='')}" if namespace else ""
    path = f"/apis/{group}/{version}{where}/{plural}"
    return f"{path}/{quote(name, safe='')}" if name else path


def _api_error(status: int, data: bytes) -> ApiException:
    """The generated client's exception for an error reply, with the API server's
    own message (e.g. 'pods "x" not found') as its reason."""
    reason = f"HTTP {status}"
    try:
        reply = msgspec.json.decode(data)
    except msgspec.DecodeError:
        reply = None
    if isinstance(reply, dict):
        message = reply.get("message") or reply.get("reason")
        if isinstance(message, str) and message:
            # some messages quote the whole object: keep log lines readable
            reason = message if len(message) <= REASON_CHARS else message[:REASON_CHARS] + "..."
    exc = ApiException(status=status, reason=reason)
    exc.body = data.decode("utf-8", "replace")
    return exc
