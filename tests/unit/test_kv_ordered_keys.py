"""``OrderedKeys`` (kv/ordered.py), the engine's ordered view, against a plain sorted list:
random inserts and deletes with tiny chunks (so chunks split, join and empty all the
time), then every query the engine makes (membership, positions, seeks by position,
ranges both ways with limits and bounds) compared after each step, and the structure's
own invariants (``check``); and ``KVStore.check`` catching a view that lost a key."""

from __future__ import annotations

import bisect
import random
from typing import Any

import pytest

from tuffdb.kv.ordered import OrderedKeys


def _key(rng: random.Random) -> bytes:
    return bytes(rng.randrange(97, 101) for _ in range(rng.randrange(1, 5)))


def _expected_between(model: list[bytes], lo: bytes, hi: bytes | None, limit: int,
                      reverse: bool) -> list[bytes]:
    inside = [k for k in model if k >= lo and (hi is None or k < hi)]
    return (inside[::-1] if reverse else inside)[:limit]


@pytest.mark.parametrize("seed", range(6))
def test_matches_a_sorted_list_through_splits_joins_and_empty_chunks(seed: int) -> None:
    rng = random.Random(seed)
    view = OrderedKeys(load=16)
    model: list[bytes] = []
    if seed % 2:
        first = {_key(rng) for _ in range(120)}
        view.update(first)
        model = sorted(first)
    for step in range(1500):
        k = _key(rng)
        if rng.random() < (0.7 if step < 700 else 0.15):  # grow, then shrink (joins)
            assert view.add(k) == (k not in model)
            if k not in model:
                bisect.insort(model, k)
        else:
            assert view.discard(k) == (k in model)
            if k in model:
                model.remove(k)
        assert view.check() == []
        assert len(view) == len(model)
        probe = _key(rng)
        assert (probe in view) == (probe in model)
        assert view.bisect_left(probe) == bisect.bisect_left(model, probe)
        if model:
            i = rng.randrange(-len(model), len(model))
            assert view[i] == model[i]
        lo = _key(rng) if rng.random() < 0.8 else b""
        hi = None if rng.random() < 0.3 else _key(rng)
        limit = rng.choice((1, 2, 5, 1000))
        for reverse in (False, True):
            assert view.between(lo, hi, limit, reverse=reverse) == \
                _expected_between(model, lo, hi, limit, reverse)
    with pytest.raises(IndexError):
        view[len(model)]


def test_empty_view_answers_every_query() -> None:
    view = OrderedKeys()
    assert len(view) == 0
    assert b"a" not in view
    assert view.bisect_left(b"a") == 0
    assert view.between(b"", None, 10) == []
    assert view.between(b"", None, 10, reverse=True) == []
    assert not view.discard(b"a")
    assert view.add(b"a")
    assert not view.add(b"a")
    assert view[0] == b"a"
    assert view.discard(b"a")
    assert len(view) == 0
    assert view.check() == []


def test_a_thinned_chunk_joins_its_successor() -> None:
    keys = [b"%03d" % i for i in range(64)]
    view = OrderedKeys(keys, load=16)  # four chunks of 16
    assert len(view._chunks) == 4  # noqa: SLF001  (the structure under test)
    for k in keys[:15]:  # the first chunk down to one key: it joins the second
        assert view.discard(k)
    assert len(view._chunks) == 3  # noqa: SLF001
    assert view.check() == []
    assert view.between(b"", None, 100) == keys[15:]
    assert [view[i] for i in range(len(view))] == keys[15:]


def test_check_reports_a_live_key_missing_from_the_ordered_view(kv_store: Any) -> None:
    store = kv_store(durability="none", background_compaction=False)
    store.put_many((b"k%03d" % i, b"v") for i in range(50))
    store.sync()  # spilled: the keys are in the cold tier, where check compares
    assert store.count() == 50  # builds the ordered view
    assert store.check() == []
    store._ordered.discard(b"k007")  # noqa: SLF001  (damage the view on purpose)
    assert any("ordered view: 1 live cold keys missing" in p for p in store.check())
    store._ordered.add(b"k007")  # noqa: SLF001  (repaired: the fixture checks again at teardown)


@pytest.mark.parametrize("seed", range(8))
def test_bulk_adds_and_discards_match_a_sorted_list(seed: int) -> None:
    """add_many/discard_many (the engine's fold): runs of every shape (appends past the
    end, runs merged into a chunk, a few keys into a big chunk, keys already there or
    absent), with tiny chunks so that splits, joins and emptied chunks happen all the
    time; every query checked against the model after each step."""
    rng = random.Random(seed)
    view = OrderedKeys(load=rng.choice((4, 16, 64)))
    model: set[bytes] = set()
    for step in range(300):
        shape = rng.random()
        if shape < 0.2:  # a run past the end (appends)
            top = max(model, default=b"a")
            batch = {top + bytes([rng.randrange(97, 123)]) * rng.randrange(1, 3)
                     for _ in range(rng.randrange(1, 80))}
        elif shape < 0.5:  # a contiguous run (merged)
            stem = _key(rng)
            batch = {stem + b"%03d" % i for i in range(rng.randrange(0, 120))}
        else:  # scattered keys, some already there or absent
            batch = {_key(rng) for _ in range(rng.randrange(0, 40))}
            batch |= set(rng.sample(sorted(model), min(len(model), rng.randrange(0, 10))))
        if rng.random() < (0.65 if step < 200 else 0.3):
            view.add_many(list(batch))
            model |= batch
        else:
            batch |= set(rng.sample(sorted(model), len(model) // 3))
            view.discard_many(list(batch))
            model -= batch
        expected = sorted(model)
        if view.check() != [] or len(view) != len(expected):
            raise AssertionError(f"step {step}: {view.check()} {len(view)} != {len(expected)}")
        assert view.between(b"", None, 10**9) == expected
        probe = _key(rng)
        assert view.bisect_left(probe) == bisect.bisect_left(expected, probe)
        if expected:
            i = rng.randrange(-len(expected), len(expected))
            assert view[i] == expected[i]
