"""Tiering ("bottomless"): cold segments kept in an archive instead of on the local disk.

A cold segment is immutable, so once its exact bytes are in the archive (``tuffdb serve
--archive``) the local copy is only a cache. :func:`tier_out` drops it: the segment's
hint file stays (the keys are in memory anyway), and a small **stub** ``<id>.tier``
replaces the ``.dat``: the segment's header and its tail (block index, footer, trailer:
all that opening a segment validates) plus where its bytes are (archive URL, object key,
size, CRC-32C). Format: docs/format/kv.md ("Tier stubs"). A read of a tiered block goes
through :class:`TierCache`: fixed-size, aligned parts of the object on local disk,
least recently used out first, at most ``tier_cache_bytes``; a miss is one ranged GET.
Every block read verifies the block frame's CRC-32C (as for a local segment); a
mismatch drops the cached parts and fetches them once more, then raises a
``CorruptionError`` naming the object. A missing object is a ``CorruptionError`` too
(never a "no such key": the keydir says the key exists).

Crash safety: the stub is written and fsynced (temp file, rename, directory fsync)
before the ``.dat`` is unlinked; on open a segment with both keeps its local file and
drops the stub. The archiver (backup/archive.py) decides what to tier: only objects its
stored head lists, verified by reading them back; this module only swaps segments.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING

from tuffdb import metrics
from tuffdb._format.record import COMMIT, Kind, encode_frame, scan_frames
from tuffdb._format.segment import SEGMENT_HEADER_SIZE, FileKind, SegmentHeader, unpack_header
from tuffdb.errors import CorruptionError, NotFoundError, OperationalError
from tuffdb.kv.cold import STUB_SUFFIX, ColdSegment, data_path, parse_segment
from tuffdb.storage.copy import file_crc
from tuffdb.storage.files import list_ids, segment_name, write_file_durably
from tuffdb.storage.objstore import TransientError, shared_target
from tuffdb.storage.shipping import RemoteFile

if TYPE_CHECKING:
    from tuffdb.kv.store import KVStore
    from tuffdb.storage.codec import Codec

CACHE_DIR = ".tier-cache"
#: Bytes per cached part: one ranged GET on a miss, one file in the cache.
PART_SIZE = 1 << 20
FETCH_TRIES = 4
FETCH_BACKOFF_S = 0.1

TIERED_SEGMENTS = metrics.REGISTRY.counter(
    "tuffdb_kv_tiered_segments_total", "cold segments whose local file was dropped (tiered)")
TIER_FETCHES = metrics.REGISTRY.counter(
    "tuffdb_kv_tier_fetches_total", "parts of tiered segments fetched from the archive")
TIER_HITS = metrics.REGISTRY.counter(
    "tuffdb_kv_tier_cache_hits_total", "reads of tiered segments served by the local cache")


def stub_path(directory: Path, seg_id: int) -> Path:
    return directory / segment_name(seg_id, STUB_SUFFIX)


# -- stubs ---------------------------------------------------------------------------------
def stub_bytes(seg: ColdSegment, ref: RemoteFile, head: bytes, tail: bytes) -> bytes:
    """A stub file: header (KV_TIER), a META frame (where the bytes are), a
    KV_SEGMENT_TAIL frame (the segment's header, then its bytes from the block index on)."""
    doc = {"url": ref.url, "object": ref.object, "size": ref.size, "crc32c": ref.crc32c,
           "tail_offset": seg.meta["index_offset"]}
    hdr = SegmentHeader(FileKind.KV_TIER, 0, seg.id, int(time.time() * 1000),
                        seg.codec.key_id).pack()
    return b"".join([hdr, encode_frame(Kind.META, json.dumps(doc, sort_keys=True).encode()),
                     encode_frame(Kind.KV_SEGMENT_TAIL, head + tail, COMMIT)])


def read_stub(path: Path) -> tuple[RemoteFile, int, int, bytes, bytes]:
    """(where the bytes are, segment id, tail offset, segment header, tail) of a stub.

    :raises CorruptionError: a damaged stub.
    """
    where = str(path)
    raw = path.read_bytes()
    hdr = unpack_header(raw[:SEGMENT_HEADER_SIZE], where)
    if hdr.file_kind != FileKind.KV_TIER:
        raise CorruptionError("not a tier stub", path=where)
    res = scan_frames(raw, SEGMENT_HEADER_SIZE)
    if (res.error or len(res.frames) != 2 or res.frames[0].kind != Kind.META
            or res.frames[1].kind != Kind.KV_SEGMENT_TAIL):
        raise CorruptionError(res.error or "a tier stub holds a META and a KV_SEGMENT_TAIL frame",
                              path=where)
    try:
        doc = json.loads(res.frames[0].payload)
        ref = RemoteFile(str(doc["url"]), str(doc["object"]), int(doc["size"]),
                         int(doc["crc32c"]))
        tail_offset = int(doc["tail_offset"])
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptionError(f"bad tier stub: {exc!r}", path=where) from None
    body = res.frames[1].payload
    return ref, hdr.base_address, tail_offset, body[:SEGMENT_HEADER_SIZE], body[SEGMENT_HEADER_SIZE:]


def stubs_in(directory: Path) -> dict[str, RemoteFile]:
    """The tiered segments of a KV directory: ``<id>.dat`` name -> where its bytes are."""
    out = {}
    for sid in list_ids(directory, STUB_SUFFIX):
        if not data_path(directory, sid).exists():
            out[data_path(directory, sid).name] = read_stub(stub_path(directory, sid))[0]
    return out


# -- the cache -----------------------------------------------------------------------------
class TierCache:
    """Aligned :data:`PART_SIZE` parts of archived objects in a local directory, least
    recently used out first once they pass ``limit`` bytes. A cache, not a store: not
    fsynced, emptied when the store opens; every block read from it is checksummed."""

    def __init__(self, directory: Path, limit: int) -> None:
        self.directory = directory
        self.limit = max(limit, PART_SIZE)
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        self._parts: OrderedDict[tuple[str, int], int] = OrderedDict()
        self._bytes = 0
        self._mu = threading.Lock()
        self._fetching: dict[tuple[str, int], threading.Event] = {}
        self.hits = 0
        self.misses = 0

    def _file(self, obj: str, part: int) -> Path:
        digest = hashlib.blake2b(obj.encode(), digest_size=10).hexdigest()
        return self.directory / f"{digest}-{part:08d}"

    def read(self, ref: RemoteFile, offset: int, length: int) -> bytes:
        """Bytes ``[offset, offset + length)`` of ``ref``'s object."""
        out = []
        pos, end = offset, offset + length
        while pos < end:
            n = pos // PART_SIZE
            hi = min(end, (n + 1) * PART_SIZE) - n * PART_SIZE
            out.append(self._part_range(ref, n, pos - n * PART_SIZE, hi))
            pos = n * PART_SIZE + hi
        return out[0] if len(out) == 1 else b"".join(out)

    def evict(self, ref: RemoteFile, offset: int, length: int) -> None:
        """Forget the cached parts covering a range (a block failed its checksum)."""
        with self._mu:
            for n in range(offset // PART_SIZE, (offset + length - 1) // PART_SIZE + 1):
                self._drop((ref.object, n))

    def _drop(self, key: tuple[str, int]) -> None:
        size = self._parts.pop(key, None)
        if size is not None:
            self._bytes -= size
            self._file(*key).unlink(missing_ok=True)

    def _part_range(self, ref: RemoteFile, n: int, lo: int, hi: int) -> bytes:
        """Bytes ``[lo, hi)`` of part ``n`` of ``ref``'s object: from the cache, or
        fetched whole (once, however many readers miss it at the same time)."""
        key = (ref.object, n)
        while True:
            fetch = False  # (no break inside the lock: the compiled build cannot)
            with self._mu:
                waiting: threading.Event | None = None
                if key in self._parts:
                    self._parts.move_to_end(key)
                else:
                    waiting = self._fetching.get(key)
                    if waiting is None:
                        self._fetching[key] = threading.Event()
                        fetch = True
            if fetch:
                break
            if waiting is not None:
                waiting.wait()  # another reader is fetching it
                continue
            try:
                fd = os.open(self._file(*key), os.O_RDONLY)
            except FileNotFoundError:
                continue  # evicted meanwhile
            try:
                data = os.pread(fd, hi - lo, lo)
            finally:
                os.close(fd)
            if len(data) == hi - lo:
                self.hits += 1
                TIER_HITS.inc()
                return data
            with self._mu:  # a short part file: fetch it again
                self._drop(key)
        try:
            data = _fetch(ref, n * PART_SIZE, min(ref.size, (n + 1) * PART_SIZE))
            path = self._file(*key)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_bytes(data)
            tmp.replace(path)
            with self._mu:
                self.misses += 1
                self._parts[key] = len(data)
                self._bytes += len(data)
                while self._bytes > self.limit and len(self._parts) > 1:
                    self._drop(next(iter(self._parts)))
            TIER_FETCHES.inc()
            return data[lo:hi]
        finally:
            with self._mu:
                self._fetching.pop(key).set()

    @property
    def bytes(self) -> int:
        return self._bytes


def _fetch(ref: RemoteFile, start: int, end: int) -> bytes:
    """Bytes ``[start, end)`` of an archived object, retried with backoff.

    :raises CorruptionError: the object is missing or shorter than recorded.
    :raises OperationalError: the archive cannot be reached.
    """
    where = f"{ref.url}/{ref.object}"
    delay = FETCH_BACKOFF_S
    for attempt in range(FETCH_TRIES):
        try:
            data = shared_target(ref.url).get_range(ref.object, start, end)
        except NotFoundError:
            raise CorruptionError(f"{where} is missing: a tiered segment's bytes are gone from "
                                  "the archive", path=where) from None
        except (TransientError, OSError) as exc:
            if attempt + 1 == FETCH_TRIES:
                raise OperationalError(f"reading tiered segment bytes from {where} failed "
                                       f"{FETCH_TRIES} times: {exc}") from None
            time.sleep(delay)
            delay *= 4
            continue
        if len(data) != end - start:
            raise CorruptionError(f"{where} is shorter than the {ref.size} bytes recorded",
                                  path=where, offset=start + len(data))
        return data
    raise AssertionError("unreachable")


# -- tiered segments -------------------------------------------------------------------------
class TieredSegment(ColdSegment):
    """A cold segment whose bytes are read from the archive through a :class:`TierCache`."""

    def __init__(self, seg: ColdSegment, ref: RemoteFile, cache: TierCache) -> None:
        # The same segment (id, footer, block index, accounting): only its bytes move.
        self.adopt(seg)
        self.file_size = ref.size
        self._file = None
        self.ref = ref
        self._cache = cache
        self._open = True

    @property
    def tiered(self) -> bool:
        return True

    @classmethod
    def from_stub(cls, directory: Path, seg_id: int, codec: Codec, cache: TierCache,
                  ) -> TieredSegment:
        """Open tiered segment ``seg_id`` from its stub: no archive access."""
        path = stub_path(directory, seg_id)
        ref, base, tail_offset, head, tail = read_stub(path)
        where = str(path)

        def read(n: int, off: int) -> bytes:
            if off + n <= len(head):
                return head[off : off + n]
            if off >= tail_offset and off + n <= ref.size:
                return tail[off - tail_offset : off - tail_offset + n]
            raise CorruptionError(f"the stub holds no bytes at {off}..{off + n}", path=where)

        sid, meta, index = parse_segment(read, ref.size, where, codec)
        if sid != seg_id or base != seg_id:
            raise CorruptionError(f"the stub is for segment {sid}, not {seg_id}", path=where)
        local = ColdSegment(data_path(directory, seg_id), None, sid, meta, index, codec, ref.size)
        return cls(local, ref, cache)

    def _read(self, size: int, offset: int) -> bytes:
        if not self._open:
            raise CorruptionError("segment closed", path=str(self.path))
        return self._cache.read(self.ref, offset, size)

    def read_block(self, block_no: int) -> bytes:
        try:
            return super().read_block(block_no)
        except CorruptionError:
            if not self._open:
                raise
        # A damaged cached part or a damaged object: fetch the parts once more.
        off, size = self.block_span(block_no)
        self._cache.evict(self.ref, off, size)
        try:
            return super().read_block(block_no)
        except CorruptionError as exc:
            where = f"{self.ref.url}/{self.ref.object}"
            raise CorruptionError(f"tiered segment {self.id} is damaged in the archive: "
                                  f"{where}, block {block_no}: {exc.reason}", path=where,
                                  offset=off) from None

    def close(self) -> None:
        self._open = False


# -- the store's side ---------------------------------------------------------------------------
class Tier:
    """A store's tiering state (``KVStore._tier``): its cache, and the local segments
    swapped out whose descriptors a reader may still be using (closed one swap later)."""

    def __init__(self, store: KVStore) -> None:
        self.cache = TierCache(store._dir / CACHE_DIR, store._tier_cache_bytes)
        self.retired: list[ColdSegment] = []

    def close(self) -> None:
        for seg in self.retired:
            seg.close()
        self.retired = []


def tier_of(store: KVStore) -> Tier:
    if store._tier is None:
        store._tier = Tier(store)
    return store._tier  # type: ignore[no-any-return]


def open_stubs(store: KVStore, segs: dict[int, ColdSegment]) -> None:
    """Recovery: open every tiered segment of ``store`` into ``segs``; a stub whose local
    segment still exists (a crash before its ``.dat`` was unlinked) is dropped."""
    d = store._dir
    for sid in list_ids(d, STUB_SUFFIX):
        if sid in segs:
            stub_path(d, sid).unlink()
            continue
        segs[sid] = TieredSegment.from_stub(d, sid, store._codec, tier_of(store).cache)


def local_segments(store: KVStore) -> list[ColdSegment]:
    """The store's cold segments with a local file, oldest (lowest seq) first."""
    with store._bg_mutex:
        return [s for s in store._cold_order if not s.tiered]


def tier_out(store: KVStore, seg_id: int, ref: RemoteFile) -> bool:
    """Replace segment ``seg_id``'s local file by a stub pointing at ``ref`` (an archived
    copy the caller has verified); False when the segment is gone or tiered already.

    :raises CorruptionError: the local file's checksum differs from ``ref``'s (nothing
        is changed).
    """
    tier = tier_of(store)
    with store._bg_mutex:
        store._require_open()
        seg = store._cold.get(seg_id)
        if seg is None or seg.tiered:
            return False
        if file_crc(seg.path) != (ref.crc32c, ref.size):
            raise CorruptionError(f"segment {seg_id} differs from its archived copy "
                                  f"{ref.url}/{ref.object}: not tiered", path=str(seg.path))
        fd = os.open(seg.path, os.O_RDONLY)
        try:
            head = os.pread(fd, SEGMENT_HEADER_SIZE, 0)
            tail = os.pread(fd, ref.size - seg.meta["index_offset"], seg.meta["index_offset"])
        finally:
            os.close(fd)
        write_file_durably(stub_path(store._dir, seg_id), stub_bytes(seg, ref, head, tail))
        tiered = TieredSegment(seg, ref, tier.cache)
        with store._lock:
            store._cold[seg_id] = tiered
            store._cold_order = [tiered if s is seg else s for s in store._cold_order]
            store._open_segs[seg_id] = tiered
        # A reader that took ``seg`` just before the swap may still read through its
        # descriptor: it is closed one swap later (or when the store closes).
        old, tier.retired = tier.retired, [seg]
        for s in old:
            s.close()
        seg.path.unlink()
        TIERED_SEGMENTS.inc()
        return True
