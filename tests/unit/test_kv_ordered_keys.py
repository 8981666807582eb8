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
