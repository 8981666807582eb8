"""Fault tools for cluster tests: processes on loopback addresses, cuttable links, namespaces.

What works on this machine (Debian bookworm, kernel 6.x, root; checked by
``test_cluster_faults.py``):

* **Distinct loopback addresses**: every 127.0.0.0/8 address is local, so nodes bind
  127.0.0.2, .3, ... (:func:`loopback_hosts`) with no setup. Outgoing connections leave
  from 127.0.0.1 unless the client binds its own address (``EtcdClient(local_address=)``).
* **Crash and pause**: :class:`tuffdb.testing.processes.Process` (``kill`` = SIGKILL,
  ``pause``/``resume`` = SIGSTOP/SIGCONT, ``restart``).
* **A cuttable link without privileges**: :class:`LinkProxy`, an asyncio TCP proxy on a
  thread of the test. ``cut()`` stops forwarding: bytes already sent wait inside the proxy
  (the sender's TCP window fills, as in a partition), new connections are accepted and
  held; ``heal()`` delivers what waited. ``cut(reset=True)`` instead closes every
  connection and refuses new ones (a crashed peer). ``cut(sources={"127.0.0.3"})`` cuts
  only clients connecting from those addresses. ``delay=`` adds latency per chunk (``tc
  netem`` is not in this kernel, so this is the way to add latency).
* **Network namespaces** (:class:`Network`, root only): one namespace per host, joined by
  veth pairs to a bridge in a hub namespace, every host with an address of its own in
  127.0.29.0/24 (``route_localnet``: the traffic is loopback-range and never leaves the
  namespaces the test made). Processes start inside with ``ip netns exec``. Cuts are
  ``iptables`` DROP rules inside the host's namespace (:meth:`Network.cut`,
  :meth:`Network.isolate`; silent, like a real partition); :meth:`Network.link_down`
  takes the host's interface down. The test's own thread talks to the hosts from the hub
  (address 127.0.29.1) inside ``with network.entered():``. Every namespace is deleted at
  ``close()``; namespaces left by a killed test run are removed by the next one.
* Not here: ``tc netem`` (no such qdisc in this kernel); clock skew needs Debian's
  ``faketime``, not installed by dev.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import re
import shutil
import socket
import subprocess
import threading
from collections.abc import Coroutine, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from tuffdb.testing.processes import Process

T = TypeVar("T")
WAIT_S = 60.0  # a bound for a loaded 2-core machine; a passing run never waits this long
CHUNK = 65536


def loopback_hosts(n: int, first: int = 2) -> list[str]:
    """``n`` distinct loopback addresses: 127.0.0.2, 127.0.0.3, ..."""
    return [f"127.0.0.{first + i}" for i in range(n)]


# -- a cuttable TCP link ----------------------------------------------------------------------

class LinkProxy:
    """A TCP proxy from ``listen`` to ``target`` whose link can be cut and healed.

    Runs its own event loop on a daemon thread; every method is safe from any thread.
    ``address`` is where clients connect (``listen_port=0`` picks a free port).
    """

    def __init__(self, target: tuple[str, int], *, listen_host: str = "127.0.0.1",
                 listen_port: int = 0, delay: float = 0.0) -> None:
        self.target = target
        self.delay = delay
        self._loop = asyncio.new_event_loop()
        self._open = asyncio.Event()
        self._open.set()
        self._reset = False
        self._cut_sources: set[str] | None = None  # None: every source (when cut)
        self._writers: set[asyncio.StreamWriter] = set()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name=f"LinkProxy->{target}")
        self._thread.start()
        self._server = self._call(asyncio.start_server(self._accept, listen_host,
                                                       listen_port))
        sock = self._server.sockets[0]
        self.address: tuple[str, int] = sock.getsockname()[:2]

    def cut(self, *, reset: bool = False, sources: Sequence[str] | None = None) -> None:
        """Stop the link: silently (bytes wait, as in a partition) or, with ``reset``, by
        closing every connection and refusing new ones. ``sources``: only connections
        from these client addresses."""
        def apply() -> None:
            self._reset = reset
            self._cut_sources = set(sources) if sources is not None else None
            self._open.clear()
            if reset:
                for writer in list(self._writers):
                    if self._is_cut(writer):
                        _abort(writer)
        self._loop.call_soon_threadsafe(apply)
        self._call(asyncio.sleep(0))  # the cut is in force when this returns

    def heal(self) -> None:
        """Forward again; bytes held during a silent cut are delivered."""
        def apply() -> None:
            self._reset = False
            self._cut_sources = None
            self._open.set()
        self._loop.call_soon_threadsafe(apply)
        self._call(asyncio.sleep(0))

    def close(self) -> None:
        """Close the listener and every connection; stop the thread."""
        async def shutdown() -> None:
            self._server.close()
            for writer in list(self._writers):
                _abort(writer)
        self._call(shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=WAIT_S)
        self._loop.close()

    def __enter__(self) -> LinkProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(WAIT_S)

    def _is_cut(self, writer: asyncio.StreamWriter) -> bool:
        if self._open.is_set():
            return False
        peer = writer.get_extra_info("peername")
        return self._cut_sources is None or (peer is not None and peer[0] in self._cut_sources)

    async def _gate(self, client: asyncio.StreamWriter) -> bool:
        """Wait while this client's link is silently cut; False when it is reset."""
        while self._is_cut(client):
            if self._reset:
                return False
            await self._open.wait()
        return True

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        up_writer = None
        try:
            if not await self._gate(writer):
                return
            try:
                up_reader, up_writer = await asyncio.open_connection(*self.target)
            except OSError:
                return
            self._writers.add(up_writer)
            await asyncio.gather(self._pump(reader, up_writer, writer),
                                 self._pump(up_reader, writer, writer))
        finally:
            for w in (writer, up_writer):
                if w is not None:
                    self._writers.discard(w)
                    _abort(w)

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter,
                    client: asyncio.StreamWriter) -> None:
        try:
            while data := await source.read(CHUNK):
                if not await self._gate(client):
                    break
                if self.delay:
                    await asyncio.sleep(self.delay)
                sink.write(data)
                await sink.drain()
        except OSError:
            pass
        finally:
            _abort(sink)


def _abort(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(Exception):
        writer.transport.abort()


# -- network namespaces -----------------------------------------------------------------------

NS_PREFIX = "tdb"  # namespaces are named tdb<pid>h<i> (hub: tdb<pid>hub)
SUBNET = "127.0.29"
CLONE_NEWNET = 0x40000000


def netns_available() -> str | None:
    """None when :class:`Network` can run here, else why not."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    missing = [p for p in ("ip", "iptables") if shutil.which(p) is None]
    if missing:
        return f"{missing} not installed (dev.py test installs iptables as root)"
    return None


def _ip(*args: str, ns: str | None = None) -> None:
    cmd = ["ip", *(["-n", ns] if ns else []), *args]
    subprocess.run(cmd, check=True, capture_output=True)


def _in_ns(ns: str, *args: str) -> None:
    subprocess.run(["ip", "netns", "exec", ns, *args], check=True, capture_output=True)


def remove_stale_namespaces() -> list[str]:
    """Delete the namespaces of test runs whose process is gone (a SIGKILLed pytest)."""
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                             check=False).stdout
    removed = []
    for name in re.findall(rf"^({NS_PREFIX}(\d+)h\w+)", listing, re.MULTILINE):
        ns, pid = name[0], int(name[1])
        if not Path(f"/proc/{pid}").exists():
            subprocess.run(["ip", "netns", "del", ns], check=False, capture_output=True)
            removed.append(ns)
    return removed


class Network:
    """``n`` hosts, each in a network namespace of its own, on one bridge.

    ``hosts[i]`` is host i's address (127.0.29.2, .3, ...); the hub, where the test's own
    clients run (inside :meth:`entered`), is 127.0.29.1.
    """

    HUB_ADDRESS = f"{SUBNET}.1"

    def __init__(self, n: int, log_dir: Path) -> None:
        remove_stale_namespaces()
        tag = f"{NS_PREFIX}{os.getpid()}h"
        suffix = f"{len(_live_networks)}x"
        self.hub = f"{tag}{suffix}hub"
        self.namespaces = [f"{tag}{suffix}{i}" for i in range(n)]
        self.hosts = [f"{SUBNET}.{i + 2}" for i in range(n)]
        self.log_dir = log_dir
        self.processes: list[Process] = []
        _live_networks.append(self)
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    def _build(self) -> None:
        for ns in (self.hub, *self.namespaces):
            _ip("netns", "add", ns)
            _ip("link", "set", "lo", "up", ns=ns)
        _ip("link", "add", "br0", "type", "bridge", ns=self.hub)
        self._address(self.hub, "br0", self.HUB_ADDRESS)
        for i, (ns, host) in enumerate(zip(self.namespaces, self.hosts, strict=True)):
            _ip("link", "add", f"v{i}", "type", "veth", "peer", "name", "eth0", "netns", ns,
                ns=self.hub)
            _ip("link", "set", f"v{i}", "master", "br0", "up", ns=self.hub)
            self._address(ns, "eth0", host)

    @staticmethod
    def _address(ns: str, dev: str, address: str) -> None:
        """Give ``dev`` a loopback-range address usable across the bridge: 127/8 stops
        being all-local in this namespace (only 127.0.0.1 stays on lo), and the kernel
        is told to route it (``route_localnet``)."""
        _in_ns(ns, "sysctl", "-qw", "net.ipv4.conf.all.route_localnet=1",
               f"net.ipv4.conf.{dev}.route_localnet=1")
        _ip("route", "del", "local", "127.0.0.0/8", "dev", "lo", "table", "local", ns=ns)
        _ip("addr", "add", f"{address}/24", "dev", dev, ns=ns)
        _ip("link", "set", dev, "up", ns=ns)

    def prefix(self, host: int) -> tuple[str, ...]:
        """The command prefix that runs a program in host ``host``'s namespace."""
        return ("ip", "netns", "exec", self.namespaces[host])

    def popen(self, host: int, argv: Sequence[str], name: str,
              env: dict[str, str] | None = None) -> Process:
        """Start ``argv`` in host ``host``'s namespace (stopped at :meth:`close`)."""
        process = Process(argv, self.log_dir / f"{name}.log", prefix=self.prefix(host), env=env)
        self.processes.append(process)
        return process

    def run(self, host: int, argv: Sequence[str], timeout: float = WAIT_S
            ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` to completion in host ``host``'s namespace."""
        return subprocess.run([*self.prefix(host), *argv], capture_output=True, text=True,
                              timeout=timeout, check=False)

    def cut(self, host: int, peers: Sequence[str]) -> None:
        """Drop every packet between host ``host`` and ``peers`` (addresses), both ways."""
        ns = self.namespaces[host]
        for peer in peers:
            _in_ns(ns, "iptables", "-A", "INPUT", "-s", peer, "-j", "DROP")
            _in_ns(ns, "iptables", "-A", "OUTPUT", "-d", peer, "-j", "DROP")

    def isolate(self, host: int, *, keep_hub: bool = True) -> None:
        """Cut host ``host`` off from every other host (and from the hub's clients unless
        ``keep_hub``: a leader cut off from etcd and its peers that clients still reach)."""
        others = [h for i, h in enumerate(self.hosts) if i != host]
        self.cut(host, others if keep_hub else [*others, self.HUB_ADDRESS])

    def heal(self, host: int | None = None) -> None:
        """Remove the cuts of ``host`` (every host when None)."""
        for i in range(len(self.hosts)) if host is None else [host]:
            _in_ns(self.namespaces[i], "iptables", "-F")

    def link_down(self, host: int) -> None:
        """Take host ``host``'s interface down (nothing in or out)."""
        _ip("link", "set", "eth0", "down", ns=self.namespaces[host])

    def link_up(self, host: int) -> None:
        _ip("link", "set", "eth0", "up", ns=self.namespaces[host])

    @contextlib.contextmanager
    def entered(self) -> Iterator[None]:
        """Run the calling thread in the hub namespace for the block: sockets it opens
        (clients of the hosts) live there and keep working after the block."""
        with _netns_of_thread(f"/run/netns/{self.hub}"):
            yield

    def close(self) -> None:
        """Stop every process started here and delete every namespace (idempotent)."""
        for process in self.processes:
            process.stop()
        for ns in (*self.namespaces, self.hub):
            subprocess.run(["ip", "netns", "del", ns], check=False, capture_output=True)
        if self in _live_networks:
            _live_networks.remove(self)

    def __enter__(self) -> Network:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_live_networks: list[Network] = []
_libc = ctypes.CDLL(None, use_errno=True)


@contextlib.contextmanager
def _netns_of_thread(path: str) -> Iterator[None]:
    """setns(2) for the calling thread only (network namespaces are per thread)."""
    with open("/proc/thread-self/ns/net", "rb") as original, open(path, "rb") as target:
        if _libc.setns(target.fileno(), CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns({path}) failed")
        try:
            yield
        finally:
            if _libc.setns(original.fileno(), CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back to the original namespace failed")


def connects(host: str, port: int, *, source: str | None = None, timeout: float = 1.0) -> bool:
    """True when a TCP connection to ``host:port`` opens and echoes a byte back within
    ``timeout`` (the fault tests' probe; the servers they probe echo)."""
    try:
        with socket.create_connection((host, port), timeout=timeout,
                                      source_address=(source, 0) if source else None) as s:
            s.sendall(b"x")
            return s.recv(1) == b"x"
    except OSError:
        return False
