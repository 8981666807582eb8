"""Compaction: merge cold segments, keeping only live records (Bitcask's merge).

A record is live when the keydir still points at it. The output gets a new id and the
*highest seq of its inputs*, so on open it sorts where its newest input did and cannot
shadow a newer version held by a segment outside the merge. Tombstones are dropped only
when the inputs include every older segment (nothing older could be resurrected).
Crash safety: the output and its hint are durable (and list their inputs in
``supersedes``) before any input is deleted; open finishes an interrupted swap.
"""

from __future__ import annotations

import time
from itertools import pairwise
from operator import eq
from typing import TYPE_CHECKING

import numpy as np

from tuffdb import metrics
from tuffdb._format.kv import BLOCK_BITS, OP_DELETE, OP_PUT
from tuffdb.errors import CorruptionError
from tuffdb.kv.cold import (
    ColdSegment,
    Entries,
    data_path,
    hint_path,
    load_hint,
    segment_files,
    write_segment,
)
from tuffdb.kv.hot_tier import RECORD_OVERHEAD_BYTES
from tuffdb.storage.files import fsync_dir, remove_quietly

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tuffdb.kv.store import KVStore

MAX_MERGE_VALUE_BYTES = 256 << 20
#: A background merge costs at most this many hot segments (by :func:`_merge_cost`):
#: it runs on the thread that spills, so a writer that fills the hot tier meanwhile
#: waits for it. Measured without the bound: one merge of 822 mostly dead segments
#: (39 M records checked, 0.9 MB live) took 20 s, and an embedded writer of 100 B values
#: stood still for all of it.
BACKGROUND_MERGE_HOT_SEGMENTS = 8
#: Keys a spill or a merge moves to the keydir per hold of the store lock and of the GIL
#: (~0.2 ms in a keydir of millions), and the pause after each: a real sleep, so a thread
#: waiting for the GIL (a server's event loop) takes it. ``sleep(0)`` is not enough: the
#: waiter is woken but the sleeper takes the GIL back first, and the waiter gets it only
#: once its switch interval has passed (background.spill says why this matters).
INSTALL_CHUNK = 1024
INSTALL_PAUSE_S = 0.0001
SMALL_SEGMENT_COUNT = 8
BUSY_MAX_DEAD_PER_LIVE = 2.0
#: Under load, dead records are also left alone while they weigh (:func:`_weight`) at most
#: this many hot segments, however little is live: Redis's ``auto-aof-rewrite-min-size``
#: (64 MB), for the same reason. Without it a store holding little (a queue whose
#: elements were all popped) merged its few megabytes of dead records on the requests'
#: core at the first look, each time the dead share passed twice a live share near zero.
BUSY_MIN_DEAD_HOT_SEGMENTS = 8
BUSY_MAX_SMALL_SEGMENTS = 4 * SMALL_SEGMENT_COUNT


def paced(n: int) -> Iterator[tuple[int, int]]:
    """``(lo, hi)`` of each INSTALL_CHUNK-sized piece of ``range(n)``, with the GIL handed
    over (an INSTALL_PAUSE_S sleep) after each piece's work."""
    for lo in range(0, n, INSTALL_CHUNK):
        yield lo, min(n, lo + INSTALL_CHUNK)
        time.sleep(INSTALL_PAUSE_S)


def compact_all(store: KVStore) -> dict[str, int]:
    """Merge every cold segment (in groups of at most MAX_MERGE_VALUE_BYTES)."""
    with store._bg_mutex:
        segs = list(store._cold_order)
        before = sum(s.file_size for s in segs)
        groups: list[list[ColdSegment]] = []
        size = 0
        for s in segs:
            if not groups or size + s.live_bytes > MAX_MERGE_VALUE_BYTES:
                groups.append([])
                size = 0
            groups[-1].append(s)
            size += s.live_bytes
        merged = 0
        for i, g in enumerate(groups):
            tombs = g[0].meta.get("tombstones", 0) > 0
            if len(g) > 1 or g[0].live_bytes < g[0].value_bytes or (i == 0 and tombs):
                merge_segments(store, g)
                merged += len(g)
        after = sum(s.file_size for s in store._cold_order)
    return {"segments_merged": merged, "bytes_before": before, "bytes_after": after,
            "segments": len(store._cold_order)}


def compact_background(store: KVStore, *, busy: bool = False) -> None:
    """Merge segments past the dead-fraction threshold, and runs of small segments.

    ``busy``: the store served reads or writes since the last look. A merge then would
    take the core from requests (it decodes and rewrites every live record in Python),
    so it waits for a quiet moment, unless dead bytes pass ``BUSY_MAX_DEAD_PER_LIVE``
    times the live bytes (space amplification 3x) and the dead records weigh more than
    ``BUSY_MIN_DEAD_HOT_SEGMENTS`` hot segments, or small segments pile up: space stays
    bounded under a load that never pauses.

    Segments with nothing live and no tombstones (a queue's pushes once popped, values
    all overwritten) go first and whatever the load: dropping them reads nothing.
    """
    with store._bg_mutex:
        dead = [s for s in store._cold_order if _unread(s)]
        if dead:
            merge_segments(store, dead)
        order = store._cold_order
        small = [s for s in order if _weight(s) < store._hot_bytes // 4]
        if busy and len(small) < BUSY_MAX_SMALL_SEGMENTS:
            live = sum(s.live_bytes for s in order)
            if (sum(s.value_bytes for s in order) - live <= BUSY_MAX_DEAD_PER_LIVE * live
                    or dead_weight(order) <= BUSY_MIN_DEAD_HOT_SEGMENTS * store._hot_bytes):
                return
        keep = 1 - store._compaction_threshold
        cands = [s for s in order if s.value_bytes and s.live_bytes < s.value_bytes * keep]
        if len(small) >= SMALL_SEGMENT_COUNT:
            cands = sorted({*cands, *small}, key=lambda s: (s.seq, s.id))
        if not cands or (len(cands) == 1 and cands[0].live_bytes >= cands[0].value_bytes):
            return
        group: list[ColdSegment] = []
        size = cost = 0
        cap = BACKGROUND_MERGE_HOT_SEGMENTS * store._hot_bytes
        for s in cands:
            c = _merge_cost(s)
            if group and (size + s.live_bytes > MAX_MERGE_VALUE_BYTES or cost + c > cap):
                break
            group.append(s)
            size += s.live_bytes
            cost += c
        merge_segments(store, group)


def _weight(seg: ColdSegment) -> int:
    """A segment's size as the hot tier counted it (values plus a fixed charge per record):
    a spill of a full hot segment of tiny values (list elements, counters) is not small,
    though its value bytes are. Small ones are the spills the loss window forced early."""
    records: int = seg.meta.get("records", 0)
    return seg.value_bytes + records * RECORD_OVERHEAD_BYTES


def dead_weight(segs: list[ColdSegment]) -> int:
    """What the dead records of ``segs`` weigh, in :func:`_weight`'s units (tombstones
    included: they are records a merge may drop)."""
    live: int = sum(s.live_bytes + max(0, s.live_records) * RECORD_OVERHEAD_BYTES
                    for s in segs)
    total: int = sum(map(_weight, segs))
    return total - live


def _merge_cost(seg: ColdSegment) -> int:
    """What merging ``seg`` costs, in the hot tier's units (:func:`_weight`): every
    record's key is checked against the keydir, dead or alive, and the live values are
    copied."""
    if _unread(seg):
        return 0
    records: int = seg.meta.get("records", 0)
    live: int = seg.live_bytes
    return live + records * RECORD_OVERHEAD_BYTES


def _unread(seg: ColdSegment) -> bool:
    """Nothing in ``seg`` is live and it holds no tombstone: a merge drops it unread."""
    return seg.live_records <= 0 and not seg.meta.get("tombstones", 0)


def merge_segments(store: KVStore, group: list[ColdSegment]) -> None:
    """Rewrite ``group`` (in (seq, id) order) as one segment of its live records."""
    kd = store._keydir
    order = store._cold_order
    ids = {s.id for s in group}
    drop_tombs = all(s.id in ids for s in order[: len(group)])
    keys: list[bytes] = []
    vals: list[bytes | None] = []
    expiry: dict[bytes, int] = {}
    src: list[int] = []
    tombs: dict[bytes, None] = {}
    for seg in group:
        keep_tombs = not drop_tombs and seg.meta.get("tombstones", 0)
        if seg.live_records <= 0 and not keep_tombs:
            continue  # nothing in it is live and no tombstone of it stays: never read
        e = _collect_live(store, seg, keys, vals, src, expiry)
        if keep_tombs:
            for i in np.flatnonzero(e.ops == OP_DELETE).tolist():
                if e.keys[i] not in kd:
                    tombs[e.keys[i]] = None
    live_bytes = sum(map(len, vals))  # type: ignore[arg-type]
    out: ColdSegment | None = None
    if keys or tombs:
        with store._lock:
            new_id = store._next_id
            store._next_id += 1
        seq = max(s.seq for s in group)
        all_keys = keys + list(tombs)
        all_vals = vals + [None] * len(tombs)
        out, entries = write_segment(store._dir, new_id, seq, all_keys, all_vals, expiry,
                                     store._codec, supersedes=tuple(sorted(ids)),
                                     block_size=store.block_bytes)
        new_locs = entries.locations(new_id)
        out.live_bytes = live_bytes
        out.live_records = len(keys)
    if out is not None:
        store._open_segs[out.id] = out
        # A chunk of keys per hold of the lock and the GIL: readers find a key at its
        # old place or its new one, both open until the end.
        for lo, hi in paced(len(keys)):
            with store._lock:
                for k, old, new in zip(keys[lo:hi], src[lo:hi], new_locs[lo:hi], strict=False):
                    if kd.get(k) == old:
                        kd[k] = new
                    else:
                        out.live_bytes -= new & ((1 << 28) - 1)
                        out.live_records -= 1
    with store._lock:
        if out is not None:
            store._cold[out.id] = out
        for s in group:
            store._cold.pop(s.id, None)
        store._cold_order = sorted(store._cold.values(), key=lambda s: (s.seq, s.id))
        old_retired, store._retired = store._retired, list(group)
    with store._cache_lock:
        for gid in [g for g in store._cache if (g >> BLOCK_BITS) in ids]:
            store._cache_size -= len(store._cache.pop(gid))
    for s in old_retired:
        store._open_segs.pop(s.id, None)
        s.close()
    if out is not None:
        store.shipper.added(out.path.name)
        store.shipper.added(hint_path(store._dir, out.id).name)
    # Not fsynced: if a crash resurrects them, open deletes them again (output's supersedes).
    doomed = [p for s in group for p in segment_files(store._dir, s.id)]
    remove_quietly(doomed)
    if out is None:
        # No output lists these in its ``supersedes`` for open to delete again: make the
        # removal itself durable, or a crash could bring back records a later merge
        # dropped the tombstones of.
        fsync_dir(store._dir)
    for s in group:  # a tiered segment's .dat is gone already, but it is part of the state
        store.shipper.removed(data_path(store._dir, s.id).name)
        store.shipper.removed(hint_path(store._dir, s.id).name)
    reclaimed = sum(s.file_size for s in group) - (out.file_size if out else 0)
    metrics.KV_COMPACTIONS.inc()
    metrics.KV_COMPACTED_BYTES.inc(max(0, reclaimed))


def _entries(store: KVStore, seg: ColdSegment) -> Entries:
    """``seg``'s key table: its hint file, or a scan of its blocks if the hint is bad."""
    try:
        return load_hint(hint_path(store._dir, seg.id), seg.id, store._codec)
    except (CorruptionError, OSError):
        return seg.entries()


def _collect_live(store: KVStore, seg: ColdSegment, keys: list[bytes],
                  vals: list[bytes | None], src: list[int], expiry: dict[bytes, int]) -> Entries:
    """Append ``seg``'s live records (the keydir points at them) in file order; returns
    the segment's key table.

    Driven by the segment's key table, not by parsing its records: liveness is one
    C-level pass (keydir lookups against the table's locations), and only blocks that
    hold a live record are read, each sliced at its live values. Under a Zipfian update
    load most records of an old segment are dead; parsing each one in Python was most
    of a merge's cost. The caller holds ``store._bg_mutex``: the keydir does not change.
    """
    e = _entries(store, seg)
    n = len(e.keys)
    if not n:
        return e
    locs = e.locations(seg.id)
    get = store._keydir.get
    live = np.empty(n, dtype=bool)
    for lo, hi in paced(n):  # a chunk per hold of the GIL, as installs do
        live[lo:hi] = np.fromiter(map(eq, map(get, e.keys[lo:hi]), locs[lo:hi]), dtype=bool,
                                  count=hi - lo)
    idx = np.flatnonzero(live & (e.ops == OP_PUT))
    if not len(idx):
        return e
    at = idx.tolist()
    keys += map(e.keys.__getitem__, at)
    src += map(locs.__getitem__, at)
    if e.ttl:
        expiry.update((e.keys[i], x) for i, x in e.ttl.items() if live[i])
    blocks = e.blocks[idx].astype(np.int64)
    starts = e.voffs[idx].astype(np.int64)
    ends = (starts + e.vlens[idx]).tolist()
    starts_l = starts.tolist()
    cuts = [*np.flatnonzero(np.diff(blocks, prepend=-1)).tolist(), len(at)]
    base = seg.id << BLOCK_BITS
    cache_get = store._cache.get
    for a, b in pairwise(cuts):
        bno = int(blocks[a])
        blk = cache_get(base | bno)
        if blk is None:
            blk = seg.read_block(bno)
        if ends[b - 1] > len(blk):
            raise CorruptionError(f"hint entry past the end of block {bno}", path=str(seg.path))
        vals += map(blk.__getitem__, map(slice, starts_l[a:b], ends[a:b]))
    return e
