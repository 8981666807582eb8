"""A spill puts the blocks it writes into the block cache (kv/background.py: spill)."""

from __future__ import annotations

from typing import Any

KEYS = 300
VALUE = b"v" * 400


def _spilled(kv_store: Any, **options: Any) -> Any:
    store = kv_store(durability="none", hot_bytes=16 << 10, **options)
    for i in range(KEYS):
        store.put(f"key-{i:04d}".encode(), VALUE + i.to_bytes(2, "big"))
    store.sync()  # seals and spills every hot segment
    assert store._cold_order  # noqa: SLF001 - the reads below must be cold reads
    return store


def _read_all(store: Any) -> None:
    for i in range(KEYS):
        assert store.get(f"key-{i:04d}".encode()) == VALUE + i.to_bytes(2, "big")


def test_reads_after_a_spill_find_its_blocks_cached(kv_store: Any) -> None:
    store = _spilled(kv_store)
    assert store.stats()["cache_bytes"] > 0
    _read_all(store)
    assert store.stats()["cache_misses"] == 0


def test_a_segment_over_half_the_cache_is_not_put_in_it(kv_store: Any) -> None:
    store = _spilled(kv_store, cache_bytes=16 << 10)  # a 16 KiB segment, a 16 KiB cache
    _read_all(store)
    assert store.stats()["cache_misses"] > 0  # read from disk, decoded, then cached


def test_reopened_store_reads_from_disk_and_gets_the_same_bytes(kv_store: Any) -> None:
    _spilled(kv_store).close()
    store = kv_store(durability="none")
    _read_all(store)
    assert store.stats()["cache_misses"] > 0
