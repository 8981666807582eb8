"""Reply encoders for RESP2 and RESP3: one class per protocol, chosen per connection.

Handlers build their reply with the connection's encoder (``c.enc``), so the same
handler speaks both protocols: RESP3 gets maps, sets, ``_`` nulls and ``>`` pushes;
RESP2 gets the flat arrays Redis sends there. Every method returns ``bytes`` ready
for the socket; containers take already-encoded elements.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from tuffdb.kv.hot_tier import holds

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

OK = b"+OK\r\n"
QUEUED = b"+QUEUED\r\n"
PONG = b"+PONG\r\n"
ZERO = b":0\r\n"
ONE = b":1\r\n"
EMPTY_ARRAY = b"*0\r\n"


def bulk(value: bytes) -> bytes:
    return b"$%d\r\n%b\r\n" % (len(value), value)


def integer(n: int) -> bytes:
    return b":%d\r\n" % n


def simple(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return b"+%b\r\n" % raw


def error(text: str) -> bytes:
    """``text`` starts with the error code, e.g. ``"ERR syntax error"``."""
    return b"-%b\r\n" % text.replace("\r", " ").replace("\n", " ").encode()


def array(items: Sequence[bytes]) -> bytes:
    return b"*%d\r\n%b" % (len(items), b"".join(items))


_BULK_HEAD = b"$%d".__mod__
_SMALL_HEADS = tuple(_BULK_HEAD(n) for n in range(1024))  # "$len" of short values


def _head(n: int) -> bytes:
    return _SMALL_HEADS[n] if n < 1024 else _BULK_HEAD(n)  # noqa: PLR2004


def bulk_array(values: Sequence[bytes]) -> bytes:
    """An array of bulk strings (no nulls), built by C loops (:func:`bulks_after`)."""
    n = len(values)
    if not n:
        return EMPTY_ARRAY
    return bulks_after(b"*%d\r\n" % n, values)


def bulks_after(header: bytes, values: Sequence[bytes]) -> bytes:
    """``header`` and then the bulk strings of ``values`` (at least one, no nulls), built
    by C loops. Values of one length (ids, counters, fixed-size payloads) share one
    ``$len`` header, so the bulks are one ``join`` with the header as separator; otherwise
    the headers are made by ``map`` (looked up for short values) and interleaved with
    the values by slice assignment."""
    lens = list(map(len, values))
    first = lens[0]
    if lens.count(first) == len(lens):  # small ints are shared objects: count compares identities
        return _same_length(header, values, first)
    items: list[bytes] = [b""] * (2 * len(lens))
    items[::2] = (list(map(_SMALL_HEADS.__getitem__, lens)) if max(lens) < 1024  # noqa: PLR2004
                  else list(map(_head, lens)))
    items[1::2] = values
    return b"%b%b\r\n" % (header, b"\r\n".join(items))


def same_length_array(values: Sequence[bytes], width: int) -> bytes:
    """An array of bulk strings that are all ``width`` bytes long: one ``join``, with the
    shared ``$len`` header as its separator."""
    if not values:
        return EMPTY_ARRAY
    return _same_length(b"*%d\r\n" % len(values), values, width)


def _same_length(header: bytes, values: Sequence[bytes], width: int) -> bytes:
    """``header`` and bulks all ``width`` bytes long: one ``join``, with the shared
    ``$len`` header as its separator."""
    return b"%b$%d\r\n%b\r\n" % (header, width, (b"\r\n$%d\r\n" % width).join(values))


def bulks_or_nulls(values: list[bytes | None], null: bytes) -> bytes:
    """An array of bulk strings where a None is the protocol's ``null``."""
    if not holds(values, None):
        return bulk_array(values)  # type: ignore[arg-type]
    parts = [b"*%d\r\n" % len(values)]
    add = parts.append
    for v in values:
        add(null if v is None else b"$%d\r\n%b\r\n" % (len(v), v))
    return b"".join(parts)


class Resp2:
    """Encoder for RESP2 connections."""

    proto: ClassVar[int] = 2
    null: ClassVar[bytes] = b"$-1\r\n"
    null_array: ClassVar[bytes] = b"*-1\r\n"

    @staticmethod
    def bulks(values: list[bytes | None]) -> bytes:
        return bulks_or_nulls(values, Resp2.null)

    @staticmethod
    def map(pairs: Iterable[tuple[bytes, bytes]]) -> bytes:
        flat = [x for kv in pairs for x in kv]
        return b"*%d\r\n%b" % (len(flat), b"".join(flat))

    @staticmethod
    def bulk_map(flat: Sequence[bytes]) -> bytes:
        """A map of bulk strings given as ``[key, value, key, value, ...]``."""
        return bulk_array(flat)

    @staticmethod
    def set(items: Sequence[bytes]) -> bytes:
        return array(items)

    @staticmethod
    def push(items: Sequence[bytes]) -> bytes:
        return array(items)

    @staticmethod
    def double(text: bytes) -> bytes:
        """``text`` is the number already formatted (Redis formats it as a bulk in RESP2)."""
        return bulk(text)

    @staticmethod
    def boolean(flag: bool) -> bytes:
        return ONE if flag else ZERO

    @staticmethod
    def verbatim(text: bytes) -> bytes:
        """INFO, CLIENT LIST...: a bulk in RESP2, a ``txt`` verbatim string in RESP3."""
        return bulk(text)


class Resp3(Resp2):
    """Encoder for connections that sent ``HELLO 3``."""

    proto: ClassVar[int] = 3
    null: ClassVar[bytes] = b"_\r\n"
    null_array: ClassVar[bytes] = b"_\r\n"

    @staticmethod
    def bulks(values: list[bytes | None]) -> bytes:
        return bulks_or_nulls(values, Resp3.null)

    @staticmethod
    def map(pairs: Iterable[tuple[bytes, bytes]]) -> bytes:
        items = list(pairs)
        return b"%%%d\r\n%b" % (len(items), b"".join(k + v for k, v in items))

    @staticmethod
    def bulk_map(flat: Sequence[bytes]) -> bytes:
        return bulks_after(b"%%%d\r\n" % (len(flat) // 2), flat) if flat else b"%0\r\n"

    @staticmethod
    def set(items: Sequence[bytes]) -> bytes:
        return b"~%d\r\n%b" % (len(items), b"".join(items))

    @staticmethod
    def push(items: Sequence[bytes]) -> bytes:
        return b">%d\r\n%b" % (len(items), b"".join(items))

    @staticmethod
    def double(text: bytes) -> bytes:
        return b",%b\r\n" % text

    @staticmethod
    def boolean(flag: bool) -> bytes:
        return b"#t\r\n" if flag else b"#f\r\n"

    @staticmethod
    def verbatim(text: bytes) -> bytes:
        return b"=%d\r\ntxt:%b\r\n" % (len(text) + 4, text)


ENCODERS: dict[int, type[Resp2]] = {2: Resp2, 3: Resp3}
