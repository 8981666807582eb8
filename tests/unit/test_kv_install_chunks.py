"""A spill and a merge move their keys into the keydir a chunk at a time (merge.INSTALL_CHUNK
per hold of the lock and the GIL, so a server's loop is not stopped for the whole pass).
Readers running meanwhile must see every key's newest value at every instant: the spilled
hot segment stays in the read chain until its last chunk is in, and a merge's inputs stay
open until every key points at the output."""

from __future__ import annotations

import threading
from typing import Any

from tuffdb.kv import merge

KEYS = 3 * merge.INSTALL_CHUNK + 17  # several chunks, and a partial one


def _key(i: int) -> bytes:
    return b"key-%06d" % i


def test_readers_see_the_newest_value_while_keys_move_in_chunks(kv_store: Any,
                                                                 tmp_path: Any) -> None:
    store = kv_store(tmp_path / "kv", durability="none", background_compaction=False)
    keys = [_key(i) for i in range(KEYS)]
    for k in keys:
        store.put(k, b"v1-" + k)
    store.sync()  # v1 is cold: a reader that missed the newer hot copy would find it
    for k in keys:
        store.put(k, b"v2-" + k)
    for i in range(KEYS):  # fresh keys in the same segment: the keydir's insert path too
        store.put(b"new-%06d" % i, b"n")
    want = [b"v2-" + k for k in keys]
    stop = threading.Event()
    wrong: list[tuple[bytes, bytes | None]] = []
    reads = [0]  # passes made; also picks the key of each pass's single get

    def reader() -> None:
        while True:  # at least one pass, however soon the writer is done
            got = store.get_many(keys)
            reads[0] += 1
            if got != want:
                wrong.extend((k, g) for k, g, w in zip(keys, got, want, strict=True) if g != w)
                return
            one = store.get(keys[reads[0] % KEYS])
            if one != want[reads[0] % KEYS]:
                wrong.append((keys[reads[0] % KEYS], one))
                return
            if stop.is_set():
                return

    t = threading.Thread(target=reader)
    t.start()
    try:
        store.sync()  # the spill of both key sets, chunk by chunk
        store.compact()  # a merge moves the live v2 records, chunk by chunk
    finally:
        stop.set()
        t.join()
    assert wrong == []
    assert store.get_many(keys) == want
    assert store.get(b"new-%06d" % (KEYS - 1)) == b"n"
    assert store.check() == []
    stats = store.stats()
    live = 2 * KEYS  # the v2 keys and the fresh ones; every v1 record is dead
    assert sum(s.live_records for s in store._cold_order) == live, stats
