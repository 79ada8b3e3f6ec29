"""devcluster's ports: outside the range outgoing connections take their local ports
from, so nothing takes one between picking it and the server binding it."""

from __future__ import annotations

import socket

import pytest

from devcluster import cluster


def test_ports_are_distinct_free_and_outside_the_ephemeral_range() -> None:
    low, high = cluster._ephemeral_range()
    ports = [cluster.free_port() for _ in range(20)]
    assert len(set(ports)) == 20
    for port in ports:
        assert not low <= port <= high, port
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # still free: nobody was given it


def test_a_port_someone_listens_on_is_never_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    busy = cluster.free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", busy))
        taken.listen()
        monkeypatch.setattr(cluster, "_handed_out", set())  # as if another process picked it
        monkeypatch.setattr(cluster, "LISTEN_PORTS", (busy, busy + 1))
        got = cluster.free_port()  # the only candidate is busy: any free port
    assert got != busy
