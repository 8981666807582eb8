"""``KVStore.changes`` moves on every kind of write and on nothing else: the RESP face
compares it around a batch to answer write commands that changed nothing as reads
(no fsync round of their own) under ``appendfsync always``."""

from __future__ import annotations

from typing import Any

from tuffdb.kv.store import KEEP_TTL


def test_changes_moves_on_every_write_and_never_on_a_read(kv_store: Any) -> None:
    store = kv_store(durability="none", background_compaction=False)
    writes = [
        lambda: store.put(b"a", b"1"),
        lambda: store.put(b"a", b"1"),  # the same value again is still a write
        lambda: store.put(b"t", b"1", ttl=60),
        lambda: store.put_many([(b"b", b"2"), (b"c", b"3")]),
        lambda: store.write_batch([(b"d", b"4"), (b"a", None), (b"t", b"2", KEEP_TTL)]),
        lambda: store.delete(b"b"),
        lambda: store.expire(b"c", 30),
        lambda: store.persist(b"c"),
    ]
    for write in writes:
        before = store.changes
        write()
        assert store.changes != before
    reads = [
        lambda: store.get(b"d"),
        lambda: store.get_many([b"a", b"d", b"x"]),
        lambda: list(store.scan(b"")),
        lambda: store.count(b""),
        lambda: store.delete(b"absent"),  # nothing to delete: no tombstone, no change
        lambda: store.expire(b"absent", 5),
        lambda: store.persist(b"d"),  # no TTL to drop
        lambda: store.write_batch([]),
    ]
    for read in reads:
        before = store.changes
        read()
        assert store.changes == before

