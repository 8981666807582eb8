"""The collection layout on disk (docs/format/resp.md): layout-0 data converted on open,
and the elements of deleted, overwritten and expired collections swept away."""

from __future__ import annotations

import time
from pathlib import Path

import msgspec
import pytest
import redis

from tuffdb import KVStore
from tuffdb._format.resp import DATA_PREFIX, INDEX_PREFIX, LAYOUT_KEY, OWNER_PREFIX
from tuffdb.errors import CorruptionError
from tuffdb.server.resp.keyspace import LAYOUT_RECORD, open_layout
from tuffdb.server.resp._process import start_tuffdb

WAIT_S = 30.0


def test_a_fresh_store_gets_the_layout_record_without_an_ordered_view(tmp_path: Path) -> None:
    """Opening an empty store writes the layout record and scans nothing: a scan would
    build the engine's ordered view, which every later write then folds into (a SET-only
    server paid it all its first life); a reopen finds the record."""
    with KVStore.open(tmp_path / "kv", durability="always") as kv:
        open_layout(kv)
        assert kv.get(LAYOUT_KEY) == LAYOUT_RECORD
        kv.put(b"k", b"v")
        assert kv._ordered is None  # noqa: SLF001  (what a scan would have built)
    with KVStore.open(tmp_path / "kv", durability="always") as kv:
        open_layout(kv)
        assert kv._ordered is None  # noqa: SLF001
        assert kv.get(b"k") == b"v"


def test_layout0_strings_hashes_and_ff_keys_are_converted_on_open(tmp_path: Path) -> None:
    with KVStore.open(tmp_path / "kv", durability="always") as kv:
        kv.put(b"plain", b"shello")
        kv.put(b"h", b"h" + msgspec.msgpack.encode([b"f1", b"v1", b"f2", b"v2"]))
        kv.put(b"hot", b"h" + msgspec.msgpack.encode([b"a", b"1"]), ttl=3600)
        kv.put(b"\xffraw", b"sbinary key", ttl=3600)
    proc = start_tuffdb(tmp_path)
    try:
        r = redis.Redis(port=proc.port)
        assert r.get("plain") == b"hello"
        assert r.hgetall("h") == {b"f1": b"v1", b"f2": b"v2"}
        assert r.hlen("h") == 2
        assert r.type("h") == b"hash"
        assert r.hget("hot", "a") == b"1"
        assert 3500 < r.ttl("hot") <= 3600
        assert r.get(b"\xffraw") == b"binary key"
        assert 3500 < r.ttl(b"\xffraw") <= 3600
        assert sorted(r.keys("*")) == [b"h", b"hot", b"plain", b"\xffraw"]
        assert r.dbsize() == 4
        assert r.hset("h", "f3", "v3") == 1
        assert r.hlen("h") == 3
    finally:
        proc.stop()
    with KVStore.open(tmp_path / "kv") as kv:
        assert kv.get(LAYOUT_KEY) == b"tuffdb-resp-layout 1"
        assert kv.get(b"h")[:1] == b"H"
        assert kv.get(b"\xffraw") is None
    restarted = start_tuffdb(tmp_path)  # a converted store opens as it is
    try:
        assert redis.Redis(port=restarted.port).hget("h", "f3") == b"v3"
    finally:
        restarted.stop()


def test_elements_of_dropped_collections_are_swept(tmp_path: Path) -> None:
    proc = start_tuffdb(tmp_path)
    try:
        r = redis.Redis(port=proc.port)
        r.config_set("tuffdb-sweep-interval-ms", "50")
        r.sadd("big", *range(3000))
        r.rpush("list", *range(500))
        r.zadd("z", {f"m{i}": i for i in range(400)})
        r.xadd("s", {"f": "v"})
        r.hset("kept", mapping={f"f{i}": i for i in range(10)})
        r.delete("big")
        r.set("list", "now a string")
        r.expire("z", 1)
        r.rename("s", "kept2")
        expected = 3000 + 500 + 2 * 400
        deadline = time.monotonic() + WAIT_S
        while True:
            info = r.info("persistence")
            if info["tuffdb_swept_entries"] >= expected and not info["tuffdb_sweeper_busy"] \
                    and not r.exists("z"):
                break
            assert time.monotonic() < deadline, info
        assert info["tuffdb_swept_entries"] == expected
        assert r.hlen("kept") == 10
        assert r.xlen("kept2") == 1
    finally:
        proc.stop()
    with KVStore.open(tmp_path / "kv") as kv:
        assert kv.count(DATA_PREFIX) == 10 + 1  # the hash's fields and the stream's entry
        assert kv.count(INDEX_PREFIX) == 0
        assert kv.count(OWNER_PREFIX) == 2


def test_a_value_that_is_no_layout0_hash_is_a_clear_error_naming_its_key(tmp_path: Path) -> None:
    for bad in (b"h\x01\x02", b"h" + msgspec.msgpack.encode([b"f1", b"v1", b"f2"])):
        d = tmp_path / str(len(bad))
        with KVStore.open(d, durability="always") as kv:
            kv.put(b"ok", b"sfine")
            kv.put(b"not-a-hash", bad)
        with KVStore.open(d) as kv:
            with pytest.raises(CorruptionError, match="b'not-a-hash'.*not written by the RESP"):
                open_layout(kv)
            assert kv.get(b"not-a-hash") == bad  # nothing was lost or rewritten
