"""The single-writer coordinator: group commit with staged conditions.

One thread owns the log. Callers encode their events on their own thread and queue an
:class:`AppendRequest`; the writer blocks for the first request, drains whatever else is
queued (up to ``max_batch_events`` / ``max_batch_bytes``, no timer: batches grow as fsync
latency grows), and for each request in order:

1. checks its condition against durable state **and** the requests already staged in this
   drain (the indexes are fed at staging, above the published head, so readers never see
   staged events while the condition check does);
2. applies the idempotent-retry rule or rejects only this request (IntegrityError);
3. checks tracking info (strictly increasing per source);
4. stages it: assigns positions, builds entries, feeds the tag index, type column and
   location columns.

Then the whole drain is written as one run of frames (the last carries COMMIT) with one
``append`` (so a drain never spans segments) and one fsync, the head is published, and
every request is acknowledged. If the write or fsync fails, the log is poisoned, the
staged index entries are dropped and every request of the drain gets the error.
"""

from __future__ import annotations

import queue
import struct
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from itertools import chain
from typing import TYPE_CHECKING

import numpy as np

from tuffdb._format.record import COMMIT, FRAME_SIZE, frame_header
from tuffdb._format.segment import SEGMENT_HEADER_SIZE
from tuffdb.errors import ClosedError, IntegrityError, NotEnoughReplicasError
from tuffdb.events import codec
from tuffdb.events.format import EVENTS_HEADER, EVENTS_HEADER_SIZE, FrameKind

if TYPE_CHECKING:
    from tuffdb.events.planner import Items
    from tuffdb.events.store import EventStore

MAX_BATCH_EVENTS = 2048
MAX_BATCH_BYTES = 8 << 20
_U64 = struct.Struct("<Q")


class Settled:
    """The part of a Future the writer and a single-threaded caller use, without its lock
    and condition (a request committed on the caller's thread: ``commit_now``)."""

    __slots__ = ("_exc", "_on_done", "_res")

    def __init__(self) -> None:
        self._res: int | None = None
        self._exc: BaseException | None = None
        self._on_done: Callable[[], None] | None = None

    def done(self) -> bool:
        return self._res is not None or self._exc is not None

    def set_result(self, res: int) -> None:
        self._res = res
        if self._on_done is not None:
            self._on_done()

    def set_exception(self, exc: BaseException) -> None:
        self._exc = exc
        if self._on_done is not None:
            self._on_done()

    def on_done(self, fn: Callable[[], None]) -> None:
        """Call ``fn()`` once this is settled (at once if it is): for a request a cluster
        leader settles later, on its confirmer thread. ``fn`` may run twice when the two
        threads race (set before the other looked): it must be idempotent."""
        self._on_done = fn
        if self.done():
            fn()

    def exception(self) -> BaseException | None:
        return self._exc

    def result(self) -> int:
        if self._exc is not None:
            raise self._exc
        assert self._res is not None, "not settled yet"
        return self._res


class AppendRequest:
    """One queued append; ``future`` resolves to the last position (or 0 / an error)."""

    __slots__ = (
        "after", "condition", "future", "has_condition", "items", "nbytes", "tags",
        "tails", "tracking", "types", "uuids",
    )

    def __init__(
        self,
        tails: list[bytes] | codec.TailBlock,
        types: Sequence[str],
        tags: Sequence[Sequence[str]],
        uuids: list[str] | None,
        *,
        has_condition: bool = False,
        items: Items | None = None,
        after: int = 0,
        condition: object = None,
        tracking: tuple[str, int] | None = None,
        settled: bool = False,
    ) -> None:
        self.tails = tails
        self.types = types
        self.tags = tags
        self.uuids = uuids
        self.has_condition = has_condition
        self.items = items
        self.after = after
        self.condition = condition
        self.tracking = tracking
        self.nbytes = codec.nbytes(tails)
        self.future: Future[int] | Settled = Settled() if settled else Future()


class Writer(threading.Thread):
    """The writer thread of one :class:`EventStore`."""

    def __init__(
        self, store: EventStore, *, max_batch_events: int = MAX_BATCH_EVENTS,
        max_batch_bytes: int = MAX_BATCH_BYTES,
    ) -> None:
        super().__init__(name="tuffdb-events-writer", daemon=True)
        self.store = store
        self.queue: queue.SimpleQueue[AppendRequest | None] = queue.SimpleQueue()
        self.max_batch_events = max_batch_events
        self.max_batch_bytes = max_batch_bytes
        self._pushback: AppendRequest | None = None
        self._closed = False
        self._submit_lock = threading.Lock()
        self._commit_lock = threading.Lock()  # this thread's drains and commit_now()

    def submit(self, req: AppendRequest) -> Future[int] | Settled:
        # IMPORTANT: check and put under one lock, so nothing is queued behind stop()'s None.
        with self._submit_lock:
            if self._closed:
                raise ClosedError("the event store is closed: open it again")
            self.queue.put(req)
        return req.future

    def commit_now(self, reqs: list[AppendRequest]) -> None:
        """Commit ``reqs`` on the calling thread, as the writer thread would a drain (the
        two take turns on one lock); futures are settled before this returns."""
        with self._submit_lock:
            if self._closed:
                exc = ClosedError("the event store is closed: open it again")
                for req in reqs:
                    req.future.set_exception(exc)
                return
        i = 0
        while i < len(reqs):
            batch = [reqs[i]]
            n, size = len(reqs[i].tails), reqs[i].nbytes
            i += 1
            while i < len(reqs):
                r = reqs[i]
                if (n + len(r.tails) > self.max_batch_events
                        or size + r.nbytes > self.max_batch_bytes):
                    break
                batch.append(r)
                n += len(r.tails)
                size += r.nbytes
                i += 1
            with self._commit_lock:
                self._commit_guarded(batch)

    def _commit_guarded(self, batch: list[AppendRequest]) -> None:
        try:
            self._commit(batch)
        except BaseException as exc:  # noqa: BLE001 (a bug, not an I/O error: fail stop, never hang)
            self.store._poison.set(exc)
            for req in batch:
                if not req.future.done():
                    req.future.set_exception(exc)

    def stop(self) -> None:
        with self._submit_lock:
            self._closed = True
            self.queue.put(None)
        self.join()

    # -- the loop --------------------------------------------------------------------------
    def run(self) -> None:
        get = self.queue.get
        get_nowait = self.queue.get_nowait
        while True:
            first = self._pushback or get()
            self._pushback = None
            if first is None:
                self._fail_queued()
                return
            batch = [first]
            n = len(first.tails)
            size = first.nbytes
            stop = False
            while n < self.max_batch_events and size < self.max_batch_bytes:
                try:
                    req = get_nowait()
                except queue.Empty:
                    break
                if req is None:
                    stop = True
                    break
                if n + len(req.tails) > self.max_batch_events or (
                    size + req.nbytes > self.max_batch_bytes
                ):
                    self._pushback = req
                    break
                batch.append(req)
                n += len(req.tails)
                size += req.nbytes
            with self._commit_lock:
                self._commit_guarded(batch)
            if stop:
                self._fail_queued()
                return

    def _fail_queued(self) -> None:
        while True:
            try:
                req = self.queue.get_nowait()
            except queue.Empty:
                return
            if req is not None:
                req.future.set_exception(ClosedError("the event store was closed"))

    # -- one drain -------------------------------------------------------------------------
    def _commit(self, batch: list[AppendRequest]) -> None:  # noqa: C901, PLR0912, PLR0915
        st = self.store
        if st._refusal is not None:
            # Stepped down: appends are refused, not written (none could be confirmed,
            # and this node leads no sequence to number them; set_replication_hooks).
            for req in batch:
                req.future.set_exception(st._refusal)
            return
        log = st._log
        planner = st._planner
        durable_head = st._written  # in the log (published, or waiting for followers)
        head = durable_head
        tracking = st._tracking
        staged_tracking: dict[str, int] = {}
        frames: list[bytes] = []
        addr = log.tail_address
        results: list[tuple[AppendRequest, int | BaseException]] = []
        # (first position, joined entries, lengths) staged in this drain, for idempotency.
        pending: list[tuple[int, bytes, np.ndarray]] = []
        addrs: list[np.ndarray] = []
        lens: list[np.ndarray] = []
        wrote = False
        enc = st._codec.encode if st._codec is not None else None
        frame_addrs: list[int] = []
        drain_tags: list[Sequence[Sequence[str]]] = []
        last_flags = 0
        for req in batch:
            try:
                st._poison.check()
                if req.has_condition and planner.exists(req.items, req.after, head):
                    pos = self._idempotent(req, head, durable_head, pending)
                    if pos is None:
                        raise IntegrityError(
                            "integrity error: condition failed: events match the condition "
                            f"after position {req.after}",
                            req.condition,
                        )
                    results.append((req, pos))
                    continue
                if req.tracking is not None:
                    src, tpos = req.tracking
                    cur = staged_tracking.get(src, tracking.get(src))
                    if cur is not None and tpos <= cur:
                        raise IntegrityError(
                            f"integrity error: non-increasing tracking position for source "
                            f"'{src}': {tpos} <= {cur}"
                        )
            except BaseException as exc:  # noqa: BLE001
                results.append((req, exc))
                continue
            if req.tracking is not None:
                src, tpos = req.tracking
                staged_tracking[src] = tpos
                body = _U64.pack(tpos) + src.encode()
                last_flags = 0
                if enc is not None:
                    last_flags, body = enc(body)
                frames += (frame_header(FrameKind.TRACKING, body, last_flags), body)
                addr += FRAME_SIZE + len(body)
                wrote = True
            tails = req.tails
            if not tails:
                results.append((req, 0))
                continue
            first = head + 1
            blob, ln = codec.entries_block(first, tails)
            n = len(ln)
            pending.append((first, blob, ln))
            payload = EVENTS_HEADER.pack(first, n) + blob
            last_flags = 0
            if enc is not None:
                last_flags, payload = enc(payload)
            frames += (frame_header(FrameKind.EVENTS, payload, last_flags), payload)
            frame_addrs.append(addr)
            start = addr + FRAME_SIZE + EVENTS_HEADER_SIZE
            ends = np.cumsum(ln)
            addrs.append(ends - ln + start)
            lens.append(ln)
            addr += FRAME_SIZE + len(payload)
            head += n
            st._types.extend(first, req.types)
            st._tags.add(first, req.tags)
            drain_tags.append(req.tags)
            results.append((req, head))
            wrote = True
        if wrote:
            # Re-frame the last frame with COMMIT (its header is at frames[-2]).
            last = frames[-1]
            kind = frames[-2][8]
            frames[-2] = frame_header(kind, last, last_flags | COMMIT)
            try:
                if addrs:
                    st._addr.extend(np.concatenate(addrs) if len(addrs) > 1 else addrs[0])
                    st._len.extend(np.concatenate(lens) if len(lens) > 1 else lens[0])
                blob = b"".join(frames)
                log.append(blob)
                log.sync()
            except BaseException as exc:  # noqa: BLE001
                st._rollback(durable_head)
                for req, res in results:
                    if not isinstance(res, BaseException):
                        req.future.set_exception(exc)
                    else:
                        req.future.set_exception(res)
                return
            st._written = head
            if st.shipper.feeds:
                st.shipper.round([log.shipped(blob)])
            confirm_later = None
            if st.round_tap is not None:  # a cluster leader: ship; followers confirm later
                seg = log.segments[-1]  # the drain never spans segments
                offset = SEGMENT_HEADER_SIZE + seg.size - len(blob)
                st.round_tap([(f"log/{seg.path.name}", offset, blob)])
                confirm_later = st.confirm
            if log.segments[-1].base_address != st._segment_bases[-1]:
                st._on_roll(durable_head + 1)
            # What the active segment's index will need at seal (built from memory then).
            seg_tags = st._seg_tags
            for tags in drain_tags:
                if type(tags) is list and tags and tags.count(tags[0]) == len(tags):
                    seg_tags.update(tags[0])  # one entity's batch
                else:
                    seg_tags.update(chain.from_iterable(tags))
            st._seg_tracking.update(staged_tracking)
            tracking.update(staged_tracking)
            if frame_addrs:
                st._frames.extend(frame_addrs)
            if confirm_later is not None:
                # Published and acknowledged once followers confirm it, in order; the
                # writer goes on with the next drain meanwhile. Refused: its appends get
                # the reason, not a position, and it stays unpublished (a failover could
                # lose it) until a later confirmation covers it, or the node steps down.
                done = results
                later = confirm_later

                def publish(unconfirmed: BaseException | None) -> None:
                    if unconfirmed is None:
                        st._publish(head)
                    elif isinstance(unconfirmed, NotEnoughReplicasError):
                        later(publish)

                def finish(unconfirmed: BaseException | None) -> None:
                    publish(unconfirmed)
                    _settle(done, unconfirmed)

                later(finish)
                return
            st._head = head
            st._notify(head)
        _settle(results, None)

    def _idempotent(
        self, req: AppendRequest, head: int, durable_head: int,
        pending: list[tuple[int, bytes, np.ndarray]],
    ) -> int | None:
        """The last position of an earlier identical append, if this is its retry."""
        uuids = req.uuids
        if not uuids:
            return None
        pos = self.store._planner.positions(req.items, req.after + 1, head, limit=len(uuids))
        if len(pos) != len(uuids):
            return None
        plist = pos.tolist()
        joined = b"".join(
            _staged_entry(pending, p) if p > durable_head else self.store._entry(p)
            for p in plist
        )
        if codec.uuids_of(joined) != uuids:
            return None
        return int(plist[-1])


def _settle(results: list[tuple[AppendRequest, int | BaseException]],
            unconfirmed: BaseException | None) -> None:
    """Resolve a drain's requests: each its position, or its error (``unconfirmed`` for
    every one that was written, when followers did not confirm the drain)."""
    for req, res in results:
        if isinstance(res, BaseException):
            req.future.set_exception(res)
        elif unconfirmed is not None:
            req.future.set_exception(unconfirmed)
        else:
            req.future.set_result(res)


def _staged_entry(pending: list[tuple[int, bytes, np.ndarray]], p: int) -> bytes:
    for first, blob, ln in pending:
        if first <= p < first + len(ln):
            i = p - first
            start = int(ln[:i].sum())
            return blob[start : start + int(ln[i])]
    raise AssertionError(f"position {p} is not staged")
