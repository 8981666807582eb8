"""Opening a KV directory, and writing the hot-tier log (spec: docs/design/recovery.md).

Open, step by step:
1. Remove ``*.tmp`` leftovers (an unfinished atomic write never became visible).
2. Open every cold segment, and every tiered one from its stub (kv/tier.py; a stub
   beside its segment's own file is a tiering that did not finish: the file stays).
3. Delete segments that a complete merge output lists in ``supersedes``.
4. In (seq, id) order, load each segment's hint (rebuilding a missing or damaged one from
   the data) into the keydir; tombstones remove keys.
5. Delete hot-tier logs whose segment id is <= the highest spilled seq (spilled already);
   replay the rest, truncating a torn tail, into sealed hot segments queued for spill.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tuffdb import metrics
from tuffdb._failpoints import failpoint
from tuffdb._format.kv import OP_DELETE, OP_PUT
from tuffdb._format.record import COMMIT, Kind, frame_header
from tuffdb._format.segment import SEGMENT_HEADER_SIZE, FileKind
from tuffdb.errors import CorruptionError
from tuffdb.kv.cold import (
    DATA_SUFFIX,
    HINT_SUFFIX,
    ColdSegment,
    Entries,
    data_path,
    hint_path,
    load_hint,
    segment_files,
    write_hint,
)
from tuffdb.kv import tier
from tuffdb.kv.hot_tier import RECORD_OVERHEAD_BYTES, TOMBSTONE, HotSegment
from tuffdb.kv.records import encode_pending, iter_records
from tuffdb.storage.codec import LOG_ZSTD_LEVEL
from tuffdb.storage.files import list_ids, remove_durably, remove_quietly, segment_name
from tuffdb.storage.log_file import LogFile
from tuffdb.storage.shipping import Part

if TYPE_CHECKING:
    from tuffdb.kv.store import KVStore

WAL_SUFFIX = ".log"
LOG_COMPRESS_MIN_BYTES = 64 << 10


@dataclass
class RecoveryStats:
    bytes_dropped: int = 0
    dropped_reasons: list[str] = field(default_factory=list)
    hints_rebuilt: int = 0
    incomplete_removed: int = 0
    wal_segments_replayed: int = 0


def recover(store: KVStore) -> int:
    """Load the directory into ``store``; return the next free segment id."""
    d: Path = store._dir
    stats = store.recovery
    for name in os.listdir(d):
        if name.endswith(".tmp"):
            os.unlink(d / name)
            stats.incomplete_removed += 1
    segs: dict[int, ColdSegment] = {}
    for sid in list_ids(d, DATA_SUFFIX):
        # Cold segments are written as .tmp and renamed once complete and fsynced, so a
        # .dat that fails validation is damage, never an unfinished write: refuse it.
        segs[sid] = ColdSegment.open(data_path(d, sid), store._codec)
    tier.open_stubs(store, segs)
    for seg in list(segs.values()):
        for old in seg.supersedes:
            gone = segs.pop(old, None)
            if gone is not None:
                gone.close()
                remove_durably(segment_files(d, old))
    order = sorted(segs.values(), key=lambda s: (s.seq, s.id))
    now = store._now_ms()
    for seg in order:
        apply_entries(store, seg, _entries(store, seg), now)
    store._cold = {s.id: s for s in order}
    store._open_segs = dict(store._cold)
    store._cold_order = order
    max_seq = max((s.seq for s in order), default=0)
    max_id = max((s.id for s in order), default=0)
    for wid in list_ids(d, WAL_SUFFIX):
        path = d / segment_name(wid, WAL_SUFFIX)
        max_id = max(max_id, wid)
        if wid <= max_seq or path.stat().st_size < SEGMENT_HEADER_SIZE:
            # Spilled already, or a crash while creating it (its header is written and
            # fsynced before any record, so a short file holds nothing acknowledged).
            remove_durably([path])
            continue
        store._sealed.append(_replay_wal(store, wid, path))
        stats.wal_segments_replayed += 1
    for name in os.listdir(d):
        if name.endswith(HINT_SUFFIX):
            stem = name[: -len(HINT_SUFFIX)]
            if stem.isdigit() and int(stem) not in segs:
                remove_durably([d / name])
    return max_id + 1


def _entries(store: KVStore, seg: ColdSegment) -> Entries:
    path = hint_path(store._dir, seg.id)
    try:
        return load_hint(path, seg.id, store._codec)
    except (CorruptionError, FileNotFoundError):
        entries = seg.entries()
        write_hint(store._dir, seg.id, entries, store._codec)
        store.recovery.hints_rebuilt += 1
        return entries


def apply_entries(store: KVStore, seg: ColdSegment, e: Entries, now_ms: int) -> None:
    """Apply one segment's key table on top of the keydir (later segments win)."""
    kd = store._keydir
    expiry = store._expiry
    locs = e.locations(seg.id)
    if not len(e.keys):
        return
    if bool((e.ops == OP_PUT).all()):
        puts_k, puts_l, dels = e.keys, locs, []
    else:
        mask = (e.ops == OP_PUT).tolist()
        puts_k = [k for k, m in zip(e.keys, mask, strict=True) if m]
        puts_l = [x for x, m in zip(locs, mask, strict=True) if m]
        dels = [k for k, m in zip(e.keys, mask, strict=True) if not m]
    if expiry:
        for k in puts_k:
            expiry.pop(k, None)
    kd.update(zip(puts_k, puts_l))
    for k in dels:
        kd.pop(k, None)
        expiry.pop(k, None)
    for i, exp in e.ttl.items():
        k = e.keys[i]
        if int(e.ops[i]) != OP_PUT:
            continue
        if exp <= now_ms:
            kd.pop(k, None)
        else:
            expiry[k] = exp
            store._expiry_heap.append((exp, k))


def _replay_wal(store: KVStore, wid: int, path: Path) -> HotSegment:
    log, frames = LogFile.open_existing(
        path, file_kind=FileKind.KV_LOG, key_id=store._codec.key_id, poison=store._poison
    )
    log.close()
    if log.bytes_dropped:
        store.recovery.bytes_dropped += log.bytes_dropped
        store.recovery.dropped_reasons.append(f"{path.name}: {log.drop_reason}")
    seg = HotSegment(wid, logged=False)
    seg.sealed = True
    seg.wal_path = path
    index, expiry = seg.index, seg.expiry
    gexp = store._expiry
    for f in frames:
        if f.kind != Kind.KV_BATCH:
            raise CorruptionError(f"unexpected frame kind {f.kind}", path=str(path), offset=f.offset)
        body = store._codec.decode(f.flags, f.payload, str(path))
        for r in iter_records(body, str(path)):
            k = r.key
            if r.op == OP_DELETE:
                index[k] = TOMBSTONE
                expiry.pop(k, None)
                gexp.pop(k, None)
            elif r.expiry_ms:
                index[k] = r.value
                expiry[k] = gexp[k] = r.expiry_ms
                store._expiry_heap.append((r.expiry_ms, k))
            else:
                index[k] = r.value
                expiry.pop(k, None)
                gexp.pop(k, None)
            seg.bytes += len(k) + len(r.value) + RECORD_OVERHEAD_BYTES
    seg.pending = None
    return seg


def write_wal_batches(
    store: KVStore, work: list[tuple[HotSegment, list[object] | None, bool]]
) -> int:
    """Committer thread: append each segment's pending records as one frame, fsync, and
    close the logs of sealed segments. Returns the number of records written.

    A cluster leader's tap gets the round before the fsync: followers receive and fsync it
    while this one does (its writers are answered only after both; a failed fsync here
    poisons the store, so a round shipped and not made durable here is never answered:
    cluster/sequencer.py)."""
    staged = stage_wal_batches(store, work)
    staged.tap()
    for wal in staged.touched:
        wal.sync()
    staged.finish()
    return staged.records


class StagedWal:
    """A round's frames appended to its logs but not yet fsynced (:func:`stage_wal_batches`):
    fsync :meth:`sync_requests` by any means, then call :meth:`finish`. ``tap_parts`` are
    the round's frames as ``(log name, file offset, bytes)``, for ``KVStore.round_tap``."""

    def __init__(self, store: KVStore, touched: list[LogFile], finished: list[HotSegment],
                 records: int, parts: list[Part] | None = None,
                 tap_parts: list[tuple[str, int, bytes]] | None = None) -> None:
        self.store, self.touched, self.finished, self.records = store, touched, finished, records
        self.parts = parts  # what the round wrote, for the shipping seam (None: nobody listens)
        self.tap_parts = tap_parts  # the same, for a cluster leader's round_tap (None: none)

    def tap(self) -> None:
        """Hand the round's frames to a cluster leader's ``round_tap`` (once)."""
        tap, parts, self.tap_parts = self.store.round_tap, self.tap_parts, None
        if tap is not None and parts:
            tap(parts)

    def sync_requests(self) -> list[tuple[int, bool]]:
        """The ``(fd, data_only)`` pairs to fsync (failpoints as ``fsync_fd`` has them)."""
        reqs = [req for wal in self.touched if (req := wal.sync_request()) is not None]
        for _ in reqs:
            failpoint("before_fsync")
        return reqs

    def finish(self, *, synced: bool = False) -> None:
        """After the fsyncs (``synced``: done outside LogFile.sync, e.g. by AIO): report the
        round to the shipping seam, count the records, close the logs of sealed segments,
        drop logs already spilled."""
        if synced:
            for wal in self.touched:
                wal.mark_synced()
        store = self.store
        if self.parts:
            store.shipper.round(self.parts)
        if self.records:
            metrics.KV_PUTS.inc(self.records)
        self.tap()
        for seg in self.finished:
            if seg.wal is not None:
                seg.wal.close()
            with store._lock:
                seg.pending = None
                store._finishing.discard(seg.id)
                doomed = seg.spilled and seg.wal_path is not None
            if doomed:
                remove_quietly([seg.wal_path])  # type: ignore[list-item]
                store.shipper.removed(seg.wal_path.name)  # type: ignore[union-attr]


def stage_wal_batches(
    store: KVStore, work: list[tuple[HotSegment, list[object] | None, bool]]
) -> StagedWal:
    """Append each segment's pending records as one frame (no fsync)."""
    codec = store._codec
    touched: list[LogFile] = []
    finished: list[HotSegment] = []
    records = 0
    parts: list[Part] | None = [] if store.shipper.feeds else None
    tap_parts: list[tuple[str, int, bytes]] | None = [] if store.round_tap is not None else None
    for seg, chunks, final in work:
        if chunks:
            if seg.wal is None:
                seg.wal_path = store._dir / segment_name(seg.id, WAL_SUFFIX)
                spares = store._spares
                spare = spares.take() if spares is not None else None
                seg.wal = LogFile.create(seg.wal_path, file_kind=FileKind.KV_LOG,
                                         base_address=seg.id, key_id=codec.key_id,
                                         poison=store._poison, spare=spare)
                if spare is not None:
                    with store._lock:
                        store._space_cv.notify_all()  # the background thread makes the next
            payload = encode_pending(chunks, seg.mixed)
            # Small groups (durable writes) skip compression: latency over bytes.
            flags, data = codec.encode(payload, compress=len(payload) >= LOG_COMPRESS_MIN_BYTES
                                       and codec.compress, level=LOG_ZSTD_LEVEL)
            framed = [frame_header(Kind.KV_BATCH, data, flags | COMMIT), data]
            at = seg.wal.append(framed)
            if parts is not None:
                parts.append(seg.wal.shipped(at, framed))
            if tap_parts is not None:
                tap_parts.append((seg.wal_path.name, SEGMENT_HEADER_SIZE + at,  # type: ignore[union-attr]
                                  framed[0] + data))
            if seg.wal not in touched:
                touched.append(seg.wal)
            records += len(chunks) // 2
        if final:
            finished.append(seg)
    return StagedWal(store, touched, finished, records, parts, tap_parts)
