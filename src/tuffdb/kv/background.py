"""The KV background thread: spill sealed segments, serve sync/compact requests, expire
TTL keys, and merge cold segments whose dead fraction passes the threshold.

It is the only thread that changes the cold tier and the keydir after open, so spills
and merges never race each other; it holds ``store._bg_mutex`` while it does so, which
lets ``check()`` see a quiet cold tier.
"""

from __future__ import annotations

import heapq
import logging
import time
from itertools import compress
from typing import TYPE_CHECKING

from tuffdb import metrics
from tuffdb._format.kv import BLOCK_BITS, SEGMENT_SHIFT
from tuffdb.errors import ClosedError
from tuffdb.kv import merge
from tuffdb.kv.cold import hint_path, write_segment
from tuffdb.kv.hot_tier import TOMBSTONE, HotSegment, holds
from tuffdb.storage.files import remove_quietly

if TYPE_CHECKING:
    from tuffdb.kv.store import KVStore

log = logging.getLogger("tuffdb.kv")
_VALUE_MASK = (1 << 28) - 1
IDLE_TICK_S = 0.5


class Periodic:
    """The periodic work (TTL sweep, fold, merge), due every ``IDLE_TICK_S`` (or the
    store's expiry interval, if shorter). It runs when due whether or not segments wait
    to be spilled: a write load that always leaves one sealed would otherwise starve it,
    and the cold tier would grow without bound (dead segments never merged, until the
    process ran out of file descriptors)."""

    def __init__(self, store: KVStore) -> None:
        self.store = store
        self.recounted = False
        self.seen = store.activity()
        self.due = time.monotonic() + self.period()

    def period(self) -> float:
        return min(IDLE_TICK_S, self.store._expiry_interval_s)

    def run_if_due(self) -> None:
        if time.monotonic() < self.due:
            return
        store = self.store
        self.due = time.monotonic() + self.period()
        try:
            if not self.recounted:
                recount_live(store)
                self.recounted = True
            sweep_expired(store)
            fold_touched(store)
            now_seen = store.activity()
            if store._background_compaction and not store._poison:
                merge.compact_background(store, busy=now_seen != self.seen)
            self.seen = now_seen
        except OSError as exc:
            store._poison.set(exc)


def run(store: KVStore) -> None:
    periodic = Periodic(store)
    while True:
        with store._lock:
            while not (store._sealed and not store._poison) and not store._requests \
                    and not store._closing and not _spare_wanted(store):
                delay = periodic.due - time.monotonic()
                if delay <= 0:
                    break
                store._space_cv.wait(delay)
            seg = store._sealed[0] if store._sealed and not store._poison else None
            requests = [] if seg else store._requests
            if not seg:
                store._requests = []
            closing = store._closing
        if seg is not None:
            try:
                spill(store, seg)
            except BaseException as exc:  # noqa: BLE001 - a failed spill poisons the store
                store._poison.set(exc)
                with store._lock:
                    store._space_cv.notify_all()
            fold_touched(store)
            if not closing:
                periodic.run_if_due()
            continue
        for what, _arg, fut in requests:
            try:
                store._poison.check()
                fut.set_result(merge.compact_all(store) if what == "compact" else None)
            except BaseException as exc:  # noqa: BLE001 - hand any failure to the caller
                if not isinstance(exc, ClosedError):
                    store._poison.set(exc) if isinstance(exc, OSError) else None
                fut.set_exception(exc)
        if closing:
            return
        if _spare_wanted(store):
            _prepare_spare(store)
        periodic.run_if_due()


def _spare_wanted(store: KVStore) -> bool:
    spares = store._spares
    return spares is not None and spares.wanted and not store._poison


def _prepare_spare(store: KVStore) -> None:
    spares = store._spares
    if spares is None:
        return
    try:
        spares.prepare()
    except OSError as exc:  # no spare: logs are created and fsynced as before
        log.warning("could not prepare a spare log file, not using spares: %s", exc)
        store._spares = None


def spill(store: KVStore, seg: HotSegment) -> None:
    """Write a sealed hot segment to a cold segment, then move its keys to the keydir."""
    t0 = time.perf_counter()
    with store._bg_mutex:
        keys = list(seg.index)
        vals = list(seg.index.values())
        written = len(keys)
        tomb_olds: list[int | None] = []
        if holds(vals, TOMBSTONE):  # by identity: ``in`` compares every value with ==
            # Tombstones take their keys out of the keydir here, before the write: readers
            # meet them first in this segment, which stays in the read chain until the
            # install below. One that takes nothing out (the key has no cold record: it was
            # written and deleted while hot, a queue's push then pop) shadows nothing and
            # stays out of the cold segment. Only this thread changes the keydir.
            pop = store._keydir.pop
            kept_keys: list[bytes] = []
            kept_vals: list[bytes | None] = []
            for k, v in zip(keys, vals, strict=True):
                if v is TOMBSTONE:
                    old = pop(k, None)
                    if old is None:
                        continue
                    tomb_olds.append(old)
                    kept_keys.append(k)
                    kept_vals.append(None)
                else:
                    kept_keys.append(k)
                    kept_vals.append(v)  # type: ignore[arg-type]  # not TOMBSTONE: bytes
            keys, vals = kept_keys, kept_vals  # type: ignore[assignment]
        # The blocks just written go into the block cache (RocksDB's prepopulate_block_cache
        # on flush): the newest records are the likeliest to be read, and the first read of
        # each would otherwise decrypt and decompress its whole block on the reader's thread
        # (the event loop's, for a server). Not when the segment would fill over half the
        # cache: one big spill must not push the whole working set out.
        blocks: list[bytes] | None = [] if seg.bytes <= store._cache_limit >> 1 else None
        cold, entries = write_segment(store._dir, seg.id, seg.id, keys, vals, seg.expiry,  # type: ignore[arg-type]
                                      store._codec, blocks_out=blocks,
                                      block_size=store.block_bytes)
        if blocks:
            base = cold.id << BLOCK_BITS
            for b, raw in enumerate(blocks):
                store._cache_put(base | b, raw)
        locs = entries.locations(seg.id)
        if holds(vals, None):
            mask = [v is not None for v in vals]
            put_keys = list(compress(keys, mask))
            put_locs = list(compress(locs, mask))
        else:
            put_keys, put_locs = keys, locs
        kd = store._keydir
        store._open_segs[cold.id] = cold
        with store._lock:
            store._cold[cold.id] = cold
            store._cold_order.append(cold)
        account_dead(store, tomb_olds)
        # The keys move to the keydir a chunk per hold of the lock, each hold followed by
        # a hand-off of the GIL: one pass over a big segment's keys in a keydir of
        # millions is tens of milliseconds of cache misses in C, and compiled code never
        # offers the GIL meanwhile, so a server's event loop stood still for all of it
        # (~90 ms every few seconds under a durable YCSB load). Readers meanwhile find
        # these keys in ``seg``, still in the read chain until every chunk is in.
        for lo, hi in merge.paced(len(put_keys)):
            chunk = put_keys[lo:hi]
            with store._lock:
                # Fresh keys (the common ingest case) skip the old-locations list.
                olds = (list(map(kd.get, chunk))
                        if kd and not kd.keys().isdisjoint(chunk) else [])
                kd.update(zip(chunk, put_locs[lo:hi]))
            account_dead(store, olds)
        with store._lock:
            store._sealed.remove(seg)
            store._rechain()
            seg.spilled = True
            doomed = seg.pending is None and seg.wal_path is not None
            metrics.KV_SEALED_PENDING.set(len(store._sealed))
            store._space_cv.notify_all()
        store.shipper.added(cold.path.name)
        store.shipper.added(hint_path(store._dir, cold.id).name)
        if doomed:  # under the mutex: a shipping snapshot never sees a log vanish
            remove_quietly([seg.wal_path])  # type: ignore[list-item]
            store.shipper.removed(seg.wal_path.name)  # type: ignore[union-attr]
    if seg.wal_path is None and seg.pending is None:  # never logged: count its writes here
        metrics.KV_PUTS.inc(written)
    metrics.KV_SPILLS.inc()
    metrics.KV_SPILL_BYTES.inc(seg.bytes)
    metrics.KV_SPILL_SECONDS.observe(time.perf_counter() - t0)


def account_dead(store: KVStore, olds: list[int | None]) -> None:
    cold = store._cold
    for o in olds:
        if o is not None:
            s = cold.get(o >> SEGMENT_SHIFT)
            if s is not None:
                s.live_bytes -= o & _VALUE_MASK
                s.live_records -= 1


def recount_live(store: KVStore) -> None:
    with store._bg_mutex:
        live: dict[int, int] = {}
        records: dict[int, int] = {}
        get = live.get
        count = records.get
        for loc in list(store._keydir.values()):
            sid = loc >> SEGMENT_SHIFT
            live[sid] = get(sid, 0) + (loc & _VALUE_MASK)
            records[sid] = count(sid, 0) + 1
        for s in store._cold_order:
            s.live_bytes = live.get(s.id, 0)
            s.live_records = records.get(s.id, 0)


FOLD_CHUNK = 4096  # keys folded into the ordered view per hold of the store lock


def fold_touched(store: KVStore) -> None:
    """Fold the keys written since into the ordered view, a chunk per lock hold.

    Once the view exists every write adds its key to ``_touched``; an ordered read folds
    what is there before it reads. Left to the reads, a read after a long write burst
    would fold millions of keys in one go (seconds, on whatever thread reads: a server's
    event loop). Folding here, after each spill and on each periodic tick, keeps what a
    read has to fold small.
    """
    while True:
        with store._lock:
            if store._ordered is None or store._closed or not (
                    store._touched or store._folding):
                return
            store._fold_chunk_locked(FOLD_CHUNK)
        # let the writers and readers waiting for the lock or the GIL in (merge.py says
        # why a real pause, not sleep(0))
        time.sleep(merge.INSTALL_PAUSE_S)


def sweep_expired(store: KVStore) -> None:
    """Write tombstones for keys whose TTL has passed (lazy expiry hides them already)."""
    heap = store._expiry_heap
    if not heap:
        return
    now = store._now_ms()
    with store._lock:
        if store._closed or store._closing or store._poison:
            return
        if len(heap) > 2 * len(store._expiry) + 1024:
            heap[:] = [(e, k) for k, e in store._expiry.items()]
            heapq.heapify(heap)
        expiry = store._expiry
        while heap and heap[0][0] <= now:
            exp, k = heapq.heappop(heap)
            if expiry.get(k) == exp:
                store._tombstone_locked(k, wait=False)
