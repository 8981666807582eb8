"""The fault tools work as their docstrings say (tests/cluster/cluster_faults.py).

A fault tool that does nothing would make a partition test pass for the wrong reason, so
each is shown to really stop traffic and to really restore it: a cut proxy link holds
bytes and a healed one delivers them, a reset link closes connections, a paused process
answers nothing until continued, an iptables cut inside a namespace drops exactly the
traffic it names, and a host cut off from etcd cannot reach it while a healed one can.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_faults import (
    LinkProxy,
    Network,
    connects,
    loopback_hosts,
    netns_available,
    remove_stale_namespaces,
)

from tuffdb.cluster.etcd import EtcdClient
from tuffdb.errors import CoordinationUnavailable
from tuffdb.testing.cluster import until
from tuffdb.testing.etcd import ETCD_MISSING, EtcdCluster, etcd_binary, free_port
from tuffdb.testing.processes import Process

SILENCE_S = 0.3  # how long a cut link is watched for bytes that must not arrive

# A threaded echo server: ``python -c ECHO host port``.
ECHO = """
import socket, sys, threading
srv = socket.create_server((sys.argv[1], int(sys.argv[2])))
def serve(c):
    with c:
        while data := c.recv(65536):
            c.sendall(data)
while True:
    threading.Thread(target=serve, args=(srv.accept()[0],), daemon=True).start()
"""


@pytest.fixture
def echo() -> Iterator[tuple[str, int]]:
    """An in-process echo server on 127.0.0.2."""
    server = socket.create_server(("127.0.0.2", 0))

    def serve(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):  # a reset cut aborts the proxy's side
            while data := conn.recv(65536):
                conn.sendall(data)

    def accept() -> None:
        while True:
            try:
                conn = server.accept()[0]
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[:2]
    server.close()


def roundtrip(sock: socket.socket, data: bytes, timeout: float = 30.0) -> bytes:
    sock.settimeout(timeout)
    sock.sendall(data)
    return sock.recv(len(data))


def silent(sock: socket.socket) -> bool:
    """True when nothing arrives on ``sock`` for SILENCE_S."""
    sock.settimeout(SILENCE_S)
    try:
        sock.recv(1)
    except TimeoutError:
        return True
    return False


def test_loopback_hosts_are_distinct_and_local() -> None:
    hosts = loopback_hosts(3)
    assert hosts == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
    for host in hosts:
        free_port(host)  # bindable: local


def test_a_silent_cut_holds_bytes_and_healing_delivers_them(echo: tuple[str, int]) -> None:
    with LinkProxy(echo) as proxy, socket.create_connection(proxy.address) as sock:
        assert roundtrip(sock, b"before") == b"before"
        proxy.cut()
        sock.sendall(b"during")
        assert silent(sock)
        with socket.create_connection(proxy.address) as late:  # accepted, then held
            late.sendall(b"late")
            assert silent(late)
            proxy.heal()
            late.settimeout(30)
            assert late.recv(4) == b"late"
        sock.settimeout(30)
        assert sock.recv(6) == b"during"
        assert roundtrip(sock, b"after") == b"after"


def test_a_reset_cut_closes_connections_and_refuses_new_ones(echo: tuple[str, int]) -> None:
    with LinkProxy(echo) as proxy:
        sock = socket.create_connection(proxy.address)
        assert roundtrip(sock, b"x") == b"x"
        proxy.cut(reset=True)
        sock.settimeout(30)
        try:
            closed = sock.recv(1) == b""
        except ConnectionResetError:
            closed = True
        assert closed
        sock.close()
        assert not connects(*proxy.address, timeout=5)
        proxy.heal()
        assert connects(*proxy.address, timeout=30)


def test_a_cut_can_name_the_sources_it_applies_to(echo: tuple[str, int]) -> None:
    with LinkProxy(echo) as proxy:
        proxy.cut(sources=["127.0.0.3"])
        assert connects(*proxy.address, source="127.0.0.4", timeout=30)
        assert not connects(*proxy.address, source="127.0.0.3", timeout=SILENCE_S)
        proxy.heal()
        assert connects(*proxy.address, source="127.0.0.3", timeout=30)


def test_delay_still_delivers_in_order(echo: tuple[str, int]) -> None:
    with LinkProxy(echo, delay=0.01) as proxy, socket.create_connection(proxy.address) as s:
        assert roundtrip(s, b"slow") == b"slow"


def test_paused_process_answers_nothing_until_continued(tmp_path: Path) -> None:
    host, port = "127.0.0.5", free_port("127.0.0.5")
    server = Process([sys.executable, "-c", ECHO, host, str(port)], tmp_path / "echo.log")
    try:
        until("the echo server", lambda: connects(host, port))
        with socket.create_connection((host, port)) as sock:
            assert roundtrip(sock, b"1") == b"1"
            server.pause()
            sock.sendall(b"2")
            assert silent(sock)
            server.resume()
            sock.settimeout(30)
            assert sock.recv(1) == b"2"
        server.kill()
        assert not server.running and not connects(host, port)
        server.restart()
        until("the restarted echo server", lambda: connects(host, port))
    finally:
        server.stop()


needs_netns = pytest.mark.skipif(netns_available() is not None,
                                 reason=str(netns_available()))


@needs_netns
def test_stale_namespaces_of_dead_runs_are_removed() -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    name = f"tdb{dead.pid}hstale"
    subprocess.run(["ip", "netns", "add", name], check=True)
    assert name in remove_stale_namespaces()
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert name not in listing


@pytest.mark.once
@needs_netns
def test_namespaced_hosts_are_cut_and_healed_by_iptables_and_link_state(
        tmp_path: Path) -> None:
    probe = ("import socket,sys\ntry:\n s=socket.create_connection((sys.argv[1],7000),timeout=1)"
             "\n s.sendall(b'x'); print(s.recv(1) == b'x')\nexcept OSError: print(False)")
    with Network(2, tmp_path) as net:
        a, b = net.hosts
        for i, host in enumerate(net.hosts):
            net.popen(i, [sys.executable, "-c", ECHO, host, "7000"], f"echo{i}")

        def from_b() -> bool:
            return net.run(1, [sys.executable, "-c", probe, a]).stdout.strip() == "True"

        with net.entered():
            until("both echoes", lambda: connects(a, 7000) and connects(b, 7000))
            assert from_b()
            net.cut(0, [b])  # a <-> b dropped; the hub still reaches both
            assert not from_b()
            assert connects(a, 7000) and connects(b, 7000)
            net.isolate(0, keep_hub=False)
            assert not connects(a, 7000, timeout=SILENCE_S)
            net.heal(0)
            assert from_b() and connects(a, 7000)
            net.link_down(0)
            assert not connects(a, 7000, timeout=SILENCE_S)
            net.link_up(0)
            until("the link back up", lambda: connects(a, 7000))
        namespaces = [net.hub, *net.namespaces]
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not any(ns in listing for ns in namespaces)


@pytest.mark.once
@needs_netns
@pytest.mark.skipif(etcd_binary() is None, reason=ETCD_MISSING)
def test_a_host_cut_off_from_etcd_cannot_reach_it_until_healed(tmp_path: Path) -> None:
    with Network(2, tmp_path) as net, net.entered():
        etcd = EtcdCluster.start(tmp_path / "etcd", host=net.hosts[0], prefix=net.prefix(0))
        try:
            with EtcdClient(etcd.endpoints, timeout=1.0) as client:
                client.put("/cut", "before")
                net.cut(0, [Network.HUB_ADDRESS])  # the hub (this client) loses etcd
                with pytest.raises(CoordinationUnavailable):
                    client.get("/cut")
                net.heal()
                kv = until("etcd again", lambda: _get_or_none(client, "/cut"))
                assert kv.value == b"before"
        finally:
            etcd.stop()


def _get_or_none(client: EtcdClient, key: str) -> object:
    try:
        return client.get(key).first
    except CoordinationUnavailable:
        return None
