"""List commands, blocking ones included.

A list is metadata ``(id, size, head, tail)`` plus one entry per element at position
``head + i`` (docs/format/resp.md): pushes and pops at either end, LINDEX, LSET and
LRANGE are O(1) per element touched, whatever the length. LINSERT and LREM shift the
shorter side of the list (O(n) writes at worst, as Kvrocks does).
"""

from __future__ import annotations

from itertools import repeat
from typing import TYPE_CHECKING, Any

import numpy as np

from tuffdb._format.resp import LIST_META, LIST_START, TAG_LIST, U64
from tuffdb.kv.hot_tier import holds
from tuffdb.kv.store import KVStore
from tuffdb.server.resp import reply
from tuffdb.server.resp.blocking import Blocked
from tuffdb.server.resp.commands.collection import (
    batchable,
    commit,
    commit_batch,
    numkeys,
    positive_count,
)
from tuffdb.server.resp.commands.common import to_int
from tuffdb.server.resp.commands.numbers import parse_long_double
from tuffdb.server.resp.keyspace import (
    Op,
    drop_ops,
    elements,
    lookup,
    meta_op,
    new_collection,
    stored,
)
from tuffdb.server.resp.table import SYNTAX, CommandError, batched, command

if TYPE_CHECKING:
    from collections.abc import Callable

    from tuffdb.server.resp.conn import Conn

LIST_TAGS = frozenset((TAG_LIST,))
_pack = U64.pack
MANY_POSITIONS = 32  # from this many keys, ListState.positions builds them with NumPy


class ListState:
    """One list while a command changes it: metadata in fields, writes in ``ops``."""

    __slots__ = ("cid", "existed", "head", "key", "ops", "prefix", "size", "skey")

    def __init__(self, c: Conn, key: bytes, *, create: bool = False,
                 ops: list[Op] | None = None) -> None:
        self.key = key
        self.skey = stored(key)
        self.ops: list[Op] = [] if ops is None else ops
        raw = lookup(c.db, key, TAG_LIST)
        self.existed = raw is not None
        if raw is not None:
            _, self.cid, self.size, self.head, _tail = LIST_META.unpack(raw)
        else:
            self.cid = new_collection(self.ops, c.srv.ids, key) if create else 0
            self.size = 0
            self.head = LIST_START
        self.prefix = elements(self.cid)

    def pos(self, i: int) -> bytes:
        return self.prefix + _pack(self.head + i)

    def positions(self, i: int, j: int) -> list[bytes]:
        """Engine keys of elements i..j-1."""
        return element_keys(self.prefix, self.head + i, self.head + j)

    def keys(self, c: Conn, i: int, j: int) -> list[bytes]:
        """Engine keys of elements i..j-1 to read: many of them are taken from the engine's
        ordered view (one C slice of keys that exist, where :meth:`positions` makes a
        bytes object per element), when it holds exactly as many as the list says."""
        db = c.db
        if j - i >= MANY_POSITIONS and type(db) is KVStore:
            keys = db.keys_between(self.pos(i), self.pos(j), j - i)
            if len(keys) == j - i:
                return keys
        return self.positions(i, j)

    def values(self, c: Conn, i: int, j: int) -> list[bytes]:
        """Elements i..j-1 (0 <= i <= j <= size)."""
        if i >= j:
            return []
        got = c.db.get_many(self.keys(c, i, j))
        if holds(got, None):  # only if the engine lost an element: never hand out a null
            return [v if v is not None else b"" for v in got]
        result: list[bytes] = got
        return result

    def push(self, values: list[bytes], *, left: bool) -> None:
        ops = self.ops
        if left:
            for v in values:
                self.head -= 1
                ops.append((self.prefix + _pack(self.head), v))
        else:
            tail = self.head + self.size
            for n, v in enumerate(values):
                ops.append((self.prefix + _pack(tail + n), v))
        self.size += len(values)

    def pop(self, c: Conn, n: int, *, left: bool) -> list[bytes]:
        n = min(n, self.size)
        if n == 1:  # the common case: one key, one get
            key = self.pos(0 if left else self.size - 1)
            v = c.db.get(key)
            out: list[bytes] = [v if v is not None else b""]  # never hand out a null
            self.ops.append((key, None))
        else:
            keys = self.positions(0, n) if left else self.positions(self.size - n, self.size)[::-1]
            out = [v if v is not None else b"" for v in c.db.get_many(keys)]
            self.ops.extend(zip(keys, repeat(None, n)))
        if left:
            self.head += n
        self.size -= n
        return out

    def splice(self, c: Conn, i: int, j: int, new: list[bytes]) -> None:
        """Replace elements [i, j) with ``new``, moving whichever side is shorter."""
        delta = len(new) - (j - i)
        if i <= self.size - j:  # rewrite the head side: elements [0, i) move by -delta
            moved = self.values(c, 0, i) + new
            old_head = self.head
            self.head -= delta
            for k, v in enumerate(moved):
                self.ops.append((self.prefix + _pack(self.head + k), v))
            for p in range(old_head, self.head):  # the head moved right: free its old cells
                self.ops.append((self.prefix + _pack(p), None))
        else:  # rewrite the tail side: elements [j, size) move by +delta
            moved = new + self.values(c, j, self.size)
            for k, v in enumerate(moved):
                self.ops.append((self.pos(i + k), v))
            for p in range(self.size + delta, self.size):  # the tail moved left
                self.ops.append((self.pos(p), None))
        self.size += delta

    def meta(self) -> bytes:
        return LIST_META.pack(TAG_LIST, self.cid, self.size, self.head, self.head + self.size)

    def finish(self, c: Conn, *, signal: bool = False) -> None:
        """Queue the metadata (or, emptied, its removal) in ``ops``; write unless shared."""
        self.close()
        commit(c, self.key, self.ops)
        if signal and self.size:
            c.srv.signal(self.key, self.meta())

    def close(self) -> None:
        if self.size:
            self.ops.append(meta_op(self.skey, self.meta(), self.existed))
        elif self.existed:
            self.ops.append((self.skey, None))
            drop_ops(self.ops, self.cid)


def store_list(c: Conn, dst: bytes, values: list[bytes]) -> None:
    """Overwrite ``dst`` (whatever it held) with a list of ``values``; empty deletes it
    (SORT ... STORE)."""
    sdst = stored(dst)
    old = c.db.get(sdst)
    ops: list[Op] = []
    meta = b""
    if values:
        cid = new_collection(ops, c.srv.ids, dst)
        ops.extend(zip(element_keys(elements(cid), LIST_START, LIST_START + len(values)),
                       values))
        meta = LIST_META.pack(TAG_LIST, cid, len(values), LIST_START, LIST_START + len(values))
        ops.append((sdst, meta))
    elif old is not None:
        ops.append((sdst, None))
    commit(c, dst, ops)
    if old is not None:
        c.srv.dropped(old)
    if values:
        c.srv.signal(dst, meta)


def element_keys(prefix: bytes, lo: int, hi: int) -> list[bytes]:
    """``prefix`` + the big-endian position, for positions lo..hi-1: few by C loops
    (``map`` over ``range``), many (LRANGE) by :func:`span_keys`."""
    if hi - lo < MANY_POSITIONS:
        return list(map(prefix.__add__, map(_pack, range(lo, hi))))
    return span_keys([(prefix, lo, hi)])


_ROW_TYPES: dict[int, tuple[np.dtype[Any], np.dtype[Any], np.dtype[Any]]] = {}


def _row_types(width: int) -> tuple[np.dtype[Any], np.dtype[Any], np.dtype[Any]]:
    """(row, prefix, key) dtypes for prefixes of ``width`` bytes: parsing a dtype spec
    costs more than filling a hundred rows, so each width's are made once."""
    types = _ROW_TYPES.get(width)
    if types is None:
        types = _ROW_TYPES[width] = (np.dtype([("prefix", f"V{width}"), ("pos", ">u8")]),
                                     np.dtype(f"V{width}"), np.dtype(f"V{width + 8}"))
    return types


def span_keys(spans: list[tuple[bytes, int, int]]) -> list[bytes]:
    """The element keys of every span ``(prefix, lo, hi)`` in order, prefixes of one width,
    as one NumPy record array of (prefix, position) viewed as fixed-size raw items, whose
    ``tolist`` makes the bytes objects in C (~20 ns a key against ~85 ns by ``map``; raw
    ``V`` items, unlike ``S``, keep trailing zero bytes)."""
    row, pre, key = _row_types(len(spans[0][0]))
    if len(spans) == 1:
        prefix, lo, hi = spans[0]
        rows = np.empty(hi - lo, dtype=row)
        rows["prefix"] = np.frombuffer(prefix, dtype=pre)[0]
        rows["pos"] = np.arange(lo, hi, dtype=np.uint64)
    else:
        counts = np.array([hi - lo for _, lo, hi in spans], dtype=np.int64)
        starts = np.array([lo for _, lo, _ in spans], dtype=np.uint64)
        rows = np.empty(int(counts.sum()), dtype=row)
        rows["prefix"] = np.repeat(np.frombuffer(b"".join([p for p, _, _ in spans]), dtype=pre),
                                   counts)
        firsts = np.cumsum(counts) - counts  # each span's first row
        rows["pos"] = (np.arange(len(rows), dtype=np.uint64)
                       - np.repeat(firsts.astype(np.uint64), counts) + np.repeat(starts, counts))
    keys: list[bytes] = rows.view(key).tolist()
    return keys


def _index(raw: bytes, size: int) -> int | None:
    i = to_int(raw)
    if i < 0:
        i += size
    return i if 0 <= i < size else None


# -- push / pop -----------------------------------------------------------------------------
def _push(c: Conn, a: list[bytes], *, left: bool, only_existing: bool) -> bytes:
    lst = ListState(c, a[1], create=not only_existing)
    if only_existing and not lst.existed:
        return reply.ZERO
    lst.push(a[2:], left=left)
    lst.finish(c, signal=True)
    return reply.integer(lst.size)


@command("lpush", -3, "write denyoom fast", (1, 1, 1), group="list")
def lpush(c: Conn, a: list[bytes]) -> bytes:
    """Insert elements at the head; reply the new length."""
    return _push(c, a, left=True, only_existing=False)


@command("rpush", -3, "write denyoom fast", (1, 1, 1), group="list")
def rpush(c: Conn, a: list[bytes]) -> bytes:
    """Append elements at the tail; reply the new length."""
    return _push(c, a, left=False, only_existing=False)


@command("lpushx", -3, "write denyoom fast", (1, 1, 1), group="list", since="2.2.0")
def lpushx(c: Conn, a: list[bytes]) -> bytes:
    """LPUSH only if the list exists."""
    return _push(c, a, left=True, only_existing=True)


@command("rpushx", -3, "write denyoom fast", (1, 1, 1), group="list", since="2.2.0")
def rpushx(c: Conn, a: list[bytes]) -> bytes:
    """RPUSH only if the list exists."""
    return _push(c, a, left=False, only_existing=True)


def _pop(c: Conn, a: list[bytes], *, left: bool) -> bytes:
    if len(a) > 3:  # noqa: PLR2004
        raise CommandError(f"ERR wrong number of arguments for '{a[0].lower().decode()}' "
                           "command")
    count = positive_count(a[2]) if len(a) == 3 else None  # noqa: PLR2004
    lst = ListState(c, a[1])
    if not lst.existed:
        return c.enc.null if count is None else c.enc.null_array
    got = lst.pop(c, 1 if count is None else count, left=left)
    if got:
        lst.finish(c)
    if count is None:
        return reply.bulk(got[0])
    return c.enc.bulks(got)  # type: ignore[arg-type]


def _push_batch(c: Conn, cmds: list[list[bytes]], *, left: bool) -> list[bytes]:
    """Pipelined LPUSH/RPUSH: one metadata read per key, one write_batch."""
    if not batchable(c, cmds, 3, exact=False):
        return []
    ops: list[Op] = []
    states: dict[bytes, ListState] = {}
    out = []
    try:
        for a in cmds:
            lst = states.get(a[1])
            if lst is None:
                lst = states[a[1]] = ListState(c, a[1], create=True, ops=ops)
            lst.push(a[2:], left=left)
            out.append(reply.integer(lst.size))
    except CommandError:
        return []  # WRONGTYPE: one by one gives each command its reply (nothing written yet)
    for lst in states.values():
        lst.close()
    commit_batch(c, ops, list(states))
    for lst in states.values():
        c.srv.signal(lst.key, lst.meta())
    return out


@batched("lpush")
def lpush_batch(c: Conn, cmds: list[list[bytes]]) -> list[bytes]:
    return _push_batch(c, cmds, left=True)


@batched("rpush")
def rpush_batch(c: Conn, cmds: list[list[bytes]]) -> list[bytes]:
    return _push_batch(c, cmds, left=False)


def _pop_batch(c: Conn, cmds: list[list[bytes]], *, left: bool) -> list[bytes]:
    """Pipelined LPOP/RPOP without a count: the popped elements of each list are known up
    front (its first or last k), so they are read with one get_many."""
    if not batchable(c, cmds, 2):
        return []
    ops: list[Op] = []
    states: dict[bytes, ListState] = {}
    try:
        for a in cmds:
            if a[1] not in states:
                states[a[1]] = ListState(c, a[1], ops=ops)
    except CommandError:
        return []
    wanted: dict[bytes, int] = {}
    for a in cmds:
        wanted[a[1]] = wanted.get(a[1], 0) + 1
    popped: dict[bytes, list[bytes]] = {}
    for key, n in wanted.items():
        lst = states[key]
        got = lst.pop(c, n, left=left) if lst.size else []
        popped[key] = got[::-1]  # pop() from the end of this list serves commands in order
        if lst.existed:
            lst.close()
    null = c.enc.null
    out = []
    for a in cmds:
        got = popped[a[1]]
        out.append(reply.bulk(got.pop()) if got else null)
    commit_batch(c, ops, list(states))
    return out


@batched("lpop")
def lpop_batch(c: Conn, cmds: list[list[bytes]]) -> list[bytes]:
    return _pop_batch(c, cmds, left=True)


@batched("rpop")
def rpop_batch(c: Conn, cmds: list[list[bytes]]) -> list[bytes]:
    return _pop_batch(c, cmds, left=False)


@command("lpop", -2, "write fast", (1, 1, 1), group="list")
def lpop(c: Conn, a: list[bytes]) -> bytes:
    """Remove and return the first element(s)."""
    return _pop(c, a, left=True)


@command("rpop", -2, "write fast", (1, 1, 1), group="list")
def rpop(c: Conn, a: list[bytes]) -> bytes:
    """Remove and return the last element(s), last first."""
    return _pop(c, a, left=False)


# -- reads ---------------------------------------------------------------------------------
@command("llen", 2, "readonly fast", (1, 1, 1), group="list")
def llen(c: Conn, a: list[bytes]) -> bytes:
    """The length of a list (from its metadata: O(1))."""
    return reply.integer(ListState(c, a[1]).size)


@command("lindex", 3, "readonly", (1, 1, 1), group="list")
def lindex(c: Conn, a: list[bytes]) -> bytes:
    """The element at an index (negative: from the tail)."""
    lst = ListState(c, a[1])
    i = _index(a[2], lst.size)
    if i is None:
        return c.enc.null
    return reply.bulk(lst.values(c, i, i + 1)[0])


def clamp_range(raw_start: bytes, raw_stop: bytes, size: int) -> tuple[int, int]:
    """LRANGE/LTRIM/ZRANGE index arithmetic: inclusive, negatives from the end, clamped;
    returns [i, j) (empty when i >= j)."""
    start, stop = to_int(raw_start), to_int(raw_stop)
    if start < 0:
        start = max(start + size, 0)
    if stop < 0:
        stop += size
    stop = min(stop, size - 1)
    if start > stop or start >= size:
        return 0, 0
    return start, stop + 1


@command("lrange", 4, "readonly", (1, 1, 1), group="list")
def lrange(c: Conn, a: list[bytes]) -> bytes:
    """Elements start..stop, inclusive (negatives from the tail)."""
    to_int(a[2]), to_int(a[3])  # a bad index is the error before a wrong type (as Redis)
    lst = ListState(c, a[1])
    i, j = clamp_range(a[2], a[3], lst.size)
    return c.enc.bulks(lst.values(c, i, j))  # type: ignore[arg-type]


@batched("lrange")
def lrange_batch(c: Conn, cmds: list[list[bytes]]) -> list[bytes]:
    """Pipelined LRANGEs: every element of every reply in one get_many."""
    if list(map(len, cmds)).count(4) != len(cmds):
        return []
    try:
        spans = []
        states: dict[bytes, ListState] = {}  # one metadata read per key
        for a in cmds:
            lst = states.get(a[1])
            if lst is None:
                lst = states[a[1]] = ListState(c, a[1])
            i, j = clamp_range(a[2], a[3], lst.size)
            spans.append((lst, i, j))
    except CommandError:
        return []
    reads = [(lst.prefix, lst.head + i, lst.head + j) for lst, i, j in spans if j > i]
    values = c.db.get_many(span_keys(reads)) if reads else []
    out = []
    pos = 0
    if values and not holds(values, None):
        lens = list(map(len, values))
        width = lens[0]
        if lens.count(width) == len(lens):  # one length: no reply needs to measure its own
            for _, i, j in spans:
                out.append(reply.same_length_array(values[pos : pos + j - i], width))
                pos += j - i
            return out
    for _, i, j in spans:
        out.append(c.enc.bulks(values[pos : pos + j - i]))
        pos += j - i
    return out


@command("lpos", -3, "readonly", (1, 1, 1), group="list", since="6.0.6")
def lpos(c: Conn, a: list[bytes]) -> bytes:  # noqa: C901, PLR0912  (Redis option parsing)
    """Index(es) of an element: RANK, COUNT, MAXLEN."""
    rank, count, maxlen = 1, None, 0
    i = 3
    while i < len(a):
        opt = a[i].lower()
        if i + 1 >= len(a):
            raise CommandError(SYNTAX)
        if opt == b"rank":
            rank = to_int(a[i + 1])
            if rank == 0:
                raise CommandError(
                    "ERR RANK can't be zero: use 1 to start from the first match, 2 from the "
                    "second ... or use negative to start from the end of the list")
            if rank == -(2**63):
                raise CommandError("ERR value is out of range, value must between "
                                   "-9223372036854775807 and 9223372036854775807")
        elif opt == b"count":
            count = to_int(a[i + 1], "ERR COUNT can't be negative")  # a non-number too
            if count < 0:
                raise CommandError("ERR COUNT can't be negative")
        elif opt == b"maxlen":
            maxlen = to_int(a[i + 1], "ERR MAXLEN can't be negative")  # a non-number too
            if maxlen < 0:
                raise CommandError("ERR MAXLEN can't be negative")
        else:
            raise CommandError(SYNTAX)
        i += 2
    lst = ListState(c, a[1])
    found: list[int] = []
    want = count if count else None
    if lst.size:
        order = range(lst.size) if rank > 0 else range(lst.size - 1, -1, -1)
        if maxlen:
            order = order[:maxlen]
        skip = abs(rank) - 1
        chunk = 512
        for n in range(0, len(order), chunk):
            idx = order[n : n + chunk]
            vals = c.db.get_many([lst.pos(k) for k in idx])
            for k, v in zip(idx, vals, strict=True):
                if v == a[2]:
                    if skip:
                        skip -= 1
                        continue
                    found.append(k)
                    if (want is not None and len(found) >= want) or count is None:
                        break
            else:
                continue
            break
    if count is None:
        return reply.integer(found[0]) if found else c.enc.null
    return reply.array([reply.integer(k) for k in found])


# -- changes in the middle -------------------------------------------------------------------
@command("lset", 4, "write denyoom", (1, 1, 1), group="list")
def lset(c: Conn, a: list[bytes]) -> bytes:
    """Replace the element at an index."""
    lst = ListState(c, a[1])
    if not lst.existed:
        raise CommandError("ERR no such key")
    i = _index(a[2], lst.size)
    if i is None:
        raise CommandError("ERR index out of range")
    lst.ops.append((lst.pos(i), a[3]))
    lst.finish(c)
    return reply.OK


@command("ltrim", 4, "write", (1, 1, 1), group="list")
def ltrim(c: Conn, a: list[bytes]) -> bytes:
    """Keep only elements start..stop; an empty range deletes the list."""
    to_int(a[2]), to_int(a[3])  # a bad index is the error before a wrong type (as Redis)
    lst = ListState(c, a[1])
    i, j = clamp_range(a[2], a[3], lst.size)
    if not lst.existed or (i == 0 and j == lst.size):
        return reply.OK
    lst.ops.extend((lst.pos(k), None) for k in range(i))
    lst.ops.extend((lst.pos(k), None) for k in range(max(j, i), lst.size))
    lst.head += i
    lst.size = max(j - i, 0)
    lst.finish(c)
    return reply.OK


@command("lrem", 4, "write", (1, 1, 1), group="list")
def lrem(c: Conn, a: list[bytes]) -> bytes:
    """Remove occurrences of an element: count > 0 from the head, < 0 from the tail."""
    count = to_int(a[2])
    lst = ListState(c, a[1])
    if not lst.existed:
        return reply.ZERO
    values = lst.values(c, 0, lst.size)
    order = range(lst.size) if count >= 0 else range(lst.size - 1, -1, -1)
    hits: list[int] = []
    for k in order:
        if values[k] == a[3]:
            hits.append(k)
            if count and len(hits) >= abs(count):
                break
    if not hits:
        return reply.ZERO
    lo, hi = min(hits), max(hits) + 1
    gone = set(hits)
    lst.splice(c, lo, hi, [values[k] for k in range(lo, hi) if k not in gone])
    lst.finish(c)
    return reply.integer(len(hits))


@command("linsert", 5, "write denyoom", (1, 1, 1), group="list", since="2.2.0")
def linsert(c: Conn, a: list[bytes]) -> bytes:
    """Insert an element before or after the first occurrence of a pivot."""
    where = a[2].lower()
    if where not in (b"before", b"after"):
        raise CommandError(SYNTAX)
    lst = ListState(c, a[1])
    if not lst.existed:
        return reply.ZERO
    values = lst.values(c, 0, lst.size)
    try:
        k = values.index(a[3])
    except ValueError:
        return reply.integer(-1)
    at = k if where == b"before" else k + 1
    lst.splice(c, at, at, [a[4]])
    lst.finish(c, signal=True)
    return reply.integer(lst.size)


# -- moves between lists ----------------------------------------------------------------------
def _side(raw: bytes) -> bool:
    """LEFT -> True, RIGHT -> False."""
    side = raw.lower()
    if side == b"left":
        return True
    if side == b"right":
        return False
    raise CommandError(SYNTAX)


def move(c: Conn, src: bytes, dst: bytes, from_left: bool, to_left: bool) -> bytes | None:
    """LMOVE's work: the moved element, or None when ``src`` is empty. The destination's
    type is checked before anything is popped."""
    s = ListState(c, src)
    if not s.existed:
        return None
    if dst == src:
        d = s
    else:
        d = ListState(c, dst, create=True, ops=s.ops)
    value = s.pop(c, 1, left=from_left)[0]
    d.push([value], left=to_left)
    if d is not s:
        s.close()
    d.finish(c, signal=True)
    if d is not s:
        c.srv.touch(src)
    return value


@command("lmove", 5, "write denyoom", (1, 2, 1), group="list", since="6.2.0")
def lmove(c: Conn, a: list[bytes]) -> bytes:
    """Pop from one end of a list and push to an end of another (atomically)."""
    from_left, to_left = _side(a[3]), _side(a[4])
    value = move(c, a[1], a[2], from_left, to_left)
    return c.enc.null if value is None else reply.bulk(value)


@command("rpoplpush", 3, "write denyoom", (1, 2, 1), group="list", since="1.2.0")
def rpoplpush(c: Conn, a: list[bytes]) -> bytes:
    """LMOVE src dst RIGHT LEFT."""
    value = move(c, a[1], a[2], False, True)
    return c.enc.null if value is None else reply.bulk(value)


def mpop_args(a: list[bytes], first: int, sides: tuple[bytes, bytes]) -> tuple[list[bytes],
                                                                              bool, int]:
    """LMPOP/ZMPOP ``numkeys key... <side> [COUNT n]`` from ``a[first]``: (keys, True for
    ``sides[0]``, count)."""
    n = numkeys(a, first, 1)
    keys = a[first + 1 : first + 1 + n]
    rest = a[first + 1 + n :]
    if not rest or rest[0].lower() not in sides:
        raise CommandError(SYNTAX)
    count = 1
    if len(rest) == 3 and rest[1].lower() == b"count":  # noqa: PLR2004
        count = to_int(rest[2], "ERR count should be greater than 0")
        if count <= 0:
            raise CommandError("ERR count should be greater than 0")
    elif len(rest) != 1:
        raise CommandError(SYNTAX)
    return keys, rest[0].lower() == sides[0], count


def _mpop_from(c: Conn, key: bytes, left: bool, count: int) -> bytes | None:
    lst = ListState(c, key)
    if not lst.existed:
        return None
    got = lst.pop(c, count, left=left)
    lst.finish(c)
    return reply.array([reply.bulk(key), c.enc.bulks(got)])  # type: ignore[arg-type]


@command("lmpop", -4, "write", (0, 0, 0), group="list", since="7.0.0")
def lmpop(c: Conn, a: list[bytes]) -> bytes:
    """Pop elements from the first non-empty list of several."""
    keys, left, count = mpop_args(a, 1, (b"left", b"right"))
    return first_served(keys, lambda key: _mpop_from(c, key, left, count)) or c.enc.null_array


# -- blocking -----------------------------------------------------------------------------------
def parse_timeout(raw: bytes) -> float:
    """B*POP/BLMOVE timeouts: seconds as a float (Redis rounds up to whole ms); 0 = none."""
    x = parse_long_double(raw, "ERR timeout is not a float or out of range")
    ms = x * 1000
    # Not in a long long (inf too): C's cast of it is LLONG_MIN, so Redis 7.0 says negative.
    if not -(2**63) < ms < 2**63 or ms < 0:
        raise CommandError("ERR timeout is negative")
    whole = int(ms) + (1 if ms != int(ms) else 0)
    return whole / 1000


def first_served(keys: list[bytes], attempt: Callable[[bytes], bytes | None]) -> bytes | None:
    """The reply of the first key (in argument order) ``attempt`` can serve, or None."""
    for key in keys:
        out = attempt(key)
        if out is not None:
            return out
    return None


def serve_or_wait(c: Conn, keys: list[bytes], timeout: float,
                  attempt: Callable[[bytes], bytes | None], timeout_reply: bytes,
                  tags: frozenset[int] = LIST_TAGS) -> bytes:
    """A blocking command: served from the first key that can serve it; otherwise inside
    MULTI/EXEC or a script the timeout reply at once, else the client parks (blocking.py)."""
    out = first_served(keys, attempt)
    if out is not None:
        return out
    if c.no_block:
        return timeout_reply
    raise Blocked(keys, timeout, attempt, tags, timeout_reply)


def _bpop(c: Conn, a: list[bytes], *, left: bool) -> bytes:
    timeout = parse_timeout(a[-1])
    keys = a[1:-1]

    def attempt(key: bytes) -> bytes | None:
        lst = ListState(c, key)
        if not lst.size:
            return None
        value = lst.pop(c, 1, left=left)[0]
        lst.finish(c)
        return reply.array([reply.bulk(key), reply.bulk(value)])

    return serve_or_wait(c, keys, timeout, attempt, c.enc.null_array)


@command("blpop", -3, "write noscript", (1, -2, 1), group="list", since="2.0.0")
def blpop(c: Conn, a: list[bytes]) -> bytes:
    """LPOP from the first non-empty list, waiting up to timeout seconds (0: forever)."""
    return _bpop(c, a, left=True)


@command("brpop", -3, "write noscript", (1, -2, 1), group="list", since="2.0.0")
def brpop(c: Conn, a: list[bytes]) -> bytes:
    """RPOP from the first non-empty list, waiting up to timeout seconds (0: forever)."""
    return _bpop(c, a, left=False)


def _bmove(c: Conn, src: bytes, dst: bytes, from_left: bool, to_left: bool,
           timeout: float) -> bytes:
    # The destination's type is checked only once the source has an element (``move``), as
    # Redis does: an empty source waits (or, in MULTI, answers nil) whatever it holds.
    def attempt(key: bytes) -> bytes | None:
        value = move(c, key, dst, from_left, to_left)
        return None if value is None else reply.bulk(value)

    # Quirk kept from Redis: the timeout reply is a null array, in MULTI a null bulk.
    return serve_or_wait(c, [src], timeout, attempt,
                         c.enc.null if c.no_block else c.enc.null_array)


@command("blmove", 6, "write denyoom noscript", (1, 2, 1), group="list", since="6.2.0")
def blmove(c: Conn, a: list[bytes]) -> bytes:
    """LMOVE, waiting for the source up to timeout seconds."""
    from_left, to_left = _side(a[3]), _side(a[4])
    return _bmove(c, a[1], a[2], from_left, to_left, parse_timeout(a[5]))


@command("brpoplpush", 4, "write denyoom noscript", (1, 2, 1), group="list", since="2.2.0")
def brpoplpush(c: Conn, a: list[bytes]) -> bytes:
    """RPOPLPUSH, waiting for the source up to timeout seconds."""
    return _bmove(c, a[1], a[2], False, True, parse_timeout(a[3]))


@command("blmpop", -5, "write", (0, 0, 0), group="list", since="7.0.0")
def blmpop(c: Conn, a: list[bytes]) -> bytes:
    """LMPOP, waiting up to timeout seconds."""
    timeout = parse_timeout(a[1])
    keys, left, count = mpop_args(a, 2, (b"left", b"right"))
    for key in keys:
        lookup(c.db, key, TAG_LIST)
    return serve_or_wait(c, keys, timeout, lambda key: _mpop_from(c, key, left, count),
                         c.enc.null_array)
