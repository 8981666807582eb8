"""Real ``tuffdb serve --cluster`` processes, for the cluster tests and bench/replication.py.

Each :class:`ServerNode` is one process on loopback with its own data directory and free
ports; its JSON log lines are collected from stderr, and its state is read from its admin
port's ``/health`` (role, epoch, LSN, followers). Waiting is always for a condition with
an upper bound (``until``), never a sleep. Every node gets the same encryption key (a
cluster's documents face needs one) and ``--durability always``.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx

from tuffdb.testing.etcd import free_port

WAIT_S = 90.0  # an upper bound for a loaded 2-core machine; a passing run waits far less
KEY_HEX = bytes(range(32)).hex()  # the cluster's shared encryption key (documents face)


T = TypeVar("T")


def until(what: str, check: Callable[[], T | None], timeout: float = WAIT_S) -> T:
    """Poll ``check`` until it returns something truthy (its value), failing after
    ``timeout`` seconds with ``what`` in the message."""
    deadline = time.monotonic() + timeout
    last: T | Exception | None = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except (OSError, httpx.HTTPError, ValueError) as exc:
            last = exc
        if last and not isinstance(last, Exception):
            return last
        time.sleep(0.05)  # polling interval of a bounded wait, not synchronisation
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what} (last: {last!r})")


class ServerNode:
    def __init__(self, root: Path, node_id: str, etcd: str | None, *, cluster: str = "c",
                 extra: list[str] | None = None, host: str = "127.0.0.1",
                 python: str = sys.executable) -> None:
        self.node_id = node_id
        self.cluster = cluster
        self.dir = root / node_id
        self.host = host
        self.ports = {name: free_port(host) for name in
                      ("resp", "grpc", "http", "admin", "replication")}
        clustered = ["--cluster", cluster, "--etcd", etcd, "--node-id", node_id,
                     "--lease-ttl", "2"] if etcd is not None else []
        ports = self.ports if etcd is not None else {
            k: v for k, v in self.ports.items() if k != "replication"}
        self.argv = [python, "-m", "tuffdb", "serve", "--data-dir", str(self.dir),
                     "--host", host, *clustered, "--durability", "always",
                     *(f"--{n}-port={p}" for n, p in ports.items()), *(extra or [])]
        self.env = dict(os.environ, TUFFDB_ENCRYPTION_KEY=KEY_HEX)
        self.proc: subprocess.Popen[str] | None = None
        self.lines: list[dict[str, Any]] = []
        self._q: queue.Queue[dict[str, Any] | None] = queue.Queue()

    # -- process ------------------------------------------------------------------------
    def start(self) -> ServerNode:
        self.lines = []
        self._q = queue.Queue()
        self.proc = subprocess.Popen(self.argv, env=self.env, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        threading.Thread(target=self._read, args=(self.proc, self._q, self.log_path),
                         daemon=True).start()
        return self

    @property
    def log_path(self) -> Path:
        """Every line the node logged, over all its restarts (beside its data directory,
        which a snapshot replaces): tests/cluster/conftest.py shows them when a test fails."""
        return self.dir.with_name(self.node_id + ".log")

    @staticmethod
    def _read(proc: subprocess.Popen[str], q: queue.Queue[dict[str, Any] | None],
              path: Path) -> None:
        assert proc.stderr is not None
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as kept:
            for raw in proc.stderr:
                kept.write(raw)
                kept.flush()
                try:
                    q.put(json.loads(raw))
                except ValueError:
                    q.put({"event": "<not json>", "raw": raw})
        q.put(None)

    def drain(self) -> list[dict[str, Any]]:
        while True:
            try:
                line = self._q.get_nowait()
            except queue.Empty:
                return self.lines
            if line is not None:
                self.lines.append(line)

    def signal(self, sig: signal.Signals) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=WAIT_S)

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                return self.proc.wait(timeout=WAIT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                return self.proc.wait(timeout=WAIT_S)
        return self.proc.returncode

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # -- state ----------------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        r = httpx.get(f"http://{self.host}:{self.ports['admin']}/health", timeout=5)
        return dict(r.json())

    def role(self) -> str | None:
        try:
            return self.health().get("role")
        except (OSError, httpx.HTTPError, ValueError):
            return None

    def admin_key(self) -> str:
        """The admin API key the first leader created (its ekoDB face writes it here)."""
        return until(f"{self.node_id}'s admin key file",
                     lambda: (self.dir / "ekodb_admin_key").read_text().strip())

    @property
    def resp(self) -> tuple[str, int]:
        return self.host, self.ports["resp"]

    @property
    def grpc_url(self) -> str:
        return f"http://{self.host}:{self.ports['grpc']}"

    @property
    def http_url(self) -> str:
        return f"http://{self.host}:{self.ports['http']}"


class ServerCluster:
    def __init__(self, root: Path, etcd: str, size: int = 3, **options: Any) -> None:
        self.etcd = etcd
        self.nodes = [ServerNode(root, f"n{i + 1}", etcd, **options) for i in range(size)]

    def start(self) -> ServerCluster:
        for node in self.nodes:
            node.start()
        return self

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def leader(self, *, exclude: ServerNode | None = None) -> ServerNode:
        """The one live node whose /health says leader (waiting for it)."""
        def find() -> ServerNode | None:
            leaders = [n for n in self.nodes if n is not exclude and n.alive
                       and n.role() == "leader"]
            return leaders[0] if len(leaders) == 1 else None
        return until("exactly one leader", find)

    def in_sync(self, leader: ServerNode, count: int) -> dict[str, Any]:
        """Wait until ``count`` followers are in the leader's sync set."""
        def check() -> dict[str, Any] | None:
            followers: dict[str, Any] = leader.health().get("cluster", {}).get("followers", {})
            synced = [n for n, f in followers.items() if f.get("in_sync") and f.get("connected")]
            return followers if len(synced) >= count else None
        return until(f"{count} followers in sync", check)

    def followers(self, leader: ServerNode) -> list[ServerNode]:
        return [n for n in self.nodes if n is not leader and n.alive]
