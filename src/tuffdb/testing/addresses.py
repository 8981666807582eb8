"""An address of this host that is not a loopback one: what a test needs to be a client
from "another host" (protected mode, security/protected.py) without a second machine.

A connection from this host to one of its own addresses comes from that address, so a
server listening on every address sees a peer that is not loopback. As root, an address
from 198.18.0.0/15 (set aside for benchmarking, never routed) is added to ``lo`` for the
block and removed after; otherwise an address the host already has is used.
"""

from __future__ import annotations

import ipaddress
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["other_host_address"]


def _existing() -> str | None:
    out = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True,
                         check=False).stdout
    for line in out.splitlines():
        fields = line.split()
        if "inet" in fields:
            addr = fields[fields.index("inet") + 1].split("/", 1)[0]
            if not ipaddress.ip_address(addr).is_loopback:
                return addr
    return None


@contextmanager
def other_host_address() -> Iterator[str]:
    """A non-loopback IPv4 address of this host, for the block.

    :raises RuntimeError: when there is none and one cannot be added (not root).
    """
    if os.geteuid() == 0:
        n = os.getpid() % 65_000 + 256  # one per test process (parallel runs differ)
        addr = f"198.18.{n >> 8}.{n & 0xFF}"
        subprocess.run(["ip", "addr", "replace", f"{addr}/32", "dev", "lo"], check=True,
                       capture_output=True)
        try:
            yield addr
        finally:
            subprocess.run(["ip", "addr", "del", f"{addr}/32", "dev", "lo"], check=False,
                           capture_output=True)
        return
    found = _existing()
    if found is None:
        raise RuntimeError("no non-loopback address on this host, and adding one needs root")
    yield found
