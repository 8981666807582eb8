"""An unlogged store's hot segment counts the memory it holds: an overwrite within it adds
only its growth (kv/store.py ``put``), so rewriting hot keys does not seal and spill
segment after segment; a logged one counts every put (its log holds each)."""

from __future__ import annotations

import random
from typing import Any

from tuffdb.kv.hot_tier import RECORD_OVERHEAD_BYTES

KEYS = 16


def _rewrite(store: Any, rounds: int, rng: random.Random) -> dict[bytes, bytes]:
    final: dict[bytes, bytes] = {}
    for n in range(rounds):
        key = f"k{n % KEYS}".encode()
        final[key] = bytes([n % 251]) * rng.randrange(200, 1500)  # grows and shrinks
        store.put(key, final[key])
    return final


def test_unlogged_overwrites_count_their_growth_only(kv_store: Any) -> None:
    store = kv_store(durability="none", hot_bytes=64 << 10, background_compaction=False)
    final = _rewrite(store, 3000, random.Random(1))  # ~2.5 MiB put, < 24 KiB held
    stats = store.stats()
    assert stats["hot_segments"] == 1 and stats["sealed_pending"] == 0
    assert stats["cold_segments"] == 0
    assert stats["hot_bytes"] == sum(len(k) + len(v) + RECORD_OVERHEAD_BYTES
                                     for k, v in final.items())
    assert all(store.get(k) == v for k, v in final.items())
    store.sync()  # the hot tier still spills whole
    assert all(store.get(k) == v for k, v in final.items())
    assert store.stats()["cold_segments"] == 1


def test_unlogged_new_keys_still_fill_and_seal_segments(kv_store: Any) -> None:
    store = kv_store(durability="none", hot_bytes=64 << 10, background_compaction=False)
    for n in range(300):
        store.put(f"new-{n}".encode(), b"x" * 1000)
    stats = store.stats()
    assert stats["cold_segments"] + stats["sealed_pending"] >= 4


def test_logged_overwrites_count_every_put(kv_store: Any) -> None:
    store = kv_store(durability="interval", hot_bytes=64 << 10, background_compaction=False)
    final = _rewrite(store, 3000, random.Random(1))
    stats = store.stats()
    assert stats["cold_segments"] + stats["sealed_pending"] >= 10
    assert all(store.get(k) == v for k, v in final.items())
