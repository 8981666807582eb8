"""The leader's end of the replication stream: one thread pair per follower.

A follower says where it is (``HELLO``: its LSN and epoch history). The leader answers
with the mode (``WELCOME``):

- ``stream`` when it can serve every round after the follower's LSN from its ring and the
  follower holds nothing the leader does not (their histories agree up to the follower's
  LSN): rounds follow at once;
- ``snapshot`` otherwise (the follower is behind the ring, or holds rounds of a deposed
  leader that the new one never had: those are given up, and logged as truncated). The
  leader then sends a consistent snapshot of every store (``FILE`` chunks, taken with
  every store's next round held at its tap), ``SNAPSHOT_END`` with the snapshot's LSN,
  and streams from there.

Rounds go out as ``ROUND`` messages in LSN order, a ``PING`` when idle (so the follower can
measure its lag and see the leader alive); the follower's ``ACK`` of an LSN says every
round up to it is durable there (``Sequencer.ack``). A follower that falls behind the ring
while connected is disconnected: it comes back and takes a snapshot.
"""

from __future__ import annotations

import contextlib
import hmac
import itertools
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from tuffdb.cluster import wire
from tuffdb.cluster.sequencer import FollowerState, Sequencer
from tuffdb.cluster.state import shared_prefix
from tuffdb.cluster.wire import Msg
from tuffdb.errors import ProtocolError
from tuffdb.security.protected import OFF, is_local
from tuffdb.log import get_logger

log = get_logger("tuffdb.cluster")

PING_INTERVAL_S = 0.1
SEND_BATCH_BYTES = 4 << 20
AUTH_TIMEOUT_S = 10.0  # a connection that does not answer the challenge by then is closed
MAX_UNADMITTED = 32  # connections waiting to be admitted at once; more are closed at once


@dataclass
class SnapshotFile:
    store: str
    name: str
    size: int
    read: Callable[[int, int], bytes]  # (offset, length) -> bytes


# () -> (lsn, files, release): a consistent snapshot of every store at LSN ``lsn``.
SnapshotSource = Callable[[], tuple[int, list[SnapshotFile], Callable[[], None]]]
# A face's handler of a forwarded request: (fields, request bytes) -> (fields, reply bytes).
ForwardHandler = Callable[[dict[str, Any], bytes], tuple[dict[str, Any], bytes]]


class ReplicationServer:
    """Serves the replication stream while this node leads (``close`` when it stops)."""

    def __init__(self, *, host: str, port: int, cluster: str, node: str,
                 sequencer: Sequencer, history: Callable[[], list[list[int]]],
                 snapshot: SnapshotSource | None,
                 forward: dict[str, ForwardHandler] | None = None,
                 secret: bytes | None = None, protected_mode: bool = True) -> None:
        self.forward = forward if forward is not None else {}
        self.secret = secret  # None: any connection is admitted (no secret configured)
        # without a secret, nodes on this host only (security/protected.py)
        self.local_only = protected_mode and secret is None
        self.cluster = cluster
        self.node = node
        self.seq = sequencer
        self.history = history
        self.snapshot = snapshot
        self._closed = False
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._links = itertools.count(1)  # accepted connections, in order
        self._unadmitted = 0  # accepted connections that have not answered the challenge yet
        self._sock = socket.create_server((host, port), reuse_port=False)
        self.port = self._sock.getsockname()[1]
        self._thread = threading.Thread(target=self._accept, name="tuffdb-repl-accept",
                                        daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=5)

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, addr = self._sock.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                if self._unadmitted >= MAX_UNADMITTED:  # a flood: no thread for it
                    conn.close()
                    continue
                self._unadmitted += 1
                self._conns.add(conn)
            threading.Thread(target=self._serve,
                             args=(conn, f"{addr[0]}:{addr[1]}", next(self._links),
                                   is_local(addr[0])),
                             name="tuffdb-repl-send", daemon=True).start()

    def _serve(self, conn: socket.socket, peer: str, link: int, local: bool) -> None:
        follower: FollowerState | None = None
        try:
            try:
                admitted = self._admit(conn, peer, local)
            finally:
                with self._lock:
                    self._unadmitted -= 1
            if not admitted:
                return
            shook = self._handshake(conn, peer, link)
            if shook is not None:
                follower, start = shook
                self._stream(conn, follower, start)
        except (OSError, ConnectionError, ProtocolError) as exc:
            if not self._closed:
                log.info("replication link closed", peer=peer, reason=str(exc))
        finally:
            if follower is not None:
                follower.connected = False
                with self.seq._cv:  # noqa: SLF001 - wake confirmations waiting on it
                    self.seq._cv.notify_all()  # noqa: SLF001
            with self._lock:
                self._conns.discard(conn)
            with contextlib.suppress(OSError):
                conn.close()

    def _admit(self, conn: socket.socket, peer: str, local: bool) -> bool:
        """Challenge the connection; True if it proved it knows the cluster secret (or
        none is configured). A failed proof gets REFUSE and is logged."""
        nonce = os.urandom(16)
        conn.settimeout(AUTH_TIMEOUT_S)
        wire.send(conn, Msg.CHALLENGE, {"nonce": nonce})
        kind, header, _ = wire.recv(conn)
        if kind != Msg.AUTH:
            raise ProtocolError(f"expected AUTH, got {kind.name}")
        conn.settimeout(None)
        if self.local_only and not local:
            log.warning("replication connection refused: protected mode (no cluster secret) "
                        "admits nodes on this host only", peer=peer)
            wire.send(conn, Msg.REFUSE, {"reason": (
                "protected mode: with no cluster secret, the leader admits nodes on its own "
                "host only; set the same --cluster-secret (or --requirepass, --api-key or "
                f"encryption key) on every node, or turn protected mode off: {OFF}")})
            return False
        theirs = header.get("nonce")
        if self.secret is None:
            wire.send(conn, Msg.PROVEN, {"proof": b""})
            return True
        given = header.get("proof")
        if isinstance(given, bytes) and hmac.compare_digest(
                given, wire.proof(self.secret, self.cluster, nonce)):
            # ... and this node proves the secret back (the other end checks it: wire.py)
            wire.send(conn, Msg.PROVEN, {"proof": wire.leader_proof(
                self.secret, self.cluster, theirs) if isinstance(theirs, bytes) else b""})
            return True
        log.warning("replication connection refused: it does not know the cluster secret",
                    peer=peer)
        wire.send(conn, Msg.REFUSE, {"reason": "authentication failed: this node's cluster "
                                               "secret differs from the leader's (set the same "
                                               "--cluster-secret on every node)"})
        return False

    def _serve_forwards(self, conn: socket.socket, header: dict[str, Any], blob: bytes) -> None:
        """A follower's forwarded requests, one after another, until it hangs up."""
        while True:
            kind = wire.field(header, "kind", str)
            handler = self.forward.get(kind)
            if handler is None:
                reply, out = {"code": 12, "message": f"no handler for {kind!r}"}, b""
            elif self.seq.closed or not self.seq.lease.valid():
                reply, out = {"code": 14, "message": "not the leader any more"}, b""
            else:
                reply, out = handler(header, blob)
                # Every round written so far covers this request's write: the follower
                # answers its client once it applied this far (it reads its own writes).
                reply = {**reply, "lsn": self.seq.last_lsn}
            wire.send(conn, Msg.FORWARD_REPLY, reply, out)
            msg, header, blob = wire.recv(conn)
            if msg != Msg.FORWARD:
                raise ProtocolError(f"expected FORWARD, got {msg.name}")

    def _handshake(self, conn: socket.socket, peer: str,
                   link: int) -> tuple[FollowerState, int] | None:
        kind, hello, blob = wire.recv(conn)
        if kind == Msg.FORWARD:
            self._serve_forwards(conn, hello, blob)
            return None
        if kind != Msg.HELLO:
            raise ProtocolError(f"expected HELLO, got {kind.name}")
        if wire.field(hello, "cluster", str) != self.cluster:
            wire.send(conn, Msg.REFUSE, {"reason": f"this is cluster {self.cluster!r}"})
            return None
        node = wire.field(hello, "node", str)
        lsn = wire.field(hello, "lsn", int)
        history = wire.history_field(hello, "history")
        ours = self.history()
        seq = self.seq
        common = shared_prefix(history, lsn, ours, seq.last_lsn)
        if common < lsn:
            log.warning("follower holds rounds this leader never had: it takes a snapshot",
                        follower=node, its_lsn=lsn, shared_lsn=common, truncated_rounds=lsn - common)
            mode = "snapshot"
        elif hello.get("diverged"):  # its logs could not continue ours (follower.py)
            log.warning("follower's logs do not continue this leader's: it takes a snapshot",
                        follower=node, its_lsn=lsn, reason=str(hello["diverged"]))
            mode = "snapshot"
        elif hello.get("unsure") and hello["unsure"] != seq.epoch:
            # restarted after a crash: its stores may hold rounds of that epoch's leader
            # past its saved LSN, which this leader's history may lack (state.py)
            log.warning("follower may hold rounds of another leader past its saved position "
                        "(it restarted without saving it): it takes a snapshot",
                        follower=node, its_lsn=lsn, its_open_epoch=hello["unsure"])
            mode = "snapshot"
        elif lsn >= seq.last_lsn or seq.rounds_after(lsn) is not None:
            mode = "stream"
        else:
            mode = "snapshot"
        if mode == "snapshot" and self.snapshot is None:
            wire.send(conn, Msg.REFUSE, {"reason": "a snapshot is needed and this node "
                                                   "cannot take one"})
            return None
        wire.send(conn, Msg.WELCOME, {"epoch": seq.epoch, "leader": self.node, "mode": mode,
                                      "lsn": seq.last_lsn, "history": ours,
                                      "truncate_to": common})
        start = lsn
        if mode == "snapshot":
            start = self._send_snapshot(conn)
        with seq._cv:  # noqa: SLF001
            # A new state per connection: the threads of one it replaces (a reconnect
            # before this end saw the old one close) mark theirs disconnected when they
            # end, and marked this one, whose stream then stopped: a reconnect loop. The
            # newest connection wins: an older one whose handshake ends later (its thread
            # held back after WELCOME, or a snapshot sent meanwhile) must not replace it,
            # or the follower's acknowledgements, arriving on the new link, count for a
            # state nobody reads (seen in a unit test, 1 run in 25).
            current = seq.followers.get(node)
            if current is not None and current.link > link:
                follower = None
            else:
                follower = seq.followers[node] = FollowerState(
                    node, acked=start, connected=True, address=peer,  # acked: held now
                    link=link)
                seq._cv.notify_all()  # noqa: SLF001
        if follower is None:
            log.info("a newer link of this follower is already registered: this one ends",
                     follower=node, peer=peer)
            return None
        log.info("follower connected", follower=node, mode=mode, from_lsn=start, peer=peer)
        threading.Thread(target=self._acks, args=(conn, follower), name="tuffdb-repl-acks",
                         daemon=True).start()
        return follower, start

    def _send_snapshot(self, conn: socket.socket) -> int:
        assert self.snapshot is not None
        lsn, files, release = self.snapshot()
        try:
            for f in files:
                offset = 0
                while True:
                    n = min(wire.FILE_CHUNK_BYTES, f.size - offset)
                    wire.send(conn, Msg.FILE, {"store": f.store, "name": f.name,
                                               "offset": offset, "size": f.size},
                              f.read(offset, n) if n else b"")
                    offset += n
                    if offset >= f.size:
                        break
            wire.send(conn, Msg.SNAPSHOT_END, {"lsn": lsn, "epoch": self.seq.epoch,
                                               "history": self.history()})
        finally:
            release()
        return lsn

    def _stream(self, conn: socket.socket, follower: FollowerState, sent: int) -> None:
        """Send rounds from ``sent`` on until the follower leaves; once it is caught up,
        the committing threads write its rounds themselves (``Sequencer.next_to_send``)."""
        seq = self.seq
        epoch = seq.epoch
        stream = seq.stream(conn, sent, lambda rnd: _round_message(rnd, epoch))

        def ping() -> bytes:
            return wire.encode(Msg.PING, {"epoch": epoch, "lsn": seq.last_lsn,
                                          "time_ns": time.time_ns()})

        try:
            while not self._closed and not seq.closed and follower.connected:
                data, rounds = seq.next_to_send(stream, PING_INTERVAL_S, ping)
                if data:
                    conn.sendall(data)
                if rounds is None:
                    log.warning("follower fell behind the replication ring: it takes a "
                                "snapshot when it reconnects", follower=follower.node,
                                acked=follower.acked)
                    return
                if rounds:
                    for batch in _batches(rounds):
                        conn.sendall(b"".join(_round_message(r, epoch) for r in batch))
                    stream.sent = rounds[-1].lsn
        finally:
            seq.end_stream(stream)

    def _acks(self, conn: socket.socket, follower: FollowerState) -> None:
        try:
            while True:
                kind, header, _ = wire.recv(conn)
                if kind == Msg.ACK:
                    self.seq.ack(follower.node, wire.field(header, "lsn", int))
                elif kind == Msg.REFUSE:
                    log.warning("follower refused the stream", follower=follower.node,
                                reason=header.get("reason"))
                    break
        except (OSError, ConnectionError, ProtocolError):
            pass
        finally:
            follower.connected = False
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


def _batches(rounds: list[Any]) -> Iterator[list[Any]]:
    batch: list[Any] = []
    size = 0
    for r in rounds:
        batch.append(r)
        size += r.size
        if size >= SEND_BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _round_message(rnd: Any, leader_epoch: int) -> bytes:
    parts = [[name, offset, len(data)] for name, offset, data in rnd.parts]
    blob = rnd.parts[0][2] if len(rnd.parts) == 1 else b"".join(p[2] for p in rnd.parts)
    return wire.encode(Msg.ROUND, {"epoch": rnd.epoch, "leader_epoch": leader_epoch,
                                   "lsn": rnd.lsn, "store": rnd.store,
                                   "time_ns": rnd.time_ns, "parts": parts}, blob)
