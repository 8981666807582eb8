"""A merge keeps exactly the live records (with their TTLs) and the tombstones that still
shadow something, whether it finds them through a segment's hint or its blocks."""

from __future__ import annotations

from typing import Any

from tuffdb.kv import merge
from tuffdb.kv.cold import hint_path

KEYS = 120
VALUE = b"v" * 300


def _spilled(store: Any) -> None:
    store.sync()  # seals the hot tier and waits for its spill
    assert not store._sealed


def _model_store(kv_store: Any) -> tuple[Any, dict[bytes, bytes], set[bytes]]:
    """Three rounds of rewrites over several cold segments, some keys with a TTL, some
    deleted: what each key should read as, and which keys carry a TTL."""
    store = kv_store(durability="none", hot_bytes=16 << 10, background_compaction=False)
    want: dict[bytes, bytes] = {}
    with_ttl: set[bytes] = set()
    for r in range(3):
        for i in range(KEYS):
            k = f"key-{i:04d}".encode()
            v = VALUE + bytes([r, i % 256])
            if i % 7 == 0:
                store.put(k, v, ttl=3600)
                with_ttl.add(k)
            else:
                store.put(k, v)
                with_ttl.discard(k)
            want[k] = v
    for i in range(0, KEYS, 5):
        k = f"key-{i:04d}".encode()
        store.delete(k)
        del want[k]
        with_ttl.discard(k)
    _spilled(store)
    assert len(store._cold_order) > 3
    return store, want, with_ttl


def _reads(store: Any) -> dict[bytes, bytes]:
    got = {}
    for i in range(KEYS):
        k = f"key-{i:04d}".encode()
        v = store.get(k)
        if v is not None:
            got[k] = v
    return got


def test_a_merge_through_a_damaged_hint_keeps_every_live_record_and_ttl(kv_store: Any,
                                                                         data_dir: Any) -> None:
    store, want, with_ttl = _model_store(kv_store)
    victim = store._cold_order[1]
    path = hint_path(store._dir, victim.id)
    raw = bytearray(path.read_bytes())
    raw[-5] ^= 0xFF  # the hint's checksum no longer matches: the merge scans the blocks
    path.write_bytes(bytes(raw))
    result = merge.compact_all(store)
    assert result["segments"] == 1
    assert _reads(store) == want
    assert {k for k in want if store.ttl(k) is not None} == with_ttl
    store.close()
    again = kv_store(data_dir, durability="none", hot_bytes=16 << 10,
                     background_compaction=False)
    assert _reads(again) == want
    assert {k for k in want if again.ttl(k) is not None} == with_ttl


def test_a_merge_without_the_oldest_segment_keeps_the_tombstones_it_needs(
        kv_store: Any, data_dir: Any) -> None:
    store = kv_store(durability="none", hot_bytes=16 << 10, background_compaction=False)
    store.put(b"doomed", b"old value")
    for i in range(KEYS):
        store.put(f"pad-{i:04d}".encode(), VALUE)
    _spilled(store)
    store.delete(b"doomed")
    for i in range(KEYS):
        store.put(f"pad-{i:04d}".encode(), VALUE + b"2")
    _spilled(store)
    oldest = store._cold_order[0]
    group = store._cold_order[1:]
    assert group and sum(s.meta.get("tombstones", 0) for s in group) == 1
    with store._bg_mutex:
        merge.merge_segments(store, group)
    assert store._cold_order[0] is oldest  # the put of "doomed" is still on disk
    assert sum(s.meta.get("tombstones", 0) for s in store._cold_order[1:]) == 1
    store.close()
    again = kv_store(data_dir, durability="none", hot_bytes=16 << 10,
                     background_compaction=False)
    assert again.get(b"doomed") is None
    assert again.get(b"pad-0000") == VALUE + b"2"
