"""A follower's pooled forwarding connection is checked before a request is sent on it:
one the leader closed (or that holds bytes nobody asked for) is not reused, so a request
is never sent on a dead connection and then retried (cluster/node.py, ``Node.forward``)."""

from __future__ import annotations

import socket

from tuffdb.cluster.node import _open


def test_an_open_idle_connection_is_reused_and_keeps_its_timeout() -> None:
    a, b = socket.socketpair()
    with a, b:
        a.settimeout(5.0)
        assert _open(a)
        assert a.gettimeout() == 5.0


def test_a_connection_the_peer_closed_is_not_reused() -> None:
    a, b = socket.socketpair()
    with a:
        a.settimeout(5.0)
        b.close()
        assert not _open(a)


def test_a_connection_with_unexpected_bytes_is_not_reused() -> None:
    a, b = socket.socketpair()
    with a, b:
        b.sendall(b"x")
        assert not _open(a)
