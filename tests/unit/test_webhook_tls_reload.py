"""The webhook reloads a renewed certificate from its files without a restart
(cert-manager's Secret mounted as a volume): a real `pyextender webhook` process."""

from __future__ import annotations

import datetime as dt
import os
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

from cryptography import x509

from webhook import certs
from webhook.tls import write_pair

NAMES = ["localhost"]


def served_serial(port: int) -> int | None:
    ctx = ssl._create_unverified_context()
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=1) as s,
            ctx.wrap_socket(s) as tls,
        ):
            der = tls.getpeercert(binary_form=True)
    except OSError:
        return None
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def issue(folder: Path) -> int:
    now = dt.datetime.now(dt.UTC)
    ca, ca_key = certs.issue_ca("t", dt.timedelta(days=1), now)
    crt, key = certs.issue_serving(ca, ca_key, NAMES, dt.timedelta(hours=1), now)
    write_pair(folder, crt, key)
    return x509.load_pem_x509_certificate(crt).serial_number


def test_renewed_files_are_served_without_a_restart(tmp_path: Path) -> None:
    first = issue(tmp_path)
    port = free_port()
    # an API server that is not there: the webhook serves TLS anyway (just not ready)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "
        "'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: x}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"
    )
    cmd = [
        sys.executable,
        "-m",
        "pyextender.cli",
        "webhook",
        f"--kubeconfig={kubeconfig}",
        f"--port={port}",
        f"--tls-cert={tmp_path / 'tls.crt'}",
        f"--tls-key={tmp_path / 'tls.key'}",
        "--tls-sync-period=0.2",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=os.environ)
    try:
        deadline = time.monotonic() + 30
        while served_serial(port) != first:
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            assert time.monotonic() < deadline, "webhook never served the first certificate"
            time.sleep(0.1)
        second = issue(tmp_path)
        while served_serial(port) != second:
            assert proc.poll() is None, "the webhook exited instead of reloading"
            assert time.monotonic() < deadline + 30, "the renewed certificate was not served"
            time.sleep(0.1)
        assert proc.poll() is None  # same process, new certificate
    finally:
        proc.terminate()
        proc.wait(10)
