"""``cmsgpack`` (lua_cmsgpack 0.4): MessagePack, packed with its width rules."""

from __future__ import annotations

import math
import struct
from typing import TYPE_CHECKING, Any

import lupa.lua51 as lua51

from tuffdb.server.resp.lualibs.common import (
    INT64_LIMIT,
    INT64_MIN,
    Args,
    LibError,
    bad_arg,
    to_lua_number,
)

if TYPE_CHECKING:
    from collections.abc import Callable

MSGPACK_MAX_NESTING = 16  # deeper tables are packed as nil, as lua_cmsgpack does
_F32 = struct.Struct(">f")


def _is_int64(v: float) -> bool:
    if isinstance(v, int):
        return INT64_MIN <= v < INT64_LIMIT
    return not math.isinf(v) and v == v and -INT64_LIMIT <= v < INT64_LIMIT and v == int(v)  # noqa: PLR0124


def _pack_int(n: int) -> bytes:  # noqa: PLR0911 - one branch per msgpack width
    if n >= 0:
        if n <= 0x7F:
            return bytes((n,))
        if n <= 0xFF:
            return b"\xcc" + bytes((n,))
        if n <= 0xFFFF:
            return b"\xcd" + n.to_bytes(2, "big")
        if n <= 0xFFFFFFFF:
            return b"\xce" + n.to_bytes(4, "big")
        return b"\xcf" + n.to_bytes(8, "big")
    if n >= -32:  # noqa: PLR2004
        return bytes((n & 0xFF,))
    if n >= -128:  # noqa: PLR2004
        return b"\xd0" + n.to_bytes(1, "big", signed=True)
    if n >= -32768:  # noqa: PLR2004
        return b"\xd1" + n.to_bytes(2, "big", signed=True)
    if n >= -2147483648:  # noqa: PLR2004
        return b"\xd2" + n.to_bytes(4, "big", signed=True)
    return b"\xd3" + n.to_bytes(8, "big", signed=True)


def _pack_len(n: int, fix: int, fix_max: int, h16: bytes, h32: bytes) -> bytes:
    if n <= fix_max:
        return bytes((fix | n,))
    if n <= 0xFFFF:
        return h16 + n.to_bytes(2, "big")
    return h32 + n.to_bytes(4, "big")


class MsgpackLib:
    def __init__(self, tonumber: Callable[[bytes], Any], table: Callable[[], Any]) -> None:
        self.tonumber = tonumber
        self.table = table

    def functions(self) -> dict[bytes, Callable[..., Any]]:
        return {b"pack": self.pack, b"unpack": self.unpack, b"unpack_one": self.unpack_one,
                b"unpack_limit": self.unpack_limit}

    def pack(self, *a: Any) -> bytes:
        if not a:
            raise bad_arg(0, "pack", "MessagePack pack needs input.")
        out: list[bytes] = []
        for v in a:
            self._pack(v, 0, out)
        return b"".join(out)

    def _pack(self, v: Any, level: int, out: list[bytes]) -> None:  # noqa: C901, PLR0912
        if v is None:
            out.append(b"\xc0")
        elif v is True:
            out.append(b"\xc3")
        elif v is False:
            out.append(b"\xc2")
        elif isinstance(v, bytes):
            n = len(v)
            if n < 32:  # noqa: PLR2004
                out.append(bytes((0xA0 | n,)))
            elif n <= 0xFF:
                out.append(b"\xd9" + bytes((n,)))
            elif n <= 0xFFFF:
                out.append(b"\xda" + n.to_bytes(2, "big"))
            else:
                out.append(b"\xdb" + n.to_bytes(4, "big"))
            out.append(v)
        elif isinstance(v, (int, float)):
            if _is_int64(v):
                out.append(_pack_int(int(v)))
            else:
                d = float(v)
                try:
                    f = _F32.unpack(_F32.pack(d))[0]
                except OverflowError:
                    f = None
                out.append(b"\xca" + _F32.pack(d) if f == d else b"\xcb" + struct.pack(">d", d))
        elif lua51.lua_type(v) == "table" and level < MSGPACK_MAX_NESTING:
            items = list(v.items())
            if self._is_array(items):
                out.append(_pack_len(len(items), 0x90, 15, b"\xdc", b"\xdd"))
                for i in range(1, len(items) + 1):
                    self._pack(v[i], level + 1, out)
            else:
                out.append(_pack_len(len(items), 0x80, 15, b"\xde", b"\xdf"))
                for k, item in items:
                    self._pack(k, level + 1, out)
                    self._pack(item, level + 1, out)
        else:  # functions, userdata, threads, tables nested too deep
            out.append(b"\xc0")

    @staticmethod
    def _is_array(items: list[tuple[Any, Any]]) -> bool:
        top = 0
        for k, _ in items:
            if isinstance(k, bool) or not isinstance(k, (int, float)) or k <= 0 or k != int(k):
                return False
            top = max(top, int(k))
        return top == len(items)

    def unpack(self, *a: Any) -> tuple[Any, ...]:
        return self._unpack(Args("unpack", a, self.tonumber).string(1), 0, None)

    def unpack_one(self, *a: Any) -> tuple[Any, ...]:
        args = Args("unpack_one", a, self.tonumber)
        return self._unpack(args.string(1), int(args.opt_number(2, 0)), 1)

    def unpack_limit(self, *a: Any) -> tuple[Any, ...]:
        args = Args("unpack_limit", a, self.tonumber)
        return self._unpack(args.string(1), int(args.opt_number(3, 0)),
                            int(args.opt_number(2, 0)))

    def _unpack(self, data: bytes, offset: int, limit: int | None) -> tuple[Any, ...]:
        if offset < 0 or (limit is not None and limit < 0):
            raise LibError(f"Invalid request to unpack with offset of {offset} and limit of "
                           f"{len(data)}.")
        if offset > len(data):
            raise LibError(f"Start offset {offset} greater than input length {len(data)}.")
        if limit == 0 and offset == 0:  # lua_cmsgpack reads that as "all, no offset"
            limit = None
        values: list[Any] = []
        pos = offset
        while pos < len(data) and (limit is None or len(values) < limit):
            try:
                v, pos = self._decode(data, pos)
            except IndexError:
                raise LibError("Missing bytes in input.") from None
            values.append(v)
        if limit is None:
            return tuple(values)
        return (-1 if pos >= len(data) else pos, *values)

    def _decode(self, d: bytes, p: int) -> tuple[Any, int]:  # noqa: C901, PLR0911, PLR0912
        b = d[p]
        p += 1
        if b <= 0x7F:
            return b, p
        if b >= 0xE0:
            return b - 0x100, p
        if 0xA0 <= b <= 0xBF:
            return _take(d, p, b & 0x1F)
        if 0x90 <= b <= 0x9F:
            return self._array(d, p, b & 0x0F)
        if 0x80 <= b <= 0x8F:
            return self._map(d, p, b & 0x0F)
        if b == 0xC0:
            return None, p
        if b in (0xC2, 0xC3):
            return b == 0xC3, p
        if b in _WIDTHS:
            kind, width = _WIDTHS[b]
            raw = d[p : p + width]
            if len(raw) < width:
                raise IndexError
            p += width
            if kind == "u":
                return to_lua_number(int.from_bytes(raw, "big")), p
            if kind == "i":
                return to_lua_number(int.from_bytes(raw, "big", signed=True)), p
            if kind == "f":
                return struct.unpack(">f" if width == 4 else ">d", raw)[0], p  # noqa: PLR2004
            n = int.from_bytes(raw, "big")
            if kind == "s":
                return _take(d, p, n)
            if kind == "a":
                return self._array(d, p, n)
            return self._map(d, p, n)
        raise LibError("Bad data format in input.")

    def _array(self, d: bytes, p: int, n: int) -> tuple[Any, int]:
        t = self.table()
        for i in range(1, n + 1):
            v, p = self._decode(d, p)
            if v is not None:
                t[i] = v
        return t, p

    def _map(self, d: bytes, p: int, n: int) -> tuple[Any, int]:
        t = self.table()
        for _ in range(n):
            k, p = self._decode(d, p)
            v, p = self._decode(d, p)
            if k is None:
                raise LibError("table index is nil")
            t[k] = v
        return t, p


_WIDTHS = {0xCC: ("u", 1), 0xCD: ("u", 2), 0xCE: ("u", 4), 0xCF: ("u", 8),
           0xD0: ("i", 1), 0xD1: ("i", 2), 0xD2: ("i", 4), 0xD3: ("i", 8),
           0xCA: ("f", 4), 0xCB: ("f", 8),
           0xD9: ("s", 1), 0xDA: ("s", 2), 0xDB: ("s", 4),
           0xC4: ("s", 1), 0xC5: ("s", 2), 0xC6: ("s", 4),  # bin: Lua strings too
           0xDC: ("a", 2), 0xDD: ("a", 4), 0xDE: ("m", 2), 0xDF: ("m", 4)}


def _take(d: bytes, p: int, n: int) -> tuple[bytes, int]:
    if p + n > len(d):
        raise IndexError
    return d[p : p + n], p + n
