"""Reads of the cold tier. ``KVStore.exists`` answers from the hot tier and the keydir,
never from a value: a key in the cold tier costs no block read (SISMEMBER of a big set),
and it agrees with ``get`` on every state a key can be in. ``get_many`` reuses the block
of the previous key while keys share one (a list's elements, a range) and must agree with
``get`` whatever the order of the keys and however few blocks the cache holds."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tuffdb import metrics


def test_exists_agrees_with_get_without_reading_blocks(kv_store: Any) -> None:
    store = kv_store(durability="none", hot_bytes=16 << 10, cache_bytes=0)
    for i in range(2000):
        store.put(b"member-%05d" % i, b"v" * 20)
    store.put(b"short-lived", b"x", ttl=0.001)
    store.sync()  # spilled: every key above is in the cold tier now
    store.delete(b"member-00007")
    store.put(b"hot", b"h")
    store.delete(b"hot-deleted")
    while store.get(b"short-lived") is not None:  # until its 1 ms TTL has passed
        pass
    keys = [b"member-%05d" % i for i in range(0, 2000, 7)] + [
        b"hot", b"hot-deleted", b"member-00007", b"absent", b"short-lived"]
    before = metrics.KV_GETS.value
    got = [store.exists(k) for k in keys]
    assert metrics.KV_GETS.value == before  # no block was read
    assert got == [store.get(k) is not None for k in keys]
    assert metrics.KV_GETS.value > before  # (get does read them: the check above can fail)
    assert got[:3] == [True, False, True]  # member-00000, -00007 (deleted), -00014
    assert got[-5:] == [True, False, False, False, False]


@pytest.mark.parametrize("cache_bytes", [0, 4 << 10, 64 << 20])
def test_get_many_agrees_with_get_across_blocks(kv_store: Any, cache_bytes: int) -> None:
    """No cache (every block read on the full path), a cache of about one block (blocks
    evicted between keys of one call), a cache that holds everything."""
    store = kv_store(durability="none", hot_bytes=64 << 10, cache_bytes=cache_bytes)
    keys = [b"k-%06d" % i for i in range(6000)]
    for i, k in enumerate(keys):
        store.put(k, b"value-%d" % i * (1 + i % 5))
    store.sync()
    for k in keys[::11]:
        store.delete(k)  # tombstones in the hot tier, over cold records
    store.sync()
    rng = random.Random(7)
    probes = [keys[:700], keys[2000:2600][::-1], rng.sample(keys, 900),
              [*keys[100:140], b"absent", *keys[100:140], *keys[5000:5040]]]
    for batch in probes:
        assert store.get_many(batch) == [store.get(k) for k in batch]
