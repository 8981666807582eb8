"""KVStore: the public embedded KV engine (design: docs/design/kv.md).

Lifecycle of a write: validate sizes -> under the store lock, insert into the active
hot segment's index and (when a log is kept) append the framed record to its pending
list -> return, or wait for the group commit that carries it (``durability="always"``).
A full segment is sealed and queued; the background thread spills it to a compressed
cold segment plus hint file and moves its keys to the keydir.

Lifecycle of a read: active index -> sealed indexes newest first -> keydir location ->
block cache -> positional read of one checksummed block. Reads take no lock.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Final, cast


from tuffdb import metrics
from tuffdb._format.kv import (
    BLOCK_BITS,
    BLOCK_SHIFT,
    MAX_KEY_SIZE,
    MAX_VALUE_SIZE,
    OFFSET_BITS,
    OP_DELETE,
    SEGMENT_SHIFT,
    VALUE_BITS,
)
from tuffdb._format.record import Kind, scan_frames
from tuffdb._format.segment import SEGMENT_HEADER_SIZE
from tuffdb.errors import (
    ClosedError,
    CorruptionError,
    LimitExceeded,
    NotLeaderError,
    NotFoundError,
    ProgrammingError,
)
from tuffdb.kv import background, recovery
from tuffdb.kv.check import check_store, store_stats
from tuffdb.kv.cold import BLOCK_TARGET_SIZE, MAX_BLOCK_SIZE, MIN_BLOCK_SIZE, ColdSegment
from tuffdb.kv.hot_tier import RECORD_OVERHEAD_BYTES, TOMBSTONE, HotSegment
from tuffdb.kv.ordered import OrderedKeys
from tuffdb.kv.records import Record, iter_records
from tuffdb.kv.shipping_source import KVSource
from tuffdb.storage.codec import Codec
from tuffdb.storage.group_commit import GroupCommitter
from tuffdb.storage.lock import DirLock
from tuffdb.storage.poison import Poison
from tuffdb.storage.shipping import Shipper
from tuffdb.storage.spare import Spares

DURABILITY_MODES = ("always", "interval", "none")
SCAN_CHUNK = 16  # first chunk of keys an ordered scan takes under the lock (x4 each next)


class _KeepTTL:
    __slots__ = ()

    def __repr__(self) -> str:
        return "KEEP_TTL"


KEEP_TTL = _KeepTTL()  # write_batch: the put keeps the key's current TTL (if any)


def ttl_ms(ttl: float) -> int:
    """A TTL in seconds as whole milliseconds, at least 1: the nearest, so a TTL given in
    milliseconds (PX, PEXPIRE: ``ms / 1000``) comes back exact (truncating made 1.001 s
    1,000 ms: ``1.001 * 1000`` is 1000.9999...)."""
    ms = ttl * 1000
    if not -1e18 < ms < 1e18:  # (NaN fails every comparison)
        raise ProgrammingError(f"ttl must be a finite number of seconds, not {ttl!r}")
    return max(1, round(ms))


class Deadline:
    """write_batch: the put expires at ``ms`` (Unix time in milliseconds, kept exactly, as
    :meth:`KVStore.expire_at`); one already passed leaves the key deleted."""

    __slots__ = ("ms",)

    def __init__(self, ms: int) -> None:
        self.ms = ms

    def __repr__(self) -> str:
        return f"Deadline({self.ms})"


# Invariant: the literals in get() and _load_block() are these layout constants.
assert (SEGMENT_SHIFT, BLOCK_SHIFT, BLOCK_BITS, VALUE_BITS, OFFSET_BITS) == (80, 48, 32, 28, 20)
# A location's offset and length bits. Locations are ints over 2^80 (the segment id is
# above bit 80): every operation on one allocates (the compiled build's short-int fast
# path ends at 2^62), so reads take these bits out in one operation and work on the
# small int it leaves, not shift and mask the location twice.
_IN_BLOCK: Final = 0xFFFF_FFFF_FFFF
assert _IN_BLOCK == (1 << BLOCK_SHIFT) - 1


# What the API takes (and converts to bytes: a str key is UTF-8 encoded).
KeyLike = bytes | bytearray | memoryview | str
ValueLike = bytes | bytearray | memoryview


def prefix_range(prefix: bytes, start: bytes | None,
                 end: bytes | None) -> tuple[bytes, bytes | None]:
    """The [lo, hi) key range a scan with these bounds covers (hi None: no upper bound)."""
    lo = max(prefix, start) if start is not None else prefix
    hi = end
    if prefix:
        stripped = prefix.rstrip(b"\xff")
        if stripped:
            after = stripped[:-1] + bytes([stripped[-1] + 1])
            hi = after if hi is None else min(hi, after)
    return lo, hi


def _as_bytes(x: Any, what: str) -> bytes:
    if type(x) is bytes:
        return x
    if isinstance(x, (bytearray, memoryview)):
        return bytes(x)
    if isinstance(x, str) and what == "key":
        return x.encode()
    raise ProgrammingError(f"{what} must be bytes, not {type(x).__name__}")


class KVStore(MutableMapping[bytes, bytes]):
    """A thread-safe hash-log KV store with an in-memory hot tier. Use :meth:`open`."""

    # -- opening -----------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        durability: str = "interval",
        interval_ms: int = 200,
        cache_bytes: int = 64 << 20,
        hot_bytes: int = 8 << 20,
        encryption_key: bytes | None = None,
        compression: str | None = "zstd",
        max_sealed: int = 4,
        compaction_threshold: float = 0.5,
        background_compaction: bool = True,
        expiry_interval_s: float = 1.0,
        clock: Callable[[], float] = time.time,
        tier_cache_bytes: int = 256 << 20,
        block_bytes: int = BLOCK_TARGET_SIZE,
    ) -> KVStore:
        """Open (creating if needed) the store in directory ``path``.

        ``tier_cache_bytes`` bounds the local cache of segments kept in an archive
        (tiering, kv/tier.py; only used once a segment is tiered).
        ``block_bytes`` is the raw size at which a cold block closes (1-512 KiB): a
        block-cache miss reads and decodes one block, so smaller blocks make point reads
        out of cache cheaper and a cache hold more distinct records; larger ones compress
        better and cost the spill less per byte (docs/design/kv.md). Existing segments keep
        theirs.

        :raises LockTimeout: another process has the directory open.
        :raises WrongKeyError: ``encryption_key`` does not match the data.
        :raises CorruptionError: a sealed file is damaged beyond a torn tail.
        """
        if durability not in DURABILITY_MODES:
            raise ProgrammingError(f"durability must be one of {DURABILITY_MODES}")
        if interval_ms <= 0 or hot_bytes <= 0 or cache_bytes < 0:
            raise ProgrammingError("interval_ms and hot_bytes must be > 0, cache_bytes >= 0")
        if not MIN_BLOCK_SIZE <= block_bytes <= MAX_BLOCK_SIZE:
            raise ProgrammingError(f"block_bytes must be between {MIN_BLOCK_SIZE} and "
                                   f"{MAX_BLOCK_SIZE}")
        return cls(
            Path(path), durability=durability, interval_ms=interval_ms, cache_bytes=cache_bytes,
            hot_bytes=hot_bytes, codec=Codec(compression=compression, key=encryption_key),
            max_sealed=max_sealed, compaction_threshold=compaction_threshold,
            background_compaction=background_compaction, expiry_interval_s=expiry_interval_s,
            clock=clock, tier_cache_bytes=tier_cache_bytes, block_bytes=block_bytes,
        )

    def __init__(self, directory: Path, *, durability: str, interval_ms: int, cache_bytes: int,
                 hot_bytes: int, codec: Codec, max_sealed: int, compaction_threshold: float,
                 background_compaction: bool, expiry_interval_s: float,
                 clock: Callable[[], float], tier_cache_bytes: int = 256 << 20,
                 block_bytes: int = BLOCK_TARGET_SIZE) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._dir = directory
        self._dirlock = DirLock(directory)
        self._durability = durability
        self._interval_ms = interval_ms
        self._logged = durability != "none"
        self._hot_bytes = hot_bytes
        self._max_sealed = max(1, max_sealed)
        self._codec = codec
        self._clock = clock
        self._poison = Poison()
        self._lock = threading.Lock()
        self._space_cv = threading.Condition(self._lock)
        self._bg_mutex = threading.RLock()  # held by the background thread while it changes the cold tier
        self._closed = False
        self._closing = False
        self._keydir: dict[bytes, int] = {}
        self._expiry: dict[bytes, int] = {}
        self._expiry_heap: list[tuple[int, bytes]] = []
        self._cold: dict[int, ColdSegment] = {}
        self._cold_order: list[ColdSegment] = []
        self._retired: list[ColdSegment] = []
        self._open_segs: dict[int, ColdSegment] = {}  # every segment not yet closed, by id
        # Tiering (kv/tier.py): segments whose bytes live in an archive read through a
        # local cache of this size; the state (kv.tier.Tier) is made on first use.
        self._tier_cache_bytes = tier_cache_bytes
        self.block_bytes = block_bytes
        self._tier: Any = None
        self._cache: OrderedDict[int, bytes] = OrderedDict()  # block id -> decoded block
        self._cache_size = 0
        self._cache_limit = cache_bytes
        self._cache_lock = threading.Lock()
        self._cache_hits = 0
        self._cache_misses = 0
        self._sealed: list[HotSegment] = []
        self._unflushed: list[HotSegment] = []
        # Segments whose last records a round has drained and not yet finished logging
        # (their log may be mid-creation even once spilled): check() leaves their logs be.
        self._finishing: set[int] = set()
        # Ordered view of the keys, built on the first ordered read and then kept current
        # from ``_touched`` (keys written or deleted since, in first-write order, so a run
        # of appends reaches the fold nearly sorted): writers only add to it. The value
        # says what the key's last write left, so the fold need not look the key up:
        # True live, False deleted (writers holding the lock, which record it BEFORE their
        # write to the hot tier), None unknown (the lock-free put, which records after its
        # write; the fold then checks). The order makes a recorded True/False always the
        # flag of the key's last write: a lock-free put of the same key racing with a
        # locked writer either wrote the hot tier before the locked writer did (and
        # recorded before it too: the locked writer's flag is last and right) or records
        # None after it (checked). (Looking every key up at the fold cost ~15 % of the
        # background thread under RESP RPUSH -P 16: the keys had just been spilled, so each
        # missed every hot dict before probing the keydir.)
        self._ordered: OrderedKeys | None = None
        self._touched: dict[bytes, bool | None] = {}
        self._folding: list[bytes] = []  # keys taken from _touched, not folded yet
        self._folding_flags: list[bool | None] = []  # and their values there
        self.keys_folded = 0  # keys folded into the ordered view so far (stats())
        # Bumped by every write (put, put_many, write_batch, tombstone): a caller compares
        # it before and after some work to learn whether that work changed the store.
        self.changes = 0
        self._compaction_threshold = compaction_threshold
        self._background_compaction = background_compaction
        self._expiry_interval_s = expiry_interval_s
        self._requests: list[tuple[str, Any, Future[Any]]] = []
        self._reads = 0  # point reads served (approximate under threads): see activity()
        # "always" commits small groups often: their logs are made from zero-filled
        # spares so each commit is an fdatasync over existing blocks (storage/spare.py).
        self._spares: Spares | None = None
        self._use_spares(durability)
        # The log-shipping seam (backup, archiving, replication): reported to after each
        # durable change; round data is built only while a feed listens.
        self.shipper = Shipper(directory, KVSource(self))
        self.recovery = recovery.RecoveryStats()
        # Called with every round's frames, ``[(log name, file offset, bytes)]``, once
        # written (before their fsync) and before its waiters are released: how a cluster
        # leader ships its log (cluster/).
        self.round_tap: Callable[[list[tuple[str, int, bytes]]], None] | None = None
        # A cluster node that does not lead refuses writes with this (replica applies and
        # expiry go on); ``raced_writes`` counts puts that slipped past it (see
        # :meth:`set_replication_hooks`).
        self._refusal: BaseException | None = None
        self.raced_writes = 0
        try:
            next_id = recovery.recover(self)
        except BaseException:
            self._dirlock.release()
            raise
        # Recovery appends expiries in file order: make it a heap (sweep_expired pops the
        # earliest; _expired_between walks the entries already due from the top).
        heapq.heapify(self._expiry_heap)
        self._next_id = next_id + 1
        self._active = HotSegment(next_id, logged=self._logged)
        if self._logged:
            self._unflushed.append(self._active)
        self._rechain()
        self._committer = GroupCommitter(
            lock=self._lock, drain=self._drain, write=self._write_drained, poison=self._poison,
            interval_s=self._commit_interval(), name="tuffdb-kv-commit",
            stage=self._stage_drained,
        )
        self._bg = threading.Thread(target=background.run, args=(self,), name="tuffdb-kv-bg",
                                    daemon=True)
        self._bg.start()

    def activity(self) -> tuple[int, int, int, int]:
        """Changes whenever the store serves a read or takes a write; the background
        thread defers merges while it keeps changing (merge.compact_background)."""
        active = self._active
        return (self._reads, active.id, active.bytes, len(self._sealed))

    def _use_spares(self, durability: str) -> None:
        if durability == "always" and self._spares is None:
            # A hot segment's log holds its records plus frame headers: a quarter more
            # than the segment's budget covers it; a log that outgrows it is fsynced.
            self._spares = Spares(self._dir, SEGMENT_HEADER_SIZE + self._hot_bytes * 5 // 4)
        elif durability != "always" and self._spares is not None:
            self._spares.discard()
            self._spares = None

    def _commit_interval(self) -> float | None:
        return self._interval_ms / 1000 if self._logged else None

    def _rechain(self) -> None:
        """Rebuild the read chain (newest first). Hold the lock (or be in __init__)."""
        self._chain = (self._active.index, *(s.index for s in reversed(self._sealed)))

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def now_ms(self) -> int:
        """The store's clock, Unix time in milliseconds: what expiry deadlines are read on."""
        return self._now_ms()

    # -- writes --------------------------------------------------------------------------
    def put(self, key: KeyLike, value: ValueLike, ttl: float | None = None, *,
            sync: bool | None = None) -> None:
        """Store ``value`` under ``key``, optionally expiring after ``ttl`` seconds
        (``ttl <= 0``: already expired, so the key is deleted).

        Returns once the record is in the hot tier, or once it is fsynced when the store's
        durability is ``"always"`` (or ``sync=True``).

        :raises LimitExceeded: key over 65,535 bytes or value over 268,435,455 bytes.
        :raises PoisonedError: an earlier write or fsync failed.
        """
        if type(key) is not bytes:
            key = _as_bytes(key, "key")
        if type(value) is not bytes:
            value = _as_bytes(value, "value")
        if len(key) > MAX_KEY_SIZE or len(value) > MAX_VALUE_SIZE:
            self._too_big(key, value)
        if self._closed or self._poison.cause is not None or self._refusal is not None:
            self._check_writable()
        if ttl is not None and ttl <= 0:  # expired on arrival: the key ends up absent
            self.delete(key, sync=sync)
            return
        # Lock-free fast path (each step is one atomic operation under the GIL). A writer
        # that raced with sealing finds ``seg.sealed`` set afterwards and redoes its write
        # in the new active segment under the lock (_put_slow); see docs/design/kv.md.
        seg = self._active
        size = len(key) + len(value) + RECORD_OVERHEAD_BYTES
        if ttl is None:
            index = seg.index
            p = seg.pending
            if p is None:
                # Unlogged, a segment's bytes are the memory it holds (nothing else grows
                # with it), so an overwrite within it adds only its growth: the hot keys of
                # a skewed workload are rewritten in memory instead of filling segment after
                # segment for the background thread to spill and, later, merge away. A
                # logged segment counts every put: its log holds each one.
                old = index.get(key)
                if type(old) is bytes:
                    size = len(value) - len(old)
                index[key] = value
            else:
                index[key] = value
                p += (key, value)  # framed in bulk by the committer (records.encode_pending)
            if self._expiry:
                self._clear_expiry(seg, key)
        else:
            self._put_ttl(seg, key, value, ttl)
        if self._ordered is not None:
            touched = self._touched
            touched[key] = None
            if touched is not self._touched:  # a fold took the dict meanwhile: it may
                self._touched[key] = None  # have listed it before this add (_fold_chunk_locked)
        seg.bytes += size
        self.changes += 1
        if seg.sealed or seg.bytes >= self._hot_bytes or self._refusal is not None:
            self._put_slow(seg, key, value, ttl)
        if sync is None:
            if self._durability != "always":
                return
        elif not sync:
            return
        self._wait(self._committer.ticket())

    def _put_slow(self, seg: HotSegment, key: bytes, value: bytes, ttl: float | None) -> None:
        with self._lock:
            if self._refusal is not None:
                # This put passed the check before the node stepped down and wrote after:
                # it is in the hot tier but in no round the leader numbered. The node
                # counts it (a rejoin then takes a snapshot) and the writer is refused.
                self.raced_writes += 1
                raise self._refusal
            if seg.sealed:
                self._check_writable()
                active = self._active
                if ttl is None:
                    active.index[key] = value
                    if active.pending is not None:
                        active.pending += (key, value)
                    if self._expiry:
                        self._clear_expiry(active, key)
                else:
                    self._put_ttl(active, key, value, ttl)
                active.bytes += len(key) + len(value) + RECORD_OVERHEAD_BYTES
            if self._active.bytes >= self._hot_bytes:
                self._seal_locked()

    def _put_ttl(self, seg: HotSegment, key: bytes, value: bytes, ttl: float) -> None:
        self._put_exp(seg, key, value, self._now_ms() + ttl_ms(ttl))

    def _put_exp(self, seg: HotSegment, key: bytes, value: bytes, exp: int) -> None:
        """A put that expires at ``exp`` (ms since the epoch)."""
        seg.index[key] = value
        seg.expiry[key] = exp
        self._expiry[key] = exp
        heapq.heappush(self._expiry_heap, (exp, key))
        if seg.pending is not None:
            seg.mixed = True  # IMPORTANT: before the append, so a drain never misframes it
            seg.pending += (key, (value, exp))

    def _clear_expiry(self, seg: HotSegment, key: bytes) -> None:
        self._expiry.pop(key, None)
        if seg.expiry:
            seg.expiry.pop(key, None)

    def put_many(self, items: Iterable[tuple[KeyLike, ValueLike]] | Mapping[bytes, ValueLike]
                 | Mapping[str, ValueLike],
                 ttl: float | None = None, *, sync: bool | None = None) -> None:
        """Store many pairs atomically: one lock round, one hot segment, one group commit.

        After a crash either every pair is there or none is.
        """
        pairs = list(items.items()) if isinstance(items, Mapping) else list(items)
        if ttl is not None and ttl <= 0:  # expired on arrival: the keys end up absent
            self.delete_many([k for k, _ in pairs], sync=sync)
            return
        norm: list[tuple[bytes, bytes]] = []
        for rk, rv in pairs:
            k = rk if type(rk) is bytes else _as_bytes(rk, "key")
            v = rv if type(rv) is bytes else _as_bytes(rv, "value")
            if len(k) > MAX_KEY_SIZE or len(v) > MAX_VALUE_SIZE:
                self._too_big(k, v)
            norm.append((k, v))
        with self._lock:
            self._check_writable()
            # The whole batch goes into one hot segment (no seal inside the loop, and the
            # committer drains under this lock), so it lands in one log frame and one
            # cold segment: after a crash it is there entirely or not at all.
            seg = self._active
            if self._ordered is not None:  # before the writes (see _touched)
                touched = self._touched
                for k, _ in norm:
                    touched[k] = True
            for k, v in norm:
                if ttl is None:
                    seg.index[k] = v
                    if seg.pending is not None:
                        seg.pending += (k, v)
                    if self._expiry:
                        self._clear_expiry(seg, k)
                else:
                    self._put_ttl(seg, k, v, ttl)
                seg.bytes += len(k) + len(v) + RECORD_OVERHEAD_BYTES
            self.changes += 1
            if seg.bytes >= self._hot_bytes:
                self._seal_locked()
            ticket = self._committer.ticket()
        if sync or (sync is None and self._durability == "always"):
            self._wait(ticket)

    def set_replication_hooks(
            self, tap: Callable[[list[tuple[str, int, bytes]]], None] | None,
            confirm: Callable[[Callable[[BaseException | None], None]], None] | None) -> None:
        """Install a cluster leader's hooks, or with ``confirm`` None remove them (the node
        stepped down). ``tap`` gets every durable round's frames, ``confirm(callback)``
        calls back once followers confirmed them; the round's writers are answered then
        (``GroupCommitter.confirm``).

        Stepping down refuses writes from then on (``NotLeaderError``; replica applies and
        expiry go on) until hooks are installed again, and first runs one more round
        through ``tap``: the writes made while leading and not yet in a round go out
        numbered by the leader's sequence, so a node that rejoins knows it holds them
        (written alone, they would be in no round and it could not tell). A put that
        raced the refusal is counted in ``raced_writes`` for the same reason."""
        if confirm is not None:
            with self._lock:
                self._refusal = None
            self.round_tap = tap
            self._committer.confirm = confirm
            return
        refusal = NotLeaderError(
            "this node stepped down before followers confirmed the write: it is not "
            "acknowledged; retry against the new leader")
        with self._lock:
            self._refusal = refusal
        if self._logged and self.round_tap is not None and not self._poison:
            with self._committer.exclusive():
                self.round_tap = None
        self.round_tap = None
        self._committer.stop_confirming(refusal)

    def refuse_writes(self, error: BaseException) -> None:
        """Refuse writes with ``error`` until a leader's hooks are installed
        (:meth:`set_replication_hooks`): a cluster node that joins as a follower, whose
        store only the leader's log may change (replica applies and expiry go on)."""
        with self._lock:
            self._refusal = error

    def replica_apply(self, frames: bytes, where: str = "replicated log bytes") -> int:
        """Apply a leader's committed log frames (a cluster follower; ``cluster/``).

        ``frames`` are whole KV_BATCH frames exactly as the leader's log holds them
        (encrypted when the store is: both sides have the same key). Their records go
        through the write path of a put, in order, keeping each record's absolute expiry:
        into the active hot segment (visible to readers at once) and this store's own log.
        Applying the same frames twice leaves the same state (puts and deletes in order).
        Returns a ticket for :meth:`when_durable` / :meth:`wait_durable`.

        :raises CorruptionError: ``frames`` are not whole, valid, committed KV frames.
        """
        return self.replica_apply_records(self.replica_records(frames, where))

    def replica_records(self, frames: bytes, where: str = "replicated log bytes") -> list[Record]:
        """The records of a leader's committed log frames (see :meth:`replica_apply`).

        :raises CorruptionError: ``frames`` are not whole, valid, committed KV frames.
        """
        res = scan_frames(frames)
        if res.error is not None or res.committed_end != len(frames):
            raise CorruptionError(f"replicated KV frames: {res.error or 'no COMMIT at the end'}",
                                  path=where, offset=res.end)
        records: list[Record] = []
        for f in res.frames:
            if f.kind != Kind.KV_BATCH:
                raise CorruptionError(f"replicated frame of kind {f.kind}, not KV_BATCH",
                                      path=where, offset=f.offset)
            records.extend(iter_records(self._codec.decode(f.flags, f.payload, where), where))
        return records

    def replica_apply_records(self, records: list[Record]) -> int:
        """Apply :meth:`replica_records`' result; returns a ticket (see :meth:`replica_apply`)."""
        with self._lock:
            self._check_open()
            seg = self._active
            index, pending = seg.index, seg.pending
            if self._ordered is not None:  # before the writes (see _touched)
                touched = self._touched
                for r in records:
                    touched[r.key] = r.op != OP_DELETE
            for r in records:
                k = r.key
                if r.op == OP_DELETE:
                    index[k] = TOMBSTONE
                    if pending is not None:
                        seg.mixed = True
                        pending += (k, None)
                    if self._expiry:
                        self._clear_expiry(seg, k)
                    seg.bytes += len(k) + RECORD_OVERHEAD_BYTES
                    continue
                index[k] = r.value
                if r.expiry_ms:
                    seg.expiry[k] = self._expiry[k] = r.expiry_ms
                    heapq.heappush(self._expiry_heap, (r.expiry_ms, k))
                    if pending is not None:
                        seg.mixed = True
                        pending += (k, (r.value, r.expiry_ms))
                else:
                    if pending is not None:
                        pending += (k, r.value)
                    if self._expiry:
                        self._clear_expiry(seg, k)
                seg.bytes += len(k) + len(r.value) + RECORD_OVERHEAD_BYTES
            self.changes += 1
            if seg.bytes >= self._hot_bytes:
                self._seal_locked()
            return self._committer.ticket()

    def delete(self, key: KeyLike, *, sync: bool | None = None) -> bool:
        """Remove ``key``; True if it existed. Writes a tombstone only when it existed."""
        return self.delete_many((key,), sync=sync) == 1

    def delete_many(self, keys: Iterable[KeyLike], *, sync: bool | None = None) -> int:
        """Remove keys; return how many existed."""
        ks = [k if type(k) is bytes else _as_bytes(k, "key") for k in keys]
        n = 0
        with self._lock:
            self._check_writable()
            for k in ks:
                if self._get_locked(k) is None:
                    continue
                self._tombstone_locked(k)
                n += 1
            if not n:
                return 0
            ticket = self._committer.ticket()
        if sync or (sync is None and self._durability == "always"):
            self._wait(ticket)
        return n

    def write_batch(self, ops: Iterable[tuple[Any, ...]], *, sync: bool | None = None) -> None:
        """Apply puts and deletes atomically: one lock round, one hot segment, one group
        commit, so after a crash either every operation is there or none is.

        Each op is ``(key, value)`` (a put; any TTL the key had is dropped), ``(key, None)``
        (a delete; a tombstone is written whether or not the key exists) or
        ``(key, value, ttl)`` with ``ttl`` in seconds (``<= 0``: the key ends up deleted),
        :data:`KEEP_TTL` (the key keeps the TTL it has, if any) or a :class:`Deadline` (an
        absolute expiry, to the millisecond). Later ops on a key win.

        A :data:`KEEP_TTL` put says "this key is being rewritten": if the key exists when
        the op applies, it still exists after, so the ordered view need not hear of it
        (no fold: each folded key costs the background thread two binary searches in a
        view of every key). Collections' metadata and rewritten members are written so.

        :raises LimitExceeded: a key or value over the limits (nothing is written).
        :raises PoisonedError: an earlier write or fsync failed.
        """
        norm: list[tuple[bytes, bytes | None, float | None, bool, int]] = []
        for op in ops:
            rk = op[0]
            k = rk if type(rk) is bytes else _as_bytes(rk, "key")
            rv = op[1]
            v = None if rv is None else rv if type(rv) is bytes else _as_bytes(rv, "value")
            if len(k) > MAX_KEY_SIZE or (v is not None and len(v) > MAX_VALUE_SIZE):
                self._too_big(k, v or b"")
            keep = False
            ttl: float | None = None
            at = 0
            if len(op) > 2:  # noqa: PLR2004
                t = op[2]
                if t is KEEP_TTL:
                    keep = True
                elif type(t) is Deadline:
                    at = t.ms
                elif t is not None:
                    ttl = float(t)
                    if ttl <= 0:
                        v = None
            norm.append((k, v, ttl, keep, at))
        if not norm:
            return
        with self._lock:
            self._check_writable()
            # As put_many: one segment, no seal inside the loop, drained under this lock.
            seg = self._active
            index = seg.index
            pending = seg.pending
            expiry = self._expiry
            now = self._now_ms()
            added = 0
            ordered = self._ordered is not None
            touched = self._touched
            for k, v, ttl, keep, at in norm:
                if at and at <= now:
                    v = None  # a deadline already passed: the key ends up deleted
                if ordered and not (keep and v is not None and self._exists_unlocked(k, now)):
                    touched[k] = v is not None  # before the write (see _touched)
                if v is None:
                    index[k] = TOMBSTONE
                    if pending is not None:
                        seg.mixed = True  # IMPORTANT: before the append (see _tombstone_locked)
                        pending += (k, None)
                    if expiry:
                        self._clear_expiry(seg, k)
                    added += len(k) + RECORD_OVERHEAD_BYTES
                    continue
                exp = 0
                if keep:
                    kept = expiry.get(k) if expiry else None
                    exp = 0 if kept is None else kept  # already past: the put is expired
                elif at:
                    exp = at
                elif ttl is not None:
                    exp = now + ttl_ms(ttl)
                if exp:
                    self._put_exp(seg, k, v, exp)
                else:
                    index[k] = v
                    if pending is not None:
                        pending += (k, v)
                    if expiry:
                        self._clear_expiry(seg, k)
                added += len(k) + len(v) + RECORD_OVERHEAD_BYTES
            seg.bytes += added
            self.changes += 1
            if seg.bytes >= self._hot_bytes:
                self._seal_locked()
            ticket = self._committer.ticket()
        if sync or (sync is None and self._durability == "always"):
            self._wait(ticket)

    def _tombstone_locked(self, k: bytes, *, wait: bool = True) -> None:
        if self._ordered is not None:
            self._touched[k] = False  # before the write (see _touched)
        seg = self._active
        seg.index[k] = TOMBSTONE
        if seg.pending is not None:
            seg.mixed = True  # IMPORTANT: before the append, so a drain never misframes it
            seg.pending += (k, None)
        if self._expiry:
            self._clear_expiry(seg, k)
        seg.bytes += len(k) + RECORD_OVERHEAD_BYTES
        self.changes += 1
        if seg.bytes >= self._hot_bytes:
            self._seal_locked(wait=wait)

    def _too_big(self, key: bytes, value: bytes) -> None:
        if len(key) > MAX_KEY_SIZE:
            raise LimitExceeded(f"key is {len(key)} bytes; the limit is {MAX_KEY_SIZE}")
        raise LimitExceeded(f"value is {len(value)} bytes; the limit is {MAX_VALUE_SIZE}")

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("the store is closed; open it again")
        self._poison.check()

    def _check_writable(self) -> None:
        self._check_open()
        if self._refusal is not None:
            raise self._refusal

    def _seal_locked(self, *, wait: bool = True) -> None:
        seg = self._active
        seg.sealed = True
        self._sealed.append(seg)
        self._active = HotSegment(self._next_id, logged=self._logged)
        self._next_id += 1
        if self._logged:
            self._unflushed.append(self._active)
        self._rechain()
        metrics.KV_SEALED_PENDING.set(len(self._sealed))
        self._space_cv.notify_all()
        # Back-pressure: a bounded queue of sealed segments awaiting spill.
        while (wait and len(self._sealed) > self._max_sealed and not self._poison
               and not self._closing):
            self._space_cv.wait()

    def _wait(self, ticket: int) -> None:
        t0 = time.perf_counter()
        if self._logged:
            self._committer.wait(ticket)
        else:
            self.sync()
        metrics.KV_DURABLE_WAIT_SECONDS.observe(time.perf_counter() - t0)

    # -- group commit (called by the committer thread) -----------------------------------
    def _drain(self) -> list[tuple[HotSegment, list[object] | None, bool]]:
        """Under the store lock: take every segment's pending records.

        Each item is (segment, records or None, final): ``final`` means the segment was
        sealed when drained, so these are its last records and its log can be closed.
        IMPORTANT: ``final`` must be decided here, under the lock, not later: a segment
        sealed after this drain may still have records to log in the next round.
        """
        work: list[tuple[HotSegment, list[object] | None, bool]] = []
        keep: list[HotSegment] = []
        for seg in self._unflushed:
            final = seg.sealed
            p = seg.pending
            if p:
                n = len(p)  # writers only ever extend by whole (key, value) pairs
                chunk = p[:n]
                del p[:n]
                work.append((seg, None if seg.spilled else chunk, final))
            elif final:
                work.append((seg, None, True))
            if not final:
                keep.append(seg)
            else:
                self._finishing.add(seg.id)
        self._unflushed = keep
        return work

    def _write_drained(self, work: list[tuple[HotSegment, list[object] | None, bool]]) -> int:
        return recovery.write_wal_batches(self, work)

    def _stage_drained(self, work: list[tuple[HotSegment, list[object] | None, bool]]) -> Any:
        return recovery.stage_wal_batches(self, work)

    # -- reads ---------------------------------------------------------------------------
    def get(self, key: KeyLike, default: Any = None) -> Any:
        """The value stored under ``key``, or ``default`` (None).

        :raises ClosedError: after close() began.
        """
        if self._closed:
            self._require_open()
        if type(key) is not bytes:
            key = _as_bytes(key, "key")
        self._reads += 1
        if self._expiry:
            exp = self._expiry.get(key)
            if exp is not None and exp <= self._now_ms():
                return default
        for d in self._chain:
            v = d.get(key)
            if v is not None:
                return default if v is TOMBSTONE else v
        loc = self._keydir.get(key)
        if loc is None:
            return default
        gid = loc >> 48
        blk = self._cache.get(gid)
        if blk is None:
            blk = self._load_block(gid)
            if blk is None:  # a merge retired that segment under us: read a stable view
                return self._get_cold_stable(key, default)
        low = loc & _IN_BLOCK  # offset and length: a machine-size int from here (see _IN_BLOCK)
        off = low >> 28
        return blk[off : off + (low & 0xFFFFFFF)]

    def _get_locked(self, key: bytes) -> bytes | None:
        v: bytes | None = self.get(key)
        return v

    def _get_cold_stable(self, key: bytes, default: Any) -> Any:
        """Cold read holding the background mutex, so no merge can retire segments."""
        with self._bg_mutex:
            if self._closed:
                raise ClosedError("the store is closed; open it again")
            loc = self._keydir.get(key)
            if loc is None:
                return default
            blk = self._load_block(loc >> 48)
            if blk is None:
                raise CorruptionError(f"keydir points at missing segment {loc >> 80}")
            off = (loc >> 28) & 0xFFFFF
            return blk[off : off + (loc & 0xFFFFFFF)]

    def _load_block(self, gid: int) -> bytes | None:
        """Read, verify, decode and cache one block; None if its segment was retired by a
        merge (closed, or closing while we read: EBADF, or a reused descriptor's bytes that
        fail the frame checksum)."""
        seg = self._open_segs.get(gid >> 32)
        if seg is None:
            return None
        self._cache_misses += 1
        try:
            raw = seg.read_block(gid & 0xFFFFFFFF)
        except (OSError, CorruptionError):
            if self._cold.get(seg.id) is not seg:  # retired by a merge, or tiered
                return None
            raise
        metrics.KV_GETS.inc()
        self._cache_put(gid, raw)
        return raw

    def _cache_put(self, gid: int, raw: bytes) -> None:
        """Keep decoded block ``gid`` in the block cache (FIFO, bounded by bytes)."""
        size = len(raw)
        if size <= self._cache_limit:
            with self._cache_lock:
                cache = self._cache
                while self._cache_size + size > self._cache_limit and cache:
                    self._cache_size -= len(cache.popitem(last=False)[1])  # FIFO, O(1)
                if gid not in cache:
                    cache[gid] = raw
                    self._cache_size += size

    def get_many(self, keys: Iterable[bytes]) -> list[bytes | None]:
        """``[get(k) for k in keys]`` (pipelined GETs, a list's elements) in one loop.

        The steps are :meth:`get`'s, in its order, for each key: the hot chain (newest
        first), then the keydir, then the block cache. The background thread only ever
        installs a spilled key in the keydir before it leaves the chain, so a key missing
        from the chain snapshot is found in the keydir read after it; a key whose block
        left the cache (or whose segment a merge retired) takes :meth:`get`'s full path.
        One typed loop, not a C-level ``map`` per step: compiled, each pass over a batch
        cost 20-40 ns a key more than the dict lookups it made (a loop over 16 cold keys
        measured 690-730 against 890-920 ns a key; uncompiled within 15 % either way).
        """
        self._require_open()
        keys = keys if isinstance(keys, list) else list(keys)
        self._reads += len(keys)
        if self._expiry:
            return self._get_many_each(keys)
        chain = self._chain
        kd = self._keydir
        cache_get = self._cache.get
        out: list[bytes | None] = []
        gid = -1  # the block of the previous cold key: keys read together (a list's
        blk: bytes | None = None  # elements, a range) mostly share one
        for k in keys:
            v: Any = None
            for d in chain:
                v = d.get(k)
                if v is not None:
                    break
            if v is None:
                loc = kd.get(k)
                if loc is not None:
                    g = loc >> 48
                    if g != gid:
                        gid = g
                        blk = cache_get(g)
                    if blk is None:  # a miss (or a retired segment): the full path
                        v = self.get(k)
                        gid = -1
                    else:
                        low = loc & _IN_BLOCK
                        off = low >> 28
                        v = blk[off : off + (low & 0xFFFFFFF)]
            elif v is TOMBSTONE:
                v = None
            out.append(v)
        return out

    def _get_many_each(self, keys: list[bytes]) -> list[bytes | None]:
        """get_many when some keys carry a TTL: :meth:`get`'s steps inlined per key."""
        out: list[bytes | None] = []
        append = out.append
        expiry = self._expiry
        for key in keys:
            if expiry:
                exp = expiry.get(key)
                if exp is not None and exp <= self._now_ms():
                    append(None)
                    continue
            for d in self._chain:
                v = d.get(key)
                if v is not None:
                    append(None if v is TOMBSTONE else cast("bytes", v))
                    break
            else:
                loc = self._keydir.get(key)
                if loc is None:
                    append(None)
                    continue
                blk = self._cache.get(loc >> 48)
                if blk is None:  # a miss (or a retired segment): the full path handles it
                    append(self.get(key))
                    continue
                low = loc & _IN_BLOCK
                off = low >> 28
                append(blk[off : off + (low & 0xFFFFFFF)])
        return out

    def exists(self, key: bytes) -> bool:
        """Whether ``key`` is live: :meth:`get`'s lookups without reading the value, so a
        key in the cold tier costs no block read or decompression (SISMEMBER of a big set)."""
        if self._closed:
            self._require_open()
        if type(key) is not bytes:
            key = _as_bytes(key, "key")
        self._reads += 1
        return self._exists_unlocked(key, self._now_ms() if self._expiry else 0)

    def is_empty(self) -> bool:
        """Whether the store holds no key at all (an expired one not yet swept counts as
        held), found without the ordered view: a fresh store's open must not build the
        view, which every later write would then fold into (see :meth:`_ordered_view`)."""
        self._require_open()
        with self._lock:
            if self._keydir:
                return False
            # copies, as _ordered_view takes them: a lock-free put may resize a dict
            return all(v is TOMBSTONE for d in self._chain for v in d.copy().values())

    # -- TTL -------------------------------------------------------------------------------
    def expire(self, key: bytes, seconds: float, *, sync: bool | None = None) -> bool:
        """Set a TTL on an existing key; False if it does not exist. ``seconds <= 0``
        deletes the key (as Redis's EXPIRE does). ``sync`` as for :meth:`put`."""
        self._require_open()
        if seconds <= 0:
            return self.delete(key, sync=sync)
        with self._lock:
            v = self._get_locked(key)
        if v is None:
            return False
        self.put(key, v, ttl=seconds, sync=sync)
        return True

    def expire_at(self, key: bytes, deadline_ms: int, *, sync: bool | None = None) -> bool:
        """Make ``key`` expire at ``deadline_ms`` (Unix time in milliseconds, kept exactly,
        as Redis's PEXPIREAT); False if it does not exist. A deadline already passed
        deletes the key. ``sync`` as for :meth:`put`."""
        self._require_open()
        if deadline_ms <= self._now_ms():
            return self.delete(key, sync=sync)
        with self._lock:
            v = self._get_locked(key)
            if v is None:
                return False
            self._check_writable()
            active = self._active
            self._put_exp(active, key, v, deadline_ms)  # the key exists: no ordered-view change
            active.bytes += len(key) + len(v) + RECORD_OVERHEAD_BYTES
            self.changes += 1
            if active.bytes >= self._hot_bytes:
                self._seal_locked()
        if sync or (sync is None and self._durability == "always"):
            self._wait(self._committer.ticket())
        return True

    def expires_at(self, key: bytes) -> int | None:
        """The Unix time in milliseconds at which ``key`` expires; None if it has no TTL.

        :raises NotFoundError: the key does not exist.
        """
        if self.get(key) is None:
            raise NotFoundError(key)
        return self._expiry.get(key)

    def persist(self, key: bytes, *, sync: bool | None = None) -> bool:
        """Drop the TTL of ``key``; False if the key is absent or has no TTL. ``sync`` as
        for :meth:`put`."""
        v = self.get(key)
        if v is None or key not in self._expiry:
            return False
        self.put(key, v, sync=sync)
        return True

    def ttl(self, key: bytes) -> float | None:
        """Remaining seconds before ``key`` expires; None if it has no TTL.

        :raises NotFoundError: the key does not exist.
        """
        if self.get(key) is None:
            raise NotFoundError(key)
        exp = self._expiry.get(key)
        return None if exp is None else max(0.0, (exp - self._now_ms()) / 1000)

    # -- ordered access ------------------------------------------------------------------
    def _require_open(self) -> None:
        if self._closed:
            raise ClosedError("the store is closed; open it again")

    def _exists_unlocked(self, key: bytes, now_ms: int) -> bool:
        """Whether ``key`` is live, without reading its value."""
        exp = self._expiry.get(key) if self._expiry else None
        if exp is not None and exp <= now_ms:
            return False
        for d in self._chain:
            v = d.get(key)
            if v is not None:
                return v is not TOMBSTONE
        return key in self._keydir

    def _ordered_view(self) -> OrderedKeys:
        """The ordered view of the keys, current with every write so far. Hold the lock.

        The first call sorts every key once (O(n log n)); later calls first fold in the keys
        written or deleted since (O(m log n) for m touched keys), so ordered reads under a
        write load cost what the writes did, not a re-sort. Keys whose TTL has passed but
        that the expiry sweep has not yet deleted may still be in it (see _expired_between).
        """
        ordered = self._ordered
        if ordered is None:
            # IMPORTANT: publish the (empty) view before the snapshot, so that a write
            # landing after the snapshot is recorded in _touched and folded in below.
            ordered = self._ordered = OrderedKeys()
            keys = set(self._keydir)
            for d in reversed(self._chain):
                # d.copy(), not list(d.items()): building the item tuples can run the
                # cyclic GC, whose finalizers may let a writer thread resize d mid-list
                # (RuntimeError); a dict copy allocates nothing per item.
                for k, v in d.copy().items():
                    if v is TOMBSTONE:
                        keys.discard(k)
                    else:
                        keys.add(k)
            ordered.update(keys)
        while self._touched or self._folding:
            self._fold_chunk_locked(len(self._touched) + len(self._folding))
        return ordered

    def _fold_locked(self, keys: list[bytes], flags: list[bool | None]) -> None:
        """Bring the ordered view up to date for ``keys`` (written or deleted; ``flags``:
        their values in ``_touched``). Hold the lock; the background thread folds in
        chunks (background.fold_touched)."""
        ordered = self._ordered
        if ordered is None:
            return
        self.keys_folded += len(keys)
        now = self._now_ms()
        live: list[bytes] = []
        gone: list[bytes] = []
        for k, f in zip(keys, flags, strict=True):  # direct calls: native ones compiled
            if f is None:
                f = self._exists_unlocked(k, now)
            if f:
                live.append(k)
            else:
                gone.append(k)
        # In bulk: each chunk of the view a run of keys reaches is changed once (a fold
        # key by key cost ~0.5-0.75 us per key, a quarter of a RESP server's core under
        # RPUSH -P 16).
        ordered.add_many(live)
        ordered.discard_many(gone)

    def _fold_chunk_locked(self, limit: int) -> None:
        """Fold up to ``limit`` touched keys (background.fold_touched, ordered reads). Hold
        the lock."""
        # The touched keys are taken whole (swapped for an empty dict: writers add to that
        # from now on) and folded from a list, ``limit`` keys per call. Popping keys from
        # a live set instead cost ~9 % of a RESP server's core under RPUSH -P 16 (a set
        # never shrinks, and pop scans its emptied slots), and sorting them in hash order
        # most of the rest. A put on the lock-free path that loaded the old dict before
        # the swap adds its key to the new one too (put).
        backlog = self._folding
        flags = self._folding_flags
        if not backlog:
            touched = self._touched
            if not touched:
                return
            self._touched = {}
            backlog = self._folding = list(touched)
            flags = self._folding_flags = list(touched.values())
        if len(backlog) <= limit:
            self._folding = []
            self._folding_flags = []
            self._fold_locked(backlog, flags)
            return
        chunk = backlog[-limit:]
        del backlog[-limit:]
        chunk_flags = flags[-limit:]
        del flags[-limit:]
        self._fold_locked(chunk, chunk_flags)

    def _expired_between(self, ordered: OrderedKeys, lo: bytes, hi: bytes | None) -> list[int]:
        """Positions in ``ordered`` of keys in [lo, hi) whose TTL has passed (sorted).

        They are the keys at the top of the expiry heap, usually few: the background
        sweep deletes them within ``expiry_interval_s``. The heap is walked as a tree,
        visiting only entries already due, so the cost is the number of due entries.
        """
        heap = self._expiry_heap
        if not heap or heap[0][0] > self._now_ms():
            return []
        now = self._now_ms()
        expiry = self._expiry
        out: set[int] = set()  # a key pushed twice with the same expiry counts once
        stack = [0]
        while stack:
            i = stack.pop()
            try:
                exp, k = heap[i]
            except IndexError:  # a writer thread pushed or popped meanwhile
                continue
            if exp > now:
                continue
            stack.append(2 * i + 1)
            stack.append(2 * i + 2)
            if expiry.get(k) == exp and k >= lo and (hi is None or k < hi):
                pos = ordered.bisect_left(k)
                if pos < len(ordered) and ordered[pos] == k:
                    out.add(pos)
        return sorted(out)

    def _ordered_keys(self, lo: bytes, hi: bytes | None, limit: int, *, reverse: bool = False,
                      skip: int = 0) -> list[bytes]:
        """Up to ``limit`` keys in [lo, hi) in order (a snapshot; some may have been deleted
        meanwhile), after the first ``skip`` live ones (positional: O(log n))."""
        self._require_open()
        with self._lock:
            ordered = self._ordered_view()
            if skip > 0:
                lo_i = ordered.bisect_left(lo)
                hi_i = len(ordered) if hi is None else ordered.bisect_left(hi)
                dead = self._expired_between(ordered, lo, hi)
                if not reverse:
                    pos = lo_i + skip
                    for d in dead:  # ascending: each dead key before pos moves it one on
                        if d < pos:
                            pos += 1
                    if pos >= hi_i:
                        return []
                    lo = ordered[pos]
                else:
                    pos = hi_i - skip  # keys at positions < pos remain
                    for d in reversed(dead):
                        if d >= pos:
                            pos -= 1
                    if pos <= lo_i:
                        return []
                    hi = ordered[pos]
            return ordered.between(lo, hi, limit, reverse=reverse)

    def _ordered_iter(self, prefix: bytes, start: bytes | None, end: bytes | None, *,
                      reverse: bool = False, skip: int = 0) -> Iterator[bytes]:
        """Keys in order, fetched in chunks so a short scan costs O(chunk log n)."""
        lo, hi = self._prefix_range(prefix, start, end)
        chunk = SCAN_CHUNK
        while True:
            keys = self._ordered_keys(lo, hi, chunk, reverse=reverse, skip=skip)
            skip = 0
            for k in keys:
                if k.startswith(prefix):
                    yield k
            if len(keys) < chunk:
                return
            if reverse:
                hi = keys[-1]  # exclusive: the next chunk ends just before the last one
            else:
                lo = keys[-1] + b"\x00"  # the smallest key after the last one
            chunk = min(chunk * 4, 1 << 16)

    def _prefix_range(self, prefix: bytes, start: bytes | None,
                      end: bytes | None) -> tuple[bytes, bytes | None]:
        return prefix_range(prefix, start, end)

    def scan_keys(self, prefix: bytes = b"", start: bytes | None = None,
                  end: bytes | None = None, *, reverse: bool = False,
                  skip: int = 0) -> Iterator[bytes]:
        """Live keys in key order (``prefix`` match, ``start`` <= key < ``end``), without
        reading values; ``reverse`` walks from the end; ``skip`` passes over that many
        live keys first in O(log n) (a seek by position)."""
        live = self._exists_unlocked
        now = self._now_ms()
        for k in self._ordered_iter(prefix, start, end, reverse=reverse, skip=skip):
            if live(k, now):
                yield k

    def keys_in_range(self, prefix: bytes = b"", start: bytes | None = None,
                      end: bytes | None = None) -> list[bytes]:
        """The live keys :meth:`scan_keys` would yield, as one list, for a reader that takes
        a whole range at once (a geo search's cell): one slice of the ordered view under
        the lock (current with every write then, see :meth:`_ordered_view`), and only the
        keys that have a TTL looked at one by one, where ``scan_keys`` tests every key."""
        self._require_open()
        lo, hi = self._prefix_range(prefix, start, end)
        now = self._now_ms()
        with self._lock:
            ordered = self._ordered_view()
            keys = ordered.between(lo, hi, len(ordered))
            expiry = self._expiry
            if expiry and keys:
                timed = expiry.keys() & keys
                if timed:
                    dead = {k for k in timed if expiry[k] <= now}
                    if dead:
                        keys = [k for k in keys if k not in dead]
        if hi is None and prefix:
            keys = [k for k in keys if k.startswith(prefix)]
        return keys

    def keys_between(self, lo: bytes, hi: bytes, limit: int, *, reverse: bool = False,
                     skip: int = 0) -> list[bytes]:
        """Up to ``limit`` keys in [lo, hi), in order (descending from ``hi`` with
        ``reverse``, after the first ``skip``), as the ordered view holds them: one C
        slice under the lock, the view current with every write. TTLs are not looked at:
        for keys that never have one (a collection's elements), where ``scan_keys`` tests
        every key it yields (a keydir lookup each, a cache miss in a large store)."""
        return self._ordered_keys(lo, hi, limit, reverse=reverse, skip=skip)

    def items_in_range(self, prefix: bytes = b"", start: bytes | None = None,
                       end: bytes | None = None) -> list[tuple[bytes, bytes]]:
        """The (key, value) pairs :meth:`scan` would yield, as one list: the keys of
        :meth:`keys_in_range` and their values by one :meth:`get_many` (C loops over the
        dicts, where ``scan`` makes a ``get`` call per key)."""
        keys = self.keys_in_range(prefix, start, end)
        return [(k, v) for k, v in zip(keys, self.get_many(keys), strict=True) if v is not None]

    def scan(self, prefix: bytes = b"", start: bytes | None = None,
             end: bytes | None = None, *, reverse: bool = False,
             skip: int = 0) -> Iterator[tuple[bytes, bytes]]:
        """(key, value) pairs in key order: ``prefix`` match, ``start`` <= key < ``end``
        (a seek: O(log n) to the first key); ``reverse`` and ``skip`` as in scan_keys."""
        get = self.get
        for k in self._ordered_iter(prefix, start, end, reverse=reverse, skip=skip):
            v = get(k)
            if v is not None:
                yield k, v

    def count(self, prefix: bytes = b"", start: bytes | None = None,
              end: bytes | None = None) -> int:
        """How many live keys ``scan`` would yield, in O(log n) (plus the keys whose TTL
        passed moments ago and are not yet swept) once the ordered view exists."""
        lo, hi = self._prefix_range(prefix, start, end)
        if hi is not None and hi <= lo:
            return 0
        self._require_open()
        with self._lock:
            ordered = self._ordered_view()
            n = (len(ordered) if hi is None else ordered.bisect_left(hi)) \
                - ordered.bisect_left(lo)
            return n - len(self._expired_between(ordered, lo, hi))

    def __iter__(self) -> Iterator[bytes]:
        return self.scan_keys()

    def __len__(self) -> int:
        return self.count()

    def __getitem__(self, key: bytes) -> bytes:
        v: bytes | None = self.get(key)
        if v is None:
            raise NotFoundError(key)
        return v

    def __setitem__(self, key: bytes, value: bytes) -> None:
        self.put(key, value)

    def __delitem__(self, key: bytes) -> None:
        if not self.delete(key):
            raise NotFoundError(key)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, (bytes, str)) and self.get(key) is not None

    # -- server hooks ----------------------------------------------------------------------
    @property
    def durability(self) -> str:
        return self._durability

    @property
    def poisoned(self) -> BaseException | None:
        """The failed write or fsync that poisoned the store (every later write raises
        PoisonedError until it is reopened), or None."""
        return self._poison.cause

    @property
    def key_id(self) -> int:
        """Id of the encryption key the store writes with (0: not encrypted)."""
        return self._codec.key_id

    def write_ticket(self) -> int:
        """A ticket covering every write issued so far (see :meth:`when_durable`)."""
        self._require_open()
        with self._lock:
            return self._committer.ticket()

    def when_durable(self, ticket: int, since: int = 0) -> Future[None]:
        """A future done once the writes covered by ``ticket`` are fsynced (and, on a
        cluster leader, confirmed: refused when any round from ``since``, a ticket taken
        before the first of the caller's writes, was not; ``GroupCommitter.future``).

        With ``durability="none"`` nothing is logged, so the hot tier is sealed and the
        future is done once it has been spilled (as ``sync()`` would).
        """
        self._require_open()
        if not self._logged:
            # Nothing is logged: durability means the hot tier's spill. Seal what is there
            # and let the background thread resolve the future once everything is spilled.
            fut: Future[None] = Future()
            with self._lock:
                self._check_open()
                if self._active.index:
                    self._seal_locked(wait=False)
                self._requests.append(("spill_until", None, fut))
                self._space_cv.notify_all()
            return fut
        return self._committer.future(ticket, since)

    def commit_soon(self) -> None:
        """Start a group-commit round now on the committer thread, without waiting for it:
        a writer that has more work to do before it waits (a bulk insert's indexing) gets
        its fsync done meanwhile. Does nothing when nothing is logged."""
        self._require_open()
        if self._logged:
            self._committer.kick()

    def wait_durable(self, ticket: int) -> None:
        """Block until the writes covered by ``ticket`` are fsynced.

        When no round is running, the caller runs it itself (drain, write, fsync) rather
        than waking the committer thread: a server loop that calls this once per loop
        iteration pays no thread hand-off, the way Redis fsyncs in ``beforeSleep``.
        """
        self._require_open()
        if not self._logged:
            self.when_durable(ticket).result()
            return
        self._committer.wait(ticket, gather=False)

    def begin_round(self, settle: Callable[[], None]) -> tuple[int, Any] | None:
        """A group-commit round whose fsync the caller does (see
        :meth:`GroupCommitter.begin_round`): ``(round, staged)`` with ``staged.sync_requests()``
        to fsync, then ``staged.finish(synced=True)`` and :meth:`end_round`. None when
        nothing is logged or a round is running: use :meth:`wait_durable` then."""
        self._require_open()
        if not self._logged:
            return None
        return self._committer.begin_round(settle)

    def end_round(self, number: int, staged: Any, error: BaseException | None) -> None:
        if error is None:
            try:
                staged.finish(synced=True)
            except Exception as exc:  # noqa: BLE001 - closing a sealed log failed: poison
                error = exc
        self._committer.end_round(number, staged.records, error)

    def set_durability(self, mode: str, interval_ms: int | None = None) -> None:
        """Change durability live; the active segment is sealed when logging turns on/off."""
        if mode not in DURABILITY_MODES:
            raise ProgrammingError(f"durability must be one of {DURABILITY_MODES}")
        with self._lock:
            self._check_open()
            if interval_ms is not None:
                self._interval_ms = interval_ms
            logged = mode != "none"
            self._durability = mode
            self._use_spares(mode)
            self._space_cv.notify_all()
            if logged != self._logged:
                self._logged = logged
                if self._active.index:
                    self._seal_locked()
                else:
                    self._active = HotSegment(self._active.id, logged=logged)
                    if logged:
                        self._unflushed.append(self._active)
                    self._rechain()
        self._committer.set_interval(self._commit_interval())

    # -- maintenance -----------------------------------------------------------------------
    def sync(self) -> None:
        """Make every write so far durable (seal and spill when no log is kept)."""
        if self._logged:
            with self._lock:
                self._check_open()
                ticket = self._committer.ticket()
            self._committer.wait(ticket)
            return
        with self._lock:
            self._check_open()
            if self._active.index:
                self._seal_locked()
            target = self._active.id
        self._request("spill_until", target)

    def compact(self) -> dict[str, int]:
        """Spill the hot tier and merge cold segments with dead records; return a summary."""
        self.sync()
        summary: dict[str, int] = self._request("compact", None)
        return summary

    def check(self) -> list[str]:
        """Verify checksums, hint files and keydir/log agreement; problems as strings."""
        self._require_open()
        return check_store(self)

    def stats(self) -> dict[str, Any]:
        self._require_open()
        return store_stats(self)

    def _request(self, what: str, arg: Any) -> Any:
        fut: Future[Any] = Future()
        with self._lock:
            if self._closed:
                raise ClosedError("the store is closed; open it again")
            self._requests.append((what, arg, fut))
            self._space_cv.notify_all()
        return fut.result()

    def close(self) -> None:
        """Spill the hot tier, fsync, stop background threads, release the directory.

        :raises PoisonedError: a write, fsync or spill failed and no earlier call has
            reported it; what was not yet durable is lost (reopen to see what is on disk).
        """
        with self._lock:
            if self._closed or self._closing:
                return
            # IMPORTANT: from here every new call raises ClosedError. A put already past its
            # check lands in a segment marked sealed below, so its slow path raises too:
            # a put either raises or its write is in the final spill.
            self._closed = True
            self._closing = True
            if self._active.index and not self._poison:
                self._seal_locked(wait=False)
            self._active.sealed = True  # the (empty) segment after the last one
            self._space_cv.notify_all()
        self._bg.join()
        self._committer.close()
        if self._spares is not None:
            self._spares.discard()
        with self._lock:
            self._chain = ({},)  # frees the hot tier; every read checks _closed first
        for seg in list(self._open_segs.values()):
            seg.close()
        if self._tier is not None:
            self._tier.close()
        self._cache.clear()
        self._dirlock.release()
        # A failure nobody has been told about (a background spill in "none" mode, say)
        # must not look like a clean close; one already reported is not raised again.
        if not self._poison.reported:
            self._poison.check()

    def __enter__(self) -> KVStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<KVStore {str(self._dir)!r} durability={self._durability}>"
