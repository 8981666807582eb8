"""Generic key commands: DEL, EXISTS, expiry, TYPE, RENAME, SCAN, KEYS, RANDOMKEY."""

# Every handler takes (conn, args), used or not: one signature for the command table.
# ruff: noqa: ARG001

from __future__ import annotations

import itertools
import os
import time
from typing import TYPE_CHECKING

from tuffdb.server.resp import reply
from tuffdb.server.resp.commands.common import INT64_MAX, remaining_ttl, to_int
from tuffdb.server.resp.glob import compile_glob, literal_prefix
from tuffdb.server.resp.table import SYNTAX, CommandError, command
from tuffdb.server.resp.values import type_name

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tuffdb.server.resp.conn import Conn


def _delete(c: Conn, a: list[bytes]) -> bytes:
    keys = list(dict.fromkeys(a[1:]))
    n = c.store.delete_many(keys, sync=False)
    for k in keys:
        c.srv.touch(k)
    return reply.integer(n)


@command("del", -2, "write", (1, -1, 1), group="keyspace")
def del_(c: Conn, a: list[bytes]) -> bytes:
    """Delete keys; reply how many existed."""
    return _delete(c, a)


@command("unlink", -2, "write fast", (1, -1, 1), group="keyspace", since="4.0.0")
def unlink(c: Conn, a: list[bytes]) -> bytes:
    """Delete keys (same as DEL here: deletion is already O(1) per key)."""
    return _delete(c, a)


@command("exists", -2, "readonly fast", (1, -1, 1), group="keyspace")
def exists(c: Conn, a: list[bytes]) -> bytes:
    """How many of the given keys exist (repeats count again)."""
    ex = c.store.exists
    return reply.integer(sum(1 for k in a[1:] if ex(k)))


@command("type", 2, "readonly fast", (1, 1, 1), group="keyspace")
def type_(c: Conn, a: list[bytes]) -> bytes:
    """The type of the value at a key: string, hash or none."""
    return reply.simple(type_name(c.store.get(a[1])))


# -- expiry -----------------------------------------------------------------------------
def _expire(  # noqa: C901, PLR0912  (Redis option parsing)
        c: Conn, a: list[bytes], unit_ms: int, absolute: bool, cmd: str) -> bytes:
    n = to_int(a[2])
    nx = xx = gt = lt = False
    for opt in a[3:]:
        o = opt.lower()
        if o == b"nx":
            nx = True
        elif o == b"xx":
            xx = True
        elif o == b"gt":
            gt = True
        elif o == b"lt":
            lt = True
        else:
            raise CommandError(f"ERR Unsupported option {opt.decode('utf-8', 'replace')}")
    if nx and (xx or gt or lt):
        raise CommandError("ERR NX and XX, GT or LT options at the same time are not compatible")
    if gt and lt:
        raise CommandError("ERR GT and LT options at the same time are not compatible")
    if unit_ms == 1000 and not -INT64_MAX // 1000 <= n <= INT64_MAX // 1000:
        raise CommandError(f"ERR invalid expire time in '{cmd}' command")
    ms = n * unit_ms
    if not absolute and ms > INT64_MAX - time.time_ns() // 1_000_000:
        raise CommandError(f"ERR invalid expire time in '{cmd}' command")
    seconds = ms / 1000 - time.time() if absolute else ms / 1000
    key, store = a[1], c.store
    if not store.exists(key):
        return reply.ZERO
    current = remaining_ttl(store, key)  # None = no TTL = "infinite"
    if (nx and current is not None) or (xx and current is None):
        return reply.ZERO
    if gt and (current is None or seconds <= current):
        return reply.ZERO
    if lt and current is not None and seconds >= current:
        return reply.ZERO
    if seconds <= 0:
        store.delete(key, sync=False)
    else:
        store.expire(key, seconds)
    c.srv.touch(key)
    return reply.ONE


@command("expire", -3, "write fast", (1, 1, 1), group="keyspace")
def expire(c: Conn, a: list[bytes]) -> bytes:
    """Set a key's time to live in seconds."""
    return _expire(c, a, 1000, False, "expire")


@command("pexpire", -3, "write fast", (1, 1, 1), group="keyspace", since="2.6.0")
def pexpire(c: Conn, a: list[bytes]) -> bytes:
    """Set a key's time to live in milliseconds."""
    return _expire(c, a, 1, False, "pexpire")


@command("expireat", -3, "write fast", (1, 1, 1), group="keyspace", since="1.2.0")
def expireat(c: Conn, a: list[bytes]) -> bytes:
    """Set a key's expiry as a Unix time in seconds."""
    return _expire(c, a, 1000, True, "expireat")


@command("pexpireat", -3, "write fast", (1, 1, 1), group="keyspace", since="2.6.0")
def pexpireat(c: Conn, a: list[bytes]) -> bytes:
    """Set a key's expiry as a Unix time in milliseconds."""
    return _expire(c, a, 1, True, "pexpireat")


def _ttl_ms(c: Conn, key: bytes) -> int:
    if not c.store.exists(key):
        return -2
    ttl = remaining_ttl(c.store, key)
    return -1 if ttl is None else max(round(ttl * 1000), 0)


@command("ttl", 2, "readonly fast", (1, 1, 1), group="keyspace")
def ttl(c: Conn, a: list[bytes]) -> bytes:
    """Seconds to live (-1 no expiry, -2 no key)."""
    ms = _ttl_ms(c, a[1])
    return reply.integer(ms if ms < 0 else (ms + 500) // 1000)


@command("pttl", 2, "readonly fast", (1, 1, 1), group="keyspace", since="2.6.0")
def pttl(c: Conn, a: list[bytes]) -> bytes:
    """Milliseconds to live (-1 no expiry, -2 no key)."""
    return reply.integer(_ttl_ms(c, a[1]))


@command("persist", 2, "write fast", (1, 1, 1), group="keyspace", since="2.2.0")
def persist(c: Conn, a: list[bytes]) -> bytes:
    """Remove a key's expiry."""
    if c.store.persist(a[1]):
        c.srv.touch(a[1])
        return reply.ONE
    return reply.ZERO


# -- rename -----------------------------------------------------------------------------
def _rename(c: Conn, a: list[bytes], nx: bool) -> bytes:
    src, dst = a[1], a[2]
    store = c.store
    raw = store.get(src)
    if raw is None:
        raise CommandError("ERR no such key")
    if src == dst:
        return reply.ZERO if nx else reply.OK
    if nx and store.exists(dst):
        return reply.ZERO
    ttl = remaining_ttl(store, src)
    # Destination first: a crash in between leaves both keys, never neither.
    store.put(dst, raw, ttl, sync=False)
    store.delete(src, sync=False)
    c.srv.touch(src)
    c.srv.touch(dst)
    return reply.ONE if nx else reply.OK


@command("rename", 3, "write", (1, 2, 1), group="keyspace")
def rename(c: Conn, a: list[bytes]) -> bytes:
    """Rename a key, replacing the destination."""
    return _rename(c, a, nx=False)


@command("renamenx", 3, "write fast", (1, 2, 1), group="keyspace")
def renamenx(c: Conn, a: list[bytes]) -> bytes:
    """Rename a key only if the destination does not exist."""
    return _rename(c, a, nx=True)


# -- iteration --------------------------------------------------------------------------
def scan_keys(c: Conn, pattern: bytes | None, start: bytes | None) -> Iterator[
        tuple[bytes, bytes]]:
    prefix = literal_prefix(pattern) if pattern else b""
    if start is not None and prefix and start < prefix:
        start = None
    return iter(c.store.scan(prefix, start))


@command("scan", -2, "readonly", group="keyspace", since="2.8.0")
def scan(c: Conn, a: list[bytes]) -> bytes:
    """Iterate the keyspace with a cursor; MATCH, COUNT and TYPE filters."""
    try:
        cursor = int(a[1]) if a[1].isdigit() else -1
    except ValueError:
        cursor = -1
    if cursor < 0 or cursor >= 2**64:
        raise CommandError("ERR invalid cursor")
    count, pattern, want_type = _scan_options(a, 2)
    start: bytes | None = None
    if cursor:
        last = c.srv.cursors.get(cursor)
        if last is not None:
            start = last + b"\x00"  # the smallest key after ``last``
    match = compile_glob(pattern) if pattern else None
    keys: list[bytes] = []
    last_seen: bytes | None = None
    it = scan_keys(c, pattern, start)
    for examined, (key, raw) in enumerate(it, 1):
        last_seen = key
        if (match is None or match(key)) and (want_type is None or type_name(raw) == want_type):
            keys.append(key)
        if examined >= count:
            break
    else:
        last_seen = None  # exhausted: the scan is complete
    if last_seen is not None and next(it, None) is None:
        last_seen = None
    next_cursor = 0 if last_seen is None else c.srv.save_cursor(last_seen)
    return reply.array([reply.bulk(b"%d" % next_cursor), c.enc.bulks(keys)])


def _scan_options(a: list[bytes], i: int) -> tuple[int, bytes | None, bytes | None]:
    count, pattern, want_type = 10, None, None
    while i < len(a):
        opt = a[i].lower()
        if i + 1 >= len(a):
            raise CommandError(SYNTAX)
        if opt == b"count":
            count = to_int(a[i + 1])
            if count < 1:
                raise CommandError(SYNTAX)
        elif opt == b"match":
            pattern = None if a[i + 1] == b"*" else a[i + 1]
        elif opt == b"type":
            want_type = a[i + 1].lower()
        else:
            raise CommandError(SYNTAX)
        i += 2
    return count, pattern, want_type


@command("keys", 2, "readonly", group="keyspace")
def keys(c: Conn, a: list[bytes]) -> bytes:
    """Every key matching a glob pattern (O(n): prefer SCAN)."""
    pattern = a[1]
    match = compile_glob(pattern)
    prefix = literal_prefix(pattern) if pattern else b""
    return c.enc.bulks([k for k in c.store.scan_keys(prefix) if match(k)])


@command("randomkey", 1, "readonly", group="keyspace")
def randomkey(c: Conn, a: list[bytes]) -> bytes:
    """A random key (the first key at or after a random point; not uniform)."""
    for start in (os.urandom(8), None):
        for key in itertools.islice(c.store.scan_keys(b"", start), 1):
            return reply.bulk(key)
    return c.enc.null
