"""Background merges wait for a quiet moment unless space amplification passes 3x and
the dead records weigh more than a few hot segments."""

from __future__ import annotations

import os
from typing import Any

import pytest

from tuffdb.kv import merge

KEYS = 200
VALUE = b"v" * 400
KEEP_EVERY = 20


def _store_with_rewrites(kv_store: Any, rounds: int, keys: int = KEYS) -> Any:
    """Every key written ``rounds`` times, all spilled: dead ~ (rounds - 1) x live. Every
    KEEP_EVERY puts a key of its own that is never rewritten, so no segment is all dead
    (those are dropped unread, whatever the load: see the last test)."""
    store = kv_store(durability="none", hot_bytes=16 << 10, background_compaction=False)
    for r in range(rounds):
        for i in range(keys):
            store.put(f"key-{i:04d}".encode(), VALUE + bytes([r]))
            if i % KEEP_EVERY == 0:
                store.put(f"keep-{r:02d}-{i:04d}".encode(), b"k")
    store.sync()
    assert all(s.live_records for s in store._cold_order)
    return store


def _dead_per_live(store: Any) -> float:
    segs = store._cold_order
    live = sum(s.live_bytes for s in segs)
    return (sum(s.value_bytes for s in segs) - live) / live


def test_a_busy_store_defers_merges_below_the_space_bound(kv_store: Any) -> None:
    store = _store_with_rewrites(kv_store, 2)
    before = [s.id for s in store._cold_order]
    assert 0.5 < _dead_per_live(store) <= merge.BUSY_MAX_DEAD_PER_LIVE
    merge.compact_background(store, busy=True)
    assert [s.id for s in store._cold_order] == before  # nothing rewritten under load
    merge.compact_background(store, busy=False)  # the first quiet look merges
    assert [s.id for s in store._cold_order] != before
    assert _dead_per_live(store) < 0.5
    assert {store.get(f"key-{i:04d}".encode()) for i in range(KEYS)} == {VALUE + b"\x01"}


def test_a_busy_store_still_merges_past_the_space_bound(kv_store: Any) -> None:
    store = _store_with_rewrites(kv_store, 4)
    assert _dead_per_live(store) > merge.BUSY_MAX_DEAD_PER_LIVE
    assert merge.dead_weight(store._cold_order) > merge.BUSY_MIN_DEAD_HOT_SEGMENTS * (16 << 10)
    merge.compact_background(store, busy=True)
    assert _dead_per_live(store) <= merge.BUSY_MAX_DEAD_PER_LIVE
    assert {store.get(f"key-{i:04d}".encode()) for i in range(KEYS)} == {VALUE + b"\x03"}


def test_a_busy_store_leaves_a_few_dead_records_however_little_is_live(kv_store: Any) -> None:
    floor = merge.BUSY_MIN_DEAD_HOT_SEGMENTS * (16 << 10)
    store = _store_with_rewrites(kv_store, 4, keys=50)  # 3 x live dead, under the floor
    before = [s.id for s in store._cold_order]
    assert _dead_per_live(store) > merge.BUSY_MAX_DEAD_PER_LIVE
    assert 0 < merge.dead_weight(store._cold_order) <= floor
    merge.compact_background(store, busy=True)
    assert [s.id for s in store._cold_order] == before  # nothing rewritten under load
    merge.compact_background(store, busy=False)
    assert _dead_per_live(store) < 0.5
    assert {store.get(f"key-{i:04d}".encode()) for i in range(50)} == {VALUE + b"\x03"}


def test_activity_changes_with_reads_and_writes(kv_store: Any) -> None:
    store = kv_store(durability="none")
    a = store.activity()
    assert store.activity() == a
    store.put(b"k", b"v")
    b = store.activity()
    assert b != a
    store.get(b"k")
    c = store.activity()
    assert c != b
    store.get_many([b"k", b"x"])
    assert store.activity() != c


def test_merges_go_on_while_spills_never_run_dry(kv_store: Any,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A write load that always leaves a sealed segment waiting must not starve the
    merges: once the periodic work is due (here: always), it runs after a spill, not
    only when nothing waits. Before, 30 segments queued back to back were spilled with
    no merge between them, so under a load that never paused the cold tier grew until
    the process ran out of file descriptors. (No floor of dead records here: the
    store is a few hot segments in all.)"""
    from tuffdb import metrics

    monkeypatch.setattr(merge, "BUSY_MIN_DEAD_HOT_SEGMENTS", 0)

    store = kv_store(durability="none", hot_bytes=16 << 10, max_sealed=1000,
                     expiry_interval_s=0.0)
    store.put(b"warm", b"up")
    store.sync()
    before = metrics.KV_COMPACTIONS.value
    with store._bg_mutex:  # the background thread waits at its first spill meanwhile
        for r in range(30):  # 30 rounds of rewrites, one sealed segment (or more) each
            for i in range(KEYS // 4):
                store.put(f"key-{i:04d}".encode(), VALUE + bytes([r]))
        assert len(store._sealed) >= 30
    store.sync()
    assert metrics.KV_COMPACTIONS.value - before >= 10
    assert _dead_per_live(store) <= merge.BUSY_MAX_DEAD_PER_LIVE
    assert {store.get(f"key-{i:04d}".encode()) for i in range(KEYS // 4)} == {VALUE + b"\x1d"}


def test_full_spills_of_tiny_values_are_not_small_segments(kv_store: Any) -> None:
    """Small segments (the loss window's early spills) are merged in runs to bound the
    file count. A hot segment of 3-byte values spilled full has tiny value bytes too but
    is not one of them: rewriting it would cost a merge per spill of a list being pushed."""
    store = kv_store(durability="none", hot_bytes=16 << 10, background_compaction=False)
    n = 0
    for _ in range(10):  # ten full spills of 3-byte values, every record live
        for _ in range((16 << 10) // 70 + 1):
            store.put(b"elem-%08d" % n, b"abc")
            n += 1
    store.sync()
    full = [s.id for s in store._cold_order]
    assert len(full) >= merge.SMALL_SEGMENT_COUNT
    merge.compact_background(store, busy=False)
    assert [s.id for s in store._cold_order] == full
    for _ in range(merge.SMALL_SEGMENT_COUNT):  # early spills of a few records each
        for _ in range(5):
            store.put(b"elem-%08d" % n, b"abc")
            n += 1
        store.sync()
    merge.compact_background(store, busy=False)
    assert len(store._cold_order) < len(full) + merge.SMALL_SEGMENT_COUNT
    assert store.get_many([b"elem-%08d" % i for i in range(n)]) == [b"abc"] * n


def test_a_background_merge_is_bounded_by_what_it_checks_not_what_survives(
        kv_store: Any) -> None:
    # Thirty rounds over the same keys: the old segments are almost all dead records, so
    # their live bytes are tiny while checking their records is the merge's real cost.
    store = _store_with_rewrites(kv_store, 30)
    cap = merge.BACKGROUND_MERGE_HOT_SEGMENTS * store._hot_bytes
    cands = [s for s in store._cold_order if s.live_bytes < s.value_bytes]
    assert sum(merge._merge_cost(s) for s in cands) > 2 * cap  # more than one bounded merge
    assert sum(s.live_bytes for s in cands) < cap  # (live bytes alone would take them all)
    rounds = 0
    while True:
        before = list(store._cold_order)
        merge.compact_background(store, busy=False)
        after = {t.id for t in store._cold_order}
        merged = [s for s in before if s.id not in after]
        if not merged:
            break
        rounds += 1
        assert len(merged) == 1 or sum(merge._merge_cost(s) for s in merged) <= cap
    assert rounds >= 2
    assert _dead_per_live(store) < 0.5
    assert {store.get(f"key-{i:04d}".encode()) for i in range(KEYS)} == {VALUE + bytes([29])}


def test_segments_with_nothing_live_are_dropped_unread_even_when_busy(kv_store: Any) -> None:
    """A queue's pushes, once popped, leave segments with no live record and no tombstone:
    they go at the next look, busy or not, without a read. Here the dead share is far
    under the busy bound, so before this nothing was merged at all; and their data files
    are cut short first, so a merge that read them would fail."""
    store = kv_store(durability="none", hot_bytes=16 << 10, background_compaction=False)
    for i in range(100):
        store.put(b"elem-%04d" % i, VALUE)
    store.sync()
    pushed = list(store._cold_order)
    for i in range(600):
        store.put(b"live-%04d" % i, VALUE)
    store.sync()
    for i in range(100):
        store.delete(b"elem-%04d" % i)
    store.sync()
    assert [s.live_records for s in pushed] == [0] * len(pushed)
    assert _dead_per_live(store) < merge.BUSY_MAX_DEAD_PER_LIVE
    for s in pushed:
        os.truncate(s.path, 100)
    kept = [s.id for s in store._cold_order if s not in pushed]
    merge.compact_background(store, busy=True)
    assert [s.id for s in store._cold_order] == kept
    assert not any(s.path.exists() for s in pushed)
    assert store.get_many([b"elem-%04d" % i for i in range(100)]) == [None] * 100
    assert store.get_many([b"live-%04d" % i for i in range(600)]) == [VALUE] * 600
    assert store.check() == []


def test_check_reports_a_live_count_under_the_keydir(kv_store: Any) -> None:
    """check() catches the one accounting error that would lose data: a segment counted
    with fewer live records than the keydir points at (a merge would drop it unread)."""
    store = kv_store(durability="none", hot_bytes=16 << 10, background_compaction=False)
    for i in range(100):
        store.put(b"elem-%04d" % i, VALUE)
    store.sync()
    assert store.check() == []
    seg = store._cold_order[0]
    seg.live_records = 0
    assert any(f"segment {seg.id}: 0 live records counted" in p for p in store.check())
    seg.live_records = 10**6  # over the count is safe (a merge then reads it)
    assert store.check() == []
