"""A spill leaves out the tombstones that shadow nothing: keys written and deleted while
hot (a queue's push then pop) never reach a cold segment; a delete of a key that is cold
still does, and still hides it after a reopen."""

from __future__ import annotations

from typing import Any


def _tombstones(store: Any) -> int:
    return sum(s.meta.get("tombstones", 0) for s in store._cold_order)


def test_a_key_born_and_deleted_while_hot_leaves_no_tombstone(kv_store: Any, tmp_path: Any
                                                              ) -> None:
    path = tmp_path / "kv"
    store = kv_store(path, durability="none", background_compaction=False)
    store.put(b"old", b"cold value")
    store.sync()  # "old" is in a cold segment now
    assert store._cold_order
    before = _tombstones(store)
    for i in range(100):
        store.put(b"job-%03d" % i, b"payload")
    for i in range(100):
        store.delete(b"job-%03d" % i)
    store.delete(b"old")
    store.sync()
    assert _tombstones(store) - before == 1  # only "old"'s: it has a record to shadow
    assert store.get(b"old") is None
    assert all(store.get(b"job-%03d" % i) is None for i in range(100))
    store.close()
    store = kv_store(path)
    assert store.get(b"old") is None
    assert all(store.get(b"job-%03d" % i) is None for i in range(100))
    assert store.check() == []


def test_a_hot_segment_of_only_such_tombstones_spills_to_an_empty_segment(
        kv_store: Any, tmp_path: Any) -> None:
    path = tmp_path / "kv"
    store = kv_store(path, durability="none", background_compaction=False)
    for i in range(50):
        store.put(b"k%02d" % i, b"v")
        store.delete(b"k%02d" % i)
    store.sync()
    assert sum(s.meta["records"] for s in store._cold_order) == 0
    store.put(b"after", b"x")
    store.close()
    store = kv_store(path)
    assert store.get(b"after") == b"x"
    assert all(store.get(b"k%02d" % i) is None for i in range(50))
    assert store.check() == []
