"""String commands: GET/SET and friends, counters, ranges."""

# Every handler takes (conn, args), used or not: one signature for the command table.
# ruff: noqa: ARG001

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from tuffdb import errors
from tuffdb.kv.store import KEEP_TTL, Deadline
from tuffdb.server.resp import reply
from tuffdb.server.resp.commands.common import (
    INT64_MAX,
    INT64_MIN,
    put_keep_ttl,
    to_int,
)
from tuffdb.server.resp.commands.numbers import add_and_format
from tuffdb.server.resp.table import SYNTAX, WRONGTYPE, CommandError, batched, command
from tuffdb.server.resp.keyspace import STRING_PREFIX, STRING_TAG, stored

if TYPE_CHECKING:
    from tuffdb.server.resp.conn import Conn

MAX_STRING_SIZE = 512 * 1024 * 1024


def get_string(c: Conn, key: bytes) -> bytes | None:
    """The string at ``key``, None if absent; WRONGTYPE for other types."""
    raw: bytes | None = c.db.get(stored(key))
    if raw is None:
        return None
    if raw[0] != STRING_TAG:
        raise CommandError(WRONGTYPE)
    return raw[1:]


# -- expiry options shared by SET and GETEX --------------------------------------------
def expire_seconds(unit: bytes, raw: bytes, cmd: str) -> float:
    """Relative seconds for EX/PX/EXAT/PXAT (may be <= 0 for a time in the past)."""
    n = to_int(raw)
    seconds = unit in (b"ex", b"exat")
    if n <= 0 or (seconds and n > INT64_MAX // 1000):
        raise CommandError(f"ERR invalid expire time in '{cmd}' command")
    ms = n * 1000 if seconds else n
    if unit in (b"exat", b"pxat"):
        return ms / 1000 - time.time()
    if ms > INT64_MAX - time.time_ns() // 1_000_000:  # Redis: now + ms overflows int64
        raise CommandError(f"ERR invalid expire time in '{cmd}' command")
    return ms / 1000


def deadline_ms(unit: bytes, raw: bytes) -> int | None:
    """The deadline EXAT/PXAT name, in ms since the epoch (after :func:`expire_seconds`
    accepted it); None for EX/PX."""
    if unit == b"exat":
        return to_int(raw) * 1000
    return to_int(raw) if unit == b"pxat" else None


def write_string(c: Conn, key: bytes, value: bytes, ttl: float | None,
                 at: int | None = None) -> None:
    """``at``: the exact deadline of an EXAT/PXAT (``ttl`` is then the same, rounded)."""
    if ttl is not None and ttl <= 0:
        c.db.delete(stored(key), sync=False)  # an EXAT/PXAT in the past: set, then expired
    elif at is not None:  # one put at the deadline, to the millisecond (PEXPIRETIME's answer)
        c.db.write_batch([(stored(key), STRING_PREFIX + value, Deadline(at))], sync=False)
    else:
        c.db.put(stored(key), STRING_PREFIX + value, ttl, sync=False)
    c.srv.touch(key)


@command("get", 2, "readonly fast", (1, 1, 1), group="string")
def get(c: Conn, a: list[bytes]) -> bytes:
    """Get the value of a key."""
    return _get_reply(c, c.db.get(stored(a[1])))


@batched("get")
def get_batch(c: Conn, cmds: list[list[bytes]]) -> list[bytes]:
    """Pipelined GETs: one store call for the whole pipeline."""
    if list(map(len, cmds)).count(2) != len(cmds):
        return []  # some have the wrong arity: one by one (same errors)
    return _get_replies(c, c.db.get_many([stored(a[1]) for a in cmds]))


def _get_reply(c: Conn, raw: bytes | None) -> bytes:
    if raw is not None and raw[0] == STRING_TAG:  # the common case, without a list
        c.srv.stats["hits"] += 1
        return _bulk_value(raw)
    return _get_replies(c, [raw])[0]


def _bulk_value(raw: bytes) -> bytes:
    """A stored string (tag byte first) as a bulk reply. One copy: join takes the
    memoryview (any buffer) directly (~20 % less than ``%b`` formatting, pure or compiled)."""
    return b"".join((b"$%d\r\n" % (len(raw) - 1), memoryview(raw)[1:], b"\r\n"))


def _get_replies(c: Conn, raws: list[bytes | None]) -> list[bytes]:
    """GET's replies for stored values (None: missing); keyspace hits/misses counted
    once per call."""
    null = c.enc.null
    out: list[bytes] = []
    append = out.append
    hits = 0
    for raw in raws:
        if raw is None:
            append(null)
        elif raw[0] != STRING_TAG:
            append(reply.error(WRONGTYPE))
        else:
            hits += 1
            append(_bulk_value(raw))
    stats = c.srv.stats
    stats["hits"] += hits
    stats["misses"] += raws.count(None)
    return out


@batched("set")
def set_batch(c: Conn, cmds: list[list[bytes]]) -> list[bytes]:
    """Pipelined plain SETs: one ``put_many`` (one lock round, one group-commit ticket)."""
    if list(map(len, cmds)).count(3) != len(cmds):
        return []  # options or wrong arity: one by one
    try:
        c.db.put_many([(stored(a[1]), STRING_PREFIX + a[2]) for a in cmds], sync=False)
    except errors.Error:
        return []  # validated before anything is written: one by one gives each its error
    srv = c.srv
    if srv.watchers:
        for a in cmds:
            srv.touch(a[1])
    return [reply.OK] * len(cmds)


@command("set", -3, "write denyoom", (1, 1, 1), group="string")
def set_(c: Conn, a: list[bytes]) -> bytes:  # noqa: C901  (Redis option parsing)
    """Set the string value of a key, with expiry and condition options."""
    key, value = a[1], a[2]
    if len(a) == 3:  # fast path: plain SET
        c.db.put(stored(key), STRING_PREFIX + value, sync=False)
        c.srv.touch(key)
        return reply.OK
    nx = xx = want_get = keepttl = False
    expire: tuple[bytes, bytes] | None = None
    i = 3
    while i < len(a):
        opt = a[i].lower()
        nxt = a[i + 1] if i + 1 < len(a) else None
        if opt == b"nx" and not xx:
            nx = True
        elif opt == b"xx" and not nx:
            xx = True
        elif opt == b"get":
            want_get = True
        elif opt == b"keepttl" and expire is None:
            keepttl = True
        elif opt in (b"ex", b"px", b"exat", b"pxat") and expire is None and not keepttl \
                and nxt is not None:
            expire = (opt, nxt)
            i += 1
        else:
            raise CommandError(SYNTAX)
        i += 1
    ttl = expire_seconds(*expire, "set") if expire else None
    db = c.db
    old_raw = db.get(stored(key)) if (want_get or nx or xx or keepttl) else None
    if want_get and old_raw is not None and old_raw[0] != STRING_TAG:
        raise CommandError(WRONGTYPE)
    old = old_raw[1:] if old_raw is not None else None
    if (nx and old_raw is not None) or (xx and old_raw is None):
        return c.enc.null if not want_get or old is None else reply.bulk(old)
    if keepttl and old_raw is not None:  # the store keeps the key's deadline as it is
        db.write_batch([(stored(key), STRING_PREFIX + value, KEEP_TTL)], sync=False)
        c.srv.touch(key)
    else:
        write_string(c, key, value, ttl, deadline_ms(*expire) if expire else None)
    if want_get:
        return c.enc.null if old is None else reply.bulk(old)
    return reply.OK


@command("setnx", 3, "write denyoom fast", (1, 1, 1), group="string")
def setnx(c: Conn, a: list[bytes]) -> bytes:
    """Set a key only if it does not exist."""
    if c.db.exists(stored(a[1])):
        return reply.ZERO
    write_string(c, a[1], a[2], None)
    return reply.ONE


def _setex(c: Conn, a: list[bytes], unit: bytes, cmd: str) -> bytes:
    ttl = expire_seconds(unit, a[2], cmd)
    write_string(c, a[1], a[3], ttl)
    return reply.OK


@command("setex", 4, "write denyoom", (1, 1, 1), group="string")
def setex(c: Conn, a: list[bytes]) -> bytes:
    """Set a key with an expiry in seconds."""
    return _setex(c, a, b"ex", "setex")


@command("psetex", 4, "write denyoom", (1, 1, 1), group="string")
def psetex(c: Conn, a: list[bytes]) -> bytes:
    """Set a key with an expiry in milliseconds."""
    return _setex(c, a, b"px", "psetex")


@command("getset", 3, "write denyoom fast", (1, 1, 1), group="string")
def getset(c: Conn, a: list[bytes]) -> bytes:
    """Set a key and return its old value."""
    old = get_string(c, a[1])
    write_string(c, a[1], a[2], None)
    return c.enc.null if old is None else reply.bulk(old)


@command("getdel", 2, "write fast", (1, 1, 1), group="string")
def getdel(c: Conn, a: list[bytes]) -> bytes:
    """Get a key's value and delete the key."""
    old = get_string(c, a[1])
    if old is None:
        return c.enc.null
    c.db.delete(stored(a[1]), sync=False)
    c.srv.touch(a[1])
    return reply.bulk(old)


@command("getex", -2, "write fast", (1, 1, 1), group="string")
def getex(c: Conn, a: list[bytes]) -> bytes:
    """Get a key's value and set or clear its expiry."""
    expire: tuple[bytes, bytes] | None = None
    persist = False
    i = 2
    while i < len(a):
        opt = a[i].lower()
        if opt in (b"ex", b"px", b"exat", b"pxat") and expire is None and not persist \
                and i + 1 < len(a):
            expire = (opt, a[i + 1])
            i += 1
        elif opt == b"persist" and expire is None:
            persist = True
        else:
            raise CommandError(SYNTAX)
        i += 1
    key = a[1]
    value = get_string(c, key)  # Redis: syntax, then absent/WRONGTYPE, then the time
    if value is None:
        return c.enc.null
    ttl = expire_seconds(*expire, "getex") if expire else None
    if expire is not None:
        at = deadline_ms(*expire)
        if ttl is None or ttl <= 0:
            c.db.delete(stored(key), sync=False)  # EXAT/PXAT in the past
        elif at is not None:
            c.db.expire_at(stored(key), at, sync=False)  # to the millisecond
        else:
            c.db.expire(stored(key), ttl, sync=False)
        c.srv.touch(key)
    elif persist and c.db.persist(stored(key), sync=False):
        c.srv.touch(key)
    return reply.bulk(value)


@command("mget", -2, "readonly fast", (1, -1, 1), group="string")
def mget(c: Conn, a: list[bytes]) -> bytes:
    """Get the values of several keys (nil for missing or non-string keys)."""
    raws = c.db.get_many([stored(k) for k in a[1:]])
    return c.enc.bulks([r[1:] if r is not None and r[0] == STRING_TAG else None for r in raws])


def _pairs(c: Conn, a: list[bytes], name: str) -> list[tuple[bytes, bytes]]:
    if len(a) % 2 == 0:
        raise CommandError(f"ERR wrong number of arguments for '{name}' command")
    return [(a[i], STRING_PREFIX + a[i + 1]) for i in range(1, len(a), 2)]


@command("mset", -3, "write denyoom", (1, -1, 2), group="string")
def mset(c: Conn, a: list[bytes]) -> bytes:
    """Set several keys in one step."""
    items = _pairs(c, a, "mset")
    c.db.put_many({stored(k): v for k, v in items}, sync=False)
    for k, _ in items:
        c.srv.touch(k)
    return reply.OK


@command("msetnx", -3, "write denyoom", (1, -1, 2), group="string")
def msetnx(c: Conn, a: list[bytes]) -> bytes:
    """Set several keys only if none of them exists."""
    items = _pairs(c, a, "msetnx")
    if any(c.db.exists(stored(k)) for k, _ in items):
        return reply.ZERO
    c.db.put_many({stored(k): v for k, v in items}, sync=False)
    for k, _ in items:
        c.srv.touch(k)
    return reply.ONE


@command("append", 3, "write denyoom", (1, 1, 1), group="string")
def append(c: Conn, a: list[bytes]) -> bytes:
    """Append to a string value."""
    old = get_string(c, a[1])
    new = a[2] if old is None else old + a[2]
    if len(new) > MAX_STRING_SIZE:
        raise CommandError("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
    put_keep_ttl(c.db, stored(a[1]), STRING_PREFIX + new, old is not None)
    c.srv.touch(a[1])
    return reply.integer(len(new))


@command("strlen", 2, "readonly fast", (1, 1, 1), group="string")
def strlen(c: Conn, a: list[bytes]) -> bytes:
    """Length of a string value."""
    value = get_string(c, a[1])
    return reply.integer(0 if value is None else len(value))


@command("getrange", 4, "readonly", (1, 1, 1), group="string")
def getrange(c: Conn, a: list[bytes]) -> bytes:
    """A substring of a string value (inclusive offsets, negatives from the end)."""
    start, end = to_int(a[2]), to_int(a[3])
    value = get_string(c, a[1]) or b""
    n = len(value)
    if start < 0 and end < 0 and start > end:
        return reply.bulk(b"")
    if start < 0:
        start = max(n + start, 0)
    if end < 0:
        end = max(n + end, 0)
    end = min(end, n - 1)
    if n == 0 or start > end:
        return reply.bulk(b"")
    return reply.bulk(value[start : end + 1])


@command("substr", 4, "readonly", (1, 1, 1), group="string", since="1.0.0")
def substr(c: Conn, a: list[bytes]) -> bytes:
    """GETRANGE under its old name."""
    return getrange(c, a)


@command("setrange", 4, "write denyoom", (1, 1, 1), group="string")
def setrange(c: Conn, a: list[bytes]) -> bytes:
    """Overwrite part of a string value at an offset (zero-padding as needed)."""
    offset = to_int(a[2])
    if offset < 0:
        raise CommandError("ERR offset is out of range")
    patch = a[3]
    old = get_string(c, a[1])
    if not patch:
        return reply.integer(0 if old is None else len(old))
    if offset + len(patch) > MAX_STRING_SIZE:
        raise CommandError("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
    buf = bytearray(old or b"")
    if len(buf) < offset:
        buf.extend(b"\0" * (offset - len(buf)))
    buf[offset : offset + len(patch)] = patch
    put_keep_ttl(c.db, stored(a[1]), STRING_PREFIX + bytes(buf), old is not None)
    c.srv.touch(a[1])
    return reply.integer(len(buf))


def _incr(c: Conn, key: bytes, delta: int) -> bytes:
    old = get_string(c, key)
    current = 0 if old is None else to_int(old)
    total = current + delta
    if not INT64_MIN <= total <= INT64_MAX:
        raise CommandError("ERR increment or decrement would overflow")
    put_keep_ttl(c.db, stored(key), b"s%d" % total, old is not None)
    c.srv.touch(key)
    return reply.integer(total)


@command("incr", 2, "write denyoom fast", (1, 1, 1), group="string")
def incr(c: Conn, a: list[bytes]) -> bytes:
    """Add one to an integer value."""
    return _incr(c, a[1], 1)


@command("decr", 2, "write denyoom fast", (1, 1, 1), group="string")
def decr(c: Conn, a: list[bytes]) -> bytes:
    """Subtract one from an integer value."""
    return _incr(c, a[1], -1)


@command("incrby", 3, "write denyoom fast", (1, 1, 1), group="string")
def incrby(c: Conn, a: list[bytes]) -> bytes:
    """Add an integer to an integer value."""
    return _incr(c, a[1], to_int(a[2]))


@command("decrby", 3, "write denyoom fast", (1, 1, 1), group="string")
def decrby(c: Conn, a: list[bytes]) -> bytes:
    """Subtract an integer from an integer value."""
    delta = to_int(a[2])
    if delta == INT64_MIN:
        raise CommandError("ERR decrement would overflow")
    return _incr(c, a[1], -delta)


@command("incrbyfloat", 3, "write denyoom fast", (1, 1, 1), group="string")
def incrbyfloat(c: Conn, a: list[bytes]) -> bytes:
    """Add a floating-point number to a value (Redis's long double formatting)."""
    old = get_string(c, a[1])
    text = add_and_format(old, a[2])
    put_keep_ttl(c.db, stored(a[1]), STRING_PREFIX + text, old is not None)
    c.srv.touch(a[1])
    return reply.bulk(text)
