"""Hash commands. A hash is one engine entry (see values.py); writes re-encode it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tuffdb.server.resp import reply
from tuffdb.server.resp.commands.common import INT64_MAX, INT64_MIN, put_keep_ttl, to_int
from tuffdb.server.resp.commands.numbers import add_and_format, parse_long_double
from tuffdb.server.resp.glob import compile_glob
from tuffdb.server.resp.table import SYNTAX, WRONGTYPE, CommandError, command
from tuffdb.server.resp.values import HASH_TAG, decode_hash, encode_hash

if TYPE_CHECKING:
    from tuffdb.server.resp.conn import Conn


def load(c: Conn, key: bytes) -> dict[bytes, bytes] | None:
    raw = c.store.get(key)
    if raw is None:
        return None
    if raw[0] != HASH_TAG:
        raise CommandError(WRONGTYPE)
    return decode_hash(raw)


def save(c: Conn, key: bytes, fields: dict[bytes, bytes], existed: bool) -> None:
    if fields:
        put_keep_ttl(c.store, key, encode_hash(fields), existed)
    elif existed:
        c.store.delete(key, sync=False)  # Redis deletes a hash that loses its last field
    c.srv.touch(key)


def _set_fields(c: Conn, a: list[bytes], name: str) -> int:
    if len(a) % 2 != 0:
        raise CommandError(f"ERR wrong number of arguments for '{name}' command")
    fields = load(c, a[1])
    existed = fields is not None
    fields = fields or {}
    before = len(fields)
    for i in range(2, len(a), 2):
        fields[a[i]] = a[i + 1]
    save(c, a[1], fields, existed)
    return len(fields) - before


@command("hset", -4, "write denyoom fast", (1, 1, 1), group="hash", since="2.0.0")
def hset(c: Conn, a: list[bytes]) -> bytes:
    """Set hash fields; reply how many were new."""
    return reply.integer(_set_fields(c, a, "hset"))


@command("hmset", -4, "write denyoom fast", (1, 1, 1), group="hash", since="2.0.0")
def hmset(c: Conn, a: list[bytes]) -> bytes:
    """Set hash fields (deprecated form of HSET)."""
    _set_fields(c, a, "hmset")
    return reply.OK


@command("hsetnx", 4, "write denyoom fast", (1, 1, 1), group="hash", since="2.0.0")
def hsetnx(c: Conn, a: list[bytes]) -> bytes:
    """Set a hash field only if it does not exist."""
    fields = load(c, a[1])
    if fields is not None and a[2] in fields:
        return reply.ZERO
    existed = fields is not None
    fields = fields or {}
    fields[a[2]] = a[3]
    save(c, a[1], fields, existed)
    return reply.ONE


@command("hget", 3, "readonly fast", (1, 1, 1), group="hash", since="2.0.0")
def hget(c: Conn, a: list[bytes]) -> bytes:
    """The value of a hash field."""
    fields = load(c, a[1])
    value = None if fields is None else fields.get(a[2])
    return c.enc.null if value is None else reply.bulk(value)


@command("hmget", -3, "readonly fast", (1, 1, 1), group="hash", since="2.0.0")
def hmget(c: Conn, a: list[bytes]) -> bytes:
    """The values of several hash fields."""
    fields = load(c, a[1]) or {}
    return c.enc.bulks([fields.get(f) for f in a[2:]])


@command("hgetall", 2, "readonly", (1, 1, 1), group="hash", since="2.0.0")
def hgetall(c: Conn, a: list[bytes]) -> bytes:
    """Every field and value of a hash (a map in RESP3)."""
    fields = load(c, a[1]) or {}
    return c.enc.map([(reply.bulk(k), reply.bulk(v)) for k, v in fields.items()])


@command("hdel", -3, "write fast", (1, 1, 1), group="hash", since="2.0.0")
def hdel(c: Conn, a: list[bytes]) -> bytes:
    """Delete hash fields; reply how many existed."""
    fields = load(c, a[1])
    if fields is None:
        return reply.ZERO
    n = sum(1 for f in a[2:] if fields.pop(f, None) is not None)
    if n:
        save(c, a[1], fields, True)
    return reply.integer(n)


@command("hexists", 3, "readonly fast", (1, 1, 1), group="hash", since="2.0.0")
def hexists(c: Conn, a: list[bytes]) -> bytes:
    """Whether a hash field exists."""
    fields = load(c, a[1])
    return reply.ONE if fields is not None and a[2] in fields else reply.ZERO


@command("hlen", 2, "readonly fast", (1, 1, 1), group="hash", since="2.0.0")
def hlen(c: Conn, a: list[bytes]) -> bytes:
    """Number of fields in a hash."""
    return reply.integer(len(load(c, a[1]) or ()))


@command("hstrlen", 3, "readonly fast", (1, 1, 1), group="hash", since="3.2.0")
def hstrlen(c: Conn, a: list[bytes]) -> bytes:
    """Length of a hash field's value."""
    fields = load(c, a[1]) or {}
    return reply.integer(len(fields.get(a[2], b"")))


@command("hkeys", 2, "readonly", (1, 1, 1), group="hash", since="2.0.0")
def hkeys(c: Conn, a: list[bytes]) -> bytes:
    """Every field name of a hash."""
    return c.enc.bulks(list(load(c, a[1]) or ()))


@command("hvals", 2, "readonly", (1, 1, 1), group="hash", since="2.0.0")
def hvals(c: Conn, a: list[bytes]) -> bytes:
    """Every value of a hash."""
    return c.enc.bulks(list((load(c, a[1]) or {}).values()))


@command("hincrby", 4, "write denyoom fast", (1, 1, 1), group="hash", since="2.0.0")
def hincrby(c: Conn, a: list[bytes]) -> bytes:
    """Add an integer to a hash field."""
    delta = to_int(a[3])
    fields = load(c, a[1])
    existed = fields is not None
    fields = fields or {}
    old = fields.get(a[2])
    current = 0 if old is None else to_int(old, "ERR hash value is not an integer")
    total = current + delta
    if not INT64_MIN <= total <= INT64_MAX:
        raise CommandError("ERR increment or decrement would overflow")
    fields[a[2]] = b"%d" % total
    save(c, a[1], fields, existed)
    return reply.integer(total)


@command("hincrbyfloat", 4, "write denyoom fast", (1, 1, 1), group="hash", since="2.6.0")
def hincrbyfloat(c: Conn, a: list[bytes]) -> bytes:
    """Add a floating-point number to a hash field."""
    if not np.isfinite(parse_long_double(a[3])):  # Redis checks the increment first
        raise CommandError("ERR value is NaN or Infinity")
    fields = load(c, a[1])
    existed = fields is not None
    fields = fields or {}
    text = add_and_format(fields.get(a[2]), a[3], "ERR hash value is not a float")
    fields[a[2]] = text
    save(c, a[1], fields, existed)
    return reply.bulk(text)


@command("hscan", -3, "readonly", (1, 1, 1), group="hash", since="2.8.0")
def hscan(c: Conn, a: list[bytes]) -> bytes:  # noqa: C901  (Redis option parsing)
    """Iterate a hash: like Redis for small hashes, one reply holds every field."""
    if not a[2].isdigit():
        raise CommandError("ERR invalid cursor")
    pattern: bytes | None = None
    novalues = False
    i = 3
    while i < len(a):
        opt = a[i].lower()
        if opt == b"novalues":
            novalues = True
            i += 1
            continue
        if i + 1 >= len(a):
            raise CommandError(SYNTAX)
        if opt == b"count":
            if to_int(a[i + 1]) < 1:
                raise CommandError(SYNTAX)
        elif opt == b"match":
            pattern = a[i + 1]
        else:
            raise CommandError(SYNTAX)
        i += 2
    fields = load(c, a[1]) or {}
    match = compile_glob(pattern) if pattern else None
    flat: list[bytes] = []
    for k, v in fields.items():
        if match is None or match(k):
            flat.append(k)
            if not novalues:
                flat.append(v)
    return reply.array([reply.bulk(b"0"), c.enc.bulks(flat)])
