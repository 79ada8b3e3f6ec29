"""The extender port over HTTPS with client certificates (``--tls-cert-file``,
``--client-ca-file``): a caller without a certificate from the CA cannot reach
any verb, one with it gets the same answers as over plain HTTP."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from devcluster.cluster import Cluster, free_port
from tests.e2e.kube import wait_for

pytestmark = pytest.mark.e2e


def _call(url: str, ctx: ssl.SSLContext | None, body: bytes | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=body, method="POST" if body is not None else "GET")
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, context=ctx, timeout=5) as r:
        return r.status, r.read()


def test_client_certificates_guard_every_verb(cluster: Cluster) -> None:
    st = cluster.state
    assert st is not None
    pki = Path(st.dir) / "pki"
    port = free_port()
    cluster.start_sidecar(
        [
            f"--port={port}",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
        ],
        role="sidecar-tls",
    )
    try:
        url = f"https://127.0.0.1:{port}"
        trusted = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        client = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        client.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))

        def ready() -> bool:
            try:
                return _call(f"{url}/readyz", client)[0] == 200
            except (OSError, urllib.error.URLError):
                return False

        wait_for("the TLS sidecar ready", ready, timeout=90)
        args = json.dumps(
            {
                "Pod": {
                    "metadata": {"name": "p", "namespace": "tls", "uid": "u-tls"},
                    "spec": {"schedulerName": "volcano", "containers": [{"name": "c"}]},
                },
                "NodeNames": ["kwok-node-0"],
            }
        ).encode()
        code, body = _call(f"{url}/filter", client, args)
        assert code == 200 and json.loads(body)["NodeNames"] == ["kwok-node-0"]
        # no client certificate: the handshake fails before any verb runs
        with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
            _call(f"{url}/bind", trusted, b'{"PodName":"p","PodNamespace":"tls","Node":"x"}')
        # plain HTTP on the TLS port gets nothing either
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
            _call(f"http://127.0.0.1:{port}/filter", None, args)
    finally:
        cluster.stop_role("sidecar-tls")
