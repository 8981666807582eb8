"""Hash commands: one engine entry per field (docs/format/resp.md), so HSET, HGET and
HDEL cost the same on a hash of ten fields or ten million."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tuffdb._format.resp import TAG_HASH
from tuffdb.server.resp import reply
from tuffdb.server.resp.commands.collection import (
    Coll,
    batchable,
    commit_batch,
    present,
    scan_cursor,
    scan_reply,
)
from tuffdb.server.resp.commands.common import INT64_MAX, INT64_MIN, to_int
from tuffdb.server.resp.commands.numbers import add_and_format, parse_long_double
from tuffdb.server.resp.keyspace import Op, elements, hash_meta, rewrite_op
from tuffdb.server.resp.table import CommandError, batched, command

if TYPE_CHECKING:
    from tuffdb.server.resp.conn import Conn


def _set_fields(c: Conn, a: list[bytes], name: str) -> int:
    if len(a) % 2 != 0:
        raise CommandError(f"ERR wrong number of arguments for '{name}' command")
    h = Coll(c, a[1], TAG_HASH, create=True)
    prefix = elements(h.cid)
    pairs = dict(zip(a[2::2], a[3::2], strict=True))  # a repeated field: the last wins
    fkeys = [prefix + f for f in pairs]
    if not h.existed:
        added = len(pairs)
        h.ops.extend(zip(fkeys, pairs.values(), strict=True))
    else:
        old = c.db.get_many(fkeys)
        added = old.count(None)
        h.ops.extend([(k, v) if o is None else rewrite_op(k, v)
                      for k, v, o in zip(fkeys, pairs.values(), old, strict=True)])
    h.finish(c, hash_meta(h.cid, h.size + added))
    return added


def _get(c: Conn, key: bytes, field: bytes) -> tuple[Coll, bytes | None]:
    h = Coll(c, key, TAG_HASH)
    return h, (c.db.get(elements(h.cid) + field) if h.existed else None)


def _put_field(c: Conn, h: Coll, field: bytes, value: bytes, new: bool) -> None:
    if not h.existed:
        h = Coll(c, h.key, TAG_HASH, create=True)
    h.ops.append((elements(h.cid) + field, value))
    h.finish(c, hash_meta(h.cid, h.size + new))


def _fields(c: Conn, h: Coll) -> list[tuple[bytes, bytes]]:
    return field_pairs(c, h.cid) if h.existed else []


def field_pairs(c: Conn, cid: int) -> list[tuple[bytes, bytes]]:
    """(field, value) of hash ``cid``, in field order."""
    prefix = elements(cid)
    n = len(prefix)
    return [(k[n:], v) for k, v in c.db.items_in_range(prefix)]


@command("hset", -4, "write denyoom fast", (1, 1, 1), group="hash", since="2.0.0")
def hset(c: Conn, a: list[bytes]) -> bytes:
    """Set hash fields; reply how many were new."""
    return reply.integer(_set_fields(c, a, "hset"))


@batched("hset")
def hset_batch(c: Conn, cmds: list[list[bytes]]) -> list[bytes]:
    """Pipelined HSETs: one metadata read per hash, one field read, one write_batch."""
    if not batchable(c, cmds, 4, exact=False) or any(len(a) % 2 for a in cmds):
        return []
    hashes: dict[bytes, Coll] = {}
    try:
        for a in cmds:
            if a[1] not in hashes:
                hashes[a[1]] = Coll(c, a[1], TAG_HASH, create=True)
    except CommandError:
        return []
    prefixes = {key: elements(h.cid) for key, h in hashes.items()}
    per_cmd = [dict(zip([prefixes[a[1]] + f for f in a[2::2]], a[3::2], strict=True))
               for a in cmds]
    there = present(c, (k for pairs in per_cmd for k in pairs))
    # One op per field however many commands set it (the batch is atomic: only the last
    # value is ever seen); a field new to its hash is a plain put, the rest rewrites.
    final: dict[bytes, bytes] = {}
    fresh: set[bytes] = set()
    out = []
    for a, pairs in zip(cmds, per_cmd, strict=True):
        added = [k for k in pairs if k not in there]
        if added:
            there.update(added)
            fresh.update(added)
        final.update(pairs)
        hashes[a[1]].size += len(added)
        out.append(reply.integer(len(added)))
    ops: list[Op] = [(k, v) if k in fresh else rewrite_op(k, v) for k, v in final.items()]
    for h in hashes.values():
        ops.extend(h.ops)
        h.ops = ops
        h.close(hash_meta(h.cid, h.size))
    commit_batch(c, ops, list(hashes))
    return out


@command("hmset", -4, "write denyoom fast", (1, 1, 1), group="hash", since="2.0.0")
def hmset(c: Conn, a: list[bytes]) -> bytes:
    """Set hash fields (deprecated form of HSET)."""
    _set_fields(c, a, "hmset")
    return reply.OK


@command("hsetnx", 4, "write denyoom fast", (1, 1, 1), group="hash", since="2.0.0")
def hsetnx(c: Conn, a: list[bytes]) -> bytes:
    """Set a hash field only if it does not exist."""
    h, old = _get(c, a[1], a[2])
    if old is not None:
        return reply.ZERO
    _put_field(c, h, a[2], a[3], True)
    return reply.ONE


@command("hget", 3, "readonly fast", (1, 1, 1), group="hash", since="2.0.0")
def hget(c: Conn, a: list[bytes]) -> bytes:
    """The value of a hash field."""
    value = _get(c, a[1], a[2])[1]
    return c.enc.null if value is None else reply.bulk(value)


@command("hmget", -3, "readonly fast", (1, 1, 1), group="hash", since="2.0.0")
def hmget(c: Conn, a: list[bytes]) -> bytes:
    """The values of several hash fields."""
    h = Coll(c, a[1], TAG_HASH)
    if not h.existed:
        return c.enc.bulks([None] * (len(a) - 2))
    prefix = elements(h.cid)
    return c.enc.bulks(c.db.get_many([prefix + f for f in a[2:]]))


@command("hgetall", 2, "readonly", (1, 1, 1), group="hash", since="2.0.0")
def hgetall(c: Conn, a: list[bytes]) -> bytes:
    """Every field and value of a hash (a map in RESP3)."""
    fields = _fields(c, Coll(c, a[1], TAG_HASH))
    return c.enc.bulk_map([x for kv in fields for x in kv])


@command("hdel", -3, "write fast", (1, 1, 1), group="hash", since="2.0.0")
def hdel(c: Conn, a: list[bytes]) -> bytes:
    """Delete hash fields; reply how many existed."""
    h = Coll(c, a[1], TAG_HASH)
    if not h.existed:
        return reply.ZERO
    prefix = elements(h.cid)
    fkeys = list(dict.fromkeys(prefix + f for f in a[2:]))
    gone = [k for k, v in zip(fkeys, c.db.get_many(fkeys), strict=True) if v is not None]
    if not gone:
        return reply.ZERO
    h.ops.extend((k, None) for k in gone)
    left = h.size - len(gone)
    h.finish(c, hash_meta(h.cid, left) if left > 0 else None)  # an emptied hash goes
    return reply.integer(len(gone))


@command("hexists", 3, "readonly fast", (1, 1, 1), group="hash", since="2.0.0")
def hexists(c: Conn, a: list[bytes]) -> bytes:
    """Whether a hash field exists."""
    return reply.ZERO if _get(c, a[1], a[2])[1] is None else reply.ONE


@command("hlen", 2, "readonly fast", (1, 1, 1), group="hash", since="2.0.0")
def hlen(c: Conn, a: list[bytes]) -> bytes:
    """Number of fields in a hash (kept in its metadata: O(1))."""
    return reply.integer(Coll(c, a[1], TAG_HASH).size)


@command("hstrlen", 3, "readonly fast", (1, 1, 1), group="hash", since="3.2.0")
def hstrlen(c: Conn, a: list[bytes]) -> bytes:
    """Length of a hash field's value."""
    return reply.integer(len(_get(c, a[1], a[2])[1] or b""))


@command("hkeys", 2, "readonly", (1, 1, 1), group="hash", since="2.0.0")
def hkeys(c: Conn, a: list[bytes]) -> bytes:
    """Every field name of a hash."""
    h = Coll(c, a[1], TAG_HASH)
    if not h.existed:
        return c.enc.bulks([])
    prefix = elements(h.cid)
    n = len(prefix)
    return reply.bulk_array([k[n:] for k in c.db.keys_in_range(prefix)])


@command("hvals", 2, "readonly", (1, 1, 1), group="hash", since="2.0.0")
def hvals(c: Conn, a: list[bytes]) -> bytes:
    """Every value of a hash."""
    return c.enc.bulks([v for _, v in _fields(c, Coll(c, a[1], TAG_HASH))])


@command("hincrby", 4, "write denyoom fast", (1, 1, 1), group="hash", since="2.0.0")
def hincrby(c: Conn, a: list[bytes]) -> bytes:
    """Add an integer to a hash field."""
    delta = to_int(a[3])
    h, old = _get(c, a[1], a[2])
    current = 0 if old is None else to_int(old, "ERR hash value is not an integer")
    total = current + delta
    if not INT64_MIN <= total <= INT64_MAX:
        raise CommandError("ERR increment or decrement would overflow")
    _put_field(c, h, a[2], b"%d" % total, old is None)
    return reply.integer(total)


@command("hincrbyfloat", 4, "write denyoom fast", (1, 1, 1), group="hash", since="2.6.0")
def hincrbyfloat(c: Conn, a: list[bytes]) -> bytes:
    """Add a floating-point number to a hash field."""
    if not np.isfinite(parse_long_double(a[3])):  # Redis checks the increment first
        raise CommandError("ERR value is NaN or Infinity")
    h, old = _get(c, a[1], a[2])
    text = add_and_format(old, a[3], "ERR hash value is not a float")
    _put_field(c, h, a[2], text, old is None)
    return reply.bulk(text)


@command("hrandfield", -2, "readonly", (1, 1, 1), group="hash", since="6.2.0")
def hrandfield(c: Conn, a: list[bytes]) -> bytes:
    """Random fields (and values): positive count distinct, negative may repeat."""
    from tuffdb.server.resp.commands.sets import random_members  # noqa: PLC0415  (cycle)

    return random_members(c, a, lambda: Coll(c, a[1], TAG_HASH), "hrandfield",
                          withscores=b"withvalues")


@command("hscan", -3, "readonly", (1, 1, 1), group="hash", since="2.8.0")
def hscan(c: Conn, a: list[bytes]) -> bytes:
    """Iterate a hash: small hashes in one reply (as Redis), big ones page by COUNT."""
    novalues = any(x.lower() == b"novalues" for x in a[3:])
    args = [x for x in a if x.lower() != b"novalues"] if novalues else a
    scan_cursor(a)
    h = Coll(c, a[1], TAG_HASH)
    if novalues:
        return scan_reply(c, args, elements(h.cid), h.size, lambda f, _v: [reply.bulk(f)])
    return scan_reply(c, args, elements(h.cid), h.size,
                      lambda f, v: [reply.bulk(f), reply.bulk(v)])
