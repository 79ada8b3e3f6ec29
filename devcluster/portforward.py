"""TCP forwarding to a local pod's address (kube-proxy's part in devcluster).

The API server refuses loopback addresses (and single-label names such as
``localhost``) in EndpointSlices, so a Service of a local pod
(devcluster.localpods) is published at this host's own non-loopback IPv4 address
and a port of one of these forwarders, which relay bytes (TLS untouched) to
``<pod ip>:<container port>``.
"""

from __future__ import annotations

import contextlib
import socket
import threading


def host_address() -> str:
    """This host's primary non-loopback IPv4 address (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: only picks the outgoing interface
            ip: str = s.getsockname()[0]
        except OSError as exc:
            raise RuntimeError(
                "devcluster needs a non-loopback IPv4 address for Service endpoints "
                f"(the API server refuses loopback ones): {exc}"
            ) from exc
    if ip.startswith("127."):
        raise RuntimeError(f"no non-loopback IPv4 address on this host (got {ip})")
    return ip


class Forwarder:
    """Relays every connection to ``address``:``port`` to ``target``; runs in threads."""

    def __init__(self, target: tuple[str, int], address: str) -> None:
        self.target = target
        self.address = address
        self._server = socket.create_server((address, 0), backlog=128)
        self.port: int = self._server.getsockname()[1]
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True, name=f"fwd-{self.port}").start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(conn,), daemon=True).start()

    def _relay(self, conn: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError:
            conn.close()
            return
        upstream.settimeout(None)

        def pump(src: socket.socket, dst: socket.socket) -> None:
            with contextlib.suppress(OSError):
                while data := src.recv(65536):
                    dst.sendall(data)
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)

        t = threading.Thread(target=pump, args=(upstream, conn), daemon=True)
        t.start()
        pump(conn, upstream)
        t.join()
        conn.close()
        upstream.close()

    def close(self) -> None:
        self._stop.set()
        self._server.close()
