"""SORT and SORT_RO: the elements of a list, set or sorted set, sorted by value or by
other keys (BY pattern), with LIMIT, GET patterns and STORE, as Redis 7.0 sorts them.

Numbers compare as doubles and equal scores by their bytes (Redis's rule, so the order is
deterministic); ALPHA compares bytes (strcoll in the C locale). A BY pattern without
``*`` (``BY nosort``) keeps the collection's own order: a list's from the end LIMIT
names, a sorted set's by score; DESC reverses both.
"""

# Every handler takes (conn, args), used or not: one signature for the command table.
# ruff: noqa: ARG001

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from tuffdb._format.resp import TAG_HASH, TAG_LIST, TAG_SET, TAG_STRING, TAG_ZSET
from tuffdb.server.resp import reply
from tuffdb.server.resp.commands.common import to_int
from tuffdb.server.resp.commands.lists import ListState, store_list
from tuffdb.server.resp.commands.sets import member_names
from tuffdb.server.resp.commands.zsets import ZSet, strtod
from tuffdb.server.resp.keyspace import cid_of, elements, stored
from tuffdb.server.resp.table import SYNTAX, WRONGTYPE, CommandError, command

if TYPE_CHECKING:
    from tuffdb.server.resp.conn import Conn

NOT_DOUBLE = "ERR One or more scores can't be converted into double"


def by_pattern(c: Conn, pattern: bytes, element: bytes) -> bytes | None:
    """The value a BY/GET pattern names for ``element``: ``#`` is the element, ``*`` is
    replaced by it, ``key->field`` reads a hash field; None when nothing is there."""
    if pattern == b"#":
        return element
    star = pattern.find(b"*")
    if star < 0:
        return None  # a constant key is no per-element lookup
    arrow = pattern.find(b"->", star + 1)
    field = None
    if arrow >= 0 and arrow + 2 < len(pattern):
        field, pattern = pattern[arrow + 2 :], pattern[:arrow]
    raw = c.db.get(stored(pattern[:star] + element + pattern[star + 1 :]))
    if raw is None:
        return None
    if field is None:
        return raw[1:] if raw[0] == TAG_STRING else None
    if raw[0] != TAG_HASH:
        return None
    value: bytes | None = c.db.get(elements(cid_of(raw)) + field)
    return value


def _elements(c: Conn, key: bytes, *, nosort: bool, desc: bool) -> tuple[int, list[bytes]]:
    """(type tag, elements in the collection's own order; a list or zset reversed for
    DESC when nothing will be sorted)."""
    raw = c.db.get(stored(key))
    if raw is None:
        return TAG_LIST, []
    tag = raw[0]
    if tag == TAG_LIST:
        lst = ListState(c, key)
        out = lst.values(c, 0, lst.size)
    elif tag == TAG_SET:
        out = member_names(c, cid_of(raw))
    elif tag == TAG_ZSET:
        out = [m for m, _ in ZSet(c, key).entries(c)]
    else:
        raise CommandError(WRONGTYPE)
    if nosort and desc and tag in (TAG_LIST, TAG_ZSET):
        out.reverse()
    return tag, out


def _sort(c: Conn, a: list[bytes], *, readonly: bool) -> bytes:  # noqa: C901, PLR0912, PLR0915
    desc = alpha = False
    sortby: bytes | None = None
    nosort = False
    limit: tuple[int, int] | None = None
    gets: list[bytes] = []
    store: bytes | None = None
    i = 2
    while i < len(a):
        opt = a[i].lower()
        left = len(a) - i - 1
        if opt == b"asc":
            desc = False
        elif opt == b"desc":
            desc = True
        elif opt == b"alpha":
            alpha = True
        elif opt == b"limit" and left >= 2:  # noqa: PLR2004
            limit = (to_int(a[i + 1]), to_int(a[i + 2]))
            i += 2
        elif opt == b"store" and left >= 1 and not readonly:
            store = a[i + 1]
            i += 1
        elif opt == b"by" and left >= 1:
            sortby = a[i + 1]
            nosort = b"*" not in sortby
            i += 1
        elif opt == b"get" and left >= 1:
            gets.append(a[i + 1])
            i += 1
        else:
            raise CommandError(SYNTAX)
        i += 1
    tag, items = _elements(c, a[1], nosort=nosort, desc=desc)
    if nosort and tag == TAG_SET and store is not None:
        nosort, sortby, alpha = False, None, True  # a stored set is sorted, for determinism
    n = len(items)
    start, count = limit if limit is not None else (0, -1)
    start = max(start, 0)
    end = n - 1 if count < 0 else start + count - 1
    if start >= n:
        start, end = n - 1, n - 2
    end = min(end, n - 1)
    if not nosort:
        keys: list[tuple[float, bytes, bytes | None]] = []
        for item in items:
            by = item if sortby is None else by_pattern(c, sortby, item)
            if alpha:
                keys.append((0.0, item, by))
                continue
            score = 0.0
            if by:  # missing or empty: 0 (strtod of "" reads nothing and ends the string)
                x = strtod(by, strict=False)  # plain strtod: spaces before, hex
                if x is None or x != x:  # noqa: PLR0124 - NaN
                    raise CommandError(NOT_DOUBLE)
                score = x
            keys.append((score, item, None))
        keys.sort(key=functools.cmp_to_key(_compare(alpha=alpha, by=sortby is not None)),
                  reverse=desc)
        items = [k[1] for k in keys]
    chosen = items[start : end + 1] if end >= start else []
    out: list[bytes | None] = []
    for item in chosen:
        if gets:
            out.extend(by_pattern(c, g, item) for g in gets)
        else:
            out.append(item)
    if store is not None:
        store_list(c, store, [b"" if v is None else v for v in out])
        return reply.integer(len(out))
    return c.enc.bulks(out)


def _compare(*, alpha: bool, by: bool):  # type: ignore[no-untyped-def]  # noqa: ANN202
    def numeric(x: tuple[float, bytes, bytes | None], y: tuple[float, bytes, bytes | None]) -> int:
        if x[0] != y[0]:
            return -1 if x[0] < y[0] else 1
        return (x[1] > y[1]) - (x[1] < y[1])

    def by_value(x: tuple[float, bytes, bytes | None], y: tuple[float, bytes, bytes | None]) -> int:
        a, b = x[2], y[2]
        if a is None or b is None:
            return 0 if a is b else (-1 if a is None else 1)
        return (a > b) - (a < b)

    def elements_(x: tuple[float, bytes, bytes | None], y: tuple[float, bytes, bytes | None]) -> int:
        return (x[1] > y[1]) - (x[1] < y[1])

    if not alpha:
        return numeric
    return by_value if by else elements_


@command("sort", -2, "write denyoom", (1, 1, 1), group="generic", since="1.0.0")
def sort(c: Conn, a: list[bytes]) -> bytes:
    """Sort a list, set or sorted set (BY, LIMIT, GET, ASC|DESC, ALPHA, STORE)."""
    return _sort(c, a, readonly=False)


@command("sort_ro", -2, "readonly", (1, 1, 1), group="generic", since="7.0.0")
def sort_ro(c: Conn, a: list[bytes]) -> bytes:
    """SORT without STORE."""
    return _sort(c, a, readonly=True)
