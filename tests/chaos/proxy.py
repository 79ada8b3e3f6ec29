"""A TCP proxy between one client and the API server, that a test can stall or slow.

    with TcpProxy(("127.0.0.1", apiserver_port)) as proxy:
        ... point a kubeconfig at proxy.port ...
        proxy.stall()          # blackhole: connections stay open, nothing is forwarded
        proxy.resume()         # forwarding again; connections that lost data are closed
        proxy.delay = 0.3      # seconds added before every forwarded chunk
        proxy.drop()           # close every open connection

TLS passes through untouched (the client still talks to the API server's cert,
whose SANs include 127.0.0.1). One thread accepts; two threads pump each connection.
Bytes that arrive during a stall are dropped, never delivered late: a connection
that lost some is closed when the stall ends (the partition outlived it).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from types import TracebackType

CHUNK = 65536


class TcpProxy:
    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.delay = 0.0
        """Seconds slept before forwarding each chunk (both directions)."""
        self.forwarded = 0
        """Chunks forwarded so far."""
        self.connections = 0
        self._stalled = threading.Event()
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._broken: set[socket.socket] = set()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._accept, name="proxy-accept", daemon=True)
        self._thread.start()

    # -- control ------------------------------------------------------------------
    def stall(self) -> None:
        """Accept new connections but forward nothing, on any connection."""
        self._stalled.set()

    def resume(self) -> None:
        with self._lock:
            broken, self._broken = self._broken, set()
        for s in broken:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        self._stalled.clear()

    @property
    def stalled(self) -> bool:
        return self._stalled.is_set()

    def drop(self) -> None:
        """Close every open connection (clients see a reset)."""
        with self._lock:
            socks, self._open = set(self._open), set()
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()

    def close(self) -> None:
        self._closed.set()
        self._stalled.clear()
        with contextlib.suppress(OSError):
            self._listener.close()
        self.drop()

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- the pumps ------------------------------------------------------------------
    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open |= {client, upstream}
                self.connections += 1
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while not self._closed.is_set():
                data = src.recv(CHUNK)
                if not data:
                    break
                if self._stalled.is_set() or src in self._broken:
                    with self._lock:
                        self._broken |= {src, dst}
                    continue
                if self.delay:
                    time.sleep(self.delay)
                dst.sendall(data)
                self.forwarded += 1
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
            with self._lock:
                self._open -= {src, dst}
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.close()
