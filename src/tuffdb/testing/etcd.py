"""Private etcd servers for tests and benchmarks: one member, or a three-member cluster.

Each :class:`EtcdCluster` runs Debian's ``etcd`` (3.4, ``etcd-server``; ``dev.py test``
installs it) in a directory of its own, on free ports, with the JSON gRPC gateway on
(``--enable-grpc-gateway``, which tuffdb's coordination client speaks). Readiness is
waited for by polling each member's ``/health`` until it answers ``"health": "true"``
(the member has a leader), within a bound: never a sleep. The faults a cluster test needs
are one call each on a member: :meth:`EtcdMember.kill` (SIGKILL), :meth:`~EtcdMember.pause`
/ :meth:`~EtcdMember.resume` (SIGSTOP / SIGCONT), :meth:`~EtcdMember.restart` (same data
directory and ports, so the member keeps its identity and data).

    with EtcdCluster.start(tmp_path / "etcd") as etcd:
        client = EtcdClient(etcd.endpoints)      # "http://127.0.0.1:PORT"
        etcd.members[0].kill(); etcd.members[0].restart()

Members are :class:`~tuffdb.testing.processes.ManagedProcess` objects. A member can run
inside a network namespace: pass ``prefix=("ip", "netns", "exec", NS)`` and that
namespace's address as ``host``; the readiness poll then runs in the calling
thread, which must be able to reach that address.

Needs only the standard library (``http.client``), so it imports without test extras.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import shutil
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import cast

from tuffdb.testing.processes import ManagedProcess

__all__ = ["ETCD_MISSING", "EtcdCluster", "EtcdMember", "etcd_binary", "free_port"]

READY_TIMEOUT_S = 60.0  # a bound for a loaded 2-core machine; a member is ready in < 1 s
POLL_INTERVAL_S = 0.02
ETCD_MISSING = ("etcd is not installed (apt-get install etcd-server etcd-client; "
                "dev.py test does it)")


def etcd_binary() -> str | None:
    """The path of the ``etcd`` program, or None when it is not installed."""
    return shutil.which("etcd")


# Listening ports for test servers come from below the kernel's ephemeral range (Linux:
# 32768-60999), so the outgoing connections of a busy test cannot take one between the
# moment it is chosen and the moment its server binds it.
_LISTEN_PORTS = (20000, 32000)
_taken: set[int] = set()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago, not handed out before by this
    process, outside the ephemeral range."""
    rnd = random.Random()
    for _ in range(1000):
        port = rnd.randrange(*_LISTEN_PORTS)
        if port in _taken:
            continue
        with socket.socket() as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
        _taken.add(port)
        return port
    with socket.socket() as sock:  # the range is crowded: let the OS pick
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclass
class EtcdMember(ManagedProcess):
    """One etcd process: its ports and data directory outlive the process across restarts."""

    name: str
    host: str
    client_port: int
    peer_port: int
    data_dir: Path
    initial_cluster: str = ""
    prefix: tuple[str, ...] = ()
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        """The client URL (``http://host:port``) tuffdb's ``--etcd`` takes."""
        return f"http://{self.host}:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://{self.host}:{self.peer_port}"

    @property
    def log_path(self) -> Path:
        """etcd's own log (stderr), kept next to the data directory for post-mortems."""
        return self.data_dir.with_suffix(".log")

    def argv(self) -> list[str]:
        binary = etcd_binary()
        if binary is None:
            raise FileNotFoundError(ETCD_MISSING)
        return [
            *self.prefix, binary,
            "--name", self.name,
            "--data-dir", str(self.data_dir),
            "--listen-client-urls", self.url,
            "--advertise-client-urls", self.url,
            "--listen-peer-urls", self.peer_url,
            "--initial-advertise-peer-urls", self.peer_url,
            "--initial-cluster", self.initial_cluster or f"{self.name}={self.peer_url}",
            "--initial-cluster-state", "new",
            "--initial-cluster-token", f"tuffdb-test-{os.getpid()}",
            "--enable-grpc-gateway",
            "--logger", "zap",
            # Faster elections than the defaults (100 ms / 1 s): a restarted member leads
            # again in about half a second; still far above loopback round trips.
            "--heartbeat-interval", "50", "--election-timeout", "500",
        ]

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Poll ``/health`` until the member has a leader.

        :raises RuntimeError: when the process exits or the bound passes first (the
            message carries the tail of etcd's log).
        """
        deadline = time.monotonic() + timeout
        while True:
            if not self.running:
                raise RuntimeError(f"etcd {self.name} exited ({self._exit()}): {self.log_tail()}")
            if self.healthy():
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"etcd {self.name} not healthy after {timeout} s: "
                                   f"{self.log_tail()}")
            time.sleep(POLL_INTERVAL_S)  # polling interval, not synchronisation

    def healthy(self) -> bool:
        """One ``GET /health``: True when etcd says it is healthy (has a leader)."""
        conn = http.client.HTTPConnection(self.host, self.client_port, timeout=1.0)
        try:
            conn.request("GET", "/health")
            response = conn.getresponse()
            body = json.loads(response.read() or b"{}")
        except (OSError, ValueError, http.client.HTTPException):
            return False
        finally:
            conn.close()
        return response.status == 200 and body.get("health") == "true"

    def restart(self, *, wait: bool = True) -> None:
        """Kill if running, start again on the same data directory and ports."""
        super().restart()
        if wait:
            self.wait_ready()

    def _exit(self) -> str:
        return f"exit code {self.proc.returncode}" if self.proc is not None else "never started"


class EtcdCluster:
    """One or three (any odd number of) etcd members on free ports under ``root``."""

    def __init__(self, members: list[EtcdMember]) -> None:
        self.members = members

    @classmethod
    def start(
        cls,
        root: Path,
        *,
        size: int = 1,
        host: str | Sequence[str] = "127.0.0.1",
        prefix: Sequence[tuple[str, ...]] | tuple[str, ...] = (),
        wait: bool = True,
    ) -> EtcdCluster:
        """Start ``size`` members under ``root`` and wait until every member is healthy.

        ``host`` is one address for all members or one per member (e.g. distinct loopback
        addresses or network-namespace addresses); ``prefix`` is one command prefix for all
        or one per member (e.g. ``("ip", "netns", "exec", NS)``). Ports are picked free.
        A port taken between the pick and etcd's bind makes etcd exit: the start is then
        retried with new ports, a few times.

        :raises FileNotFoundError: etcd is not installed (:data:`ETCD_MISSING`).
        :raises RuntimeError: the members did not become healthy.
        """
        hosts = [host] * size if isinstance(host, str) else list(host)
        prefixes: list[tuple[str, ...]] = (
            [tuple(cast("tuple[str, ...]", prefix))] * size
            if not prefix or isinstance(prefix[0], str)
            else [tuple(p) for p in cast("Sequence[tuple[str, ...]]", prefix)])
        assert len(hosts) == size and len(prefixes) == size, "one host and prefix per member"
        for attempt in range(3):
            cluster = cls._spawn(Path(root) / f"try{attempt}", hosts, prefixes)
            if not wait:
                return cluster
            try:
                cluster.wait_ready()
            except RuntimeError:
                if attempt == 2 or not any("address already in use" in m.log_tail()
                                           for m in cluster.members):
                    cluster.stop()
                    raise
                cluster.stop()
            else:
                return cluster
        raise AssertionError("unreachable")

    @classmethod
    def _spawn(cls, root: Path, hosts: list[str],
               prefixes: list[tuple[str, ...]]) -> EtcdCluster:
        members = [
            EtcdMember(name=f"etcd{i}", host=h, client_port=0, peer_port=0,
                       data_dir=root / f"etcd{i}.data", prefix=p)
            for i, (h, p) in enumerate(zip(hosts, prefixes, strict=True))
        ]
        for member in members:
            member.client_port = _port_for(member.host)
            member.peer_port = _port_for(member.host)
        initial = ",".join(f"{m.name}={m.peer_url}" for m in members)
        for member in members:
            member.initial_cluster = initial
            member.spawn()
        return cls(members)

    @property
    def endpoints(self) -> list[str]:
        """Every member's client URL."""
        return [m.url for m in self.members]

    @property
    def endpoint_list(self) -> str:
        """``URL[,URL...]``, the form ``--etcd`` takes."""
        return ",".join(self.endpoints)

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Wait until every running member is healthy (has a leader)."""
        deadline = time.monotonic() + timeout
        for member in self.members:
            if member.running:
                member.wait_ready(max(deadline - time.monotonic(), 0.1))

    def stop(self) -> None:
        """Stop every member (idempotent)."""
        for member in self.members:
            member.stop()

    def __enter__(self) -> EtcdCluster:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


_next_port = 20000 + os.getpid() % 20000


def _port_for(host: str) -> int:
    """A free port on ``host``; for an address that is not local here (a member in a
    network namespace of its own, where nothing else binds), a port from a counter."""
    global _next_port  # noqa: PLW0603 - one counter per process
    try:
        return free_port(host)
    except OSError:
        _next_port = 20000 + (_next_port - 19999) % 40000
        return _next_port
