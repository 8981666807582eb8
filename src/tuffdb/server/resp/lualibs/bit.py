"""``bit`` (LuaBitOp): 32-bit operations on Lua numbers, results signed."""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

from tuffdb.server.resp.lualibs.common import Args

if TYPE_CHECKING:
    from collections.abc import Callable

BIT_BIAS = 6755399441055744.0  # 2^52 + 2^51: LuaBitOp's round-to-int32 of a double
_DOUBLE = struct.Struct("<d")
_BITS = struct.Struct("<Q")


def _tobit(x: float) -> int:
    """LuaBitOp's conversion: the low 32 bits of x + 2^52 + 2^51 (round half to even,
    wrap modulo 2^32), as a signed int."""
    raw: int = _BITS.unpack(_DOUBLE.pack(float(x) + BIT_BIAS))[0] & 0xFFFFFFFF
    return raw - (1 << 32) if raw & 0x80000000 else raw


def _signed(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


class BitLib:
    def __init__(self, tonumber: Callable[[bytes], Any]) -> None:
        self.tonumber = tonumber

    def _bits(self, fname: str, args: tuple[Any, ...], n: int) -> int:
        return _tobit(Args(fname, args, self.tonumber).number(n))

    def functions(self) -> dict[bytes, Callable[..., Any]]:
        def unary(name: str, op: Callable[[int], int]) -> Callable[..., int]:
            return lambda *a: _signed(op(self._bits(name, a, 1)))

        def fold(name: str, op: Callable[[int, int], int]) -> Callable[..., int]:
            def f(*a: Any) -> int:
                acc = self._bits(name, a, 1)
                for i in range(2, len(a) + 1):
                    acc = op(acc, self._bits(name, a, i))
                return _signed(acc)
            return f

        def shift(name: str, op: Callable[[int, int], int]) -> Callable[..., int]:
            return lambda *a: _signed(op(self._bits(name, a, 1), self._bits(name, a, 2) & 31))

        def tohex(*a: Any) -> bytes:
            b = self._bits("tohex", a, 1)
            n = 8 if len(a) < 2 else self._bits("tohex", a, 2)  # noqa: PLR2004
            digits = "%08x"
            if n < 0:
                n, digits = -n, "%08X"
            n = min(n, 8)
            return (digits % (b & 0xFFFFFFFF))[8 - n :].encode() if n else b""

        u = 0xFFFFFFFF
        return {
            b"tobit": unary("tobit", lambda x: x),
            b"bnot": unary("bnot", lambda x: ~x),
            b"bswap": unary("bswap", lambda x: int.from_bytes((x & u).to_bytes(4, "little"),
                                                                "big")),
            b"band": fold("band", lambda x, y: x & y),
            b"bor": fold("bor", lambda x, y: x | y),
            b"bxor": fold("bxor", lambda x, y: x ^ y),
            b"lshift": shift("lshift", lambda x, n: x << n),
            b"rshift": shift("rshift", lambda x, n: (x & u) >> n),
            b"arshift": shift("arshift", lambda x, n: x >> n),
            b"rol": shift("rol", lambda x, n: ((x & u) << n) | ((x & u) >> (32 - n))),
            b"ror": shift("ror", lambda x, n: ((x & u) >> n) | ((x & u) << (32 - n))),
            b"tohex": tohex,
        }
