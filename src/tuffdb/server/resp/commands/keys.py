"""Generic key commands: DEL, EXISTS, expiry, TYPE, RENAME, SCAN, KEYS, RANDOMKEY."""

# Every handler takes (conn, args), used or not: one signature for the command table.
# ruff: noqa: ARG001

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING, Any

from tuffdb.errors import NotFoundError
from tuffdb.server.resp import reply
from tuffdb.server.resp.commands.common import (
    INT64_MAX,
    INT_RE,
    remaining_deadline,
    remaining_ttl,
    to_int,
)
from tuffdb.server.resp.glob import compile_glob, literal_prefix
from tuffdb.server.resp.table import SYNTAX, CommandError, command
from tuffdb._format.resp import TAG_HASH, TAG_LIST, TAG_SET, TAG_STREAM, TAG_STRING, TAG_ZSET, U64
from tuffdb.server.resp.keyspace import (
    cid_of,
    elements,
    is_collection,
    new_collection,
    owner,
    secondary,
    stored,
    type_name,
    user_key,
    user_ranges,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tuffdb.kv.store import Deadline
    from tuffdb.server.resp.conn import Conn


def _delete(c: Conn, a: list[bytes]) -> bytes:
    keys = list(dict.fromkeys(a[1:]))
    skeys = [stored(k) for k in keys]
    raws = c.db.get_many(skeys)
    ops = [(sk, None) for sk, raw in zip(skeys, raws, strict=True) if raw is not None]
    if ops:
        c.db.write_batch(ops, sync=False)
        for k, raw in zip(keys, raws, strict=True):
            if raw is not None:
                c.srv.dropped(raw)
                c.srv.touch(k)
    return reply.integer(len(ops))


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
    ex = c.db.exists
    return reply.integer(sum(1 for k in a[1:] if ex(stored(k))))


@command("type", 2, "readonly fast", (1, 1, 1), group="keyspace")
def type_(c: Conn, a: list[bytes]) -> bytes:
    """The type of the value at a key: string, hash, list, set, zset, stream or none."""
    return reply.simple(type_name(c.db.get(stored(a[1]))))


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
    key, db = a[1], c.db
    skey = stored(key)
    if not db.exists(skey):
        return reply.ZERO
    # deadlines compared as Redis does, in whole ms on one clock reading
    now = db.now_ms()
    at = ms if absolute else now + ms
    seconds = (at - now) / 1000
    try:
        current = db.expires_at(skey)  # None = no TTL = "infinite"
    except NotFoundError:  # expired since exists() answered
        return reply.ZERO
    if (nx and current is not None) or (xx and current is None):
        return reply.ZERO
    if gt and (current is None or at <= current):
        return reply.ZERO
    if lt and current is not None and at >= current:
        return reply.ZERO
    if seconds <= 0:
        raw = db.get(skey)
        db.delete(skey, sync=False)
        if raw is not None:
            c.srv.dropped(raw)
    else:
        db.expire_at(skey, at, sync=False)  # the deadline compared, to the millisecond
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
    skey = stored(key)
    if not c.db.exists(skey):
        return -2
    ttl = remaining_ttl(c.db, skey)
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


def _expire_time_ms(c: Conn, key: bytes) -> int:
    """The absolute expiry in Unix ms (-1 none, -2 no key): the engine's deadline itself,
    so a PEXPIREAT's own millisecond comes back."""
    try:
        at = c.db.expires_at(stored(key))
    except NotFoundError:
        return -2
    return -1 if at is None else at


@command("expiretime", 2, "readonly fast", (1, 1, 1), group="keyspace", since="7.0.0")
def expiretime(c: Conn, a: list[bytes]) -> bytes:
    """The Unix time, in seconds, at which a key expires (-1 none, -2 no key)."""
    ms = _expire_time_ms(c, a[1])
    return reply.integer(ms if ms < 0 else (ms + 500) // 1000)


@command("pexpiretime", 2, "readonly fast", (1, 1, 1), group="keyspace", since="7.0.0")
def pexpiretime(c: Conn, a: list[bytes]) -> bytes:
    """The Unix time, in milliseconds, at which a key expires (-1 none, -2 no key)."""
    return reply.integer(_expire_time_ms(c, a[1]))


@command("touch", -2, "readonly fast", (1, -1, 1), group="keyspace", since="3.2.1")
def touch(c: Conn, a: list[bytes]) -> bytes:
    """How many of the keys exist (tuffdb keeps no access times to update)."""
    ex = c.db.exists
    return reply.integer(sum(1 for k in a[1:] if ex(stored(k))))


@command("persist", 2, "write fast", (1, 1, 1), group="keyspace", since="2.2.0")
def persist(c: Conn, a: list[bytes]) -> bytes:
    """Remove a key's expiry."""
    if c.db.persist(stored(a[1]), sync=False):
        c.srv.touch(a[1])
        return reply.ONE
    return reply.ZERO


# -- rename -----------------------------------------------------------------------------
def _rename(c: Conn, a: list[bytes], nx: bool) -> bytes:
    src, dst = a[1], a[2]
    db = c.db
    ssrc, sdst = stored(src), stored(dst)
    raw = db.get(ssrc)
    if raw is None:
        raise CommandError("ERR no such key")
    if src == dst:
        return reply.ZERO if nx else reply.OK
    old = db.get(sdst)
    if nx and old is not None:
        return reply.ZERO
    at = remaining_deadline(db, ssrc)
    # One batch: the metadata moves (a collection's elements stay under its id, so this is
    # O(1) whatever the size) and the owner record follows it.
    ops: list[tuple[bytes, bytes | None] | tuple[bytes, bytes, Deadline | None]] = [
        (sdst, raw, at), (ssrc, None)]
    if is_collection(raw):
        ops.append((owner(cid_of(raw)), dst))
    db.write_batch(ops, sync=False)
    if old is not None:
        c.srv.dropped(old)
    c.srv.touch(src)
    c.srv.touch(dst)
    c.srv.signal(dst, raw)
    return reply.ONE if nx else reply.OK


@command("move", 3, "write fast", (1, 1, 1), group="keyspace", since="1.0.0")
def move(c: Conn, a: list[bytes]) -> bytes:
    """MOVE key db: there is one database, 0, so a key can only be "moved" onto itself."""
    db = to_int(a[2])
    if db != 0:
        raise CommandError("ERR DB index is out of range")
    raise CommandError("ERR source and destination objects are the same")


@command("copy", -3, "write denyoom", (1, 2, 1), group="keyspace", since="6.2.0")
def copy(c: Conn, a: list[bytes]) -> bytes:
    """Copy a key's value (any type, its TTL too) to another key; O(elements), as in Redis."""
    src, dst = a[1], a[2]
    replace = False
    i = 3
    while i < len(a):
        opt = a[i].lower()
        if opt == b"replace":
            replace = True
        elif opt == b"db" and i + 1 < len(a):
            if to_int(a[i + 1], "ERR value is not an integer or out of range") != 0:
                raise CommandError("ERR DB index is out of range")
            i += 1
        else:
            raise CommandError(SYNTAX)
        i += 1
    if src == dst:
        raise CommandError("ERR source and destination objects are the same")
    db = c.db
    ssrc, sdst = stored(src), stored(dst)
    raw = db.get(ssrc)
    if raw is None:
        return reply.ZERO
    old = db.get(sdst)
    if old is not None and not replace:
        return reply.ZERO
    at = remaining_deadline(db, ssrc)
    ops: list[tuple[Any, ...]] = []
    value = raw
    if is_collection(raw):
        # A new incarnation: every entry under the source's id, again under a new one.
        cid = new_collection(ops, c.srv.ids, dst)
        value = raw[:1] + U64.pack(cid) + raw[9:]
        old_cid = cid_of(raw)
        for prefix, new in ((elements(old_cid), elements(cid)),
                            (secondary(old_cid), secondary(cid))):
            n = len(prefix)
            ops += [(new + k[n:], v) for k, v in db.items_in_range(prefix)]
    ops.append((sdst, value, at))
    db.write_batch(ops, sync=False)
    if old is not None:
        c.srv.dropped(old)
    c.srv.touch(dst)
    c.srv.signal(dst, value)
    return reply.ONE


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
    """(user key, metadata) in user-key order, from engine key ``start`` on."""
    prefix = literal_prefix(pattern) if pattern else b""
    for eprefix, lo, hi in user_ranges(prefix):
        if start is not None:
            if hi is not None and start >= hi:
                continue
            lo = start if lo is None else max(lo, start)
        for ekey, raw in c.db.scan(eprefix, lo, hi):
            key = user_key(ekey)
            if key is not None:
                yield key, raw


@command("scan", -2, "readonly", group="keyspace", since="2.8.0")
def scan(c: Conn, a: list[bytes]) -> bytes:
    """Iterate the keyspace with a cursor; MATCH, COUNT and TYPE filters."""
    cursor = parse_cursor(a[1])
    count, pattern, want_type = scan_options(a, 2)
    start: bytes | None = None
    if cursor:
        last = c.srv.cursors.get(cursor)
        if last is not None:
            start = stored(last) + b"\x00"  # the smallest engine key after ``last``
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
    return reply.array([reply.bulk(b"%d" % next_cursor), reply.bulk_array(keys)])


def parse_cursor(raw: bytes) -> int:
    """A SCAN-family cursor as Redis reads it (``strtoul``): an optional sign and decimal
    digits (a negative one wraps modulo 2**64, ``-1`` is 2**64 - 1; ``""`` is 0), else
    ``ERR invalid cursor`` (a leading space, other characters, past 2**64 - 1)."""
    digits = raw[1:] if raw[:1] in (b"+", b"-") else raw
    if not (digits.isdigit() or raw == b"") or len(digits.lstrip(b"0")) > 20:  # noqa: PLR2004
        raise CommandError("ERR invalid cursor")
    cursor = int(digits) if digits else 0
    if cursor >= 2**64:
        raise CommandError("ERR invalid cursor")
    return (-cursor) % 2**64 if raw[:1] == b"-" else cursor


def scan_options(a: list[bytes], i: int, *, with_type: bool = True
                 ) -> tuple[int, bytes | None, bytes | None]:
    """SCAN-family options from ``a[i]``: (COUNT, MATCH pattern or None for all, TYPE)."""
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
        elif opt == b"type" and with_type:
            want_type = a[i + 1].lower()
        else:
            raise CommandError(SYNTAX)
        i += 2
    return count, pattern, want_type


def user_keys(c: Conn, prefix: bytes) -> Iterator[bytes]:
    """Every user key starting with ``prefix``, in order, without reading values."""
    for eprefix, lo, hi in user_ranges(prefix):
        for ekey in c.db.scan_keys(eprefix, lo, hi):
            key = user_key(ekey)
            if key is not None:
                yield key


def count_keys(db: Any) -> int:
    """How many user keys exist: O(log n) (two range counts)."""
    return sum(db.count(eprefix, lo, hi) for eprefix, lo, hi in user_ranges(b""))


@command("keys", 2, "readonly", group="keyspace")
def keys(c: Conn, a: list[bytes]) -> bytes:
    """Every key matching a glob pattern (O(n): prefer SCAN)."""
    pattern = a[1]
    match = compile_glob(pattern)
    prefix = literal_prefix(pattern) if pattern else b""
    return c.enc.bulks([k for k in user_keys(c, prefix) if match(k)])


@command("randomkey", 1, "readonly", group="keyspace")
def randomkey(c: Conn, a: list[bytes]) -> bytes:
    """A random key (positions are picked uniformly: one O(log n) seek)."""
    n = count_keys(c.db)
    if not n:
        return c.enc.null
    pos = random.randrange(n)
    for eprefix, lo, hi in user_ranges(b""):
        here = c.db.count(eprefix, lo, hi)
        if pos < here:
            for ekey in c.db.scan_keys(eprefix, lo, hi, skip=pos):
                key = user_key(ekey)
                if key is not None:
                    return reply.bulk(key)
            break
        pos -= here
    return c.enc.null


# -- OBJECT ----------------------------------------------------------------------------------
SMALL_ENTRIES = 128  # Redis 7.0's *-max-listpack-entries
SMALL_VALUE = 64  # *-max-listpack-value
INTSET_ENTRIES = 512  # set-max-intset-entries


def _encoding(c: Conn, raw: bytes) -> bytes:  # noqa: PLR0911
    """The encoding Redis 7.0 would report for this value (a plausible answer: tuffdb
    stores every type the same way, one engine entry per element)."""
    tag = raw[0]
    if tag == TAG_STRING:
        value = raw[1:]
        if len(value) <= 20 and INT_RE.match(value) and value != b"-0":  # noqa: PLR2004
            n = int(value)
            if -(2**63) <= n < 2**63:
                return b"int"
        return b"embstr" if len(value) <= 44 else b"raw"  # noqa: PLR2004
    if tag == TAG_LIST:
        return b"quicklist"
    if tag == TAG_STREAM:
        return b"stream"
    cid, size = cid_of(raw), int(U64.unpack_from(raw, 9)[0])
    if tag == TAG_SET:
        if size > INTSET_ENTRIES:
            return b"hashtable"
        n = len(elements(cid))
        ints = all(INT_RE.match(k[n:]) and len(k) - n <= 20  # noqa: PLR2004
                   for k in c.db.scan_keys(elements(cid)))
        return b"intset" if ints else b"hashtable"
    small, big = (b"listpack", b"skiplist") if tag == TAG_ZSET else (b"listpack", b"hashtable")
    if size > SMALL_ENTRIES:
        return big
    for k, v in c.db.scan(elements(cid)):
        if len(k) - len(elements(cid)) > SMALL_VALUE or (tag == TAG_HASH and len(v) > SMALL_VALUE):
            return big
    return small


@command("object", -2, "readonly", (2, 2, 1), group="keyspace", since="2.2.3")
def object_(c: Conn, a: list[bytes]) -> bytes:
    """OBJECT ENCODING key | REFCOUNT key | IDLETIME key | FREQ key | HELP."""
    sub = a[1].lower()
    if sub == b"help" and len(a) == 2:  # noqa: PLR2004
        lines = [b"OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                 b"ENCODING <key>", b"FREQ <key>", b"IDLETIME <key>", b"REFCOUNT <key>",
                 b"HELP"]
        return reply.array([reply.simple(x) for x in lines])
    if sub not in (b"encoding", b"refcount", b"idletime", b"freq", b"help"):
        raise CommandError(f"ERR unknown subcommand '{a[1].decode('utf-8', 'replace')}'. "
                           "Try OBJECT HELP.")
    if len(a) != 3 or sub == b"help":  # noqa: PLR2004
        raise CommandError(f"ERR wrong number of arguments for 'object|{sub.decode()}' "
                           "command")
    raw = c.db.get(stored(a[2]))
    if raw is None:
        return c.enc.null
    if sub == b"encoding":
        return reply.bulk(_encoding(c, raw))
    if sub == b"freq":
        raise CommandError("ERR An LFU maxmemory policy is not selected, access frequency "
                           "not tracked. Please note that when switching between policies at "
                           "runtime LRU and LFU data will take some time to adjust.")
    return reply.integer(1 if sub == b"refcount" else 0)
