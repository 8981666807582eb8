"""MULTI EXEC DISCARD WATCH UNWATCH.

Atomic and isolated because the loop is single-threaded and owns the store: EXEC runs
the queued commands back to back, and no other client's command can interleave. Their
writes go to an overlay (overlay.py) applied as one engine batch at the end, so a crash
keeps the whole transaction or none of it.

WATCH: every write handler calls ``srv.touch(key)``, which marks each connection
watching that key dirty (FLUSHDB/FLUSHALL mark all). Expiry happens inside the engine
without a write, so WATCH also notes whether the key existed; a key that existed then
and is gone at EXEC (expired) aborts the transaction too, as in Redis 7.
"""

# Every handler takes (conn, args), used or not: one signature for the command table.
# ruff: noqa: ARG001

from __future__ import annotations

from typing import TYPE_CHECKING

from tuffdb.server.resp import reply
from tuffdb.server.resp.keyspace import stored
from tuffdb.server.resp.overlay import Overlay
from tuffdb.server.resp.table import TABLE, CommandError, command

if TYPE_CHECKING:
    from tuffdb.server.resp.conn import Conn


@command("multi", 1, "noscript loading stale fast", group="transactions", since="1.2.0")
def multi(c: Conn, a: list[bytes]) -> bytes:
    """Start queueing commands."""
    if c.multi is not None:
        raise CommandError("ERR MULTI calls can not be nested")
    c.multi = []
    c.multi_error = False
    return reply.OK


@command("discard", 1, "noscript loading stale fast", group="transactions", since="2.0.0")
def discard(c: Conn, a: list[bytes]) -> bytes:
    """Drop the queued commands and the watches."""
    if c.multi is None:
        raise CommandError("ERR DISCARD without MULTI")
    c.multi = None
    c.multi_error = False
    c.unwatch()
    return reply.OK


@command("exec", 1, "noscript loading stale", group="transactions", since="1.2.0")
def exec_(c: Conn, a: list[bytes]) -> bytes:
    """Run the queued commands atomically, unless a watched key changed."""
    queued = c.multi
    if queued is None:
        raise CommandError("ERR EXEC without MULTI")
    c.multi = None
    if c.multi_error:
        c.multi_error = False
        c.unwatch()
        raise CommandError("EXECABORT Transaction discarded because of previous errors.")
    exists = c.db.exists
    dirty = c.dirty or any(existed and not exists(stored(k)) for k, existed in c.watched.items())
    c.unwatch()
    if dirty:
        return c.enc.null_array
    return reply.array(run_atomically(c, queued))


def run_atomically(c: Conn, commands: list[list[bytes]]) -> list[bytes]:
    """Run ``commands`` back to back against one overlay and apply their writes as one
    batch (nothing else runs meanwhile: the loop is ours). Blocking commands inside
    behave as if their timeout had passed, as in Redis."""
    outer = c.db
    overlay = outer if isinstance(outer, Overlay) else Overlay(c.store)
    c.db = overlay
    c.no_block += 1
    try:
        call = c.call
        return [call(TABLE[args[0].lower()], args) for args in commands]
    finally:
        c.no_block -= 1
        c.db = outer
        if overlay is not outer:
            overlay.commit()


@command("watch", -2, "noscript loading stale fast", group="transactions", since="2.2.0")
def watch(c: Conn, a: list[bytes]) -> bytes:
    """Abort the next EXEC if any of these keys changes first."""
    if c.multi is not None:
        raise CommandError("ERR WATCH inside MULTI is not allowed")
    watchers = c.srv.watchers
    exists = c.db.exists
    for key in a[1:]:
        if key not in c.watched:
            c.watched[key] = exists(stored(key))
            watchers.setdefault(key, set()).add(c)
    return reply.OK


@command("unwatch", 1, "noscript loading stale fast", group="transactions", since="2.2.0")
def unwatch(c: Conn, a: list[bytes]) -> bytes:
    """Forget every watched key."""
    c.unwatch()
    return reply.OK
