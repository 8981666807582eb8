"""Bitmap commands on string values: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD and
BITFIELD_RO (Redis 7.0's replies and errors).

A bitmap is a string (one engine value), bit 0 being the most significant bit of byte 0.
Changing one bit rewrites the value, so a write costs O(string length) where Redis's is
O(1): fine for the usual bitmaps of a few KB (flags, presence per day), not for ones of
hundreds of MB; and a string is at most the engine's value size (256 MB: offsets past
2^31 bits get the engine's error where Redis allows 2^32). Counting and searching run in C (``int.bit_count``, ``bytes.lstrip``).
"""

# Every handler takes (conn, args), used or not: one signature for the command table.
# ruff: noqa: ARG001

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from tuffdb.server.resp import reply
from tuffdb.server.resp.commands.common import put_keep_ttl, to_int
from tuffdb.server.resp.commands.strings import get_string
from tuffdb.server.resp.keyspace import STRING_PREFIX, stored
from tuffdb.server.resp.table import SYNTAX, CommandError, command

if TYPE_CHECKING:
    from tuffdb.server.resp.conn import Conn

MAX_BIT_OFFSET = (512 * 1024 * 1024 * 8) - 1  # a string of 512 MB
BAD_OFFSET = "ERR bit offset is not an integer or out of range"
BAD_TYPE = ("ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not "
            "supported but i64 is.")


def _offset(raw: bytes, width: int = 1) -> int:
    """A bit offset (``#N``: N fields of ``width`` bits, for BITFIELD)."""
    scaled = raw.startswith(b"#")
    n = to_int(raw[1:] if scaled else raw, BAD_OFFSET)  # string2ll: no leading zeros, no +
    if scaled:
        n *= width
    if not 0 <= n <= MAX_BIT_OFFSET:
        raise CommandError(BAD_OFFSET)
    return n


def _write(c: Conn, key: bytes, value: bytes, existed: bool, *, touch: bool = True) -> None:
    put_keep_ttl(c.db, stored(key), STRING_PREFIX + value, existed)
    if touch:
        c.srv.touch(key)


@command("setbit", 4, "write denyoom", (1, 1, 1), group="bitmap", since="2.2.0")
def setbit(c: Conn, a: list[bytes]) -> bytes:
    """Set or clear the bit at an offset; reply the bit it had."""
    offset = _offset(a[2])
    if a[3] not in (b"0", b"1"):
        raise CommandError("ERR bit is not an integer or out of range")
    old = get_string(c, a[1])
    buf = bytearray(old or b"")
    byte, shift = offset >> 3, 7 - (offset & 7)
    if len(buf) <= byte:
        buf.extend(bytes(byte + 1 - len(buf)))
    was = (buf[byte] >> shift) & 1
    if a[3] == b"1":
        buf[byte] |= 1 << shift
    else:
        buf[byte] &= ~(1 << shift) & 0xFF
    if old is None or was != (a[3] == b"1") or len(buf) != len(old):
        _write(c, a[1], bytes(buf), old is not None)
    return reply.integer(was)


@command("getbit", 3, "readonly fast", (1, 1, 1), group="bitmap", since="2.2.0")
def getbit(c: Conn, a: list[bytes]) -> bytes:
    """The bit at an offset (0 past the end)."""
    offset = _offset(a[2])
    value = get_string(c, a[1]) or b""
    byte = offset >> 3
    if byte >= len(value):
        return reply.ZERO
    return reply.integer((value[byte] >> (7 - (offset & 7))) & 1)


def _range(a: list[bytes], at: int, length: int) -> tuple[int, int, bool] | None:
    """BITCOUNT/BITPOS's ``start end [BYTE|BIT]`` from ``a[at]`` on: (first, last, in bits),
    inclusive and clamped to the string (``length`` bytes); None when empty."""
    start = to_int(a[at])  # start, unit, end: BITPOS's order (BITCOUNT reads both first)
    bits = False
    if len(a) > at + 2:
        unit = a[at + 2].lower()
        if unit == b"bit":
            bits = True
        elif unit != b"byte":
            raise CommandError(SYNTAX)
    total = length * 8 if bits else length
    end = to_int(a[at + 1]) if len(a) > at + 1 else total - 1
    if start < 0:
        start = max(start + total, 0)
    if end < 0:
        end = max(end + total, 0)
    end = min(end, total - 1)
    if start > end:
        return None
    return start, end, bits


def _bits_of(value: bytes, first: int, last: int) -> tuple[int, int]:
    """(the integer of bits first..last inclusive, its width)."""
    lo, hi = first >> 3, last >> 3
    n = int.from_bytes(value[lo : hi + 1], "big")
    width = last - first + 1
    n >>= 7 - (last & 7)
    return n & ((1 << width) - 1), width


@command("bitcount", -2, "readonly", (1, 1, 1), group="bitmap", since="2.6.0")
def bitcount(c: Conn, a: list[bytes]) -> bytes:
    """Set bits in the string, or in a byte or bit range."""
    value = get_string(c, a[1])
    if value is None:  # no key: 0 before any argument is read (as Redis)
        return reply.ZERO
    if len(a) == 3 or len(a) > 5:  # noqa: PLR2004 - a start needs an end
        raise CommandError(SYNTAX)
    if len(a) == 2:  # noqa: PLR2004
        return reply.integer(int.from_bytes(value, "big").bit_count())
    start, end = to_int(a[2]), to_int(a[3])
    if start < 0 and end < 0 and start > end:  # Redis answers 0 before clamping these
        return reply.ZERO
    span = _range(a, 2, len(value))
    if span is None or not value:
        return reply.ZERO
    first, last, bits = span
    if bits:
        return reply.integer(_bits_of(value, first, last)[0].bit_count())
    return reply.integer(int.from_bytes(value[first : last + 1], "big").bit_count())


@command("bitpos", -3, "readonly", (1, 1, 1), group="bitmap", since="2.8.7")
def bitpos(c: Conn, a: list[bytes]) -> bytes:  # noqa: C901
    """The first bit set (or clear) in the string, or in a byte or bit range."""
    bit = to_int(a[2])
    if bit not in (0, 1):
        raise CommandError("ERR The bit argument must be 1 or 0.")
    want = bit == 1
    value = get_string(c, a[1])
    if value is None:  # before the range is read (as Redis)
        return reply.integer(-1 if want else 0)
    if len(a) > 6:  # noqa: PLR2004
        raise CommandError(SYNTAX)
    end_given = len(a) > 4  # noqa: PLR2004
    if len(a) > 3:  # noqa: PLR2004
        span = _range(a, 3, len(value))
        if span is None:
            return reply.integer(-1)
        first, last, bits = span
        if not bits:
            first, last = first * 8, last * 8 + 7
    else:
        first, last = 0, len(value) * 8 - 1
        if last < 0:  # an empty string holds neither bit
            return reply.integer(-1)
    n, width = _bits_of(value, first, last)
    if not want:
        n ^= (1 << width) - 1
    if n == 0:
        # No clear bit: past the end of the string, unless the range had an end.
        return reply.integer(-1 if want or end_given else first + width)
    return reply.integer(first + width - n.bit_length())


@command("bitop", -4, "write denyoom", (2, -1, 1), group="bitmap", since="2.6.0")
def bitop(c: Conn, a: list[bytes]) -> bytes:
    """AND, OR, XOR or NOT of strings into a destination; reply its length."""
    op = a[1].lower()
    if op not in (b"and", b"or", b"xor", b"not"):
        raise CommandError(SYNTAX)
    if op == b"not" and len(a) != 4:  # noqa: PLR2004
        raise CommandError("ERR BITOP NOT must be called with a single source key.")
    values = [get_string(c, k) or b"" for k in a[3:]]
    size = max(map(len, values))
    ints = [int.from_bytes(v.ljust(size, b"\0"), "big") for v in values]
    if op == b"not":
        out = ~ints[0] & ((1 << (8 * size)) - 1)
    else:
        out = ints[0]
        for n in ints[1:]:
            out = out & n if op == b"and" else (out | n if op == b"or" else out ^ n)
    dest = stored(a[2])
    if size == 0:  # an empty result deletes the destination; no key, no change (Redis)
        if c.db.delete(dest, sync=False):
            c.srv.touch(a[2])
        return reply.ZERO
    c.db.put(dest, STRING_PREFIX + out.to_bytes(size, "big"), None, sync=False)
    c.srv.touch(a[2])
    return reply.integer(size)


# -- BITFIELD -----------------------------------------------------------------------------
def _field_type(raw: bytes) -> tuple[bool, int]:
    """(signed, width) of ``i1``..``i64`` / ``u1``..``u63``."""
    kind, digits = raw[:1].lower(), raw[1:]
    if kind not in (b"i", b"u") or not digits.isdigit():
        raise CommandError(BAD_TYPE)
    width = int(digits)
    signed = kind == b"i"
    if not 1 <= width <= (64 if signed else 63):  # noqa: PLR2004
        raise CommandError(BAD_TYPE)
    return signed, width


class FieldOp(NamedTuple):
    """One BITFIELD operation, parsed: GET, SET, INCRBY of a field, or OVERFLOW's mode."""

    kind: bytes  # b"get" | b"set" | b"incrby" | b"overflow"
    signed: bool = False
    width: int = 0
    offset: int = 0
    value: int = 0
    mode: bytes = b""


def _parse_bitfield(a: list[bytes], *, readonly: bool) -> list[FieldOp]:
    """Every operation, checked before any runs (Redis fails the whole command)."""
    ops: list[FieldOp] = []
    i = 2
    while i < len(a):
        sub = a[i].lower()
        if readonly and sub != b"get":
            raise CommandError("ERR BITFIELD_RO only supports the GET subcommand")
        if sub == b"overflow" and i + 1 < len(a):
            mode = a[i + 1].lower()
            if mode not in (b"wrap", b"sat", b"fail"):
                raise CommandError("ERR Invalid OVERFLOW type specified")
            ops.append(FieldOp(sub, mode=mode))
            i += 2
            continue
        argc = {b"get": 2, b"set": 3, b"incrby": 3}.get(sub)
        if argc is None or i + argc >= len(a):
            raise CommandError(SYNTAX)
        signed, width = _field_type(a[i + 1])
        offset = _offset(a[i + 2], width)
        value = to_int(a[i + 3]) if sub != b"get" else 0
        ops.append(FieldOp(sub, signed, width, offset, value))
        i += 1 + argc
    return ops


MASK64 = (1 << 64) - 1


def _int64(x: int) -> int:
    """``x`` as C's int64_t holds it (two's complement, wrapped)."""
    x &= MASK64
    return x - (1 << 64) if x >> 63 else x


def _signed_result(value: int, incr: int, width: int, mode: bytes) -> int | None:
    """Redis's checkSignedBitfieldOverflow and what it leaves: the sum when it fits,
    else wrapped, saturated or None (FAIL). Its bounds on the increment are computed in
    int64 and may wrap (SET i1 of INT64_MIN saturates to the maximum, 0, as in Redis)."""
    hi = (1 << 63) - 1 if width == 64 else (1 << (width - 1)) - 1  # noqa: PLR2004
    lo = -hi - 1
    max_incr, min_incr = _int64(hi - value), _int64(lo - value)
    if value > hi or (width != 64 and incr > max_incr) or \
            (value >= 0 and incr > 0 and incr > max_incr):  # noqa: PLR2004
        limit = hi
    elif value < lo or (width != 64 and incr < min_incr) or \
            (value < 0 and incr < 0 and incr < min_incr):  # noqa: PLR2004
        limit = lo
    else:
        return value + incr
    if mode == b"fail":
        return None
    if mode == b"sat":
        return limit
    total = (value + incr) & MASK64
    if width < 64:  # noqa: PLR2004 - the field's sign bit fills the bits above it
        total = total | (MASK64 << width) & MASK64 if total >> (width - 1) & 1 \
            else total & ((1 << width) - 1)
    return _int64(total)


def _unsigned_result(value: int, incr: int, width: int, mode: bytes) -> int | None:
    """Redis's checkUnsignedBitfieldOverflow, ``value`` as a uint64_t."""
    value &= MASK64
    hi = (1 << width) - 1
    max_incr, min_incr = _int64(hi - value), _int64(-value)
    if value > hi or (incr > 0 and incr > max_incr):
        limit = hi
    elif incr < 0 and incr < min_incr:
        limit = 0
    else:
        return value + incr
    if mode == b"fail":
        return None
    if mode == b"sat":
        return limit
    return (value + incr) & hi


def _bitfield(c: Conn, a: list[bytes], *, readonly: bool) -> bytes:
    ops = _parse_bitfield(a, readonly=readonly)
    old = get_string(c, a[1])
    buf = bytearray(old or b"")
    writes = [op for op in ops if op.kind in (b"set", b"incrby")]
    if writes:  # the string grows to the last field written, even by a failed one
        end = max(op.offset + op.width for op in writes)
        if len(buf) < (end + 7) >> 3:
            buf.extend(bytes(((end + 7) >> 3) - len(buf)))
    mode = b"wrap"
    out: list[bytes] = []
    changes = 0
    for op in ops:
        if op.kind == b"overflow":
            mode = op.mode
            continue
        width = op.width
        current = _get_bits(buf, op.offset, width)
        if op.signed and current >> (width - 1):
            current -= 1 << width
        if op.kind == b"get":
            out.append(reply.integer(current))
            continue
        base, incr = (current, op.value) if op.kind == b"incrby" else (op.value, 0)
        new = _signed_result(base, incr, width, mode) if op.signed else \
            _unsigned_result(base, incr, width, mode)
        if new is None:
            out.append(c.enc.null)
            continue
        _put_bits(buf, op.offset, width, new & ((1 << width) - 1))
        changes += 1
        out.append(reply.integer(current if op.kind == b"set" else new))
    if writes:
        # Only a SET or INCRBY that was not refused (OVERFLOW FAIL) counts as a change for
        # WATCH, though the string is made or grown either way (as Redis 7.0).
        _write(c, a[1], bytes(buf), old is not None, touch=changes > 0)
    return reply.array(out)


def _get_bits(buf: bytearray, offset: int, width: int) -> int:
    """The unsigned field of ``width`` bits at ``offset`` (zeros past the end)."""
    lo, hi = offset >> 3, (offset + width - 1) >> 3
    n = int.from_bytes(bytes(buf[lo : hi + 1]).ljust(hi - lo + 1, b"\0"), "big")
    return (n >> ((hi - lo + 1) * 8 - (offset & 7) - width)) & ((1 << width) - 1)


def _put_bits(buf: bytearray, offset: int, width: int, bits: int) -> None:
    lo, hi = offset >> 3, (offset + width - 1) >> 3
    span = (hi - lo + 1) * 8
    shift = span - (offset & 7) - width
    mask = ((1 << width) - 1) << shift
    n = int.from_bytes(buf[lo : hi + 1], "big")
    n = (n & ~mask) | (bits << shift)
    buf[lo : hi + 1] = n.to_bytes(hi - lo + 1, "big")


@command("bitfield", -2, "write denyoom", (1, 1, 1), group="bitmap", since="3.2.0")
def bitfield(c: Conn, a: list[bytes]) -> bytes:
    """GET, SET and INCRBY of integer fields (i1..i64, u1..u63) with OVERFLOW."""
    return _bitfield(c, a, readonly=False)


@command("bitfield_ro", -2, "readonly fast", (1, 1, 1), group="bitmap", since="6.0.0")
def bitfield_ro(c: Conn, a: list[bytes]) -> bytes:
    """BITFIELD with GET only."""
    return _bitfield(c, a, readonly=True)
