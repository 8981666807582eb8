"""``write_batch`` applies a batch's plain puts and deletes in bulk (``_bulk_part``: a
pipelined push or pop of many list elements) and the other ops after them; the result must
be what applying every op in order gives: reads, the ordered view, TTLs, the log replayed
at open, and a batch whose other ops name a bulk key (then nothing is reordered)."""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from tuffdb.kv.store import BULK_MIN_OPS, KEEP_TTL, _bulk_part


def _elements(lo: int, hi: int) -> list[bytes]:
    return [b"e:%04d" % i for i in range(lo, hi)]


def test_the_bulk_part_is_found_only_from_enough_plain_ops() -> None:
    plain = [(k, b"v") for k in _elements(0, BULK_MIN_OPS)]
    assert _bulk_part(plain[:-1]) is None
    keys, vals, rest = _bulk_part([*plain, (b"meta", b"m", KEEP_TTL)])  # type: ignore[misc]
    assert keys == _elements(0, BULK_MIN_OPS)
    assert vals == [b"v"] * BULK_MIN_OPS
    assert rest == [(b"meta", b"m", KEEP_TTL)]
    assert _bulk_part([*plain[:-1], ("text key", b"v")]) is None  # not bytes: the loop


@pytest.mark.parametrize("durability", ["interval", "always"])
def test_bulk_puts_and_deletes_read_scan_and_replay_as_ops_in_order(
        kv_store: Any, tmp_path: Any, durability: str) -> None:
    path = tmp_path / "kv"
    store = kv_store(path, durability="none", background_compaction=False)
    store.write_batch([(k, b"old") for k in _elements(0, 20)])
    store.put(b"ttl-key", b"x", ttl=3600)
    store.sync()  # spilled: the deletes below must shadow cold records
    store.close()
    store = kv_store(path, durability=durability, background_compaction=False)
    assert store._cold_order
    list(store.scan(b"e:"))  # the ordered view exists from here: writes must reach it
    ops: list[tuple[Any, ...]] = [(k, None) for k in _elements(0, 10)]  # deletes
    ops += [(k, b"new") for k in _elements(20, 30)]  # fresh puts
    ops += [(b"ttl-key", b"y")]  # a plain put drops the key's TTL
    ops += [(b"meta", b"m1", KEEP_TTL), (b"timed", b"t", 60.0)]  # the rest, after
    store.write_batch(ops)

    def check(s: Any) -> None:
        assert [s.get(k) for k in _elements(0, 10)] == [None] * 10
        assert [s.get(k) for k in _elements(10, 20)] == [b"old"] * 10
        assert s.get_many(_elements(20, 30)) == [b"new"] * 10
        assert [k for k, _ in s.scan(b"e:")] == _elements(10, 30)
        assert s.get(b"ttl-key") == b"y"
        assert s.ttl(b"ttl-key") is None
        assert s.get(b"meta") == b"m1"
        assert s.get(b"timed") == b"t"
        assert s.ttl(b"timed") is not None

    check(store)
    store.sync()
    # What a crash now leaves (the batch in the log only, the hot tier never spilled),
    # opened: the log replays to the same state.
    shutil.copytree(path, tmp_path / "crashed")
    assert store._active.index  # (not spilled: the copy holds the batch in its log alone)
    check(kv_store(tmp_path / "crashed"))
    store.close()  # and reopened after a clean close
    store = kv_store(path)
    check(store)
    assert store.check() == []


def test_a_later_op_on_a_bulk_key_keeps_the_order_of_the_batch(kv_store: Any,
                                                               tmp_path: Any) -> None:
    store = kv_store(tmp_path / "kv", background_compaction=False)
    keys = _elements(0, BULK_MIN_OPS)
    # put then a TTL of 0 (deleted on arrival) on the same key: the later op wins
    store.write_batch([*((k, b"v") for k in keys), (keys[0], b"gone", 0.0)])
    assert store.get(keys[0]) is None
    # a TTL put then a plain put of the same key: the plain one wins and drops the TTL
    store.write_batch([(keys[1], b"timed", 60.0), *((k, b"w") for k in keys)])
    assert store.get(keys[1]) == b"w"
    assert store.ttl(keys[1]) is None
    # the same key twice in the bulk part: the last wins, a delete included
    store.write_batch([*((k, b"a") for k in keys), (keys[2], None), (keys[3], b"b")])
    assert store.get(keys[2]) is None
    assert store.get(keys[3]) == b"b"
    assert store.check() == []


def test_a_bulk_batch_of_deletes_alone_replays_from_the_log(kv_store: Any,
                                                            tmp_path: Any) -> None:
    """Deletes and puts without any TTL op: the log frames them as a mixed run."""
    path = tmp_path / "kv"
    store = kv_store(path, durability="always", background_compaction=False)
    keys = _elements(0, 2 * BULK_MIN_OPS)
    store.write_batch([(k, b"v") for k in keys])
    store.write_batch([*((k, None) for k in keys[:BULK_MIN_OPS]), (keys[-1], b"w")])
    shutil.copytree(path, tmp_path / "crashed")
    crashed = kv_store(tmp_path / "crashed")
    assert crashed.get_many(keys) == [None] * BULK_MIN_OPS + [b"v"] * (BULK_MIN_OPS - 1) + [b"w"]
