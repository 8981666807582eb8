"""What the Lua libraries share: their error, ``luaL_check*`` over a call's arguments,
and C's number conversions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import lupa.lua51 as lua51

if TYPE_CHECKING:
    from collections.abc import Callable

INT64_MIN = -(1 << 63)
INT64_LIMIT = 1 << 63
EXACT_INT = 1 << 53  # beyond this a Lua number is a double rounded from the integer


class LibError(Exception):  # noqa: N818  (a Lua error, not a Python failure)
    """A library function failed; ``str()`` is the text ``luaL_error`` would raise."""


def lua_type(v: Any) -> str:
    if v is None:
        return "nil"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, bytes):
        return "string"
    return str(lua51.lua_type(v) or "userdata")


def bad_arg(n: int, fname: str, msg: str) -> LibError:
    return LibError(f"bad argument #{n} to '{fname}' ({msg})")


class Args:
    """``luaL_check*`` over a call's arguments (1-based, as Lua counts them)."""

    def __init__(self, fname: str, args: tuple[Any, ...], tonumber: Callable[[bytes], Any]) -> None:
        self.fname = fname
        self.args = args
        self.tonumber = tonumber

    def number(self, n: int) -> float | int:
        v = self.args[n - 1] if n <= len(self.args) else None
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return v
        if isinstance(v, bytes):
            got = self.tonumber(v)  # Lua's own rules (hex, spaces, exponents)
            if got is not None:
                return got  # type: ignore[no-any-return]
        raise bad_arg(n, self.fname, f"number expected, got {self._got(n)}")

    def opt_number(self, n: int, default: int) -> float | int:
        if n > len(self.args) or self.args[n - 1] is None:
            return default
        return self.number(n)

    def string(self, n: int) -> bytes:
        v = self.args[n - 1] if n <= len(self.args) else None
        if isinstance(v, bytes):
            return v
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return number_text(v)
        raise bad_arg(n, self.fname, f"string expected, got {self._got(n)}")

    def _got(self, n: int) -> str:
        return "no value" if n > len(self.args) else lua_type(self.args[n - 1])


def number_text(v: float) -> bytes:
    """A number as Lua 5.1 turns it into a string (LUA_NUMBER_FMT)."""
    return b"%.14g" % v


def c_integer(v: float) -> int:
    """C's ``(long long)`` cast of a double, as x86 does it out of range."""
    if isinstance(v, int):
        return v if INT64_MIN <= v < INT64_LIMIT else INT64_MIN
    if v != v or not -INT64_LIMIT <= v < INT64_LIMIT:  # noqa: PLR0124 - NaN
        return INT64_MIN
    return int(v)


def to_lua_number(v: int) -> int | float:
    return v if -EXACT_INT <= v <= EXACT_INT else float(v)
