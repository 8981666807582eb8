"""Pieces every collection type shares: opening a key's metadata, writing a command's
batch, the SCAN-family reply, and the order-preserving argument parsers.

A command reads what it needs, collects its writes as ops and calls :func:`commit` once:
one ``write_batch``, then WATCH invalidation and (for pushes) the blocked-client signal.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from tuffdb._format.resp import META
from tuffdb.server.resp import reply
from tuffdb.server.resp.commands.common import to_int
from tuffdb.server.resp.commands.keys import parse_cursor, scan_options
from tuffdb.server.resp.glob import compile_glob
from tuffdb.server.resp.keyspace import Op, drop_ops, lookup, meta_op, new_collection, stored
from tuffdb.server.resp.table import SYNTAX, CommandError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from tuffdb.server.resp.conn import Conn

# Redis answers SCAN-family commands on a small collection (a listpack or intset) with
# every element and cursor 0, whatever COUNT says; above this many we page.
SMALL_COLLECTION = 128


class Coll:
    """A collection being read or changed by one command."""

    __slots__ = ("cid", "existed", "key", "ops", "raw", "size", "skey")

    def __init__(self, c: Conn, key: bytes, tag: int, *, create: bool = False) -> None:
        self.key = key
        self.skey = stored(key)
        self.raw: bytes | None = lookup(c.db, key, tag)
        self.existed = self.raw is not None
        self.ops: list[Op] = []
        if self.raw is not None:
            self.cid = int(META.unpack_from(self.raw)[1])
            self.size = int(META.unpack_from(self.raw)[2])
        elif create:
            self.cid = new_collection(self.ops, c.srv.ids, key)
            self.size = 0
        else:
            self.cid = 0
            self.size = 0

    def close(self, meta: bytes | None) -> None:
        """Queue the new metadata (None: the collection emptied and goes)."""
        if meta is None:
            if self.existed:
                self.ops.append((self.skey, None))
            drop_ops(self.ops, self.cid)
        else:
            self.ops.append(meta_op(self.skey, meta, self.existed))

    def finish(self, c: Conn, meta: bytes | None, *, signal: bool = False) -> None:
        """:meth:`close`, write the batch, notify watchers and, for pushes, blocked
        clients."""
        self.close(meta)
        commit(c, self.key, self.ops)
        if signal and meta is not None:
            c.srv.signal(self.key, meta)


def commit(c: Conn, key: bytes, ops: list[Op], *, touch: bool = True) -> None:
    """Write a command's ops; ``touch`` marks WATCHers of ``key`` dirty (False where Redis
    does not count the write as a change of the key: a stream's groups, consumers, pending
    entries and XSETID)."""
    if ops:
        c.db.write_batch(ops, sync=False)
        if touch:
            c.srv.touch(key)


# -- SCAN family ----------------------------------------------------------------------------
EMPTY_SCAN = b"*2\r\n$1\r\n0\r\n*0\r\n"


def scan_cursor(a: list[bytes]) -> None:
    """HSCAN/SSCAN/ZSCAN: a bad cursor is the error before a missing or wrong-typed key."""
    parse_cursor(a[2])


def scan_reply(c: Conn, a: list[bytes], prefix: bytes, size: int,
               render: Callable[[bytes, bytes], list[bytes]],
               match_key: Callable[[bytes], bytes] | None = None) -> bytes:
    """HSCAN/SSCAN/ZSCAN ``key cursor [MATCH p] [COUNT n]``: ``render(element key
    suffix, value)`` gives the reply items for one element; MATCH applies to the
    element (``match_key(suffix)`` when the suffix is not the element itself).

    Redis's order: the cursor (callers parse it before the key's type, with
    :func:`scan_cursor`), then the key (no key, ``size`` 0: an empty scan, whatever
    the options say), then the options."""
    cursor = parse_cursor(a[2])
    if not size:
        return EMPTY_SCAN
    count, pattern, _ = scan_options(a, 3, with_type=False)
    match = compile_glob(pattern) if pattern else None
    start: bytes | None = None
    if cursor:
        last = c.srv.cursors.get(cursor)
        if last is not None and last.startswith(prefix):
            start = last + b"\x00"
    limit = size if size <= SMALL_COLLECTION and start is None else count
    items: list[bytes] = []
    last_seen: bytes | None = None
    n = len(prefix)
    it = c.db.scan(prefix, start) if size else iter(())
    for seen, (ekey, value) in enumerate(it, 1):
        suffix = ekey[n:]
        if match is None or match(match_key(suffix) if match_key else suffix):
            items.extend(render(suffix, value))
        last_seen = ekey
        if seen >= limit:
            break
    else:
        last_seen = None
    if last_seen is not None and next(it, None) is None:
        last_seen = None
    nxt = 0 if last_seen is None else c.srv.save_cursor(last_seen)
    return reply.array([reply.bulk(b"%d" % nxt), reply.array(items)])


# -- numbers --------------------------------------------------------------------------------
def format_double(x: float) -> bytes:
    """Redis 7.0's double replies: ``%.17g``, ``inf``/``-inf``, ``-0`` for a negative zero.

    A stored score is never -0 (``keyspace.sortable`` keeps +0, as Redis does), so only a
    computed one prints ``-0``: ZINCRBY or ZADD INCR creating a member at ``-0``, ZUNION
    or ZINTER with a negative weight over a 0 score, as Redis replies."""
    if math.isinf(x):
        return b"inf" if x > 0 else b"-inf"
    if x == 0:
        return b"-0" if math.copysign(1.0, x) < 0 else b"0"
    return b"%.17g" % x


def positive_count(raw: bytes) -> int:
    """LPOP/SPOP/ZPOPMIN counts: ``ERR value is out of range, must be positive``."""
    n = to_int(raw, "ERR value is out of range, must be positive")
    if n < 0:
        raise CommandError("ERR value is out of range, must be positive")
    return n


def numkeys(a: list[bytes], i: int, trailing: int) -> int:
    """The ``numkeys`` at ``a[i]`` of LMPOP/ZMPOP (``trailing`` 1: the direction must
    follow) or SINTERCARD (``trailing`` 0), with their errors."""
    try:
        n = to_int(a[i])
    except CommandError:
        n = 0
    if n <= 0:
        raise CommandError("ERR numkeys should be greater than 0")
    if n > len(a) - i - 1 - trailing:
        raise CommandError(SYNTAX if trailing else
                           "ERR Number of keys can't be greater than number of args")
    return n


# -- pipelines of one command (conn.py's batch path) ------------------------------------------
def batchable(c: Conn, cmds: list[list[bytes]], argc: int, *, exact: bool = True) -> bool:
    """Whether a pipeline of one collection command may run as one batch: every command
    has the plain form (``argc`` arguments, or at least that many) and no client is
    blocked on a key it names (those are served between commands, one by one)."""
    lens = [len(a) for a in cmds]
    if (lens.count(argc) != len(lens)) if exact else (min(lens) < argc):
        return False
    waiters = c.srv.blocking.waiters
    return not waiters or not any(a[1] in waiters for a in cmds)


def present(c: Conn, keys: Iterable[bytes]) -> set[bytes]:
    """Which of a batch's element ``keys`` exist: one ``get_many`` of the distinct ones."""
    wanted = list(dict.fromkeys(keys))
    return {k for k, v in zip(wanted, c.db.get_many(wanted), strict=True) if v is not None}


def commit_batch(c: Conn, ops: list[Op], keys: list[bytes]) -> None:
    """Write a batch's ops as one ``write_batch``; WATCH sees every key it changed."""
    if ops:
        c.db.write_batch(ops, sync=False)
        for key in keys:
            c.srv.touch(key)
