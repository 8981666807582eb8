"""``struct`` (Roberto Ierusalimschy's lstruct): pack and unpack C values in strings."""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

from tuffdb.server.resp.lualibs.common import Args, LibError, bad_arg, c_integer, to_lua_number

if TYPE_CHECKING:
    from collections.abc import Callable

MAX_INT_SIZE = 32  # the limit for i/I sizes
DEFAULT_ALIGN = 8  # '!' without a size: the platform's double alignment

_STRUCT_SIZES = {"b": 1, "B": 1, "h": 2, "H": 2, "l": 8, "L": 8, "T": 8, "f": 4, "d": 8,
                 "x": 1, "s": 0}
_INTEGER_OPTS = frozenset("bBhHlLTiI")


def _struct_items(fmt: bytes, fname: str) -> list[tuple[str, int, bool, int]]:
    """(option, size, little endian, alignment) per item of a struct format."""
    items = []
    little, align = True, 1
    text = fmt.decode("latin-1")
    i = 0
    while i < len(text):
        opt = text[i]
        i += 1
        digits = ""
        if opt in "iIc!":
            while i < len(text) and text[i].isdigit():
                digits += text[i]
                i += 1
        if opt == " ":
            continue
        if opt in "<=":
            little = True
        elif opt == ">":
            little = False
        elif opt == "!":
            a = int(digits) if digits else DEFAULT_ALIGN
            if a & (a - 1) or a == 0:
                raise LibError(f"alignment {a} is not a power of 2")
            align = a
        elif opt in "iI":
            size = int(digits) if digits else 4
            if size > MAX_INT_SIZE:
                raise LibError(f"integral size {size} is larger than limit of {MAX_INT_SIZE}")
            items.append((opt, size, little, align))
        elif opt == "c":
            items.append((opt, int(digits) if digits else 1, little, align))
        elif opt in _STRUCT_SIZES:
            items.append((opt, _STRUCT_SIZES[opt], little, align))
        else:
            raise bad_arg(1, fname, f"invalid format option '{opt}'")
    return items


def _padding(pos: int, opt: str, size: int, align: int) -> int:
    if size == 0 or opt == "c":
        return 0
    size = min(size, align)
    return (size - (pos & (size - 1))) & (size - 1)


class StructLib:
    def __init__(self, tonumber: Callable[[bytes], Any]) -> None:
        self.tonumber = tonumber

    def functions(self) -> dict[bytes, Callable[..., Any]]:
        return {b"pack": self.pack, b"unpack": self.unpack, b"size": self.size}

    def pack(self, *a: Any) -> bytes:
        args = Args("pack", a, self.tonumber)
        out = bytearray()
        arg = 2
        for opt, size, little, align in _struct_items(args.string(1), "pack"):
            out += bytes(_padding(len(out), opt, size, align))
            if opt in _INTEGER_OPTS:
                n = args.number(arg)
                arg += 1
                value = c_integer(n) & ((1 << 64) - 1)
                raw = (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little") if size <= 8 \
                    else value.to_bytes(8, "little") + bytes(size - 8)
                out += raw if little else raw[::-1]
            elif opt == "x":
                out += b"\0"
            elif opt in "fd":
                out += struct.pack(("<" if little else ">") + opt, float(args.number(arg)))
                arg += 1
            elif opt == "c":
                s = args.string(arg)
                if size == 0:
                    size = len(s)
                if len(s) < size:  # (Redis's lua_struct names the argument after it)
                    raise bad_arg(arg + 1, "pack", "string too short")
                out += s[:size]
                arg += 1
            else:  # "s"
                out += args.string(arg) + b"\0"
                arg += 1
        return bytes(out)

    def unpack(self, *a: Any) -> tuple[Any, ...]:
        args = Args("unpack", a, self.tonumber)
        fmt, data = args.string(1), args.string(2)
        pos = int(args.opt_number(3, 1)) - 1
        if not 0 <= pos <= len(data):
            raise bad_arg(3, "unpack", "offset must be 1 or greater")
        out: list[Any] = []
        for opt, size0, little, align in _struct_items(fmt, "unpack"):
            size = size0
            pos += _padding(pos, opt, size, align)
            if pos + size > len(data):
                raise bad_arg(2, "unpack", "data string too short")
            if opt in _INTEGER_OPTS:
                raw = data[pos : pos + size]
                value = int.from_bytes(raw, "little" if little else "big")
                if opt.islower() and size and value >> (8 * size - 1):
                    value -= 1 << (8 * size)
                out.append(to_lua_number(value))
            elif opt in "fd":
                out.append(struct.unpack(("<" if little else ">") + opt,
                                          data[pos : pos + size])[0])
            elif opt == "c":
                if size == 0:
                    if not out or not isinstance(out[-1], (int, float)):
                        raise LibError("format 'c0' needs a previous size")
                    size = int(out.pop())
                    if size > len(data) or pos > len(data) - size:
                        raise bad_arg(2, "unpack", "data string too short")
                out.append(data[pos : pos + size])
            elif opt == "s":
                end = data.find(b"\0", pos)
                if end < 0:
                    raise LibError("unfinished string in data")
                out.append(data[pos:end])
                size = end - pos + 1
            pos += size
        out.append(pos + 1)
        return tuple(out)

    def size(self, *a: Any) -> int:
        total = 0
        for opt, size, _little, align in _struct_items(Args("size", a, self.tonumber).string(1),
                                                       "size"):
            if opt == "s":
                raise bad_arg(1, "size", "option 's' has no fixed size")
            if opt == "c" and size == 0:
                raise bad_arg(1, "size", "option 'c0' has no fixed size")
            total += _padding(total, opt, size, align) + size
        return total
