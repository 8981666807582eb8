"""DUMP and RESTORE against a real redis-server: every type but streams moves both ways
(Redis's payloads, with their LZF strings, integer encodings, listpacks, intsets and
quicklists, restore here; ours restore in Redis), errors reply as Redis's do, and a
payload that is not one is refused with an error, never half-restored.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tuffdb._format.rdb import RDB_VERSION, crc64, loads

sys.path.insert(0, str(Path(__file__).resolve().parent))
from resp_harness import NEEDS_REDIS, compare, tuffdb_and_redis  # noqa: E402

pytestmark = NEEDS_REDIS


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, int]]:
    yield from tuffdb_and_redis(tmp_path_factory, "dump")


def _fill(r: redis.Redis) -> None:
    r.flushall()
    r.set("s", "hello")
    r.set("n", "12345")
    r.set("neg", "-70000")
    r.set("lzf", "a" * 100 + "b" * 50)  # Redis compresses strings over 20 bytes
    r.set("bin", bytes(range(256)))
    r.set("long", "x" * 70000)
    r.rpush("l", "a", "b", "1", "2", "-5", "300", "70000", "x" * 5000)
    r.rpush("lbig", *[f"e{i}" for i in range(1000)])
    r.rpush("lplain", "y" * 10000, "z")
    r.sadd("intset", 1, 2, 3, -4, 100000, 2**40)
    r.sadd("set", "a", "b")
    r.sadd("sbig", *[f"m{i}" for i in range(600)])
    r.zadd("z", {"a": 1.5, "b": 2, "c": -3, "d": 1e20, "e": float("inf")})
    r.zadd("zbig", {f"m{i}": i * 0.5 for i in range(300)})
    r.hset("h", mapping={"f": "v", "g": "1", "n": "-2"})
    r.hset("hbig", mapping={f"f{i}": "v" * (i % 70) for i in range(700)})


KEYS = ["s", "n", "neg", "lzf", "bin", "long", "l", "lbig", "lplain", "intset", "set", "sbig",
        "z", "zbig", "h", "hbig"]


def _content(r: redis.Redis, key: str) -> Any:
    kind = r.type(key)
    if kind == b"string":
        return r.get(key)
    if kind == b"list":
        return r.lrange(key, 0, -1)
    if kind == b"set":
        return sorted(r.smembers(key))
    if kind == b"zset":
        return r.zrange(key, 0, -1, withscores=True)
    return sorted(r.hgetall(key).items())


@pytest.mark.parametrize("direction", ["redis-to-tuffdb", "tuffdb-to-redis"])
def test_every_type_but_streams_moves_by_dump_and_restore(servers: tuple[int, int],
                                                          direction: str) -> None:
    ours, theirs = redis.Redis(port=servers[0]), redis.Redis(port=servers[1])
    src, dst = (theirs, ours) if direction == "redis-to-tuffdb" else (ours, theirs)
    _fill(src)
    dst.flushall()
    for key in KEYS:
        assert dst.restore(key, 0, src.dump(key)) in (True, b"OK")
        assert _content(dst, key) == _content(src, key), key
    dst.restore("ttl", 100000, src.dump("s"))
    assert 90000 < dst.pttl("ttl") <= 100000


def test_restore_errors_reply_like_redis(servers: tuple[int, int]) -> None:
    payload = redis.Redis(port=servers[1]).dump("s") or b""  # any valid payload (both agree)
    compare(servers, [
        ("SET", "s", "v"), ("RESTORE", "s", "0", b"garbage"), ("RESTORE", "x", "0", b"garbage"),
        ("RESTORE", "x", "-1", payload), ("RESTORE", "x", "0", payload[:-1] + b"\x00"),
        ("RESTORE", "x", "0", payload, "BOGUS"), ("RESTORE", "x", "0", payload, "IDLETIME", "-1"),
        ("RESTORE", "x", "0", payload, "FREQ", "300"), ("DUMP", "nokey"),
        ("RESTORE", "s", "1", payload, "REPLACE", "ABSTTL"), ("EXISTS", "s"),
        ("RESTORE", "x", "0", payload, "IDLETIME", "5", "FREQ", "3"), ("GET", "x"),
        ("XADD", "st", "1-1", "f", "v"),
    ], exact=True)


def _with_footer(body: bytes) -> bytes:
    body += RDB_VERSION.to_bytes(2, "little")
    return body + crc64(body).to_bytes(8, "little")


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.one_of(st.binary(max_size=60),
                      st.builds(lambda k, rest: bytes([k]) + rest,
                                st.sampled_from([0, 1, 2, 3, 4, 5, 11, 16, 17, 18, 20]),
                                st.binary(max_size=60))))
def test_a_payload_that_is_not_one_is_refused_with_an_error(servers: tuple[int, int],
                                                            body: bytes) -> None:
    """Any body with a valid footer either restores or gets Redis's "Bad data format",
    whatever its bytes (the decoder never fails otherwise, the key is never half-made)."""
    r = redis.Redis(port=servers[0])
    r.delete("fuzz")
    try:
        loads(_with_footer(body))
    except Exception as exc:  # noqa: BLE001 - what the decoder raises is the point
        assert str(exc) == "ERR Bad data format", repr(exc)
        with pytest.raises(redis.ResponseError, match="Bad data format"):
            r.restore("fuzz", 0, _with_footer(body))
        assert r.exists("fuzz") == 0
    else:
        assert r.restore("fuzz", 0, _with_footer(body)) in (True, b"OK")


def test_restore_absttl_keeps_the_deadline_to_the_millisecond(servers: tuple[int, int]) -> None:
    theirs = redis.Redis(port=servers[1])
    theirs.set("pay:s", "v")
    theirs.rpush("pay:l", "a", "b")
    string, lst = theirs.dump("pay:s") or b"", theirs.dump("pay:l") or b""
    at = [str(4102444800000 + ms) for ms in (1, 457, 999)]  # 2100-01-01 and odd ms
    for _ in range(20):  # the old drift depended on the clock's reading
        compare(servers, [
            ("RESTORE", "a", at[0], string, "ABSTTL"), ("PEXPIRETIME", "a"),
            ("RESTORE", "b", at[1], lst, "ABSTTL"), ("PEXPIRETIME", "b"),
            ("RESTORE", "a", at[2], lst, "REPLACE", "ABSTTL"), ("PEXPIRETIME", "a"),
        ], exact=True)
