"""Plain HTTP(S) calls with a hard per-request timeout (a hang is a failure)."""

from __future__ import annotations

import http.client
import json
import ssl
import urllib.parse
from typing import Any

REQUEST_TIMEOUT_S = 10.0


class Endpoint:
    """One keep-alive connection to ``url`` (reopened after an error)."""

    def __init__(self, url: str, ca: str | None = None) -> None:
        parts = urllib.parse.urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.ctx = ssl.create_default_context(cafile=ca) if parts.scheme == "https" else None
        self.conn: http.client.HTTPConnection | None = None

    def _connect(self) -> http.client.HTTPConnection:
        if self.ctx is not None:
            return http.client.HTTPSConnection(
                self.host, self.port, timeout=REQUEST_TIMEOUT_S, context=self.ctx
            )
        return http.client.HTTPConnection(self.host, self.port, timeout=REQUEST_TIMEOUT_S)

    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        """Status and body; raises TimeoutError when no answer comes in time."""
        for attempt in (1, 2):
            if self.conn is None:
                self.conn = self._connect()
            try:
                self.conn.request("POST", path, body, {"Content-Type": "application/json"})
                resp = self.conn.getresponse()
                data = resp.read()
            except TimeoutError:
                self.close()
                raise TimeoutError(f"POST {path}: no answer in {REQUEST_TIMEOUT_S}s") from None
            except (http.client.HTTPException, ConnectionError):
                # the server may close a keep-alive connection between requests
                self.close()
                if attempt == 2:
                    raise
                continue
            if resp.getheader("connection", "").lower() == "close":
                self.close()
            return resp.status, data
        raise AssertionError("unreachable")

    def get(self, path: str) -> tuple[int, bytes]:
        conn = self._connect()
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def decoded(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return data.decode(errors="replace")
