"""The background thread keeps the ordered view current while nobody reads in order.

Story (issue 31): the RESP face's sweeper scans in key order every 30 s; with the view
folded only by ordered reads, that scan had to fold every key written in the last 30 s
at once: at 10^5 writes/s, seconds on the event loop, long enough for redis-py 8's 5 s
default socket timeout to fire and its retry to re-send a pipeline of XADDs. Now the
background thread folds written keys in chunks after each spill and on each tick.
"""

from __future__ import annotations

import time
from pathlib import Path

from tuffdb import KVStore

WAIT_S = 30.0


def test_written_keys_are_folded_without_an_ordered_read(tmp_path: Path) -> None:
    with KVStore.open(tmp_path / "kv", durability="none", hot_bytes=64 * 1024,
                      expiry_interval_s=0.05) as kv:
        kv.put(b"first", b"v")
        assert kv.count() == 1  # builds the ordered view
        kv.put_many((b"k%06d" % i, b"v") for i in range(20_000))
        kv.delete(b"first")
        deadline = time.monotonic() + WAIT_S
        while True:
            with kv._lock:  # noqa: SLF001  (the fold folds a chunk under the lock)
                if not (kv._touched or kv._folding):  # noqa: SLF001  (the condition under test)
                    folded = len(kv._ordered)  # noqa: SLF001
                    break
            assert time.monotonic() < deadline, "written keys never folded"
            time.sleep(0.01)  # polling a condition the background thread changes
        assert folded == 20_000
        assert kv.count(prefix=b"k") == 20_000
        assert next(kv.scan_keys(reverse=True)) == b"k019999"


def test_a_keep_ttl_rewrite_of_a_present_key_is_not_folded(kv_store) -> None:  # noqa: ANN001
    """A KEEP_TTL put says "rewritten": if the key exists when it applies, the ordered view
    cannot change and the key is not queued for the fold (each fold costs the background
    thread binary searches in a view of every key: at 10^6 zset members, most of its
    time). Every other write still is: a KEEP_TTL put of an absent key, a delete, a plain
    put. Ordered reads agree either way, and check() compares the view with the keys.
    (An ordered read folds whatever is pending, whoever folds it: the count of folded
    keys is the same whenever the background thread runs.)"""
    from tuffdb.kv.store import KEEP_TTL

    kv = kv_store(durability="none")
    kv.write_batch([(b"a", b"1"), (b"b", b"1"), (b"c", b"1")])
    assert kv.count() == 3  # builds the view and folds what is pending
    folded = kv.stats()["ordered_keys_folded"]
    kv.write_batch([(b"a", b"2", KEEP_TTL), (b"b", b"2", KEEP_TTL)])
    assert kv.count() == 3
    assert kv.stats()["ordered_keys_folded"] == folded
    kv.write_batch([(b"x", b"new", KEEP_TTL), (b"c", None), (b"a", b"3")])
    assert kv.count() == 3
    assert kv.stats()["ordered_keys_folded"] == folded + 3
    kv.write_batch([(b"c", b"back", KEEP_TTL)])  # deleted above: it must be folded again
    assert list(kv.scan_keys()) == [b"a", b"b", b"c", b"x"]
    assert kv.stats()["ordered_keys_folded"] == folded + 4
    assert [kv.get(k) for k in (b"a", b"b", b"c", b"x")] == [b"3", b"2", b"back", b"new"]
    assert kv.check() == []


def test_keys_in_range_is_scan_keys_as_one_list(kv_store) -> None:  # noqa: ANN001
    """``keys_in_range`` (one slice of the ordered view, TTLs tested in bulk) gives what
    ``scan_keys`` (every key tested) gives, through puts, deletes, TTLs that passed and
    TTLs that did not, across spills to cold segments, for prefixes, bounds and none."""
    import random

    kv = kv_store(durability="none", hot_bytes=64 * 1024)
    rng = random.Random(9)
    clock = [time.time()]
    # The store's own clock, moved on by the test (kept to the end: the teardown's check()
    # must see the time the view was folded at, as a real clock never goes back).
    kv._clock = lambda: clock[0]  # noqa: SLF001
    for step in range(6):
        for _ in range(3000):
            key = b"%c:%05d" % (rng.choice(b"abc"), rng.randrange(20_000))
            r = rng.random()
            if r < 0.2:
                kv.delete(key)
            elif r < 0.3:
                kv.put(key, b"t", ttl=rng.choice([1.0, 1000.0]))
            else:
                kv.put(key, b"v%d" % step)
        clock[0] += 2.0  # the 1 s TTLs have passed
        for prefix, start, end in [(b"", None, None), (b"b:", None, None),
                                   (b"a:", b"01000", b"09000"), (b"c:", b"15000", None),
                                   (b"zz", None, None)]:
            assert kv.keys_in_range(prefix, start, end) == list(kv.scan_keys(prefix, start, end))


def test_keys_between_is_the_head_of_scan_keys_for_keys_without_a_ttl(kv_store) -> None:  # noqa: ANN001
    """``keys_between`` (one slice of the ordered view, nothing looked up again: the RESP
    face's zset ranges) gives the first ``limit`` keys ``scan_keys`` yields, both ways and
    after a skip, through puts and deletes across spills to cold segments."""
    import random

    kv = kv_store(durability="none", hot_bytes=64 * 1024)
    rng = random.Random(11)
    for step in range(4):
        for _ in range(3000):
            key = b"z:%05d" % rng.randrange(20_000)
            if rng.random() < 0.25:
                kv.delete(key)
            else:
                kv.put(key, b"v%d" % step)
        kv.put(b"y", b"below")
        kv.put(b"zz", b"above")
        for lo, hi in [(b"z:", b"z;"), (b"z:01000", b"z:09000"), (b"z:19900", b"z;")]:
            for reverse in (False, True):
                for skip, limit in [(0, 10), (7, 10), (0, 5000), (2500, 3), (10**6, 10)]:
                    got = kv.keys_between(lo, hi, limit, reverse=reverse, skip=skip)
                    want = list(kv.scan_keys(b"", lo, hi, reverse=reverse, skip=skip))[:limit]
                    assert got == want, (lo, hi, reverse, skip, limit)
                    if skip < 10:  # noqa: PLR2004  (every range holds more keys)
                        assert got


def test_is_empty_sees_every_held_key_without_building_the_ordered_view(kv_store) -> None:  # noqa: ANN001
    """``is_empty`` is a fresh store's test (the RESP face's layout check): true for no
    key and for keys deleted since (in the hot tier, and once their tombstones spilled),
    false for a key in the hot tier, in a cold segment or with a TTL; and it leaves the
    ordered view unbuilt."""
    kv = kv_store(durability="none", hot_bytes=64 * 1024)
    assert kv.is_empty()
    kv.put(b"a", b"1")
    assert not kv.is_empty()
    kv.delete(b"a")
    assert kv.is_empty()
    for i in range(2000):
        kv.put(b"k%05d" % i, b"x" * 100)
    kv.sync()  # spilled: the keys are in cold segments now
    assert not kv.is_empty()
    kv.delete_many([b"k%05d" % i for i in range(2000)])
    kv.sync()  # the tombstones spilled too: nothing is held
    assert kv.is_empty()
    kv.put(b"t", b"1", ttl=3600)
    assert not kv.is_empty()
    assert kv._ordered is None  # noqa: SLF001  (what the method must not build)
