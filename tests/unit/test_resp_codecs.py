"""Small pure pieces of the RESP face: encoders, glob patterns, value tags, numbers."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tuffdb.server.resp import reply
from tuffdb.server.resp.commands.common import to_float, to_int
from tuffdb.server.resp.commands.numbers import add_and_format
from tuffdb.server.resp.glob import compile_glob, literal_prefix
from tuffdb.server.resp.table import TABLE, CommandError
from tuffdb.server.resp.keyspace import sortable, stored, type_name, unsortable, user_key


def test_resp2_and_resp3_shapes() -> None:
    pairs = [(reply.bulk(b"a"), reply.integer(1))]
    assert reply.Resp2.map(pairs) == b"*2\r\n$1\r\na\r\n:1\r\n"
    assert reply.Resp3.map(pairs) == b"%1\r\n$1\r\na\r\n:1\r\n"
    assert reply.Resp2.bulks([b"x", None]) == b"*2\r\n$1\r\nx\r\n$-1\r\n"
    assert reply.Resp3.bulks([b"x", None]) == b"*2\r\n$1\r\nx\r\n_\r\n"
    assert reply.Resp3.push([reply.bulk(b"m")]) == b">1\r\n$1\r\nm\r\n"
    assert reply.Resp3.verbatim(b"hi") == b"=6\r\ntxt:hi\r\n"
    assert reply.Resp2.null_array == b"*-1\r\n"
    assert reply.Resp3.null_array == b"_\r\n"


@given(st.lists(st.one_of(st.binary(max_size=40), st.none(), st.binary(min_size=1020,
                                                                       max_size=1030)),
                max_size=40))
def test_bulk_arrays_encode_each_value_whatever_the_mix_of_lengths(values: list[bytes | None],
                                                                  ) -> None:
    """Values of one length take a shortcut (one shared header); this must not show."""
    for enc, null in ((reply.Resp2, b"$-1\r\n"), (reply.Resp3, b"_\r\n")):
        expected = b"*%d\r\n" % len(values) + b"".join(
            null if v is None else b"$%d\r\n%b\r\n" % (len(v), v) for v in values)
        assert enc.bulks(values) == expected
        for v in [x for x in values if x is not None][:1]:  # the first value, repeated
            assert enc.bulks([v] * 7) == b"*7\r\n" + b"$%d\r\n%b\r\n" % (len(v), v) * 7
        assert enc.bulks([]) == b"*0\r\n"


def test_error_lines_never_contain_newlines() -> None:
    assert reply.error("ERR a\r\nb") == b"-ERR a  b\r\n"


@pytest.mark.parametrize(("pattern", "key", "matches"), [
    (b"h?llo", b"hello", True), (b"h?llo", b"hllo", False), (b"h*llo", b"heeeello", True),
    (b"h[ae]llo", b"hallo", True), (b"h[ae]llo", b"hillo", False),
    (b"h[^e]llo", b"hallo", True), (b"h[^e]llo", b"hello", False),
    (b"h[a-b]llo", b"hbllo", True), (b"h[b-a]llo", b"hbllo", True),
    (b"a\\*b", b"a*b", True), (b"a\\*b", b"axb", False), (b"*", b"", True),
    (b"a.c", b"abc", False), (b"k*", b"k\nx", True),
])
def test_glob_follows_redis_stringmatch(pattern: bytes, key: bytes, matches: bool) -> None:
    assert bool(compile_glob(pattern)(key)) is matches


def test_literal_prefix_stops_at_the_first_special_character() -> None:
    assert literal_prefix(b"user:*:x") == b"user:"
    assert literal_prefix(b"abc") == b"abc"
    assert literal_prefix(b"[a]") == b""


@given(st.binary(max_size=40))
def test_glob_never_raises_on_any_pattern(pattern: bytes) -> None:
    compile_glob(pattern)(b"some key")


@given(st.lists(st.floats(allow_nan=False), min_size=2, max_size=20))
def test_score_encoding_sorts_like_the_numbers_and_round_trips(scores: list[float]) -> None:
    encoded = [sortable(x) for x in scores]
    assert [unsortable(e) for e in encoded] == [x + 0.0 for x in scores]  # -0.0 -> 0.0
    assert sorted(encoded) == [sortable(x) for x in sorted(scores)]
    assert sortable(-0.0) == sortable(0.0)


@given(st.binary(max_size=8))
def test_user_keys_map_to_metadata_keys_outside_the_internal_space(key: bytes) -> None:
    engine_key = stored(key)
    assert user_key(engine_key) == key
    assert not (b"\xff" <= engine_key < b"\xff\xff")  # internal records live there


def test_string_tag_is_one_prefix_byte() -> None:
    assert type_name(b"sv") == b"string"
    assert type_name(b"L" + bytes(32)) == b"list"
    assert type_name(None) == b"none"


@pytest.mark.parametrize("text", [b"", b" 1", b"1 ", b"+1", b"01", b"-0", b"1_0", b"0x10",
                                  b"9223372036854775808", b"1.0"])
def test_to_int_rejects_what_redis_rejects(text: bytes) -> None:
    with pytest.raises(CommandError, match="not an integer"):
        to_int(text)


def test_to_int_accepts_int64_range() -> None:
    assert to_int(b"-9223372036854775808") == -(2**63)
    assert to_int(b"0") == 0


@given(st.integers(min_value=-20_000, max_value=20_000))
def test_to_int_reads_small_numbers_as_int_does(n: int) -> None:
    """Small integers come from a table; it must agree with the parser around its edges."""
    assert to_int(b"%d" % n) == n
    with pytest.raises(CommandError):
        to_int(b"0%d" % abs(n) if n else b"-0")


def test_to_float_rejects_spaces_and_nan() -> None:
    for text in (b" 1", b"nan", b""):
        with pytest.raises(CommandError):
            to_float(text)


@pytest.mark.parametrize(("old", "inc", "expected"), [
    (None, b"10.5", b"10.5"), (b"10.5", b"0.1", b"10.6"), (b"0.1", b"0.2", b"0.3"),
    (b"5.0e3", b"2.0e2", b"5200"), (b"3", b"1.1", b"4.1"), (None, b"-0.0", b"0"),
])
def test_incrbyfloat_formats_like_redis_long_double(old: bytes | None, inc: bytes,
                                                    expected: bytes) -> None:
    assert add_and_format(old, inc) == expected


def test_incrbyfloat_refuses_infinity_and_junk() -> None:
    with pytest.raises(CommandError, match="NaN or Infinity"):
        add_and_format(b"1e4932", b"1e4932")
    with pytest.raises(CommandError, match="not a valid float"):
        add_and_format(None, b"1_0")


ISSUE_31_SCOPE = """
LPUSH RPUSH LPUSHX RPUSHX LPOP RPOP LRANGE LLEN LINDEX LSET LREM LTRIM LINSERT LPOS LMOVE
RPOPLPUSH LMPOP BLPOP BRPOP BLMOVE BRPOPLPUSH BLMPOP SADD SREM SMEMBERS SISMEMBER SMISMEMBER
SCARD SPOP SRANDMEMBER SINTER SUNION SDIFF SINTERSTORE SUNIONSTORE SDIFFSTORE SINTERCARD SMOVE
SSCAN ZADD ZREM ZSCORE ZMSCORE ZINCRBY ZCARD ZCOUNT ZLEXCOUNT ZRANGE ZRANGEBYSCORE
ZREVRANGEBYSCORE ZRANGEBYLEX ZREVRANGEBYLEX ZREVRANGE ZRANGESTORE ZRANK ZREVRANK ZPOPMIN ZPOPMAX
BZPOPMIN BZPOPMAX ZMPOP BZMPOP ZREMRANGEBYRANK ZREMRANGEBYSCORE ZREMRANGEBYLEX ZUNION ZINTER ZDIFF
ZUNIONSTORE ZINTERSTORE ZDIFFSTORE ZRANDMEMBER ZSCAN XADD XRANGE XREVRANGE XLEN XDEL XTRIM XREAD
XGROUP XREADGROUP XACK XPENDING XCLAIM XAUTOCLAIM XINFO EVAL EVALSHA EVAL_RO EVALSHA_RO SCRIPT
OBJECT"""


def test_command_table_covers_the_issue_scope() -> None:
    scope = ["GET", "SET", "MGET", "MSET", "MSETNX", "SETNX", "SETEX", "PSETEX", "GETSET", "GETDEL", "GETEX", "APPEND", "STRLEN", "GETRANGE", "SETRANGE", "INCR", "DECR", "INCRBY", "DECRBY", "INCRBYFLOAT", "DEL", "UNLINK", "EXISTS", "EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT", "TTL", "PTTL", "PERSIST", "TYPE", "RENAME", "RENAMENX", "SCAN", "KEYS", "DBSIZE", "RANDOMKEY", "FLUSHDB", "FLUSHALL", "HSET", "HGET", "HMGET", "HGETALL", "HDEL", "HEXISTS", "HLEN", "HKEYS", "HVALS", "HINCRBY", "HINCRBYFLOAT", "HSETNX", "HSCAN", "MULTI", "EXEC", "DISCARD", "WATCH", "UNWATCH", "SUBSCRIBE", "UNSUBSCRIBE", "PSUBSCRIBE", "PUNSUBSCRIBE", "PUBLISH", "PING", "ECHO", "AUTH", "HELLO", "SELECT", "QUIT", "RESET", "CLIENT", "INFO", "CONFIG", "COMMAND", "TIME", "SAVE", "BGSAVE", "LASTSAVE", "WAIT"]
    scope += ISSUE_31_SCOPE.split()
    missing = [c for c in scope if c.lower().encode() not in TABLE]
    assert missing == []
    for spec in TABLE.values():
        assert re.fullmatch(r"[a-z]+(_ro)?", spec.name)
        assert spec.arity != 0
