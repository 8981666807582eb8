"""Bitmaps (SETBIT GETBIT BITCOUNT BITPOS BITOP BITFIELD BITFIELD_RO) and the small key
commands (TOUCH EXPIRETIME PEXPIRETIME SUBSTR) against a real redis-server, reply for
reply: a scripted sequence of their edges and errors, and Hypothesis-generated sequences.

Not compared: offsets past 2^31 bits (a string is at most the engine's 256 MB value,
Redis allows 512 MB). PEXPIREAT keeps its deadline to the millisecond: PEXPIRETIME after
it gives the same number back (before, the engine took the deadline as a relative TTL
and could answer 1 ms early).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))
from resp_harness import NEEDS_REDIS, compare, tuffdb_and_redis  # noqa: E402

pytestmark = NEEDS_REDIS

Script = list[tuple[str | bytes, ...]]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, int]]:
    yield from tuffdb_and_redis(tmp_path_factory, "bitmaps")


SCRIPT: Script = [
 ('SETBIT', 'b', '7', '1'),
 ('SETBIT', 'b', '100', '1'),
 ('SETBIT', 'b', '100', '1'),
 ('GET', 'b'),
 ('BITCOUNT', 'b'),
 ('BITCOUNT', 'b', '0', '0'),
 ('BITCOUNT', 'b', '0', '7', 'BIT'),
 ('BITCOUNT', 'b', '1'),
 ('BITCOUNT', 'b', '0', '-1', 'bits'),
 ('BITCOUNT', 'b', '-2', '-1'),
 ('BITCOUNT', 'b', '5', '2'),
 ('BITCOUNT', 'nokey'),
 ('BITCOUNT', 'b', '0', '-1', 'BIT'),
 ('BITCOUNT', 'b', '-100', '-95', 'BIT'),
 ('BITCOUNT', 'b', '100', '200'),
 ('BITPOS', 'b', '1'),
 ('BITPOS', 'b', '0'),
 ('BITPOS', 'b', '1', '1'),
 ('BITPOS', 'b', '1', '8', '100', 'BIT'),
 ('BITPOS', 'b', '1', '-1'),
 ('BITPOS', 'b', '0', '-1'),
 ('BITPOS', 'b', '1', '2', '1'),
 ('SET', 'ff', b'\xff\xff'),
 ('BITPOS', 'ff', '0'),
 ('BITPOS', 'ff', '0', '0', '-1'),
 ('BITPOS', 'ff', '0', '1'),
 ('BITPOS', 'ff', '0', '3', '9', 'BIT'),
 ('BITPOS', 'ff', '1', '3', '9', 'BIT'),
 ('BITPOS', 'nokey', '0'),
 ('BITPOS', 'nokey', '1'),
 ('BITPOS', 'b', '2'),
 ('SET', 'e', ''),
 ('BITPOS', 'e', '0'),
 ('BITPOS', 'e', '1'),
 ('BITCOUNT', 'e', '0', '-1'),
 ('SETBIT', 'b', '-1', '1'),
 ('SETBIT', 'b', '4294967296', '1'),
 ('STRLEN', 'b'),
 ('SETBIT', 'b', '1', '2'),
 ('GETBIT', 'b', '7'),
 ('GETBIT', 'b', '8'),
 ('GETBIT', 'b', '99999'),
 ('GETBIT', 'nokey', '0'),
 ('GETBIT', 'b', 'x'),
 ('SETBIT', 'b', '007', '1'), ('SETBIT', 'b', '+7', '1'), ('SETBIT', 'b', ' 7', '1'),
 ('GETBIT', 'b', '08'), ('BITFIELD', 'b', 'GET', 'u8', '#01'),
 ('SET', 'one', 'a'), ('BITCOUNT', 'one', '-1', '-3'), ('BITCOUNT', 'one', '-3', '-1'),
 ('BITPOS', 'one', '1', '-1', '-3'), ('BITCOUNT', 'one', '-1', '-3', 'BIT'),
 ('LPUSH', 'l', 'x'),
 ('SETBIT', 'l', '0', '1'),
 ('GETBIT', 'l', '0'),
 ('BITCOUNT', 'l'),
 ('BITOP', 'AND', 'd', 'l'),
 ('BITFIELD', 'bf', 'SET', 'i8', '0', '200', 'GET', 'u4', '0', 'INCRBY', 'u2', '100', '1', 'OVERFLOW', 'SAT', 'INCRBY', 'i8', '0', '300', 'OVERFLOW', 'FAIL', 'INCRBY', 'u8', '8', '500', 'GET', 'i64', '0'),
 ('BITFIELD', 'bf', 'GET', 'u64', '0'),
 ('BITFIELD', 'bf', 'GET', 'i65', '0'),
 ('BITFIELD', 'bf', 'GET', 'x8', '0'),
 ('BITFIELD_RO', 'bf', 'SET', 'i8', '0', '1'),
 ('BITFIELD', 'bf', 'GET', 'u8', '#1'),
 ('BITFIELD', 'bf', 'GET', 'u8', '#x'),
 ('BITFIELD', 'bf', 'OVERFLOW', 'BOGUS'),
 ('BITFIELD', 'bf'),
 ('BITFIELD_RO', 'bf', 'GET', 'u8', '0', 'GET', 'i3', '5'),
 ('BITFIELD', 'newk', 'OVERFLOW', 'FAIL', 'INCRBY', 'u2', '100', '9'),
 ('STRLEN', 'newk'),
 ('BITFIELD', 'n2', 'SET', 'u8', '0', '255', 'GET', 'u8', '0', 'INCRBY', 'u8', '0', '1', 'OVERFLOW', 'SAT', 'SET', 'u4', '0', '100', 'GET', 'u8', '0', 'SET', 'i4', '4', '-100', 'GET', 'u8', '0'),
 ('BITFIELD', 'n2', 'OVERFLOW', 'FAIL', 'SET', 'u4', '0', '100', 'GET', 'u8', '0'),
 ('BITFIELD', 'n3', 'SET', 'i64', '3', '-9223372036854775808', 'GET', 'i64', '3', 'INCRBY', 'i64', '3', '-1', 'GET', 'u63', '1', 'OVERFLOW', 'SAT', 'INCRBY', 'i64', '3', '-5'),
 ('BITFIELD', 'n3', 'INCRBY', 'u1', '0', '3', 'INCRBY', 'i5', '9', '100', 'GET', 'i5', '9', 'OVERFLOW', 'SAT', 'INCRBY', 'u7', '2', '-500', 'INCRBY', 'u7', '2', '5000'),
 ('GET', 'n3'),
 ('BITFIELD', 'n3', 'GET', 'u8'),
 ('BITFIELD', 'n3', 'INCRBY', 'u8', '0'),
 ('BITFIELD', 'n3', 'SET', 'u8', '0', 'x'),
 ('BITFIELD', 'nokey2', 'GET', 'u8', '100'),
 ('EXISTS', 'nokey2'),
 ('BITOP', 'NOT', 'dn', 'b'),
 ('GET', 'dn'),
 ('BITOP', 'AND', 'da', 'b', 'ff'),
 ('GET', 'da'),
 ('BITOP', 'OR', 'do', 'b', 'ff', 'nokey'),
 ('GET', 'do'),
 ('BITOP', 'XOR', 'dx', 'b', 'ff'),
 ('GET', 'dx'),
 ('BITOP', 'NOT', 'dn', 'b', 'ff'),
 ('BITOP', 'foo', 'x', 'b'),
 ('BITOP', 'OR', 'de', 'nokey1', 'nokey2'),
 ('EXISTS', 'de'),
 ('SET', 'de', 'x'),
 ('BITOP', 'OR', 'de', 'nokey1'),
 ('EXISTS', 'de'),
 ('SET', 't', 'v', 'EX', '100'),
 ('SETBIT', 't', '0', '1'),
 ('TTL', 't'),
 ('BITOP', 'AND', 't', 'b'),
 ('TTL', 't'),
 ('TOUCH', 'b', 'b', 'nokey'),
 ('SUBSTR', 'b', '0', '0'),
 ('SUBSTR', 'ff', '-1', '-1'),
 ('SET', 'x', '1'),
 ('EXPIREAT', 'x', '4102444800'),
 ('EXPIRETIME', 'x'),
 ('EXPIRETIME', 'b'),
 ('EXPIRETIME', 'nokey'),
 ('PEXPIREAT', 'x', '4102444800123'),
 ('EXPIRETIME', 'x'),
 ('PEXPIRETIME', 'x'),
 ('PEXPIRETIME', 'nokey'),
 *[cmd for ms in range(4102444800001, 4102444800041, 3)
   for cmd in (('PEXPIREAT', 'x', str(ms)), ('PEXPIRETIME', 'x'), ('EXPIRETIME', 'x'))],
 ('PEXPIREAT', 'x', '4102444800999', 'GT'), ('PEXPIRETIME', 'x'),
 ('PEXPIREAT', 'x', '4102444800500', 'LT'), ('PEXPIRETIME', 'x'),
 ('PEXPIREAT', 'x', '1000'), ('PEXPIRETIME', 'x'), ('EXISTS', 'x'),
 # SET and GETEX with EXAT/PXAT keep their deadline to the millisecond too
 *[cmd for ms in range(4102444800001, 4102444800041, 7)
   for cmd in (('SET', 'sx', 'v', 'PXAT', str(ms)), ('PEXPIRETIME', 'sx'),
               ('GETEX', 'sx', 'PXAT', str(ms + 1)), ('PEXPIRETIME', 'sx'))],
 ('SET', 'sx', 'v', 'EXAT', '4102444801'), ('PEXPIRETIME', 'sx'),
 ('GETEX', 'sx', 'EXAT', '4102444802'), ('PEXPIRETIME', 'sx'),
 ('GETEX', 'sx', 'PERSIST'), ('PEXPIRETIME', 'sx'),
 ('SET', 'sx', 'v', 'PXAT', '1000'), ('EXISTS', 'sx'),
]


def test_bitmap_commands_reply_like_redis_byte_for_byte(servers: tuple[int, int]) -> None:
    compare(servers, SCRIPT, exact=True)
    compare(servers, [("HELLO", "3"), *SCRIPT], exact=True)


KEYS = st.sampled_from(["a", "b", "c"])
OFFSETS = st.sampled_from(["0", "1", "7", "8", "15", "63", "64", "100", "#1", "#3"])
INDEXES = st.sampled_from(["0", "1", "-1", "2", "-3", "10", "-100"])
UNITS = st.sampled_from(["BYTE", "BIT"])
FIELDS = st.sampled_from(["i1", "u1", "i5", "u7", "i8", "u8", "i16", "u16", "i63", "u63",
                          "i64"])
VALUES = st.sampled_from(["0", "1", "-1", "127", "128", "255", "-129", "100000",
                          "9223372036854775807", "-9223372036854775808"])
FIELD_OP = st.one_of(
    st.tuples(st.just("GET"), FIELDS, OFFSETS),
    st.tuples(st.sampled_from(["SET", "INCRBY"]), FIELDS, OFFSETS, VALUES),
    st.tuples(st.just("OVERFLOW"), st.sampled_from(["WRAP", "SAT", "FAIL"])),
)
COMMAND = st.one_of(
    st.tuples(st.just("SETBIT"), KEYS, OFFSETS.filter(lambda o: not o.startswith("#")),
              st.sampled_from(["0", "1"])),
    st.tuples(st.just("GETBIT"), KEYS, st.sampled_from(["0", "5", "9", "70"])),
    st.tuples(st.just("BITCOUNT"), KEYS),
    st.tuples(st.just("BITCOUNT"), KEYS, INDEXES, INDEXES),
    st.tuples(st.just("BITCOUNT"), KEYS, INDEXES, INDEXES, UNITS),
    st.tuples(st.just("BITPOS"), KEYS, st.sampled_from(["0", "1"])),
    st.tuples(st.just("BITPOS"), KEYS, st.sampled_from(["0", "1"]), INDEXES),
    st.tuples(st.just("BITPOS"), KEYS, st.sampled_from(["0", "1"]), INDEXES, INDEXES, UNITS),
    st.tuples(st.just("BITOP"), st.sampled_from(["AND", "OR", "XOR"]), KEYS, KEYS, KEYS),
    st.tuples(st.just("BITOP"), st.just("NOT"), KEYS, KEYS),
    st.builds(lambda key, ops: ("BITFIELD", key, *[x for op in ops for x in op]),
              KEYS, st.lists(FIELD_OP, min_size=1, max_size=4)),
    st.tuples(st.just("SET"), KEYS, st.sampled_from(["", "a", b"\xff\x00", "foobar"])),
    st.tuples(st.sampled_from(["GET", "STRLEN", "DEL"]), KEYS),
)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=st.lists(COMMAND, min_size=1, max_size=25))
def test_random_bitmap_sequences_reply_like_redis(servers: tuple[int, int],
                                                  script: Script) -> None:
    compare(servers, script, exact=True)
