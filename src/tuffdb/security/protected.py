"""Protected mode: a face that has no secret set accepts clients from this host only.

Redis's protected mode, for every door of ``tuffdb serve`` that can be left without a
secret: the RESP face without ``--requirepass``, the gRPC face without ``--api-key``,
``POST /backup`` on the admin port without either, and the cluster's replication port
without a cluster secret. A client from another host is refused there with a reason that
says how to let it in (set the secret, or ``--protected-mode no`` on a network you
trust); with a secret set, the secret decides. The ekoDB face always has keys, and
``/health`` and ``/metrics`` show state, never data: they stay open. On by default: a
server started with ``--host 0.0.0.0`` and nothing else is not a database the whole
network may read, write and copy.
"""

from __future__ import annotations

import ipaddress

OFF = "--protected-mode no (or TUFFDB_PROTECTED_MODE=no) on a network you trust"


def is_local(host: object) -> bool:
    """Whether a peer's address is this host's: a loopback address (127.0.0.0/8, ::1, an
    IPv4-mapped loopback) or none at all (a Unix socket)."""
    if not host:
        return True
    try:
        addr = ipaddress.ip_address(str(host).split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped.is_loopback
    return addr.is_loopback


def peer_host(peername: object) -> object:
    """The host part of a transport's ``peername`` (a tuple for TCP, a path or nothing
    for a Unix socket)."""
    return peername[0] if isinstance(peername, tuple) and peername else None
