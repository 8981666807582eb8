"""The by-id reply cache (server/ekodb/read_cache.py) through the real ekoDB app over a
real store: a cached body is served only while the stored bytes are the ones it was made
from, and replies shaped by anything else are never cached."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tuffdb.server.ekodb.proto import Request, Response
from tuffdb.server.ekodb.read_cache import ENTRY_OVERHEAD, ReadCache

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ekodb_app_harness import App  # noqa: E402


def test_cache_serves_a_body_only_for_the_same_stored_bytes() -> None:
    c = ReadCache(limit=1 << 20)
    key = ("c", "1", True, False)
    c.put(key, b"stored-v1", b"body-v1")
    assert c.get(key, b"stored-v1") == b"body-v1"
    assert c.get(key, bytes(bytearray(b"stored-v1"))) == b"body-v1"  # equal, not identical
    assert c.get(key, b"stored-v2") is None
    assert c.get(("c", "1", False, False), b"stored-v1") is None  # other typed setting
    c.put(key, b"stored-v2", b"body-v2")
    assert c.get(key, b"stored-v1") is None and c.get(key, b"stored-v2") == b"body-v2"
    assert len(c) == 1 and c.size == len(b"stored-v2body-v2") + ENTRY_OVERHEAD


def test_cache_stays_within_its_byte_bound_oldest_out_first() -> None:
    entry = 100 + 100 + ENTRY_OVERHEAD
    c = ReadCache(limit=entry * 4 * 16)  # one entry may take up to limit/16
    for i in range(100):
        c.put(("c", str(i), True, False), b"s" * 100, b"b" * 100)
        assert c.size <= c.limit
    # Two generations of up to 32 entries each: 96 puts flipped three times, 4 are young.
    assert len(c) == 36 and c.size == 36 * entry
    assert c.get(("c", "0", True, False), b"s" * 100) is None  # dropped with its generation
    assert c.get(("c", "63", True, False), b"s" * 100) is None
    assert c.get(("c", "64", True, False), b"s" * 100) == b"b" * 100  # the old generation
    assert c.get(("c", "99", True, False), b"s" * 100) == b"b" * 100
    c.put(("c", "huge", True, False), b"s" * c.limit, b"")
    assert c.get(("c", "huge", True, False), b"s" * c.limit) is None and len(c) == 36


def test_a_rewritten_entry_is_counted_once_and_outlives_its_first_generation() -> None:
    entry = 100 + 100 + ENTRY_OVERHEAD
    c = ReadCache(limit=entry * 4 * 16)
    c.put(("c", "hot", True, False), b"s" * 100, b"b" * 100)
    for i in range(31):
        c.put(("c", str(i), True, False), b"s" * 100, b"b" * 100)
    c.put(("c", "hot", True, False), b"s" * 100, b"B" * 100)  # a rewrite: no new bytes
    assert c.size == 32 * entry and len(c) == 32
    for i in range(31, 95):  # two flips: every other first-generation entry is gone
        c.put(("c", str(i), True, False), b"s" * 100, b"b" * 100)
        c.put(("c", "hot", True, False), b"s" * 100, b"B" * 100)
    assert c.get(("c", "0", True, False), b"s" * 100) is None
    assert c.get(("c", "hot", True, False), b"s" * 100) == b"B" * 100
    assert c.size <= c.limit


def test_a_rewrite_of_an_old_generation_entry_drops_the_old_one() -> None:
    entry = 100 + 100 + ENTRY_OVERHEAD
    c = ReadCache(limit=entry * 4 * 16)  # generations of up to 32 entries
    for i in range(33):  # the 33rd put flips: entries 0..31 are the old generation
        c.put(("c", str(i), True, False), b"s" * 100, b"b" * 100)
    assert len(c) == 33 and c.size == 33 * entry
    c.put(("c", "0", True, False), b"t" * 100, b"B" * 100)  # superseded in the old one
    assert len(c) == 33 and c.size == 33 * entry  # counted (and held) once
    assert c.get(("c", "0", True, False), b"s" * 100) is None
    assert c.get(("c", "0", True, False), b"t" * 100) == b"B" * 100


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    a = App(tmp_path)
    yield a
    a.close()


def _value(record: dict[str, Any], field: str) -> Any:
    v = record[field]
    return v["value"] if isinstance(v, dict) else v


def test_reads_reuse_the_body_and_never_serve_a_stale_one(app: App) -> None:
    rid = app.call("POST", "/api/insert/users", {"name": "ada", "n": 1})["id"]
    first = app.call("GET", f"/api/find/users/{rid}", raw=True)
    hits = app.app.reads.hits
    assert app.call("GET", f"/api/find/users/{rid}", raw=True) == first
    assert app.app.reads.hits == hits + 1
    for n in range(2, 6):  # every write is seen by the next read
        app.call("PUT", f"/api/update/users/{rid}", {"n": n})
        assert _value(app.call("GET", f"/api/find/users/{rid}"), "n") == n
    app.call("DELETE", f"/api/delete/users/{rid}")
    resp = app.app.handle(Request("GET", f"/api/find/users/{rid}".encode(),
                                  {"authorization": f"Bearer {app.token}"}))
    assert isinstance(resp, Response) and resp.status == 404


def test_replies_shaped_by_more_than_the_record_are_not_cached(app: App) -> None:
    rid = app.call("POST", "/api/insert/users", {"name": "ada", "secret": "s"})["id"]
    ttl_id = app.call("POST", "/api/insert/users", {"name": "tmp", "ttl": 3600})["id"]
    reads = app.app.reads
    assert _value(app.call("GET", f"/api/find/users/{ttl_id}"), "name") == "tmp"
    assert len(reads) == 0  # a TTL record's reply depends on the clock
    picked = app.call("GET", f"/api/find/users/{rid}?select_fields=name")
    assert set(picked) == {"id", "name"} and len(reads) == 0  # a projection
    key = app.app.keyring.create(collection_permissions={
        "users": {"read": True, "write": False, "exclude_fields": ["secret"]}})
    limited = app.login(key.key)
    assert "secret" not in app.call("GET", f"/api/find/users/{rid}", token=limited)
    assert len(reads) == 0  # a field restriction on the key
    assert "secret" in app.call("GET", f"/api/find/users/{rid}")
    assert len(reads) == 1
    assert "secret" not in app.call("GET", f"/api/find/users/{rid}", token=limited)
    app.call("PUT", "/api/config", {"use_typed_values": False})
    assert app.call("GET", f"/api/find/users/{rid}")["name"] == "ada"  # untyped: a new entry
    assert len(reads) == 2


def test_an_update_reply_is_what_the_next_read_sends(app: App) -> None:
    rid = app.call("POST", "/api/insert/users", {"name": "ada", "n": 1, "when": {
        "type": "DateTime", "value": "2026-01-02T03:04:05+00:00"}})["id"]
    reads = app.app.reads
    for change in [{"n": 2}, {"name": "bob", "extra": None, "f": 1.5}]:
        put = app.call("PUT", f"/api/update/users/{rid}", change, raw=True)
        hits = reads.hits
        assert app.call("GET", f"/api/find/users/{rid}", raw=True) == put
        assert reads.hits == hits + 1  # the update's reply was kept for the read
        app.app.reads = ReadCache()  # and a read decoded from the store sends the same
        assert app.call("GET", f"/api/find/users/{rid}", raw=True) == put
        reads = app.app.reads
    # a typed value that is not plain JSON: the read is decoded from the store, not the reply
    hits, misses = reads.hits, reads.misses
    put = app.call("PUT", f"/api/update/users/{rid}", {"when": {
        "type": "DateTime", "value": "2027-01-02T03:04:05+00:00"}}, raw=True)
    got = app.call("GET", f"/api/find/users/{rid}", raw=True)
    assert (reads.hits, reads.misses) == (hits, misses + 1)
    assert json.loads(got) == json.loads(put) and "2027" in json.dumps(json.loads(got)["when"])
    # a record with a TTL is never cached, updated or read
    ttl_id = app.call("POST", "/api/insert/users", {"name": "tmp", "ttl": 3600})["id"]
    size = len(reads)
    app.call("PUT", f"/api/update/users/{ttl_id}", {"name": "tmp2"})
    assert _value(app.call("GET", f"/api/find/users/{ttl_id}"), "name") == "tmp2"
    assert len(reads) == size
    # nor is a record of a collection with a schema (it may convert what it is given)
    app.call("POST", "/api/collections/priced", {"fields": {"price": {"field_type": "Decimal"}}})
    pid = app.call("POST", "/api/insert/priced", {"price": "1.25"})["id"]
    size = len(reads)
    app.call("PUT", f"/api/update/priced/{pid}", {"price": "2.50"})
    assert len(reads) == size
    price = app.call("GET", f"/api/find/priced/{pid}")["price"]
    assert price == {"type": "Decimal", "value": "2.50"}  # converted by the schema, stored
