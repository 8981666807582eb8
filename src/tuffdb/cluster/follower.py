"""The follower's end of the replication stream.

:func:`fetch_snapshot` runs before the stores open (at start, or when the node restarts to
catch up): it receives a leader's consistent snapshot into a staging directory and puts it
in place of the stores' directories. :class:`ReplicationClient` then tails: it applies
each ``ROUND`` to its store in LSN order, and whenever nothing more is waiting on the
socket it makes what it applied durable (one fsync per store touched), writes the LSN it
is about to acknowledge to the acked file (``state.AckedFile``: one synchronous write)
and acknowledges it, so acknowledgements batch under load the way group commit does, and
a node killed at any instant restarts with an LSN no lower than any round it
acknowledged. Rounds it applied stay in a bounded ring: if this node becomes the leader, a
follower that is a little behind it is served from there.

A round or ping from a leader whose epoch is older than the newest this node has seen is
refused: the connection is dropped and nothing of it is applied.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import select
import shutil
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tuffdb.cluster import state as node_state
from tuffdb.cluster import wire
from tuffdb.cluster.appliers import Applier
from tuffdb.cluster.sequencer import Round
from tuffdb.cluster.state import NodeState
from tuffdb.cluster.wire import Msg
from tuffdb.errors import CorruptionError, ProtocolError
from tuffdb.log import get_logger
from tuffdb.storage.files import fsync_dir

log = get_logger("tuffdb.cluster")

ACK_EVERY_ROUNDS = 256
SAVE_EVERY_S = 0.5
CONNECT_TIMEOUT_S = 5.0


class StaleLeaderError(ProtocolError):
    """The peer leads an epoch older than one this node has already seen."""


class RefusedError(ProtocolError):
    """The leader turned this node away (another cluster, a failed authentication, a
    snapshot it cannot take): logged as a warning, retried like a broken link."""


def _hello(sock: socket.socket, cluster: str, node: str, state: NodeState,
           diverged: str | None = None) -> None:
    wire.send(sock, Msg.HELLO, {"cluster": cluster, "node": node, "lsn": state.lsn,
                                "epoch": state.epoch, "history": state.history,
                                "diverged": diverged, "unsure": state.unsure})


def _expect(sock: socket.socket, expected: Msg) -> dict[str, Any]:
    """The header of the leader's next message, which must be ``expected``
    (RefusedError when it is REFUSE, ProtocolError when it is anything else)."""
    kind, header, _ = wire.recv(sock)
    if kind == Msg.REFUSE:
        raise RefusedError(f"the leader refused: {header.get('reason')}")
    if kind != expected:
        raise ProtocolError(f"expected {expected.name}, got {kind.name}")
    return header


def _welcome(sock: socket.socket, newest_epoch: int) -> dict[str, Any]:
    header = _expect(sock, Msg.WELCOME)
    epoch = wire.field(header, "epoch", int)
    if epoch < newest_epoch:
        raise StaleLeaderError(f"the peer leads epoch {epoch}, older than {newest_epoch}")
    return header


def connect(address: str, cluster: str, secret: bytes | None) -> socket.socket:
    """A connection to the leader's replication port, past the mutual proof of the
    cluster ``secret`` (wire.py): the leader's nonce is answered with this node's proof,
    and the leader answers this node's nonce with its own. A leader that does not accept
    the proof answers REFUSE (RefusedError); one that cannot prove the secret this node
    has is not a leader of this cluster (RefusedError: nothing is sent to it, nothing it
    sends is applied)."""
    host, _, port = address.rpartition(":")
    sock = socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        nonce = wire.field(_expect(sock, Msg.CHALLENGE), "nonce", bytes)
        ours = os.urandom(16)
        wire.send(sock, Msg.AUTH, {"proof": wire.proof(secret, cluster, nonce)
                                   if secret is not None else b"", "nonce": ours})
        given = _expect(sock, Msg.PROVEN).get("proof")
        if secret is not None and not (isinstance(given, bytes) and hmac.compare_digest(
                given, wire.leader_proof(secret, cluster, ours))):
            raise RefusedError(f"the node at {address} could not prove the cluster secret: "
                               "it is not a leader of this cluster (or its --cluster-secret "
                               "differs from this node's)")
        sock.settimeout(None)
    except BaseException:
        sock.close()
        raise
    return sock


def fetch_snapshot(address: str, *, cluster: str, node: str, state: NodeState,
                   data_dir: Path, stores: dict[str, Path],
                   secret: bytes | None = None) -> int | None:
    """Ask the leader at ``address`` whether this node can tail from where it is; if it
    needs a snapshot, receive it and put it in place of ``stores`` (name -> directory,
    none of them open). Returns None when no snapshot was needed, else how many rounds
    this node gave up (held only by a deposed leader's history; ``state`` is updated and
    saved). Raises ConnectionError/ProtocolError when the leader cannot be reached or
    the stream is malformed (nothing is changed then)."""
    sock = connect(address, cluster, secret)
    try:
        _hello(sock, cluster, node, state)
        welcome = _welcome(sock, state.epoch)
        if welcome.get("mode") != "snapshot":
            return None
        staging = data_dir / "cluster" / "incoming"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        files: dict[tuple[str, str], int] = {}
        fds: dict[tuple[str, str], int] = {}
        try:
            while True:
                kind, header, blob = wire.recv(sock)
                if kind == Msg.SNAPSHOT_END:
                    lsn = wire.field(header, "lsn", int)
                    history = wire.history_field(header, "history")
                    epoch = wire.field(header, "epoch", int)
                    break
                if kind != Msg.FILE:
                    raise ProtocolError(f"expected FILE or SNAPSHOT_END, got {kind.name}")
                store = wire.field(header, "store", str)
                name = wire.field(header, "name", str)
                if store not in stores or name.startswith("/") or ".." in Path(name).parts:
                    raise ProtocolError(f"snapshot file {store}/{name} is not for this node")
                key = (store, name)
                fd = fds.get(key)
                if fd is None:
                    path = staging / store / name
                    path.parent.mkdir(parents=True, exist_ok=True)
                    fd = fds[key] = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                    files[key] = wire.field(header, "size", int)
                os.pwrite(fd, blob, wire.field(header, "offset", int))
            for key, fd in fds.items():
                if os.fstat(fd).st_size != files[key]:
                    raise ProtocolError(f"snapshot file {key[0]}/{key[1]} arrived incomplete")
                os.fsync(fd)
        finally:
            for fd in fds.values():
                os.close(fd)
    finally:
        with contextlib.suppress(OSError):
            sock.close()
    for store, directory in stores.items():
        incoming = staging / store
        incoming.mkdir(exist_ok=True)
        for sub in [incoming, *[p for p in incoming.rglob("*") if p.is_dir()]]:
            fsync_dir(sub)
        old = directory.with_name(directory.name + ".replaced")
        shutil.rmtree(old, ignore_errors=True)
        if directory.exists():
            directory.rename(old)
        incoming.rename(directory)
        fsync_dir(directory.parent)
        shutil.rmtree(old, ignore_errors=True)
    shutil.rmtree(staging, ignore_errors=True)
    truncated = max(0, state.lsn - int(welcome.get("truncate_to", state.lsn)))
    if truncated:
        log.warning("rounds of a deposed leader given up for the new leader's snapshot",
                    truncated_rounds=truncated, from_lsn=state.lsn, snapshot_lsn=lsn)
    state.lsn = lsn
    state.epoch = max(state.epoch, epoch)
    state.history = [h for h in history if h[1] <= lsn] or state.history
    state.open_epoch = state.unsure = 0  # the stores are the snapshot's: exactly ``lsn``
    node_state.save(data_dir / "cluster", state)
    log.info("snapshot installed", lsn=lsn, files=len(files), leader=welcome.get("leader"))
    return truncated


class ReplicationClient:
    """Tails the leader at ``address`` until :meth:`stop` (its own thread)."""

    def __init__(self, *, address: str, cluster: str, node: str, state: NodeState,
                 state_dir: Path, appliers: dict[str, Applier],
                 newest_epoch: Callable[[], int], on_snapshot_needed: Callable[[], None],
                 ring_bytes: int = 256 << 20, secret: bytes | None = None) -> None:
        self.address = address
        self.cluster = cluster
        self.secret = secret
        self.node = node
        self.state = state
        self.state_dir = state_dir
        self.appliers = appliers
        self.newest_epoch = newest_epoch
        self.on_snapshot_needed = on_snapshot_needed
        self.ring: deque[Round] = deque()
        self.ring_size = 0
        self.ring_bytes = ring_bytes
        self.connected = False
        self.leader_lsn = 0
        self.leader_node: str | None = None
        self.applied_time_ns = 0  # when the leader wrote the last round applied here
        self.failed: str | None = None  # why the stream stopped for good (stale leader, ...)
        # why a round could not continue this node's logs: the next HELLO asks for a snapshot
        self.diverged: str | None = None
        self._stop = threading.Event()
        self._sock: socket.socket | None = None
        self._saved = 0
        self._applied_lsn = state.lsn  # the last round applied, acknowledged or not
        self._applied = threading.Condition()
        self._history_saved = True  # False once a round began an epoch not yet saved
        self._acked_file: node_state.AckedFile | None = None
        self._thread = threading.Thread(target=self._run, name="tuffdb-repl-follow",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        with self._applied:
            self._applied.notify_all()
        sock = self._sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=10)
        self._save()

    def wait_applied(self, lsn: int, timeout_s: float) -> bool:
        """Block until the rounds up to ``lsn`` are applied here (readable), or the
        timeout passes (False)."""
        with self._applied:
            return self._applied.wait_for(lambda: self.state.lsn >= lsn or self._stop.is_set(),
                                          timeout_s) and self.state.lsn >= lsn

    def lag(self) -> tuple[int, float]:
        """(rounds behind the leader's last known LSN, seconds behind its clock)."""
        behind = max(0, self.leader_lsn - self.state.lsn)
        if not behind or not self.applied_time_ns:
            return behind, 0.0
        return behind, max(0.0, (time.time_ns() - self.applied_time_ns) / 1e9)

    def _save(self) -> None:
        if self.state.lsn != self._saved:
            node_state.save(self.state_dir, self.state)
            self._saved = self.state.lsn

    def _run(self) -> None:
        try:
            self._sessions()
        finally:
            if self._acked_file is not None:
                self._acked_file.close()

    def _sessions(self) -> None:
        backoff = 0.05
        while not self._stop.is_set():
            try:
                self._session()
                backoff = 0.05
            except StaleLeaderError as exc:
                log.warning("refused a stale leader", reason=str(exc), address=self.address)
            except RefusedError as exc:
                log.warning("the leader turned this node away", reason=str(exc),
                            address=self.address)
            except CorruptionError as exc:  # a round this node's logs cannot continue
                self.diverged = str(exc)
                log.error("this node's logs do not continue the leader's: it asks for a "
                          "snapshot", address=self.address, reason=str(exc))
            except (OSError, ConnectionError, ProtocolError) as exc:
                if not self._stop.is_set():
                    log.info("replication link down", address=self.address, reason=str(exc))
            except Exception as exc:  # noqa: BLE001 - a bug: say so, keep following
                log.exception("replication follower error", address=self.address,
                              error=repr(exc))
            finally:
                self.connected = False
                self._save()
            if self.failed is not None:
                return
            self._stop.wait(backoff)
            backoff = min(backoff * 2, 1.0)

    def _session(self) -> None:
        sock = connect(self.address, self.cluster, self.secret)
        self._sock = sock
        try:
            _hello(sock, self.cluster, self.node, self.state, self.diverged)
            welcome = _welcome(sock, max(self.state.epoch, self.newest_epoch()))
            if welcome.get("mode") != "stream":
                self.failed = "the leader says this node needs a snapshot"
                self.on_snapshot_needed()
                return
            self.leader_node = welcome.get("leader")
            self.leader_lsn = wire.field(welcome, "lsn", int)
            epoch = wire.field(welcome, "epoch", int)
            self.state.epoch = max(self.state.epoch, epoch)
            self._open(epoch)
            self.connected = True
            log.info("following", leader=self.leader_node, address=self.address,
                     from_lsn=self.state.lsn, leader_lsn=self.leader_lsn)
            self._tail(sock)
        finally:
            self._sock = None
            with contextlib.suppress(OSError):
                sock.close()

    def _open(self, epoch: int) -> None:
        """Before applying a round of this session: save that the stores may hold rounds
        of epoch ``epoch``'s leader past the saved LSN (``NodeState.open_epoch``). The
        LSN saved with it is exact here (every round applied before is counted), and a
        leader streams only to a node unsure of no other epoch, so the node is sure again.
        """
        state = self.state
        state.unsure = 0
        if state.open_epoch != epoch:
            state.open_epoch = epoch
            node_state.save(self.state_dir, state)
            self._saved = state.lsn

    def _tail(self, sock: socket.socket) -> None:
        touched: set[str] = set()
        try:
            self._tail_rounds(sock, touched)
        except CorruptionError:
            raise  # this node's logs cannot go on: it asks for a snapshot (_run)
        except BaseException:
            self._keep_applied(touched, self._applied_lsn)
            raise
        self._keep_applied(touched, self._applied_lsn)

    def _keep_applied(self, touched: set[str], applied: int) -> None:
        """Rounds applied since the last ACK when the stream ends (the leader gone, a bad
        message, a stop) are made durable and counted in the LSN and the epoch history.

        The KV rounds are in the stores already and the event rounds wait in their
        applier. Left unreported, the next session would stream over them: its leader,
        perhaps a new one that never had them, starts after the last ACK. The event
        rounds were then appended in that session ahead of its own, KV writes of a deposed
        leader stayed in the store, and a promotion numbered its rounds from before them
        (docs/design/replication.md, Known gaps). Counted, the next HELLO says this node
        holds them; a leader whose history lacks them answers with a snapshot."""
        if applied <= self.state.lsn:
            return
        try:
            self._hold(touched, applied)
        except Exception as exc:  # noqa: BLE001 - the stores may hold part of a round
            self.diverged = f"rounds applied before the stream ended could not be kept: {exc}"
            log.error("rounds applied before the stream ended could not be made durable: "
                      "this node asks for a snapshot", address=self.address, error=repr(exc))

    def _hold(self, touched: set[str], applied: int) -> None:
        """Make the rounds applied so far durable (one flush per store) and count them:
        their LSN is durable too before this returns (the caller acknowledges it)."""
        for store in touched:
            self.appliers[store].flush()
        touched.clear()
        state = self.state
        if not self._history_saved:  # a new epoch's rounds: the history goes with the LSN
            lsn, state.lsn = state.lsn, applied
            try:
                node_state.save(self.state_dir, state)
            except BaseException:
                state.lsn = lsn
                raise
            self._saved = applied
            self._history_saved = True
        else:
            if self._acked_file is None:
                self._acked_file = node_state.AckedFile(self.state_dir)
            self._acked_file.write(state.gen, applied)
        with self._applied:
            self.state.lsn = applied
            self._applied.notify_all()

    def _tail_rounds(self, sock: socket.socket, touched: set[str]) -> None:
        """Apply and acknowledge rounds until the stream ends (``_applied_lsn``: the last
        one applied, acknowledged or not)."""
        state = self.state
        applied = self._applied_lsn = state.lsn
        since_ack = 0
        last_save = time.monotonic()
        while not self._stop.is_set():
            kind, header, blob = wire.recv(sock)
            if kind == Msg.ROUND:
                if wire.field(header, "leader_epoch", int) < max(state.epoch, self.newest_epoch()):
                    raise StaleLeaderError("a round from a leader of an older epoch")
                lsn = wire.field(header, "lsn", int)
                if lsn <= applied:
                    continue  # already held (a replay after reconnecting)
                if lsn != applied + 1:
                    raise ProtocolError(f"round {lsn} after {applied}: a gap in the stream")
                rnd = self._round(header, blob, lsn)
                self.appliers[rnd.store].apply(rnd.parts)
                touched.add(rnd.store)
                if not state.history or state.history[-1][0] != rnd.epoch:
                    state.begin_epoch(rnd.epoch, lsn)
                    self._history_saved = False
                applied = self._applied_lsn = lsn
                self.applied_time_ns = rnd.time_ns
                self.leader_lsn = max(self.leader_lsn, lsn)
                self._keep(rnd)
                since_ack += 1
            elif kind == Msg.PING:
                if wire.field(header, "epoch", int) < max(state.epoch, self.newest_epoch()):
                    raise StaleLeaderError("a ping from a leader of an older epoch")
                self.leader_lsn = max(self.leader_lsn, wire.field(header, "lsn", int))
            elif kind == Msg.REFUSE:
                raise ProtocolError(f"the leader ended the stream: {header.get('reason')}")
            else:
                raise ProtocolError(f"unexpected {kind.name} while tailing")
            if since_ack >= ACK_EVERY_ROUNDS or not _pending(sock):
                self._hold(touched, applied)
                wire.send(sock, Msg.ACK, {"lsn": applied})
                since_ack = 0
                now = time.monotonic()
                if now - last_save >= SAVE_EVERY_S:
                    self._save()
                    last_save = now

    def _round(self, header: dict[str, Any], blob: bytes, lsn: int) -> Round:
        store = wire.field(header, "store", str)
        if store not in self.appliers:
            raise ProtocolError(f"a round for store {store!r}, which this node does not serve")
        parts = []
        pos = 0
        for name, offset, length in wire.field(header, "parts", list):
            parts.append((str(name), int(offset), blob[pos : pos + int(length)]))
            pos += int(length)
        if pos != len(blob):
            raise ProtocolError("a round's parts do not add up to its bytes")
        return Round(lsn, wire.field(header, "epoch", int), store,
                     wire.field(header, "time_ns", int), parts, len(blob))

    def _keep(self, rnd: Round) -> None:
        self.ring.append(rnd)
        self.ring_size += rnd.size
        while self.ring_size > self.ring_bytes and len(self.ring) > 1:
            self.ring_size -= self.ring.popleft().size


def _pending(sock: socket.socket) -> bool:
    """Whether more bytes already wait on ``sock`` (poll: any file descriptor number)."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))
