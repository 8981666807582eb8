"""Set commands: one engine entry per member (value empty), SADD/SREM/SISMEMBER O(1) each.

SPOP and SRANDMEMBER pick members by position in the set's key range: the engine counts
and seeks by position in O(log n) (``scan_keys(skip=...)``), so a random member costs one
seek, not a walk.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from tuffdb._format.resp import META, TAG_SET
from tuffdb.server.resp import reply
from tuffdb.server.resp.commands.collection import (
    Coll,
    batchable,
    commit,
    commit_batch,
    numkeys,
    positive_count,
    present,
    scan_cursor,
    scan_reply,
)
from tuffdb.server.resp.commands.common import to_int
from tuffdb.server.resp.keyspace import Op, elements, new_collection, stored
from tuffdb.server.resp.table import SYNTAX, CommandError, batched, command

if TYPE_CHECKING:
    from collections.abc import Callable

    from tuffdb.server.resp.conn import Conn


def set_meta(cid: int, size: int) -> bytes:
    return META.pack(TAG_SET, cid, size)


def members(c: Conn, s: Coll) -> list[bytes]:
    return member_names(c, s.cid) if s.existed else []


def member_names(c: Conn, cid: int) -> list[bytes]:
    """The members of set ``cid``, in byte order."""
    prefix = elements(cid)
    n = len(prefix)
    return [k[n:] for k in c.db.keys_in_range(prefix)]


@command("sadd", -3, "write denyoom fast", (1, 1, 1), group="set")
def sadd(c: Conn, a: list[bytes]) -> bytes:
    """Add members; reply how many were new."""
    s = Coll(c, a[1], TAG_SET, create=True)
    prefix = elements(s.cid)
    mkeys = list(dict.fromkeys(prefix + m for m in a[2:]))
    if s.existed:
        mkeys = [k for k, v in zip(mkeys, c.db.get_many(mkeys), strict=True) if v is None]
        if not mkeys:
            return reply.ZERO
    s.ops.extend((k, b"") for k in mkeys)
    s.finish(c, set_meta(s.cid, s.size + len(mkeys)))
    return reply.integer(len(mkeys))


@batched("sadd")
def sadd_batch(c: Conn, cmds: list[list[bytes]]) -> list[bytes]:
    """Pipelined SADDs: one metadata read per set, one membership read, one write_batch."""
    if not batchable(c, cmds, 3, exact=False):
        return []
    sets: dict[bytes, Coll] = {}
    try:
        for a in cmds:
            if a[1] not in sets:
                sets[a[1]] = Coll(c, a[1], TAG_SET, create=True)
    except CommandError:
        return []  # WRONGTYPE: one by one gives each command its reply (nothing written)
    sizes = {key: st.size for key, st in sets.items()}
    prefixes = {key: elements(st.cid) for key, st in sets.items()}
    ops: list[Op] = []
    out = []
    if max(map(len, cmds)) == 3:  # one member each, the common form: no per-command lists
        mkeys = [prefixes[a[1]] + a[2] for a in cmds]
        there = present(c, mkeys)
        for a, k in zip(cmds, mkeys, strict=True):
            if k in there:
                out.append(reply.ZERO)
            else:
                there.add(k)
                ops.append((k, b""))
                sets[a[1]].size += 1
                out.append(reply.ONE)
    else:
        per_cmd = [[prefixes[a[1]] + m for m in a[2:]] for a in cmds]
        there = present(c, (k for keys in per_cmd for k in keys))
        for a, keys in zip(cmds, per_cmd, strict=True):
            new = [k for k in dict.fromkeys(keys) if k not in there]
            there.update(new)
            ops.extend((k, b"") for k in new)
            sets[a[1]].size += len(new)
            out.append(reply.integer(len(new)))
    # Only the sets that changed are written (as sadd does): a batch that added nothing
    # writes nothing, so under ``always`` it is answered as a read, without a round.
    changed = [st for st in sets.values() if st.size != sizes[st.key] or not st.existed]
    for st in changed:
        ops.extend(st.ops)
        st.ops = ops
        st.close(set_meta(st.cid, st.size))
    commit_batch(c, ops, [st.key for st in changed])
    return out


def remove(c: Conn, s: Coll, mkeys: list[bytes]) -> int:
    """Queue the removal of the existing members among ``mkeys``; write; count them."""
    gone = [k for k, v in zip(mkeys, c.db.get_many(mkeys), strict=True) if v is not None]
    if gone:
        s.ops.extend((k, None) for k in gone)
        left = s.size - len(gone)
        s.finish(c, set_meta(s.cid, left) if left else None)
    return len(gone)


@command("srem", -3, "write fast", (1, 1, 1), group="set")
def srem(c: Conn, a: list[bytes]) -> bytes:
    """Remove members; reply how many existed."""
    s = Coll(c, a[1], TAG_SET)
    if not s.existed:
        return reply.ZERO
    prefix = elements(s.cid)
    return reply.integer(remove(c, s, list(dict.fromkeys(prefix + m for m in a[2:]))))


@command("smembers", 2, "readonly", (1, 1, 1), group="set")
def smembers(c: Conn, a: list[bytes]) -> bytes:
    """Every member (a set reply in RESP3)."""
    return c.enc.set([reply.bulk(m) for m in members(c, Coll(c, a[1], TAG_SET))])


@command("sismember", 3, "readonly fast", (1, 1, 1), group="set")
def sismember(c: Conn, a: list[bytes]) -> bytes:
    """Whether a member is in the set."""
    s = Coll(c, a[1], TAG_SET)
    return reply.ONE if s.existed and c.db.exists(elements(s.cid) + a[2]) else reply.ZERO


@command("smismember", -3, "readonly fast", (1, 1, 1), group="set", since="6.2.0")
def smismember(c: Conn, a: list[bytes]) -> bytes:
    """Membership of each given member."""
    s = Coll(c, a[1], TAG_SET)
    if not s.existed:
        return reply.array([reply.ZERO] * (len(a) - 2))
    prefix = elements(s.cid)
    got = c.db.get_many([prefix + m for m in a[2:]])
    return reply.array([reply.ZERO if v is None else reply.ONE for v in got])


@command("scard", 2, "readonly fast", (1, 1, 1), group="set")
def scard(c: Conn, a: list[bytes]) -> bytes:
    """Number of members (O(1): from the metadata)."""
    return reply.integer(Coll(c, a[1], TAG_SET).size)


# -- random members -----------------------------------------------------------------------
def _at(c: Conn, prefix: bytes, positions: list[int]) -> list[tuple[bytes, bytes]]:
    """(element key suffix, value) at each position (0-based, in key order)."""
    n = len(prefix)
    out = []
    for p in positions:
        for k, v in c.db.scan(prefix, skip=p):
            out.append((k[n:], v))
            break
    return out


def _distinct_positions(size: int, count: int) -> list[int]:
    return random.sample(range(size), count)


def _pick(c: Conn, s: Coll, count: int, *, distinct: bool) -> list[tuple[bytes, bytes]]:
    prefix = elements(s.cid)
    if distinct and count >= s.size:
        n = len(prefix)
        return [(k[n:], v) for k, v in c.db.items_in_range(prefix)]
    if distinct:
        if count * 4 > s.size:  # a good part of the set: one walk is cheaper than seeks
            keep = set(_distinct_positions(s.size, count))
            n = len(prefix)
            got = [(k[n:], v) for i, (k, v) in enumerate(c.db.scan(prefix)) if i in keep]
            random.shuffle(got)
            return got
        return _at(c, prefix, _distinct_positions(s.size, count))
    return _at(c, prefix, [random.randrange(s.size) for _ in range(count)])


def random_members(c: Conn, a: list[bytes], open_coll: Callable[[], Coll], name: str,
                   withscores: bytes = b"withscores") -> bytes:
    """SRANDMEMBER / ZRANDMEMBER / HRANDFIELD ``key [count [WITHSCORES|WITHVALUES]]``, in
    Redis's order: the count, then the option, then the key (``open_coll`` reads it)."""
    from tuffdb.server.resp.commands.zsets import score_reply  # noqa: PLC0415  (cycle)

    if len(a) == 2:  # noqa: PLR2004
        s = open_coll()
        if not s.existed:
            return c.enc.null
        return reply.bulk(_pick(c, s, 1, distinct=True)[0][0])
    count = to_int(a[2])
    if count == -(2**63):
        raise CommandError("ERR value is out of range, value must between "
                           "-9223372036854775807 and 9223372036854775807")
    if len(a) > 4 or (len(a) == 4 and a[3].lower() != withscores):  # noqa: PLR2004
        raise CommandError(SYNTAX)
    with_values = len(a) == 4  # noqa: PLR2004
    if with_values and count < -((2**63 - 1) // 2):
        raise CommandError("ERR value is out of range")
    s = open_coll()
    if not s.existed or count == 0:
        return reply.EMPTY_ARRAY
    # A negative count repeats members: the reply has -count of them whatever the size.
    # Past proto-max-bulk-len of reply (6 bytes an element at least) it is refused: built
    # whole, -9223372036854775807 held the loop and grew memory until the process died
    # (Redis 7.0.15 too).
    if count < 0 and -count * (12 if with_values else 6) > c.srv.max_bulk_len:
        raise CommandError(f"ERR count {count} asks for a reply over proto-max-bulk-len "
                           f"({c.srv.max_bulk_len} bytes); ask for fewer")
    picked = _pick(c, s, abs(count), distinct=count > 0)
    if not with_values:
        return reply.array([reply.bulk(m) for m, _ in picked])
    zset = name == "zrandmember"
    items = []
    for m, v in picked:
        value = score_reply(c, v) if zset else reply.bulk(v)
        items.append((reply.bulk(m), value))
    if c.enc.proto == 3:  # noqa: PLR2004
        return reply.array([reply.array([m, v]) for m, v in items])
    return reply.array([x for pair in items for x in pair])


@command("srandmember", -2, "readonly", (1, 1, 1), group="set")
def srandmember(c: Conn, a: list[bytes]) -> bytes:
    """Random members: positive count distinct, negative may repeat."""
    if len(a) > 3:  # noqa: PLR2004
        raise CommandError(SYNTAX)
    return random_members(c, a, lambda: Coll(c, a[1], TAG_SET), "srandmember")


@command("spop", -2, "write fast", (1, 1, 1), group="set")
def spop(c: Conn, a: list[bytes]) -> bytes:
    """Remove and return random members."""
    if len(a) > 3:  # noqa: PLR2004
        raise CommandError(SYNTAX)
    count = positive_count(a[2]) if len(a) == 3 else None  # noqa: PLR2004
    s = Coll(c, a[1], TAG_SET)
    if not s.existed:
        return c.enc.null if count is None else c.enc.set([])
    if count == 0:
        return c.enc.set([])
    picked = [m for m, _ in _pick(c, s, 1 if count is None else count, distinct=True)]
    prefix = elements(s.cid)
    remove(c, s, [prefix + m for m in picked])
    if count is None:
        return reply.bulk(picked[0])
    return c.enc.set([reply.bulk(m) for m in picked])


# -- algebra --------------------------------------------------------------------------------
def _load(c: Conn, keys: list[bytes]) -> list[Coll]:
    """Every source's metadata, type-checked before any is read (WRONGTYPE first)."""
    return [Coll(c, k, TAG_SET) for k in keys]


def _algebra(c: Conn, op: str, keys: list[bytes]) -> list[bytes]:
    sets = _load(c, keys)
    if op == "inter":
        if any(not s.existed for s in sets):
            return []
        ordered = sorted(sets, key=lambda s: s.size)  # the smallest drives
        result = members(c, ordered[0])
        for s in ordered[1:]:
            prefix = elements(s.cid)
            got = c.db.get_many([prefix + m for m in result])
            result = [m for m, v in zip(result, got, strict=True) if v is not None]
            if not result:
                break
        return result
    if op == "union":
        out: dict[bytes, None] = {}
        for s in sets:
            out.update(dict.fromkeys(members(c, s)))
        return list(out)
    first = sets[0]
    if not first.existed:
        return []
    result = members(c, first)
    for s in sets[1:]:
        if not s.existed or not result:
            continue
        prefix = elements(s.cid)
        got = c.db.get_many([prefix + m for m in result])
        result = [m for m, v in zip(result, got, strict=True) if v is None]
    return result


def store_set(c: Conn, dst: bytes, result: list[bytes]) -> None:
    """Overwrite ``dst`` (whatever it held) with a set of ``result``; empty deletes it."""
    sdst = stored(dst)
    old = c.db.get(sdst)
    ops: list[Op] = []
    if result:
        cid = new_collection(ops, c.srv.ids, dst)
        prefix = elements(cid)
        ops.extend((prefix + m, b"") for m in result)
        ops.append((sdst, set_meta(cid, len(result))))
    elif old is not None:
        ops.append((sdst, None))
    commit(c, dst, ops)
    if old is not None:
        c.srv.dropped(old)


def _three(c: Conn, a: list[bytes], op: str) -> bytes:
    return c.enc.set([reply.bulk(m) for m in _algebra(c, op, a[1:])])


def _three_store(c: Conn, a: list[bytes], op: str) -> bytes:
    result = _algebra(c, op, a[2:])
    store_set(c, a[1], result)
    return reply.integer(len(result))


@command("sinter", -2, "readonly", (1, -1, 1), group="set")
def sinter(c: Conn, a: list[bytes]) -> bytes:
    """Members in every set."""
    return _three(c, a, "inter")


@command("sunion", -2, "readonly", (1, -1, 1), group="set")
def sunion(c: Conn, a: list[bytes]) -> bytes:
    """Members in any set."""
    return _three(c, a, "union")


@command("sdiff", -2, "readonly", (1, -1, 1), group="set")
def sdiff(c: Conn, a: list[bytes]) -> bytes:
    """Members of the first set in none of the others."""
    return _three(c, a, "diff")


@command("sinterstore", -3, "write denyoom", (1, -1, 1), group="set")
def sinterstore(c: Conn, a: list[bytes]) -> bytes:
    """SINTER into a destination key."""
    return _three_store(c, a, "inter")


@command("sunionstore", -3, "write denyoom", (1, -1, 1), group="set")
def sunionstore(c: Conn, a: list[bytes]) -> bytes:
    """SUNION into a destination key."""
    return _three_store(c, a, "union")


@command("sdiffstore", -3, "write denyoom", (1, -1, 1), group="set")
def sdiffstore(c: Conn, a: list[bytes]) -> bytes:
    """SDIFF into a destination key."""
    return _three_store(c, a, "diff")


@command("sintercard", -3, "readonly", (0, 0, 0), group="set", since="7.0.0")
def sintercard(c: Conn, a: list[bytes]) -> bytes:
    """How many members SINTER would return (LIMIT stops counting early)."""
    n = numkeys(a, 1, 0)
    keys = a[2 : 2 + n]
    rest = a[2 + n :]
    limit = 0
    if rest:
        if len(rest) != 2 or rest[0].lower() != b"limit":  # noqa: PLR2004
            raise CommandError(SYNTAX)
        limit = to_int(rest[1], "ERR LIMIT can't be negative")
        if limit < 0:
            raise CommandError("ERR LIMIT can't be negative")
    result = _algebra(c, "inter", keys)
    return reply.integer(min(len(result), limit) if limit else len(result))


@command("smove", 4, "write fast", (1, 2, 1), group="set")
def smove(c: Conn, a: list[bytes]) -> bytes:
    """Move a member from one set to another."""
    src, dst, member = a[1], a[2], a[3]
    raw = c.db.get(stored(src))
    if raw is None:
        return reply.ZERO  # a missing source wins over a wrong-type destination (as Redis)
    s = Coll(c, src, TAG_SET)
    d = Coll(c, dst, TAG_SET)  # WRONGTYPE on either before any change
    if c.db.get(elements(s.cid) + member) is None:
        return reply.ZERO
    if src == dst:
        return reply.ONE
    left = s.size - 1
    s.ops.append((elements(s.cid) + member, None))
    s.close(set_meta(s.cid, left) if left else None)
    if not d.existed:
        d = Coll(c, dst, TAG_SET, create=True)
    new = not d.existed or c.db.get(elements(d.cid) + member) is None
    if new:
        d.ops.append((elements(d.cid) + member, b""))
    d.ops[:0] = s.ops
    d.finish(c, set_meta(d.cid, d.size + new))
    c.srv.touch(src)
    return reply.ONE


@command("sscan", -3, "readonly", (1, 1, 1), group="set", since="2.8.0")
def sscan(c: Conn, a: list[bytes]) -> bytes:
    """Iterate a set's members with a cursor."""
    scan_cursor(a)
    s = Coll(c, a[1], TAG_SET)
    return scan_reply(c, a, elements(s.cid), s.size, lambda m, _v: [reply.bulk(m)])

