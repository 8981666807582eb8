"""The leader's side of the write path: one order over every store's rounds, and the wait
for followers.

Every durable commit round of every store (the KV store, the documents' KV store, the
event store) reaches :meth:`Sequencer.tap` from the thread that committed it, before its
writers are answered: the KV stores tap a round once it is written, so followers receive
it while the leader fsyncs it; the event store after its fsync. The tap gives it the next
**LSN** (one counter per node over all stores, so "furthest ahead" is one number and a
follower's acknowledgement of LSN *n* covers every earlier round of every store), keeps
it in a bounded ring for the followers' senders, and writes it at once to every
follower whose stream is *live* (:class:`Stream`: caught up, its sender thread idle), so
no thread is woken to ship it. After the round's fsync, :meth:`Sequencer.confirm_later`
registers a callback, called (in LSN order, by the thread that learns it: see
:meth:`Sequencer._deliver`) once the round may be acknowledged, so the store writes its
next round meanwhile:

- this node still holds a valid leader lease (:class:`Lease`: the deadline is the
  moment the last successful renewal was *sent* plus the TTL minus a margin, on the
  monotonic clock, so a paused or partitioned leader stops acknowledging before its
  lease can expire in etcd), and
- ``required`` followers of the published sync set have acknowledged an LSN >= the
  round's (they applied and fsynced it), within ``timeout``.

Otherwise the round's writers get :class:`~tuffdb.errors.NotEnoughReplicasError` or
:class:`~tuffdb.errors.NotLeaderError`: the data is durable here, but not acknowledged.

A follower may therefore hold a round its leader never made durable (the leader died
between shipping and fsyncing it). No writer of that round was answered, so keeping it
(the follower wins the election) or dropping it (the leader is elected again: it restarts
unsure of its own epoch and every follower takes its snapshot, ``state.py``) loses no
acknowledged write. Shipping before the fsync, from the tap itself, took a quarter off
a round's time from commit to confirmation (p50 1.65 -> 1.23 ms, one follower, RESP SET
under ``always``; docs/design/replication.md, Known gaps).
"""

from __future__ import annotations

import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from tuffdb.errors import NotEnoughReplicasError, NotLeaderError

STEPPED_DOWN = ("this node is no longer the cluster leader (its lease lapsed or it stepped "
                "down): the write is not acknowledged; retry against the new leader")

WATCH_S = 0.05  # how often the confirmer looks at rounds waiting for followers, at most
Part = tuple[str, int, bytes]  # (log file name in the store directory, file offset, bytes)


@dataclass(slots=True)
class Round:
    lsn: int
    epoch: int  # the epoch of the leader that wrote it
    store: str
    time_ns: int
    parts: list[Part]
    size: int
    end: int = 0  # bytes kept in the ring up to and including this round (set by _keep)


@dataclass(eq=False)
class Stream:
    """Where a follower's stream stands: ``sent`` is the last LSN handed to its socket.

    *Live* (in the sequencer's list) while its sender thread has nothing left to send:
    then :meth:`Sequencer.tap` writes each round to the socket itself, without blocking,
    under the sequencer's lock (so rounds and pings go out whole and in LSN order). A
    round the socket does not take whole ends live mode: its remainder waits in
    ``pending`` and the sender thread, woken through ``wake``, sends it and goes on from
    the ring."""

    sock: socket.socket
    sent: int
    encode: Callable[[Round], bytes]
    wake: threading.Condition  # over the sequencer's lock
    pending: bytes = b""


@dataclass
class FollowerState:
    node: str
    acked: int = 0  # highest LSN it confirmed durable
    connected: bool = False
    ack_time: float = 0.0  # monotonic time of its last acknowledgement
    address: str = ""
    link: int = 0  # which accepted connection (ReplicationServer): the newest one counts


class Lease:
    """When this node may act as leader: until ``deadline`` (monotonic seconds)."""

    def __init__(self, ttl_s: float, margin_s: float) -> None:
        self.ttl_s = ttl_s
        self.margin_s = margin_s
        self.deadline = 0.0

    def renewed(self, sent_at: float) -> None:
        """A renewal sent at ``sent_at`` (monotonic) succeeded."""
        self.deadline = max(self.deadline, sent_at + self.ttl_s - self.margin_s)

    def revoke(self) -> None:
        self.deadline = 0.0

    def valid(self) -> bool:
        return time.monotonic() < self.deadline


@dataclass
class Sequencer:
    epoch: int
    last_lsn: int  # the LSN of the last round before this epoch's first
    lease: Lease
    required: Callable[[], int]  # followers whose confirmation a round needs (0: async)
    timeout_s: float = 2.0
    ring_bytes: int = 256 << 20
    _lock: threading.RLock = field(default_factory=threading.RLock)  # (as Condition's own)
    _cv: threading.Condition = field(init=False)
    _ring: deque[Round] = field(default_factory=deque)
    _ring_size: int = 0
    _ring_total: int = 0  # bytes ever kept in the ring: lag in bytes is one subtraction
    _store_lsn: dict[str, int] = field(default_factory=dict)
    followers: dict[str, FollowerState] = field(default_factory=dict)
    counted: frozenset[str] = frozenset()  # the published sync set: whose acks count
    confirmed: int = 0  # highest LSN acknowledged to writers
    closed: bool = False
    _pending: deque[tuple[int, float, Callable[[BaseException | None], None]]] = field(
        default_factory=deque)
    _confirmer: threading.Thread | None = None
    _confirm_cv: threading.Condition = field(init=False)  # the confirmer's own (same lock)
    _watching: bool = False  # the confirmer waits with a timeout: it will look again
    _delivering: bool = False  # a thread is calling rounds back (see _deliver)
    _live: list[Stream] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._cv = threading.Condition(self._lock)
        self._confirm_cv = threading.Condition(self._lock)

    # -- the commit path -------------------------------------------------------------------
    def tap(self, store: str) -> Callable[[list[Part]], None]:
        """The ``round_tap`` to install on store ``store``."""

        def tap(parts: list[Part]) -> None:
            now = time.time_ns()
            size = sum(len(p[2]) for p in parts)
            with self._cv:
                self.last_lsn += 1
                rnd = Round(self.last_lsn, self.epoch, store, now, parts, size)
                self._keep(rnd)
                self._store_lsn[store] = rnd.lsn
                if self._live and not self.closed:  # (closed: the senders are ending)
                    self._send_live(rnd)

        return tap

    def _send_live(self, rnd: Round) -> None:
        """Under the lock: write ``rnd`` to every live stream without blocking."""
        msg = self._live[0].encode(rnd)
        for stream in list(self._live):
            stream.sent = rnd.lsn
            self._put(stream, msg)

    def _put(self, stream: Stream, msg: bytes) -> None:
        """Under the lock: write ``msg`` to a live stream without blocking; what its
        socket does not take waits in ``pending`` for the sender thread, woken."""
        try:
            n = stream.sock.send(msg, socket.MSG_DONTWAIT)
        except OSError:  # full (EAGAIN) or broken: the sender thread takes over
            n = 0
        if n < len(msg):
            stream.pending = msg[n:]
            self._live.remove(stream)
            stream.wake.notify()

    def stream(self, sock: socket.socket, sent: int,
               encode: Callable[[Round], bytes]) -> Stream:
        """A follower's stream from LSN ``sent`` on (see :class:`Stream`)."""
        return Stream(sock, sent, encode, threading.Condition(self._lock))

    def next_to_send(self, stream: Stream, timeout: float,
                     ping: Callable[[], bytes]) -> tuple[bytes, list[Round] | None]:
        """The sender thread's next work: ``(bytes, rounds)`` to send, in that order.
        With nothing to send the stream turns live, and the thread waits up to
        ``timeout`` for live mode to end; if it has not, ``ping()`` is sent (under the
        lock, between rounds) and nothing is returned. ``rounds`` is None when the ring
        no longer holds the round after ``stream.sent`` (the follower needs a snapshot);
        the caller sets ``stream.sent`` once it has sent them."""
        with self._cv:
            if not stream.pending and self.last_lsn <= stream.sent and not self.closed:
                if stream not in self._live:
                    self._live.append(stream)
                stream.wake.wait(timeout)
                if stream in self._live:
                    if not self.closed:
                        self._put(stream, ping())
                    if stream in self._live:
                        return b"", []
            data, stream.pending = stream.pending, b""
            return data, self._rounds_after(stream.sent)

    def end_stream(self, stream: Stream) -> None:
        with self._cv:
            if stream in self._live:
                self._live.remove(stream)

    def _keep(self, rnd: Round) -> None:
        self._ring_total += rnd.size
        rnd.end = self._ring_total
        self._ring.append(rnd)
        self._ring_size += rnd.size
        while self._ring_size > self.ring_bytes and len(self._ring) > 1:
            self._ring_size -= self._ring.popleft().size

    def adopt(self, rounds: list[Round]) -> None:
        """Start the ring with rounds this node applied as a follower (a new leader serves
        them to followers that are a little behind it, instead of a snapshot)."""
        with self._cv:
            for rnd in rounds:
                if rnd.lsn <= self.last_lsn and (not self._ring or rnd.lsn > self._ring[-1].lsn):
                    self._keep(rnd)

    def confirm_later(self, store: str) -> Callable[[Callable[[BaseException | None], None]], None]:
        """The ``confirm`` hook to install on store ``store``: it registers a callback for
        the round just tapped and returns, so the store can write its next round while
        this one waits for followers. Callbacks run in LSN order, with None or the reason
        the round is refused (:meth:`_deliver`): here, when the followers' acknowledgement
        is already in (they took the round while the leader fsynced it), else on the
        thread that receives it, or on the confirmer thread when time runs out."""

        def later(callback: Callable[[BaseException | None], None]) -> None:
            with self._cv:
                lsn = self._store_lsn.get(store, 0)
                self._pending.append((lsn, time.monotonic() + self.timeout_s, callback))
                if self._confirmer is None and not self.closed:
                    self._confirmer = threading.Thread(
                        target=self._confirm_loop, daemon=True, name="tuffdb-confirm")
                    self._confirmer.start()
            # IMPORTANT: closed, the confirmer thread may already have ended (it stops
            # once closed with nothing pending), so this thread delivers: every round
            # pending is refused then (_settled), in LSN order. A store steps down by
            # running one last round through its hooks after close() (the writes made
            # while leading go out numbered), so this is a real path. Its callback once
            # ran here at once, ahead of earlier rounds still pending: the store's group
            # commit took the later round's outcome as covering the earlier one, whose
            # writers were then acknowledged though no follower had their round (a
            # paused-leader cluster test lost one acknowledged SET, once in ~90 runs).
            self._deliver()
            with self._cv:
                if self._pending and not self._watching:
                    self._confirm_cv.notify()  # a deadline to watch

        return later

    def _deliver(self) -> None:
        """Call back every round at the head of the queue whose outcome is known, in LSN
        order, outside the lock. One thread at a time: another that finds a delivery under
        way leaves its news to it (the deliverer looks again before it stops, under the
        lock that news was made under).

        The thread that learns the outcome delivers it: the committer's ``confirm``, the
        acknowledgement's reader, the confirmer on a deadline. Handing every round to the
        confirmer thread instead woke it up to three times a round (the tap, the
        registration, the acknowledgement): ~3.4 us of CPU per SET on a sync-replicated
        RESP leader, on threads that share the leader's core."""
        with self._cv:
            if self._delivering:
                return
            self._delivering = True
        try:
            while True:
                ready: list[tuple[Callable[[BaseException | None], None],
                                  BaseException | None]] = []
                with self._cv:
                    pending = self._pending
                    while pending:
                        lsn, deadline, callback = pending[0]
                        outcome: BaseException | None = None
                        try:
                            if not self._settled(lsn, deadline):
                                break
                        except (NotEnoughReplicasError, NotLeaderError) as exc:
                            outcome = exc
                        pending.popleft()
                        ready.append((callback, outcome))
                    if not ready:
                        self._delivering = False
                        return
                failed: BaseException | None = None
                for callback, outcome in ready:
                    try:
                        callback(outcome)
                    except BaseException as exc:  # noqa: BLE001 - the rest are still called
                        failed = failed or exc
                if failed is not None:
                    raise failed
        except BaseException:
            with self._cv:
                self._delivering = False
            raise

    def _confirm_loop(self) -> None:
        """Watch the deadlines: the oldest pending round's (refused when it passes without
        enough followers) and the lease's (refused when it lapses); looks again at least
        every ``WATCH_S`` while rounds wait, and sleeps while none does."""
        while True:
            with self._cv:
                if not self._pending:
                    if self.closed:
                        return
                    self._watching = False
                    self._confirm_cv.wait()
                    continue
                self._watching = True
                now = time.monotonic()
                self._confirm_cv.wait(0.001 if self.closed else max(0.001, min(
                    WATCH_S, self._pending[0][1] - now, self.lease.deadline - now)))
            self._deliver()

    def _settled(self, lsn: int, deadline: float) -> bool:
        """Under the lock: True once round ``lsn`` may be acknowledged; raises when it
        may not (the lease lapsed, or the deadline passed without enough followers)."""
        if self.closed or not self.lease.valid():
            raise NotLeaderError(STEPPED_DOWN)
        need = self.required()
        if need <= 0 or self._acks_at(lsn) >= need:
            self.confirmed = max(self.confirmed, lsn)
            return True
        if time.monotonic() >= deadline:
            raise NotEnoughReplicasError(
                f"Not enough good replicas to write: {self._acks_at(lsn)} of the "
                f"{need} required followers confirmed LSN {lsn} within {self.timeout_s:g} s")
        return False

    def wait_confirmed(self, lsn: int) -> None:
        deadline = time.monotonic() + self.timeout_s
        with self._cv:
            while not self._settled(lsn, deadline):
                self._cv.wait(max(0.001, min(deadline - time.monotonic(),
                                             self.lease.deadline - time.monotonic())))

    def _acks_at(self, lsn: int) -> int:
        return sum(1 for node in self.counted
                   if (f := self.followers.get(node)) is not None and f.acked >= lsn)

    # -- the followers' side ------------------------------------------------------------
    def ack(self, node: str, lsn: int) -> None:
        with self._cv:
            f = self.followers.get(node)
            if f is None or lsn <= f.acked:
                return
            f.acked = lsn
            f.ack_time = time.monotonic()
            self._cv.notify_all()  # Redis WAIT (Node.wait_for_followers)
        self._deliver()

    def rounds_after(self, lsn: int) -> list[Round] | None:
        """Rounds with LSN > ``lsn``; None when the ring no longer holds LSN ``lsn + 1``
        (the follower needs a snapshot)."""
        with self._cv:
            return self._rounds_after(lsn)

    def _rounds_after(self, lsn: int) -> list[Round] | None:
        """Under the lock: :meth:`rounds_after`."""
        if self.last_lsn <= lsn:
            return []
        ring = self._ring
        if not ring or ring[0].lsn > lsn + 1:
            return None
        return [ring[i] for i in range(lsn + 1 - ring[0].lsn, len(ring))]

    def set_counted(self, nodes: frozenset[str]) -> None:
        with self._cv:
            self.counted = nodes
            self._cv.notify_all()
        self._deliver()

    def close(self) -> None:
        with self._cv:
            self.closed = True
            self._cv.notify_all()
            self._confirm_cv.notify_all()
            for stream in self._live:
                stream.wake.notify()

    def _after(self, acked: int) -> int:
        """Under the lock: the ring index of the first round after LSN ``acked`` (the
        ring's LSNs are consecutive, as :meth:`rounds_after` reads them)."""
        ring = self._ring
        return max(0, acked + 1 - ring[0].lsn) if ring else 0

    def oldest_unacked_ns(self, acked: int) -> int | None:
        """Wall time of the oldest round after ``acked`` still in the ring (lag in time).
        O(1): the status and the metrics ask at every tick, holding the lock the commit
        path's tap needs, and the ring holds tens of thousands of rounds."""
        with self._cv:
            i = self._after(acked)
            return self._ring[i].time_ns if i < len(self._ring) else None

    def bytes_after(self, acked: int) -> int:
        """Bytes of the rounds after ``acked`` still in the ring; O(1) as above."""
        with self._cv:
            i = self._after(acked)
            ring = self._ring
            if i >= len(ring):
                return 0
            return self._ring_total - ring[i].end + ring[i].size
