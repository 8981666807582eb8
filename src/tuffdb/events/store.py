"""The embedded DCB event store (design: docs/design/events.md).

Layout of a store directory::

    LOCK                      single-writer process lock
    log/{address:020}.log     the storage core's segmented log (frames of kind 32-47)
    index/{address:020}.idx   one derived index file per sealed log segment

Everything needed to answer queries lives in memory and is derived from the log: tag
postings, the type column, and per-position location columns (byte address and length
of each stored entry). Reads capture the published head first and never look past it,
so they never block the writer and never see a staged (not yet fsynced) event.
"""

from __future__ import annotations

import os
import struct
import threading
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np

from tuffdb._format.record import FRAME, FRAME_SIZE, Frame, check_frames, scan_frames
from tuffdb._format.segment import SEGMENT_HEADER_SIZE
from tuffdb.errors import ClosedError, CorruptionError, NotLeaderError, ProgrammingError
from tuffdb.events import codec, sealed_index
from tuffdb.events.api import (
    AppendCondition,
    Event,
    Query,
    ReadResponse,
    SequencedEvent,
    TrackingInfo,
)
from tuffdb.events.columns import Column
from tuffdb.events.format import LOG_FILE_KIND, LOG_SUFFIX
from tuffdb.events.planner import Items, Planner, normalise
from tuffdb.events.shipping_source import INDEX_DIR, LOG_DIR, EventsSource
from tuffdb.events.subscription import Subscription
from tuffdb.events.tag_index import TagIndex
from tuffdb.events.type_column import TypeColumn
from tuffdb.events.writer import (
    MAX_BATCH_BYTES,
    MAX_BATCH_EVENTS,
    AppendRequest,
    Settled,
    Writer,
)
from tuffdb.storage.codec import Codec
from tuffdb.storage.descriptors import ImmutableFile
from tuffdb.storage.lock import DirLock
from tuffdb.storage.poison import Poison
from tuffdb.storage.preallocate import DEFAULT_AHEAD
from tuffdb.storage.segmented_log import SegmentedLog
from tuffdb.storage.shipping import Shipper

DEFAULT_SEGMENT_BYTES = 256 << 20
READ_CHUNK = 1024
FRAME_CACHE = 64  # decoded frames kept by an encrypted store's readers
_SPARSE_SPAN = 1 << 20  # one pread covers a batch when its byte span is at most this ...
_SPARSE_FACTOR = 4  # ... or at most this many times the bytes it needs



def _is_int(value: object) -> bool:
    """An int or numpy integer, not a bool (read's start and limit)."""
    return isinstance(value, int | np.integer) and not isinstance(value, bool)

class EventStore:
    """A DCB event store in one directory; thread-safe, one process at a time.

    ``append`` is durable (fsynced) before it returns; concurrent appends share fsyncs.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        encryption_key: bytes | None = None,
        max_batch_events: int = MAX_BATCH_EVENTS,
        max_batch_bytes: int = MAX_BATCH_BYTES,
        preallocate_bytes: int = DEFAULT_AHEAD,
    ) -> None:
        # AES-256-GCM per frame through the core codec, no compression (events are small and
        # compression would break the virtual-address scheme, see docs/format/events-log.md).
        self._codec = Codec(compression=None, key=encryption_key) if encryption_key else None
        self._frame_cache: dict[int, bytes] = {}
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock = DirLock(self.path)
        self._closed = False
        self._poison = Poison()
        self._tags = TagIndex()
        self._types = TypeColumn()
        self._planner = Planner(self._tags, self._types)
        self._addr = Column(np.int64)
        self._len = Column(np.int64)
        self._frames = Column(np.int64)  # address of every EVENTS frame, ascending
        # Frames of sealed segments opened from their index files, not read since: True
        # until a read checks their CRCs (_check_frames). Every other frame was checked
        # by the scan at open or written by this process.
        self._unchecked = np.zeros(0, bool)
        self._unchecked_left = 0
        self._check_lock = threading.Lock()
        self._tracking: dict[str, int] = {}
        self._head = 0
        self._cv = threading.Condition()
        self._listeners: list[Callable[[int], None]] = []
        self._files: dict[int, ImmutableFile] = {}  # segment no -> its file, read pooled
        self._files_lock = threading.Lock()
        self._index_dir = self.path / "index"
        self._sealers: list[threading.Thread] = []
        self._segment_firsts: list[int] = []
        self._deferred: list[AppendRequest] = []  # submit_encoded(defer=True), one thread
        self._seg_tags: set[str] = set()  # tags written in the active segment
        self._seg_tracking: dict[str, int] = {}  # and its tracking updates
        self.indexes_rebuilt = 0
        # A cluster leader's hooks (cluster/): every durable drain's frames go to
        # ``round_tap`` as ``[(log name, file offset, bytes)]``, then ``confirm(finish)``
        # registers the drain's publication and answers, called once followers confirmed
        # it (or with the reason they did not: then its appends get that error, though the
        # events are in the log and published). The writer writes on meanwhile.
        self.round_tap: Callable[[list[tuple[str, int, bytes]]], None] | None = None
        self.confirm: Callable[[Callable[[BaseException | None], None]], None] | None = None
        # After a step-down, until hooks are installed again: appends are refused with it.
        self._refusal: BaseException | None = None
        self._written = 0  # the last position in the log (>= _head, the published one)
        self.sealed_from_memory = 0
        # The log-shipping seam (backup, archiving, replication): reported to after each
        # durable change; a drain's bytes are handed over only while a feed listens.
        self.shipper = Shipper(self.path, EventsSource(self))
        try:
            self._log = SegmentedLog(
                self.path / "log", file_kind=LOG_FILE_KIND, suffix=LOG_SUFFIX,
                segment_bytes=segment_bytes, poison=self._poison,
                preallocate=preallocate_bytes,  # commits are fdatasyncs over zeros
                key_id=self._codec.key_id if self._codec else 0,
                shipper=self.shipper, ship_prefix=f"{LOG_DIR}/",
            )
            self._segment_bases = [s.base_address for s in self._log.segments]
            self._segment_paths = [s.path for s in self._log.segments]
            self._recover()
        except BaseException:
            self._lock.release()
            raise
        self.recovery = self._log.recovery
        self._written = self._head
        self._writer = Writer(
            self, max_batch_events=max_batch_events, max_batch_bytes=max_batch_bytes
        )
        self._writer.start()

    @classmethod
    def open(cls, path: str | os.PathLike[str], **kwargs: object) -> EventStore:
        return cls(path, **kwargs)  # type: ignore[arg-type]

    def __enter__(self) -> EventStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- recovery --------------------------------------------------------------------------
    def _recover(self) -> None:
        """Rebuild the in-memory indexes: sealed segments from their ``.idx`` files (rebuilt
        from the log when missing, stale or corrupt), the last segment by scanning it."""
        segs = self._log.segments
        first = 1
        self._segment_firsts = []
        unchecked: list[tuple[int, int]] = []  # frame index ranges read from index files
        for i, seg in enumerate(segs):
            last = i == len(segs) - 1
            ix = None if last else self._load_index(seg.base_address, seg.size, first)
            if ix is not None:
                unchecked.append((self._frames.size, self._frames.size + len(ix.frames)))
            else:
                ix = sealed_index.scan_segment(
                    self._frames_of(seg), seg.base_address, str(seg.path), first, self._codec
                )
                ix.size = seg.size
                if not last:
                    sealed_index.write(self._index_dir, ix, seg.base_address, self._codec)
                    self.indexes_rebuilt += 1
            self._segment_firsts.append(first)
            self._feed(ix)
            first += ix.count
            if last:
                self._seg_tags = set(ix.postings)
                self._seg_tracking = dict(ix.tracking)
        self._head = first - 1
        self._unchecked = np.zeros(self._frames.size, bool)
        for lo, hi in unchecked:
            self._unchecked[lo:hi] = True
        self._unchecked_left = int(self._unchecked.sum())

    def _load_index(self, base: int, size: int, first: int) -> sealed_index.SegmentIndex | None:
        path = sealed_index.index_path(self._index_dir, base)
        try:
            ix = sealed_index.decode(path.read_bytes(), base, str(path), self._codec)
        except (OSError, CorruptionError, ValueError, UnicodeDecodeError, struct.error):
            return None
        if ix.first != first or ix.size != size:
            return None
        return ix

    def _frames_of(self, seg: Any) -> list[Frame]:
        res = self._log.read_segment(seg)
        return res[1] if isinstance(res, tuple) else res  # core API: frames, or (bytes, frames)

    def _feed(self, ix: sealed_index.SegmentIndex) -> None:
        self._tracking.update(ix.tracking)
        self._frames.extend(ix.frames)
        if not ix.count:
            return
        self._addr.extend(ix.addr)
        self._len.extend(ix.lens)
        self._types.extend_ids(ix.first, ix.type_names, ix.type_ids)
        add = self._tags.add_postings
        for tag, post in ix.postings.items():
            add(tag, post)

    def _seal(
        self, seg_no: int, tags: set[str] | None = None, tracking: dict[str, int] | None = None
    ) -> None:
        """Write the index file of sealed segment ``seg_no`` (background thread).

        Built from the in-memory indexes (``tags``: every tag written in the segment,
        ``tracking``: its tracking updates), which hold exactly what a scan of the
        segment would find; scanning the segment is the fallback.
        """
        seg = self._log.segments[seg_no]
        try:
            ix = None
            if tags is not None and tracking is not None:
                try:
                    ix = self._index_from_memory(seg_no, tags, tracking)
                    self.sealed_from_memory += 1
                except Exception:  # noqa: BLE001 (never trust a shortcut over the log)
                    ix = None
            if ix is None:
                ix = sealed_index.scan_segment(
                    self._frames_of(seg), seg.base_address, str(seg.path),
                    self._segment_firsts[seg_no], self._codec,
                )
            ix.size = seg.size
            sealed_index.write(self._index_dir, ix, seg.base_address, self._codec)
        except Exception:  # noqa: BLE001 (derived data: rebuilt on the next open)
            return
        self.shipper.added(
            f"{INDEX_DIR}/{sealed_index.index_path(self._index_dir, seg.base_address).name}")

    def _index_from_memory(
        self, seg_no: int, tags: set[str], tracking: dict[str, int]
    ) -> sealed_index.SegmentIndex:
        """Segment ``seg_no``'s index from the columns and the tag index (it is sealed, so
        every position in it is published and no longer changes)."""
        seg = self._log.segments[seg_no]
        first = self._segment_firsts[seg_no]
        last = self._segment_firsts[seg_no + 1] - 1
        lo, hi = first - 1, last
        frames = self._frames.array[: self._frames.size]
        i, j = np.searchsorted(frames, [seg.base_address, seg.base_address + seg.size])
        glob = self._types._col.array[lo:hi]
        # Local type ids in order of first appearance, as a scan of the segment numbers them.
        uniq, seen_at, inverse = np.unique(glob, return_index=True, return_inverse=True)
        order = np.argsort(seen_at)
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        local = rank[inverse]
        by_id = {v: k for k, v in list(self._types.names.items())}
        positions = self._tags.positions
        postings = {}
        for tag in tags:
            post = positions(tag, first, last)
            if len(post):
                postings[tag] = post
        return sealed_index.SegmentIndex(
            first, last - first + 1,
            self._addr.array[lo:hi].copy(), self._len.array[lo:hi].copy(),
            [by_id[int(uniq[k])] for k in order], local.astype(np.uint32), postings,
            dict(tracking), seg.size, frames[i:j].copy(),
        )

    # -- writing ---------------------------------------------------------------------------
    def append(
        self,
        events: Sequence[Event],
        condition: AppendCondition | None = None,
        tracking_info: TrackingInfo | None = None,
    ) -> int:
        """Append ``events`` atomically; return the position of the last one.

        Returns 0 for an empty ``events`` (tracking info, if given, is still recorded).
        With a condition whose check fails, an exact retry (every event has a uuid and the
        first N events matching the condition after ``after`` carry the same uuids in
        order) returns the earlier position instead of failing.

        :raises IntegrityError: when the condition or the tracking position fails.
        :raises LimitExceeded: when an event exceeds a size limit (nothing is written).
        :raises PoisonedError: after an earlier write or fsync failure.
        """
        return self.submit(events, condition, tracking_info).result()

    def submit(
        self,
        events: Sequence[Event],
        condition: AppendCondition | None = None,
        tracking_info: TrackingInfo | None = None,
    ) -> Future[int] | Settled:
        """Like :meth:`append` but returns a future (for servers on an event loop)."""
        tr = b""
        tracking = None
        if tracking_info is not None:
            codec.check_source(tracking_info.source)
            tracking = (tracking_info.source, int(tracking_info.position))
            tr = codec.tracking_bytes(*tracking)
        tails, types, tags, uuids = codec.encode_events(events, tr)
        return self.submit_encoded(
            tails, types, tags, uuids, condition=condition, tracking=tracking
        )

    def submit_encoded(
        self,
        tails: list[bytes] | codec.TailBlock,
        types: Sequence[str],
        tags: Sequence[Sequence[str]],
        uuids: list[str] | None,
        *,
        condition: AppendCondition | None = None,
        tracking: tuple[str, int] | None = None,
        items: Items | None = None,
        after: int | None = None,
        defer: bool = False,
    ) -> Future[int] | Settled:
        """Queue pre-encoded events (entry tails, see codec.py); the gRPC face's entry.

        With ``defer`` the request is not queued: the caller commits it with
        :meth:`commit_deferred` (a server loop committing one batch per pass); the
        returned future-like :class:`~tuffdb.events.writer.Settled` (no lock: the same
        thread commits) is done once that commit is.
        """
        if self._closed:
            raise ClosedError("the event store is closed: open it again")
        has_condition = condition is not None or after is not None or items is not None
        if condition is not None:
            items = normalise(condition.fail_if_events_match)
            after = condition.after
        if not tails and not has_condition and tracking is None:
            done: Future[int] = Future()
            done.set_result(0)
            return done
        req = AppendRequest(
            tails, types, tags, uuids or None,
            has_condition=has_condition, items=items, after=after or 0,
            condition=condition, tracking=tracking, settled=defer,
        )
        if defer:
            self._deferred.append(req)
            return req.future
        return self._writer.submit(req)

    def set_replication_hooks(
            self, tap: Callable[[list[tuple[str, int, bytes]]], None] | None,
            confirm: Callable[[Callable[[BaseException | None], None]], None] | None) -> None:
        """Install a cluster leader's hooks (see ``round_tap``), or with ``confirm`` None
        remove them (the node stepped down).

        Removing them waits for a drain in progress (it goes out through ``tap``, numbered
        by the leader's sequence, so a node that rejoins knows it holds it), then refuses
        every append not yet committed (``NotLeaderError``, nothing written) until hooks
        are installed again: those routed here while this node led would be answered
        without a follower's confirmation, and one written after would be held by this
        node alone, in no round. Replica applies go on."""
        with self._writer._commit_lock:
            if confirm is None:
                self._refusal = NotLeaderError(
                    "this node stepped down before the append was committed: it is not "
                    "written; retry against the new leader")
            else:
                self._refusal = None
            self.round_tap = tap
            self.confirm = confirm

    def refuse_writes(self, error: BaseException) -> None:
        """Refuse appends with ``error`` until a leader's hooks are installed
        (:meth:`set_replication_hooks`): a cluster node that joins as a follower, whose
        log only the leader's may change (replica applies go on)."""
        with self._writer._commit_lock:
            self._refusal = error

    def _publish(self, head: int) -> None:
        """Make positions up to ``head`` visible to readers (a confirmed drain)."""
        if head > self._head:
            self._head = head
            self._notify(head)

    def replica_apply(self, base: int, address: int, frames: bytes) -> int:
        """Apply a leader's committed frames (a cluster follower; ``cluster/``).

        ``frames`` are whole frames exactly as the leader wrote them at byte ``address`` of
        its log segment ``base`` (encrypted when the store is: both sides share the key).
        They are appended to this log at the same address (rolling where the leader
        rolled, so the two logs stay alike byte for byte), fsynced, indexed the way
        recovery indexes a segment, and published: readers and subscriptions see them
        after this returns. Returns the new head.

        :raises CorruptionError: the frames are not whole valid committed frames, or do
            not continue this log (its tail address or its positions).
        """
        res = scan_frames(frames)
        where = f"{self.path}: replicated frames at {address}"
        if res.error is not None or res.committed_end != len(frames):
            raise CorruptionError(res.error or "replicated frames end without COMMIT", path=where)
        with self._writer._commit_lock:
            if self._closed:
                raise ClosedError("the event store is closed: open it again")
            self._poison.check()
            head = self._head
            offset = SEGMENT_HEADER_SIZE + address - base
            placed = [Frame(f.offset + offset, f.kind, f.flags, f.payload) for f in res.frames]
            ix = sealed_index.scan_segment(placed, base, where, head + 1, self._codec)
            log = self._log
            try:
                log.append_at(base, address, frames)
                log.sync()
            except CorruptionError:
                raise
            except BaseException as exc:
                self._poison.set(exc)
                raise
            if log.segments[-1].base_address != self._segment_bases[-1]:
                self._on_roll(head + 1)
            self._feed(ix)
            self._seg_tags.update(ix.postings)
            self._seg_tracking.update(ix.tracking)
            self._head = self._written = head + ix.count
            self._notify(self._head)
            return self._head

    def commit_deferred(self) -> None:
        """Commit every request deferred so far on the calling thread (one drain, one
        fsync, split only at the writer's batch limits); their futures are done after."""
        reqs, self._deferred = self._deferred, []
        if reqs:
            self._writer.commit_now(reqs)

    # -- reading ---------------------------------------------------------------------------
    def head(self) -> int | None:
        """Position of the last event, or ``None`` when the store is empty."""
        return self._head or None

    def get_tracking_info(self, source: str) -> int | None:
        """The last position recorded for ``source``, or ``None``."""
        return self._tracking.get(source)

    def plan(
        self, query: Query | None, start: int | None, backwards: bool, limit: int | None
    ) -> tuple[np.ndarray, int]:
        """Positions a read returns (in read order, limit applied) and the captured head."""
        if self._closed:
            raise ClosedError("the event store is closed: open it again")
        if limit is not None and (not _is_int(limit) or limit < 0):
            raise ProgrammingError(f"limit must be an int >= 0, not {limit!r}")
        if start is not None and not _is_int(start):
            raise ProgrammingError(f"start must be a position (an int), not {start!r}")
        head = self._head
        items = normalise(query)
        if backwards:
            lo, hi = 1, head if start is None else min(start, head)
        else:
            lo, hi = (1 if start is None else max(start, 1)), head
        return self._planner.positions(items, lo, hi, backwards=backwards, limit=limit), head

    def read(
        self,
        query: Query | None = None,
        start: int | None = None,
        backwards: bool = False,
        limit: int | None = None,
    ) -> ReadResponse:
        """Events matching ``query`` from ``start`` (inclusive), up to the current head.

        ``backwards`` reads from ``start`` (or the head) down. ``head`` on the response is
        the store head when the read began, or with a ``limit`` the position of the last
        event returned (``None`` when none).
        """
        pos, head = self.plan(query, start, backwards, limit)
        if limit is not None:
            rhead = int(pos[-1]) if len(pos) else None
        else:
            rhead = head or None
        return ReadResponse(self._iter_events(pos), rhead)

    def _iter_events(self, pos: np.ndarray) -> Iterator[SequencedEvent]:
        for i in range(0, len(pos), READ_CHUNK):
            yield from codec.decode_entries(self.join_entries(pos[i : i + READ_CHUNK]))

    def subscribe(self, query: Query | None = None, after: int | None = None) -> Subscription:
        """Events matching ``query`` after ``after`` (exclusive): catch-up, then live."""
        return Subscription(self, normalise(query), after or 0)

    # -- entry access ------------------------------------------------------------------------
    def _file(self, i: int) -> ImmutableFile:
        """Segment ``i`` read through the process's descriptor pool
        (storage/descriptors.py): a store of thousands of segments never holds a
        descriptor for each."""
        f = self._files.get(i)
        if f is None:
            with self._files_lock:
                f = self._files.get(i)
                if f is None:
                    f = self._files[i] = ImmutableFile(self._segment_paths[i])
        return f

    def _entry(self, p: int) -> bytes:
        return self.join_entries(np.array([p], np.int64))

    def join_entries(self, pos: np.ndarray) -> bytes:
        """The stored entries of ``pos`` joined in order: a valid ReadResponse body."""
        n = len(pos)
        if n == 0:
            return b""
        if self._unchecked_left:
            self._check_frames(self._addr.array[pos - 1])
        if self._codec is not None:
            return self._join_encoded(pos)
        idx = pos - 1
        a = self._addr.array[idx]
        ln = self._len.array[idx]
        bases = self._segment_bases
        a0 = int(a.min())
        a1 = int((a + ln).max())
        seg = bisect_right(bases, a0) - 1
        if seg == bisect_right(bases, a1 - 1) - 1:
            need = int(ln.sum())
            span = a1 - a0
            if span <= _SPARSE_SPAN or span <= _SPARSE_FACTOR * need:
                buf = self._file(seg).pread(span, a0 - bases[seg] + SEGMENT_HEADER_SIZE)
                if n == 1 or span == need:
                    ends = a + ln
                    if n == 1 or (a[1:] == ends[:-1]).all():
                        return buf
                # Slice per run of byte-contiguous entries (a frame's entries are contiguous),
                # not per entry.
                ends = a + ln
                starts = np.flatnonzero(a[1:] != ends[:-1]) + 1
                lo = np.concatenate(([0], starts))
                hi = np.concatenate((starts, [n])) - 1
                mv = memoryview(buf)
                return b"".join([
                    mv[x : y]
                    for x, y in zip((a[lo] - a0).tolist(), (ends[hi] - a0).tolist(), strict=True)
                ])
        # Sparse or spanning segments: one pread per entry; entries come in position
        # order, so one segment's descriptor is held at a time, while its run lasts.
        pread = os.pread
        out = []
        cur = -1
        fd = -1
        held: ImmutableFile | None = None
        try:
            for x, k in zip(a.tolist(), ln.tolist(), strict=True):
                s = bisect_right(bases, x) - 1
                if s != cur:
                    if held is not None:
                        held.release()
                        held = None
                    f = self._file(s)
                    fd = f.acquire()
                    held, cur = f, s
                out.append(pread(fd, k, x - bases[s] + SEGMENT_HEADER_SIZE))
        finally:
            if held is not None:
                held.release()
        return b"".join(out)

    def _check_frames(self, a: np.ndarray) -> None:
        """Check, once, the CRC of each frame holding an entry at an address in ``a`` that
        was opened from an index file and not read since (a sealed segment's index says
        where its entries are, not that the bytes there are still good); contiguous
        frames are read and checked in one ``pread``.

        :raises CorruptionError: a frame fails its check (it stays unchecked, so every
            read that needs it fails the same way)
        """
        unchecked = self._unchecked
        n = len(unchecked)
        frames = self._frames.array[: self._frames.size]
        fi = np.searchsorted(frames, a, "right") - 1
        fi = fi[(fi >= 0) & (fi < n)]
        todo = np.unique(fi[unchecked[fi]])
        if not len(todo):
            return
        bases = self._segment_bases
        segs = self._log.segments
        # Runs of consecutive frames within one segment.
        seg_of = np.searchsorted(bases, frames[todo], "right") - 1
        breaks = np.flatnonzero((np.diff(todo) != 1) | (np.diff(seg_of) != 0)) + 1
        for run, s in zip(np.split(todo, breaks), seg_of[np.r_[0, breaks]].tolist(),
                          strict=True):
            lo, hi = int(run[0]), int(run[-1])
            start = int(frames[lo])
            seg_end = bases[s] + segs[s].size
            end = min(int(frames[hi + 1]), seg_end) if hi + 1 < len(frames) else seg_end
            off = start - bases[s] + SEGMENT_HEADER_SIZE
            buf = self._file(s).pread(end - start, off)
            stop, why, _ = check_frames(buf, 0, len(buf))
            if why is not None or stop != len(buf):
                raise CorruptionError(
                    f"sealed event segment damaged: {why or 'a frame ends past its run'}",
                    path=str(self._segment_paths[s]), offset=off + stop,
                )
            with self._check_lock:
                fresh = run[unchecked[run]]
                unchecked[fresh] = False
                self._unchecked_left -= len(fresh)

    def _join_encoded(self, pos: np.ndarray) -> bytes:
        """Encrypted store: decode each frame once (small cache) and slice its entries."""
        idx = pos - 1
        a = self._addr.array[idx]
        ln = self._len.array[idx]
        frames = self._frames.array[: self._frames.size]
        fi = np.searchsorted(frames, a, "right") - 1
        starts = frames[fi]
        bases = self._segment_bases
        cache = self._frame_cache
        out = []
        for f, x, k in zip(starts.tolist(), a.tolist(), ln.tolist(), strict=True):
            payload = cache.get(f)
            if payload is None:
                s = bisect_right(bases, f) - 1
                file = self._file(s)
                off = f - bases[s] + SEGMENT_HEADER_SIZE
                _, length, _, flags = FRAME.unpack(file.pread(FRAME_SIZE, off))
                data = file.pread(length, off + FRAME_SIZE)
                assert self._codec is not None
                payload = self._codec.decode(flags, data, str(self._segment_paths[s]))
                if len(cache) >= FRAME_CACHE:
                    cache.clear()
                cache[f] = payload
            o = x - f - FRAME_SIZE
            out.append(payload[o : o + k])
        return b"".join(out)

    # -- writer hooks ------------------------------------------------------------------------
    def _rollback(self, head: int) -> None:
        self._types.truncate(head)
        self._tags.truncate(head)
        self._addr.truncate(head)
        self._len.truncate(head)

    def _on_roll(self, first: int) -> None:
        """The log rolled before the drain starting at position ``first``: seal the old one."""
        n = len(self._segment_bases)
        for s in self._log.segments[n:]:
            self._segment_paths.append(s.path)
            self._segment_bases.append(s.base_address)
            self._segment_firsts.append(first)
        touched = (self._seg_tags, self._seg_tracking)
        self._seg_tags, self._seg_tracking = set(), {}
        for i in range(n - 1, len(self._segment_bases) - 1):
            t = threading.Thread(
                target=self._seal, args=(i, *touched), name="tuffdb-events-seal"
            )
            t.start()
            self._sealers.append(t)

    def _notify(self, head: int) -> None:
        with self._cv:
            self._cv.notify_all()
        for cb in list(self._listeners):
            cb(head)

    def add_listener(self, cb: Callable[[int], None]) -> None:
        """Call ``cb(head)`` on the writer thread after every commit (keep it tiny)."""
        self._listeners.append(cb)

    def remove_listener(self, cb: Callable[[int], None]) -> None:
        if cb in self._listeners:
            self._listeners.remove(cb)

    def wait_for(self, position: int, timeout: float | None = None) -> bool:
        """Block until the head passes ``position`` (or close/timeout); True if it did."""
        with self._cv:
            return self._cv.wait_for(
                lambda: self._head > position or self._closed, timeout
            ) and self._head > position

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def poisoned(self) -> BaseException | None:
        """The failed write or fsync that poisoned the store (every later append raises
        PoisonedError until it is reopened), or None."""
        return self._poison.cause

    @property
    def key_id(self) -> int:
        """Id of the encryption key the store writes with (0: not encrypted)."""
        return self._codec.key_id if self._codec is not None else 0

    def check(self, deep: bool = False) -> list[str]:
        """Self-check; [] when consistent.

        Always: the in-memory columns cover the head. ``deep=True`` also re-reads every
        segment and verifies every frame's CRC and the position sequence (reads check a
        frame's CRC the first time they need it after open, then trust it).
        """
        problems = []
        if deep:
            first = 1
            for seg in list(self._log.segments):
                try:
                    ix = sealed_index.scan_segment(
                        self._frames_of(seg), seg.base_address, str(seg.path), first, self._codec
                    )
                except CorruptionError as exc:
                    problems.append(str(exc))
                    break
                first += ix.count
            else:
                if first - 1 < self._head:
                    problems.append(f"log holds {first - 1} events, head is {self._head}")
        h = self._head
        sizes = {"types": len(self._types), "addr": self._addr.size, "len": self._len.size}
        problems += [f"{k} column has {n} rows, head is {h}" for k, n in sizes.items() if n < h]
        if h and int(self._len.array[:h].min()) <= 0:
            problems.append("an entry has a non-positive length")
        return problems

    def close(self) -> None:
        """Finish queued appends, fsync and close; idempotent."""
        if self._closed:
            return
        self._writer.stop()
        self._closed = True
        for t in self._sealers:
            t.join()
        with self._cv:
            self._cv.notify_all()
        for cb in list(self._listeners):
            cb(self._head)
        self._log.close()
        with self._files_lock:
            for f in self._files.values():
                f.close()
            self._files.clear()
        self._lock.release()

