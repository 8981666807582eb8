"""Redis's DUMP payload: one value in RDB encoding, the RDB version (2 bytes, LE) and a
CRC-64 of everything before it (8 bytes, LE; Jones polynomial, reflected). Written here
from the RDB format's documentation so RESTORE takes what Redis 7.x's DUMP gives and
Redis's RESTORE takes what ours gives (docs/format/resp.md, "DUMP payloads").

Read: strings (raw, integer-encoded, LZF-compressed), lists (quicklist of listpacks, and
the plain list), sets (plain, intset, listpack), sorted sets (listpack, binary-score,
string-score), hashes (plain, listpack). Streams and the ziplist encodings of Redis 6
and before are refused (:class:`RdbError`). Written: the plain encodings every Redis
since 2.x loads (string, list, set, sorted set with binary scores, hash), uncompressed.
"""

from __future__ import annotations

import struct
from typing import Any

from tuffdb.errors import Error

RDB_VERSION = 10  # Redis 7.0's
STRING, LIST, SET, ZSET, HASH, ZSET_2 = 0, 1, 2, 3, 4, 5
SET_INTSET, HASH_LISTPACK, ZSET_LISTPACK, LIST_QUICKLIST_2, SET_LISTPACK = 11, 16, 17, 18, 20
QUICKLIST_PLAIN, QUICKLIST_PACKED = 1, 2
_POLY = 0x95AC9329AC4BC9B5  # 0xad93d23594c935a9 reflected


class RdbError(Error):
    """A DUMP payload that is not one (bad checksum, version, or encoding)."""


def _table() -> list[int]:
    out = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ (_POLY if crc & 1 else 0)
        out.append(crc)
    return out


_CRC = _table()


def crc64(data: bytes, crc: int = 0) -> int:
    table = _CRC
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


# -- reading ---------------------------------------------------------------------------------
class _Reader:
    def __init__(self, data: bytes) -> None:
        self.d = data
        self.p = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.p + n > len(self.d):
            raise RdbError("ERR Bad data format")
        out = self.d[self.p : self.p + n]
        self.p += n
        return out

    def byte(self) -> int:
        return self.take(1)[0]

    def length(self) -> tuple[int, bool]:
        """(length, is an encoded value) of RDB's length encoding."""
        b = self.byte()
        kind = b >> 6
        if kind == 0:
            return b & 0x3F, False
        if kind == 1:
            return ((b & 0x3F) << 8) | self.byte(), False
        if kind == 3:  # noqa: PLR2004
            return b & 0x3F, True
        if b == 0x80:  # noqa: PLR2004
            return int.from_bytes(self.take(4), "big"), False
        if b == 0x81:  # noqa: PLR2004
            return int.from_bytes(self.take(8), "big"), False
        raise RdbError("ERR Bad data format")

    def count(self) -> int:
        n, encoded = self.length()
        if encoded:
            raise RdbError("ERR Bad data format")
        return n

    def string(self) -> bytes:
        n, encoded = self.length()
        if not encoded:
            return self.take(n)
        if n in (0, 1, 2):  # 8, 16, 32-bit integers
            return b"%d" % int.from_bytes(self.take(1 << n), "little", signed=True)
        if n == 3:  # noqa: PLR2004 - LZF
            clen, ulen = self.count(), self.count()
            return lzf_decompress(self.take(clen), ulen)
        raise RdbError("ERR Bad data format")


def lzf_decompress(data: bytes, size: int) -> bytes:
    out = bytearray()
    i, n = 0, len(data)
    while i < n:
        ctrl = data[i]
        i += 1
        if ctrl < 32:  # noqa: PLR2004 - a literal run of ctrl + 1 bytes
            run = data[i : i + ctrl + 1]
            if len(run) != ctrl + 1:
                raise RdbError("ERR Bad data format")
            out += run
            i += ctrl + 1
            continue
        length = ctrl >> 5
        if length == 7:  # noqa: PLR2004
            if i >= n:
                raise RdbError("ERR Bad data format")
            length += data[i]
            i += 1
        if i >= n:
            raise RdbError("ERR Bad data format")
        ref = len(out) - ((ctrl & 0x1F) << 8) - data[i] - 1
        i += 1
        if ref < 0:
            raise RdbError("ERR Bad data format")
        for _ in range(length + 2):  # may overlap what it copies: byte by byte
            out.append(out[ref])
            ref += 1
    if len(out) != size:
        raise RdbError("ERR Bad data format")
    return bytes(out)


def listpack(blob: bytes) -> list[bytes]:
    """The entries of a listpack (integers as their decimal text)."""
    if len(blob) < 7 or int.from_bytes(blob[:4], "little") != len(blob):  # noqa: PLR2004
        raise RdbError("ERR Bad data format")
    out: list[bytes] = []
    p, end = 6, len(blob) - 1
    while p < end:
        b = blob[p]
        if b < 0x80:  # 7-bit unsigned
            out.append(b"%d" % b)
            size = 1
        elif b < 0xC0:  # 6-bit string length
            n = b & 0x3F
            out.append(blob[p + 1 : p + 1 + n])
            size = 1 + n
        elif b < 0xE0:  # 13-bit signed
            v = ((b & 0x1F) << 8) | blob[p + 1]
            out.append(b"%d" % (v - (1 << 13) if v & (1 << 12) else v))
            size = 2
        elif b < 0xF0:  # 12-bit string length
            n = ((b & 0x0F) << 8) | blob[p + 1]
            out.append(blob[p + 2 : p + 2 + n])
            size = 2 + n
        elif b == 0xF0:  # 32-bit string length
            n = int.from_bytes(blob[p + 1 : p + 5], "little")
            out.append(blob[p + 5 : p + 5 + n])
            size = 5 + n
        elif b in _INT_WIDTHS:
            w = _INT_WIDTHS[b]
            out.append(b"%d" % int.from_bytes(blob[p + 1 : p + 1 + w], "little", signed=True))
            size = 1 + w
        else:
            raise RdbError("ERR Bad data format")
        p += size + _backlen_size(size)
    if p != end or blob[end] != 0xFF:  # noqa: PLR2004
        raise RdbError("ERR Bad data format")
    if int.from_bytes(blob[4:6], "little") not in (len(out), 0xFFFF):
        raise RdbError("ERR Bad data format")
    return out


_INT_WIDTHS = {0xF1: 2, 0xF2: 3, 0xF3: 4, 0xF4: 8}


def _backlen_size(n: int) -> int:
    return 1 if n < 128 else 2 if n < 16384 else 3 if n < 2097152 else 4 if n < 268435456 else 5  # noqa: PLR2004


def _intset(blob: bytes) -> list[bytes]:
    if len(blob) < 8:  # noqa: PLR2004
        raise RdbError("ERR Bad data format")
    width, n = struct.unpack_from("<II", blob)
    if width not in (2, 4, 8) or len(blob) != 8 + width * n:
        raise RdbError("ERR Bad data format")
    return [b"%d" % int.from_bytes(blob[8 + i * width : 8 + (i + 1) * width], "little",
                                   signed=True) for i in range(n)]


def _pairs(items: list[bytes]) -> list[tuple[bytes, bytes]]:
    if len(items) % 2:
        raise RdbError("ERR Bad data format")
    return list(zip(items[::2], items[1::2], strict=True))


def _score(raw: bytes) -> float:
    try:
        return float(raw)
    except ValueError:
        raise RdbError("ERR Bad data format") from None


def loads(payload: bytes) -> tuple[str, Any]:  # noqa: C901, PLR0911, PLR0912
    """Check a DUMP payload and decode its value: ("string", bytes), ("list", [bytes]),
    ("set", [bytes]), ("zset", [(member, score)]) or ("hash", [(field, value)])."""
    if len(payload) < 10:  # noqa: PLR2004
        raise RdbError("ERR DUMP payload version or checksum are wrong")
    body, version, crc = payload[:-10], payload[-10:-8], payload[-8:]
    if int.from_bytes(version, "little") > RDB_VERSION + 1 or \
            int.from_bytes(crc, "little") != crc64(payload[:-8]):
        raise RdbError("ERR DUMP payload version or checksum are wrong")
    r = _Reader(body)
    kind = r.byte()
    value: tuple[str, Any]
    if kind == STRING:
        value = ("string", r.string())
    elif kind in (LIST, SET):
        value = ("list" if kind == LIST else "set", [r.string() for _ in range(r.count())])
    elif kind == SET_INTSET:
        value = ("set", _intset(r.string()))
    elif kind == SET_LISTPACK:
        value = ("set", listpack(r.string()))
    elif kind == ZSET_2:
        value = ("zset", [(r.string(), struct.unpack("<d", r.take(8))[0])
                          for _ in range(r.count())])
    elif kind == ZSET:
        scored: list[tuple[bytes, float]] = []
        for _ in range(r.count()):
            member = r.string()
            n = r.byte()
            score = {253: float("nan"), 254: float("inf"), 255: float("-inf")}.get(n)
            scored.append((member, score if score is not None else _score(r.take(n))))
        value = ("zset", scored)
    elif kind == ZSET_LISTPACK:
        value = ("zset", [(m, _score(s)) for m, s in _pairs(listpack(r.string()))])
    elif kind == HASH:
        value = ("hash", [(r.string(), r.string()) for _ in range(r.count())])
    elif kind == HASH_LISTPACK:
        value = ("hash", _pairs(listpack(r.string())))
    elif kind == LIST_QUICKLIST_2:
        elements: list[bytes] = []
        for _ in range(r.count()):
            container = r.count()
            node = r.string()
            if container == QUICKLIST_PLAIN:
                elements.append(node)
            elif container == QUICKLIST_PACKED:
                elements += listpack(node)
            else:
                raise RdbError("ERR Bad data format")
        value = ("list", elements)
    else:
        raise RdbError("ERR Bad data format")
    if r.p != len(body):
        raise RdbError("ERR Bad data format")
    return value


# -- writing ---------------------------------------------------------------------------------
def _length(n: int) -> bytes:
    if n < 64:  # noqa: PLR2004
        return bytes((n,))
    if n < 16384:  # noqa: PLR2004
        return bytes((0x40 | (n >> 8), n & 0xFF))
    if n < 1 << 32:
        return b"\x80" + n.to_bytes(4, "big")
    return b"\x81" + n.to_bytes(8, "big")


def _str(s: bytes) -> bytes:
    return _length(len(s)) + s


def dumps(kind: str, value: Any) -> bytes:
    """The DUMP payload of a value (as :func:`loads` returns them)."""
    if kind == "string":
        body = bytes((STRING,)) + _str(value)
    elif kind in ("list", "set"):
        body = bytes((LIST if kind == "list" else SET,)) + _length(len(value)) + \
            b"".join(map(_str, value))
    elif kind == "zset":
        body = bytes((ZSET_2,)) + _length(len(value)) + b"".join(
            _str(m) + struct.pack("<d", s) for m, s in value)
    elif kind == "hash":
        body = bytes((HASH,)) + _length(len(value)) + b"".join(
            _str(f) + _str(v) for f, v in value)
    else:
        raise RdbError(f"ERR DUMP of a {kind} is not offered")
    body += RDB_VERSION.to_bytes(2, "little")
    return body + crc64(body).to_bytes(8, "little")
