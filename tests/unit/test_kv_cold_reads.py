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


def test_adopt_takes_every_attribute_a_cold_segment_sets(kv_store: Any) -> None:
    """A tiered segment is built by ``ColdSegment.adopt`` (kv/tier.py): it must copy every
    attribute ``__init__`` sets, read here from the source, so one added later cannot be
    left behind (the compiled build's classes have no ``__dict__`` to copy wholesale)."""
    import ast
    from pathlib import Path

    from tuffdb.kv.cold import ColdSegment

    store = kv_store(durability="none", hot_bytes=16 << 10, cache_bytes=0)
    for i in range(2000):
        store.put(b"k%05d" % i, b"v" * 20)
    store.sync()
    # two private handles of two segments (the store's own stay untouched)
    seg = ColdSegment.open(store._cold_order[0].path, store._codec)
    other = ColdSegment.open(store._cold_order[1].path, store._codec)
    # from the source file (a compiled build's __init__ has no source to inspect)
    source = Path(__file__).parents[2] / "src" / "tuffdb" / "kv" / "cold.py"
    cls = next(n for n in ast.walk(ast.parse(source.read_text()))
               if isinstance(n, ast.ClassDef) and n.name == "ColdSegment")
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    names = {t.attr for node in ast.walk(init) if isinstance(node, (ast.Assign, ast.AnnAssign))
             for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
             if isinstance(t, ast.Attribute)}
    assert {"path", "id", "live_bytes", "_offsets"} <= names
    # ints compared by value (the compiled build boxes them anew on each read), made
    # distinct first; every other attribute by identity
    ints = {n for n in names if isinstance(getattr(seg, n), int)}
    objs = names - ints
    assert [n for n in sorted(objs) if getattr(other, n) is getattr(seg, n)] == ["codec"]
    for n in ints:
        setattr(seg, n, getattr(seg, n) + 12345)
    other.close()  # its own file; after adopt it shares seg's
    other.adopt(seg)
    missed = ([n for n in sorted(ints) if getattr(other, n) != getattr(seg, n)]
              + [n for n in sorted(objs) if getattr(other, n) is not getattr(seg, n)])
    seg.close()
    assert missed == []
