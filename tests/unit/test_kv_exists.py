"""``KVStore.exists`` answers from the hot tier and the keydir, never from a value: a key
in the cold tier costs no block read (SISMEMBER of a big set), and it agrees with ``get``
on every state a key can be in."""

from __future__ import annotations

from typing import Any

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
