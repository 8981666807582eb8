"""The DUMP payload codec (_format/rdb.py) on payloads redis-server 7.0.15 produced (kept
here as bytes, so this needs no server): every encoding it uses decodes to the value
that was dumped, ours round-trip, and damaged payloads are refused."""

from __future__ import annotations

import pytest

from tuffdb._format.rdb import RdbError, crc64, dumps, loads

REDIS_7_0 = {  # DUMP of each key after the commands in the comment
    # SET s hello
    "s": (b"\x00\x05hello\n\x00cr\xdfve4 \n", ("string", b"hello")),
    # SET n 12345 (an integer encoding)
    "n": (b"\x00\xc190\n\x00\x9d\x94\xea'\x93\xfc\x08\xb9", ("string", b"12345")),
    # SET big <100 x "a"> (LZF)
    "big": (b"\x00\xc3\t@d\x01aa\xe0W\x00\x01aa\n\x00\xe8\xa3\xb5\x07\xb0m\xf2q",
            ("string", b"a" * 100)),
    # RPUSH l a b 1 2 (a quicklist of one listpack)
    "l": (b"\x12\x01\x02\x11\x11\x00\x00\x00\x04\x00\x81a\x02\x81b\x02\x01\x01\x02\x01\xff\n"
          b"\x00mrq>\x9bCH+", ("list", [b"a", b"b", b"1", b"2"])),
    # SADD si 1 2 3 (an intset)
    "si": (b"\x0b\x0e\x02\x00\x00\x00\x03\x00\x00\x00\x01\x00\x02\x00\x03\x00\n\x00\xa5\x02\\"
           b"\xe2mnM\x1b", ("set", [b"1", b"2", b"3"])),
    # SADD ss a b
    "ss": (b"\x02\x02\x01a\x01b\n\x00\xfed!%\xeb\x03=\r", ("set", [b"a", b"b"])),
    # ZADD z 1.5 a 2 b (a listpack)
    "z": (b"\x11\x14\x14\x00\x00\x00\x04\x00\x81a\x02\x831.5\x04\x81b\x02\x02\x01\xff\n\x00"
          b"\xfa\x02\xb4%\xaf\x18\x87c", ("zset", [(b"a", 1.5), (b"b", 2.0)])),
    # HSET h f v g 1 (a listpack)
    "h": (b"\x10\x12\x12\x00\x00\x00\x04\x00\x81f\x02\x81v\x02\x81g\x02\x01\x01\xff\n\x00#\xc1"
          b"\xa5\xe3]\xfa\xe8\x1c", ("hash", [(b"f", b"v"), (b"g", b"1")])),
}


def test_crc64_is_redis_jones_crc() -> None:
    assert crc64(b"123456789") == 0xE9C6D914C4B8D9CA  # the check value Redis's crc64.c tests


@pytest.mark.parametrize("name", list(REDIS_7_0))
def test_redis_payloads_decode_to_what_was_dumped(name: str) -> None:
    payload, value = REDIS_7_0[name]
    assert loads(payload) == value


@pytest.mark.parametrize("value", [("string", b"x" * 70000), ("list", [b"a", b"", b"\xff"]),
                                   ("set", [b"m"]), ("zset", [(b"a", -1.25), (b"b", 1e300)]),
                                   ("hash", [(b"f", b"v" * 300)])])
def test_ours_round_trip(value: tuple[str, object]) -> None:
    assert loads(dumps(*value)) == value


@pytest.mark.parametrize("name", list(REDIS_7_0))
def test_a_damaged_payload_is_refused(name: str) -> None:
    payload = REDIS_7_0[name][0]
    for bad in (payload[:-1], payload[:1] + b"\x00" + payload[2:], b"", payload[:5]):
        with pytest.raises(RdbError):
            loads(bad)
