"""KVStore.check() and stats(): verify everything on disk against the in-memory view."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np

from tuffdb._format.kv import SEGMENT_SHIFT
from tuffdb._format.record import scan_frames, unwritten_tail
from tuffdb._format.segment import SEGMENT_HEADER_SIZE, FileKind, unpack_header
from tuffdb.errors import CorruptionError, Error
from tuffdb.kv.cold import DATA_SUFFIX, HINT_SUFFIX, STUB_SUFFIX, hint_path, load_hint
from tuffdb.kv.recovery import WAL_SUFFIX
from tuffdb.kv.tier import CACHE_DIR
from tuffdb.storage.files import list_ids, segment_name
from tuffdb.storage.lock import LOCK_NAME

if TYPE_CHECKING:
    from tuffdb.kv.cold import ColdSegment, Entries
    from tuffdb.kv.store import KVStore


def _same(a: Entries, b: Entries) -> bool:
    return (
        a.keys == b.keys
        and np.array_equal(a.ops, b.ops)
        and np.array_equal(a.blocks, b.blocks)
        and np.array_equal(a.voffs, b.voffs)
        and np.array_equal(a.vlens, b.vlens)
        and a.ttl == b.ttl
    )


def check_store(store: KVStore) -> list[str]:
    """Problems found (empty when healthy): checksums of every block and log frame,
    hint files against their data, and the keydir against the cold tier."""
    problems: list[str] = []
    with store._bg_mutex:
        segs: list[ColdSegment] = list(store._cold_order)
        now = store._now_ms()
        expected: dict[bytes, int] = {}
        expired: dict[int, bytes] = {}
        for seg in segs:
            if seg.tiered:
                # Its bytes are in the archive (kv/tier.py): reading them all back would
                # download the segment. Its blocks are checksummed on every read; here its
                # key table comes from the hint, checked against the keydir below.
                try:
                    data_entries = load_hint(hint_path(store._dir, seg.id), seg.id,
                                             store._codec)
                except (CorruptionError, FileNotFoundError) as exc:
                    problems.append(f"tiered segment {seg.id}: hint unreadable: {exc}")
                    continue
            else:
                try:
                    data_entries = seg.entries()
                except (Error, OSError) as exc:
                    problems.append(f"segment {seg.id}: {exc}")
                    continue
                try:
                    hint = load_hint(hint_path(store._dir, seg.id), seg.id, store._codec)
                    if not _same(hint, data_entries):
                        problems.append(f"segment {seg.id}: hint file disagrees with the data")
                except (CorruptionError, FileNotFoundError) as exc:
                    problems.append(f"segment {seg.id}: hint unreadable: {exc}")
            locs = data_entries.locations(seg.id)
            ttl = data_entries.ttl
            for i, (k, loc) in enumerate(zip(data_entries.keys, locs, strict=True)):
                if int(data_entries.ops[i]) == 1 and (i not in ttl or ttl[i] > now):
                    expected[k] = loc
                else:
                    expected.pop(k, None)
                    if i in ttl:
                        expired[loc] = k  # expired records may linger in the keydir until swept
        kd = dict(store._keydir)
        for k, loc in kd.items():
            if expected.get(k) != loc and expired.get(loc) != k:
                problems.append(f"keydir entry for {k[:40]!r} does not match the cold tier")
                if len(problems) > 100:
                    break
        for k in expected.keys() - kd.keys():
            if k not in store._expiry:
                problems.append(f"key {k[:40]!r} is in the cold tier but missing from the keydir")
                if len(problems) > 100:
                    break
        problems += _check_live_counts(segs, kd)
        problems += _check_wals(store)
        problems += _check_files(store, {s.id for s in segs})
    return problems + _check_ordered(store, list(kd))


def _check_live_counts(segs: list[ColdSegment], kd: dict[bytes, int]) -> list[str]:
    """Each segment's count of live records is never under the keydir's pointers into it:
    a merge drops a segment whose count reads 0 without reading it (merge.py)."""
    pointers: dict[int, int] = {}
    for loc in kd.values():
        sid = loc >> SEGMENT_SHIFT
        pointers[sid] = pointers.get(sid, 0) + 1
    return [f"segment {s.id}: {s.live_records} live records counted, the keydir points at "
            f"{pointers.get(s.id, 0)}" for s in segs if s.live_records < pointers.get(s.id, 0)]


def _check_ordered(store: KVStore, cold_keys: list[bytes]) -> list[str]:
    """The ordered view (if built) is sound and, once the touched keys are folded in,
    holds every live cold key."""
    with store._lock:
        ordered = store._ordered
        if ordered is None:
            return []
        problems = ordered.check()
        store._ordered_view()
        now = store._now_ms()
        missing = [k for k in cold_keys if store._exists_unlocked(k, now) and k not in ordered]
        if missing:
            problems.append(f"ordered view: {len(missing)} live cold keys missing, "
                            f"e.g. {missing[0][:40]!r}")
        return problems


def _check_wals(store: KVStore) -> list[str]:
    out = []
    with store._lock:
        # Logs still being written (their segment's last records not yet logged) may hold a
        # half-written frame or header right now: that is a write in progress, not damage.
        # That includes a segment spilled before its round finished logging it, and any
        # log newer than the active segment (created after this snapshot).
        live = {s.id for s in (store._active, *store._sealed, *store._unflushed)
                if s.pending is not None} | store._finishing
        newest = store._active.id
    for wid in list_ids(store._dir, WAL_SUFFIX):
        if wid in live or wid > newest:
            continue
        path = store._dir / segment_name(wid, WAL_SUFFIX)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            continue  # spilled and removed meanwhile
        try:
            hdr = unpack_header(data[:SEGMENT_HEADER_SIZE], str(path))
            if hdr.file_kind != FileKind.KV_LOG:
                out.append(f"{path.name}: not a KV log")
            res = scan_frames(data, SEGMENT_HEADER_SIZE)
            if res.error and res.end + unwritten_tail(data, res.end) != len(data):
                out.append(f"{path.name}: {res.error} at {res.end}")
        except Error as exc:
            out.append(f"{path.name}: {exc}")
    return out


def _check_files(store: KVStore, seg_ids: set[int]) -> list[str]:
    out = []
    tiered = {s.id for s in store._cold_order if s.tiered}
    for name in os.listdir(store._dir):
        if name in (LOCK_NAME, CACHE_DIR) or name.endswith((WAL_SUFFIX, ".tmp")):
            continue
        stem, dot, ext = name.partition(".")
        if dot and stem.isdigit() and f".{ext}" in (DATA_SUFFIX, HINT_SUFFIX, STUB_SUFFIX):
            sid, suffix = int(stem), f".{ext}"
            if sid not in seg_ids or (suffix == DATA_SUFFIX and sid in tiered) \
                    or (suffix == STUB_SUFFIX and sid not in tiered):
                out.append(f"{name}: not part of the store (left over?)")
            continue
        out.append(f"{name}: unknown file")
    return out


def store_stats(store: KVStore) -> dict[str, Any]:
    with store._lock:
        hot = [store._active, *store._sealed]
        hot_keys = sum(len(s.index) for s in hot)
        hot_bytes = sum(s.bytes for s in hot)
        sealed = len(store._sealed)
    cold = list(store._cold_order)
    files = sum(s.file_size for s in cold if not s.tiered)
    for sid in (s.id for s in cold):
        try:
            files += os.path.getsize(hint_path(store._dir, sid))
        except FileNotFoundError:
            pass
    return {
        "path": str(store._dir),
        "durability": store._durability,
        "interval_ms": store._interval_ms,
        "hot_segments": len(hot),
        "hot_records": hot_keys,
        "hot_bytes": hot_bytes,
        "sealed_pending": sealed,
        "cold_segments": len(cold),
        "cold_keys": len(store._keydir),
        "cold_value_bytes": sum(s.value_bytes for s in cold),
        "cold_live_bytes": sum(s.live_bytes for s in cold),
        "disk_bytes": files,
        "cache_bytes": store._cache_size,
        "cache_limit": store._cache_limit,
        "cache_misses": store._cache_misses,
        "tiered_segments": sum(1 for s in cold if s.tiered),
        "tiered_bytes": sum(s.file_size for s in cold if s.tiered),
        "tier_cache_bytes": store._tier.cache.bytes if store._tier is not None else 0,
        "ttl_keys": len(store._expiry),
        "ordered_keys_folded": store.keys_folded,
        "poisoned": bool(store._poison),
        "recovery": vars(store.recovery),
    }
