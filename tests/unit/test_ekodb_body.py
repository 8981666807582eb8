"""Splicing changed fields into a cached by-id reply (server/ekodb/body.py): the spliced
body is byte for byte the body encoded whole, and where that cannot be guaranteed the
splice declines. Then through the real app over a real store: updates of records the read
cache holds decoded reply what a read decoded from the store sends."""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tuffdb.documents.wire import record_to_wire
from tuffdb.server.ekodb import wire as ew
from tuffdb.server.ekodb.body import pair, splice
from tuffdb.server.ekodb.read_cache import ReadCache

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ekodb_app_harness import App  # noqa: E402

ENCODINGS = [(typed, mp) for typed in (True, False) for mp in (False, True)]


def _whole(record: dict[str, Any], typed: bool, mp: bool) -> bytes:
    return ew.encode(record_to_wire(record, typed=typed), mp)


@pytest.mark.parametrize(("typed", "mp"), ENCODINGS)
def test_a_splice_is_the_whole_encoding_of_the_merged_record(typed: bool, mp: bool) -> None:
    rng = random.Random(7)
    values: list[Any] = ["", "x", 'q"uote\\', "é\u2028", 0, -1, 2**40, 1.5, -0.0, 1e300, True,
                         False, None, "a" * 300, '"f1":', "type", "value"]
    names = [*(f"f{i}" for i in range(8)), "type", "value"]
    old = {"id": "r1", **{n: rng.choice(values) for n in names}}
    body = _whole(old, typed, mp)
    declined = 0
    for _ in range(300):
        changes = {n: rng.choice(values) for n in rng.sample(names, rng.randint(1, 3))}
        new = {**old, **changes}
        got = splice(body, old, changes, typed, mp)
        whole = _whole(new, typed, mp)
        if got is None:  # MessagePack: a pair's bytes may recur inside another value
            assert mp
            declined += 1
            got = whole
        assert got == whole
        old, body = new, got
    assert declined < 100  # seeded: the splice is the usual way, not the exception


@pytest.mark.parametrize(("typed", "mp"), ENCODINGS)
def test_a_splice_declines_what_it_cannot_place(typed: bool, mp: bool) -> None:
    old = {"id": "r1", "a": "x", "b": 1}
    body = _whole(old, typed, mp)
    assert splice(body, old, {"c": 1}, typed, mp) is None  # a new field: its place is the
    assert splice(body, old, {"id": "r2"}, typed, mp) is None  # encoder's to choose
    assert splice(body, {**old, "a": "y"}, {"a": "z"}, typed, mp) is None  # not this body


@pytest.mark.parametrize(("mp", "name"), [(True, "a"), (False, "value"), (False, "type")])
def test_a_pair_found_twice_is_not_spliced(mp: bool, name: str) -> None:
    # Which of the two is the field's, bytes alone cannot tell: the caller encodes whole.
    # (A MessagePack string may hold any bytes; in JSON only the keys a typed envelope
    # nests can repeat, so only they are searched for twice.)
    old = {"id": "r1", name: "x", "b": 1}
    body = _whole(old, True, mp)
    doubled = body + pair(name, "x", True, mp)
    assert splice(doubled, old, {name: "y"}, True, mp) is None
    assert splice(body, old, {name: "y"}, True, mp) == _whole({**old, name: "y"}, True, mp)


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    a = App(tmp_path)
    yield a
    a.close()


@pytest.mark.parametrize("typed", [True, False])
@pytest.mark.parametrize("mp", [False, True])
def test_updates_of_cached_records_reply_what_the_store_holds(app: App, typed: bool,
                                                              mp: bool) -> None:
    app.call("PUT", "/api/config", {"use_typed_values": typed})
    rng = random.Random(11)
    values: list[Any] = ["v", "w" * 100, 3, 2.25, True, None, 'q"\\']
    ids = [app.call("POST", "/api/insert/t", {f"f{i}": "x" * 10 for i in range(10)})["id"]
           for _ in range(5)]
    for rid in ids:  # a read caches each record decoded
        app.call("GET", f"/api/find/t/{rid}", raw=True, mp=mp)
    for _ in range(100):
        rid = rng.choice(ids)
        changes = {f"f{i}": rng.choice(values) for i in rng.sample(range(10), rng.randint(1, 2))}
        put = app.call("PUT", f"/api/update/t/{rid}", changes, raw=True, mp=mp)
        kept = app.app.reads
        app.app.reads = ReadCache()  # a read decoded from the store
        assert app.call("GET", f"/api/find/t/{rid}", raw=True, mp=mp) == put
        app.app.reads = kept
        assert app.call("GET", f"/api/find/t/{rid}", raw=True, mp=mp) == put  # and the cached reply
    for rid in ids:  # each record's reply is cached for the bytes it now has stored
        entry = app.app.reads.entry(("t", rid, typed, mp),
                                    app.face.db.collection("t").stored(rid) or b"")
        assert entry is not None
        assert entry[1] == app.call("GET", f"/api/find/t/{rid}", raw=True, mp=mp)
    assert app.face.db.check() == []
