"""Sorted-set commands.

A zset is metadata ``(id, size)`` plus two entries per member (docs/format/resp.md):
``member -> score`` for ZSCORE and membership, and a score-index entry
``sortable(score) | member`` whose byte order is (score, member) order. Ranges by score
seek into the index, ranks are counts of the index up to a key, ranges by rank seek by
position, and lex ranges seek into the member entries: each is O(log n + m).
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from tuffdb._format.resp import META, TAG_SET, TAG_ZSET, U64
from tuffdb.kv.store import KVStore, prefix_range
from tuffdb.server.resp import reply
from tuffdb.server.resp.commands.collection import (
    Coll,
    batchable,
    commit,
    commit_batch,
    format_double,
    positive_count,
    scan_cursor,
    scan_reply,
)
from tuffdb.server.resp.commands.common import to_int
from tuffdb.server.resp.commands.lists import (
    clamp_range,
    first_served,
    mpop_args,
    parse_timeout,
    serve_or_wait,
)
from tuffdb.server.resp.keyspace import (
    Op,
    elements,
    new_collection,
    rewrite_op,
    secondary,
    sortable,
    stored,
    unsortable,
)
from tuffdb.server.resp.table import (
    NOT_FLOAT,
    SYNTAX,
    WRONGTYPE,
    CommandError,
    batched,
    command,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tuffdb.server.resp.conn import Conn

ZSET_TAGS = frozenset((TAG_ZSET,))
TAKE_MANY = 1 << 16  # ZSet.take: up to this many entries in one slice of the ordered view
NAN_SCORE = "ERR resulting score is not a number (NaN)"
_U64_MAX = (1 << 64) - 1


# -- numbers: C strtod, as Redis parses them -------------------------------------------------
_DEC = re.compile(rb"([+-]?)((?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)\Z")
_HEX = re.compile(rb"([+-]?)0[xX]((?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)"
                  rb"(?:[pP][+-]?[0-9]+)?)\Z")
_INF = re.compile(rb"([+-]?)(?:inf|infinity)\Z", re.IGNORECASE)


def strtod(raw: bytes, *, strict: bool) -> float | None:
    """The number C's ``strtod`` reads from all of ``raw``, or None.

    ``strict`` is Redis's getDoubleFromObject (ZADD, ZINCRBY, WEIGHTS): no leading space,
    and an overflow or an underflow to zero is refused. Otherwise (score bounds) leading
    whitespace is skipped and overflow gives an infinity, as plain strtod does.
    """
    if raw.isdigit() and len(raw) < 16:  # a plain integer (exact as a double): the usual
        return float(raw)  # score, a count or a timestamp, read without the patterns below
    text = raw if strict else raw.lstrip(b" \t\n\v\f\r")
    if strict and raw[:1].isspace():
        return None
    m = _DEC.match(text)
    if m:
        x = float(m.group(2))
        digits = m.group(2).split(b"e")[0].split(b"E")[0]
        if strict and (math.isinf(x) or (x == 0 and digits.strip(b"0.") != b"")):
            return None
        return -x if m.group(1) == b"-" else x
    m = _HEX.match(text)
    if m:
        body = m.group(2).decode()
        try:
            x = float.fromhex(body if "p" in body.lower() else body + "p0")
        except OverflowError:
            if strict:
                return None
            x = math.inf
        return -x if m.group(1) == b"-" else x
    m = _INF.match(text)
    if m:
        return -math.inf if m.group(1) == b"-" else math.inf
    return None


def to_score(raw: bytes, message: str = NOT_FLOAT) -> float:
    x = strtod(raw, strict=True)
    if x is None:
        raise CommandError(message)
    return x


def score_reply(c: Conn, value: bytes) -> bytes:
    """A stored score (sortable bytes) as a reply: bulk in RESP2, double in RESP3."""
    return c.enc.double(format_double(unsortable(value)))


def _score(c: Conn, x: float) -> bytes:
    return c.enc.double(format_double(x))


# -- one zset under change -------------------------------------------------------------------
class ZSet(Coll):
    __slots__ = ("prefix", "sec")

    def __init__(self, c: Conn, key: bytes, *, create: bool = False) -> None:
        super().__init__(c, key, TAG_ZSET, create=create)
        self.prefix = elements(self.cid)
        self.sec = secondary(self.cid)

    def score(self, c: Conn, member: bytes) -> float | None:
        if not self.existed:
            return None
        raw = c.db.get(self.prefix + member)
        return None if raw is None else unsortable(raw)

    def scores(self, c: Conn, members: list[bytes]) -> list[float | None]:
        if not self.existed:
            return [None] * len(members)
        raws = c.db.get_many([self.prefix + m for m in members])
        return [None if r is None else unsortable(r) for r in raws]

    def put(self, member: bytes, old: float | None, new: float) -> None:
        ops = self.ops
        if old is not None:
            ops.append((self.sec + sortable(old) + member, None))
        else:
            self.size += 1
        enc = sortable(new)
        ops.append((self.sec + enc + member, b""))
        ops.append((self.prefix + member, enc) if old is None
                   else rewrite_op(self.prefix + member, enc))

    def remove(self, member: bytes, score: float) -> None:
        self.ops.append((self.prefix + member, None))
        self.ops.append((self.sec + sortable(score) + member, None))
        self.size -= 1

    def meta(self) -> bytes | None:
        return META.pack(TAG_ZSET, self.cid, self.size) if self.size else None

    def entries(self, c: Conn, start: bytes | None = None, end: bytes | None = None, *,
                reverse: bool = False, skip: int = 0) -> Iterator[tuple[bytes, float]]:
        """(member, score) in (score, member) order over index keys [start, end)."""
        if not self.existed:
            return
        n = len(self.sec)
        for k in c.db.scan_keys(self.sec, start, end, reverse=reverse, skip=skip):
            yield k[n + 8 :], unsortable(k, n)

    def take(self, c: Conn, count: int, start: bytes | None = None, end: bytes | None = None,
             *, reverse: bool = False, skip: int = 0) -> list[tuple[bytes, float]]:
        """The first ``count`` (-1: all) of :meth:`entries`, as a list: up to TAKE_MANY
        index keys in one slice of the engine's ordered view, which holds them exactly
        (they never carry a TTL), where a scan looks each up again."""
        if not self.existed or count == 0:
            return []
        db = c.db
        lo, hi = prefix_range(self.sec, start, end)
        if not 0 < count <= TAKE_MANY or hi is None or type(db) is not KVStore:
            return _limit(self.entries(c, start, end, reverse=reverse, skip=skip), count)
        n = len(self.sec)
        return [(k[n + 8 :], unsortable(k, n))
                for k in db.keys_between(lo, hi, count, reverse=reverse, skip=skip)]


# -- ranges ------------------------------------------------------------------------------------
def _succ(enc: bytes) -> bytes | None:
    """The next 8-byte value (None past the largest)."""
    n = int(U64.unpack(enc)[0])
    return None if n == _U64_MAX else U64.pack(n + 1)


def parse_score_bound(raw: bytes) -> tuple[float, bool]:
    """(value, exclusive) of a ZRANGEBYSCORE bound."""
    exclusive = raw[:1] == b"("
    x = strtod(raw[1:] if exclusive else raw, strict=False)
    if x is None or math.isnan(x):
        raise CommandError("ERR min or max is not a float")
    return x, exclusive


def score_range(z: ZSet, lo: tuple[float, bool], hi: tuple[float, bool]
                ) -> tuple[bytes, bytes | None] | None:
    """Index keys [start, end) holding scores within the bounds; None when empty."""
    (a, a_ex), (b, b_ex) = lo, hi
    if a > b or (a == b and (a_ex or b_ex)):
        return None
    start_enc = _succ(sortable(a)) if a_ex else sortable(a)
    if start_enc is None:
        return None
    end_enc = sortable(b) if b_ex else _succ(sortable(b))
    return z.sec + start_enc, None if end_enc is None else z.sec + end_enc


def parse_lex_bound(raw: bytes) -> tuple[bytes | None, bool, int]:
    """(member, exclusive, infinity: -1 for '-', 1 for '+', else 0)."""
    if raw == b"-":
        return None, False, -1
    if raw == b"+":
        return None, False, 1
    if raw[:1] == b"(":
        return raw[1:], True, 0
    if raw[:1] == b"[":
        return raw[1:], False, 0
    raise CommandError("ERR min or max not valid string range item")


def lex_range(z: ZSet, lo: tuple[bytes | None, bool, int], hi: tuple[bytes | None, bool, int]
              ) -> tuple[bytes, bytes | None] | None:
    """Member-entry keys [start, end) within lex bounds; None when empty."""
    (a, a_ex, a_inf), (b, b_ex, b_inf) = lo, hi
    if a_inf == 1 or b_inf == -1:
        return None
    if a is not None and b is not None and (a > b or (a == b and (a_ex or b_ex))):
        return None
    p = z.prefix
    start = p if a is None else p + a + (b"\x00" if a_ex else b"")
    end = None if b is None else p + b + (b"" if b_ex else b"\x00")
    return start, end


def lex_entries(c: Conn, z: ZSet, bounds: tuple[bytes, bytes | None], *,
                reverse: bool = False, skip: int = 0) -> Iterator[tuple[bytes, float]]:
    n = len(z.prefix)
    for k, v in c.db.scan(z.prefix, bounds[0], bounds[1], reverse=reverse, skip=skip):
        yield k[n:], unsortable(v)


def _limit(items: Iterator[tuple[bytes, float]], count: int) -> list[tuple[bytes, float]]:
    out: list[tuple[bytes, float]] = []
    if count == 0:
        return out
    for item in items:
        out.append(item)
        if len(out) == count:
            break
    return out


def pairs_reply(c: Conn, items: list[tuple[bytes, float]], withscores: bool) -> bytes:
    """WITHSCORES: flat in RESP2, [member, double] pairs in RESP3."""
    if not withscores:
        return reply.array([reply.bulk(m) for m, _ in items])
    if c.enc.proto == 3:  # noqa: PLR2004
        return reply.array([reply.array([reply.bulk(m), _score(c, s)]) for m, s in items])
    return reply.array([x for m, s in items for x in (reply.bulk(m), _score(c, s))])


def _range(c: Conn, a: list[bytes], first: int, kind: str | None, reverse: bool | None,
           store: bytes | None = None) -> bytes:
    """ZRANGE and every older form; ``first`` is the index of the key argument."""
    withscores = False
    offset, limit = 0, -1
    has_limit = False
    j = first + 3
    while j < len(a):
        opt = a[j].lower()
        left = len(a) - j - 1
        if opt == b"withscores" and store is None:
            withscores = True
        elif opt == b"limit" and left >= 2:  # noqa: PLR2004
            offset, limit = to_int(a[j + 1]), to_int(a[j + 2])
            has_limit = True
            j += 2
        elif reverse is None and opt == b"rev":
            reverse = True
        elif kind is None and opt == b"bylex":
            kind = "lex"
        elif kind is None and opt == b"byscore":
            kind = "score"
        else:
            raise CommandError(SYNTAX)
        j += 1
    reverse = bool(reverse)
    kind = kind or "rank"
    if has_limit and limit != -1 and kind == "rank":
        raise CommandError("ERR syntax error, LIMIT is only supported in combination with "
                           "either BYSCORE or BYLEX")
    if withscores and kind == "lex":
        raise CommandError("ERR syntax error, WITHSCORES not supported in combination with "
                           "BYLEX")
    lo_raw, hi_raw = a[first + 1], a[first + 2]
    if reverse and kind != "rank":
        lo_raw, hi_raw = hi_raw, lo_raw
    if kind == "rank":
        to_int(lo_raw)
        to_int(hi_raw)
    elif kind == "score":
        lo_s, hi_s = parse_score_bound(lo_raw), parse_score_bound(hi_raw)
    else:
        lo_l, hi_l = parse_lex_bound(lo_raw), parse_lex_bound(hi_raw)
    z = ZSet(c, a[first])
    items: list[tuple[bytes, float]] = []
    if z.existed:
        if kind == "rank":
            i, k = clamp_range(lo_raw, hi_raw, z.size)
            items = z.take(c, k - i, reverse=reverse, skip=i) if k > i else []
        elif offset >= 0:
            count = limit if limit >= 0 else -1
            if kind == "score":
                bounds = score_range(z, lo_s, hi_s)
                if bounds is not None:
                    items = z.take(c, count, *bounds, reverse=reverse, skip=offset)
            else:
                lbounds = lex_range(z, lo_l, hi_l)
                if lbounds is not None:
                    items = _limit(lex_entries(c, z, lbounds, reverse=reverse, skip=offset),
                                   count)
    if store is not None:
        store_zset(c, store, items)
        return reply.integer(len(items))
    return pairs_reply(c, items, withscores)


@command("zrange", -4, "readonly", (1, 1, 1), group="sorted-set", since="1.2.0")
def zrange(c: Conn, a: list[bytes]) -> bytes:
    """Members by rank, score (BYSCORE) or lex (BYLEX) range; REV, LIMIT, WITHSCORES."""
    return _range(c, a, 1, None, None)


@command("zrangestore", -5, "write denyoom", (1, 2, 1), group="sorted-set", since="6.2.0")
def zrangestore(c: Conn, a: list[bytes]) -> bytes:
    """ZRANGE into a destination key."""
    return _range(c, a, 2, None, None, store=a[1])


@command("zrevrange", -4, "readonly", (1, 1, 1), group="sorted-set", since="1.2.0")
def zrevrange(c: Conn, a: list[bytes]) -> bytes:
    """Members by rank, highest score first."""
    return _range(c, a, 1, "rank", True)


@command("zrangebyscore", -4, "readonly", (1, 1, 1), group="sorted-set", since="1.0.5")
def zrangebyscore(c: Conn, a: list[bytes]) -> bytes:
    """Members with scores in [min, max]."""
    return _range(c, a, 1, "score", False)


@command("zrevrangebyscore", -4, "readonly", (1, 1, 1), group="sorted-set", since="2.2.0")
def zrevrangebyscore(c: Conn, a: list[bytes]) -> bytes:
    """Members with scores in [min, max], highest first (max is given first)."""
    return _range(c, a, 1, "score", True)


@command("zrangebylex", -4, "readonly", (1, 1, 1), group="sorted-set", since="2.8.9")
def zrangebylex(c: Conn, a: list[bytes]) -> bytes:
    """Members in a lex range (for members of equal score)."""
    return _range(c, a, 1, "lex", False)


@command("zrevrangebylex", -4, "readonly", (1, 1, 1), group="sorted-set", since="2.8.9")
def zrevrangebylex(c: Conn, a: list[bytes]) -> bytes:
    """Members in a lex range, last first (max is given first)."""
    return _range(c, a, 1, "lex", True)


# -- writes ------------------------------------------------------------------------------------
@command("zadd", -4, "write denyoom fast", (1, 1, 1), group="sorted-set", since="1.2.0")
def zadd(c: Conn, a: list[bytes]) -> bytes:  # noqa: C901, PLR0912  (Redis's option rules)
    """Add members or update scores: NX XX GT LT CH INCR."""
    nx = xx = gt = lt = ch = incr = False
    i = 2
    while i < len(a):
        opt = a[i].lower()
        if opt == b"nx":
            nx = True
        elif opt == b"xx":
            xx = True
        elif opt == b"gt":
            gt = True
        elif opt == b"lt":
            lt = True
        elif opt == b"ch":
            ch = True
        elif opt == b"incr":
            incr = True
        else:
            break
        i += 1
    rest = a[i:]
    if not rest or len(rest) % 2:
        raise CommandError(SYNTAX)
    if nx and xx:
        raise CommandError("ERR XX and NX options at the same time are not compatible")
    if (gt and nx) or (lt and nx) or (gt and lt):
        raise CommandError("ERR GT, LT, and/or NX options at the same time are not compatible")
    if incr and len(rest) > 2:  # noqa: PLR2004
        raise CommandError("ERR INCR option supports a single increment-element pair")
    scores = [to_score(x) for x in rest[::2]]
    z = ZSet(c, a[1])
    if not z.existed and xx:
        return c.enc.null if incr else reply.ZERO
    if not z.existed:
        z = ZSet(c, a[1], create=True)
    members = rest[1::2]
    olds = dict(zip(members, z.scores(c, members), strict=True))
    added = changed = 0
    processed = False
    new_score = 0.0
    for score, member in zip(scores, members, strict=True):
        old = olds[member]
        if old is not None:
            if nx:
                continue
            if incr:
                score += old
                if math.isnan(score):
                    raise CommandError(NAN_SCORE)
            if (lt and score >= old) or (gt and score <= old):
                continue
            processed = True
            new_score = score
            if score != old:
                z.put(member, old, score)
                olds[member] = score
                changed += 1
        else:
            if xx:
                continue
            processed = True
            new_score = score
            z.put(member, None, score)
            olds[member] = score
            added += 1
    if z.ops and (added or changed or not z.existed):
        z.finish(c, z.meta(), signal=True)
    if incr:
        return _score(c, new_score) if processed else c.enc.null
    return reply.integer(added + changed if ch else added)


@batched("zadd")
def zadd_batch(c: Conn, cmds: list[list[bytes]]) -> list[bytes]:
    """Pipelined plain ``ZADD key score member``: one metadata read per zset, one score
    read, one write_batch."""
    if not batchable(c, cmds, 4):
        return []
    zsets: dict[bytes, ZSet] = {}
    try:
        scores = [to_score(a[2]) for a in cmds]
        for a in cmds:
            if a[1] not in zsets:
                zsets[a[1]] = ZSet(c, a[1], create=True)
    except CommandError:
        return []  # a bad score or WRONGTYPE: one by one (nothing was written)
    mkeys = [zsets[a[1]].prefix + a[3] for a in cmds]
    wanted = list(dict.fromkeys(mkeys))
    known: dict[bytes, float | None] = {
        k: None if v is None else unsortable(v)
        for k, v in zip(wanted, c.db.get_many(wanted), strict=True)}
    ops: list[Op] = []
    out = []
    for a, score, mkey in zip(cmds, scores, mkeys, strict=True):
        z = zsets[a[1]]
        old = known[mkey]
        if old is None or old != score:
            z.put(a[3], old, score)
        known[mkey] = score
        out.append(reply.ONE if old is None else reply.ZERO)
    # Only the zsets that changed are written (as zadd does): a batch of unchanged
    # scores writes nothing, so under ``always`` it is answered as a read.
    changed = [z for z in zsets.values() if z.ops or not z.existed]
    for z in changed:
        ops.extend(z.ops)
        z.ops = ops
        z.close(z.meta())
    commit_batch(c, ops, [z.key for z in changed])
    for z in changed:
        c.srv.signal(z.key, z.meta() or b"")
    return out


@command("zincrby", 4, "write denyoom fast", (1, 1, 1), group="sorted-set", since="1.2.0")
def zincrby(c: Conn, a: list[bytes]) -> bytes:
    """Add to a member's score (creating it at the increment)."""
    inc = to_score(a[2])
    z = ZSet(c, a[1], create=True)
    old = z.score(c, a[3])
    new = inc if old is None else old + inc
    if math.isnan(new):
        raise CommandError(NAN_SCORE)
    if old is None or new != old:
        z.put(a[3], old, new)
        z.finish(c, z.meta(), signal=True)
    return _score(c, new)


@command("zrem", -3, "write fast", (1, 1, 1), group="sorted-set", since="1.2.0")
def zrem(c: Conn, a: list[bytes]) -> bytes:
    """Remove members; reply how many existed."""
    z = ZSet(c, a[1])
    if not z.existed:
        return reply.ZERO
    members = list(dict.fromkeys(a[2:]))
    n = 0
    for m, s in zip(members, z.scores(c, members), strict=True):
        if s is not None:
            z.remove(m, s)
            n += 1
    if n:
        z.finish(c, z.meta())
    return reply.integer(n)


def _remove_items(c: Conn, z: ZSet, items: list[tuple[bytes, float]]) -> bytes:
    for m, s in items:
        z.remove(m, s)
    if items:
        z.finish(c, z.meta())
    return reply.integer(len(items))


@command("zremrangebyrank", 4, "write", (1, 1, 1), group="sorted-set", since="2.0.0")
def zremrangebyrank(c: Conn, a: list[bytes]) -> bytes:
    """Remove members by rank range."""
    to_int(a[2]), to_int(a[3])  # a bad index is the error before a wrong type (as Redis)
    z = ZSet(c, a[1])
    i, k = clamp_range(a[2], a[3], z.size)
    items = z.take(c, k - i, skip=i) if k > i else []
    return _remove_items(c, z, items)


@command("zremrangebyscore", 4, "write", (1, 1, 1), group="sorted-set", since="1.2.0")
def zremrangebyscore(c: Conn, a: list[bytes]) -> bytes:
    """Remove members with scores in [min, max]."""
    lo, hi = parse_score_bound(a[2]), parse_score_bound(a[3])
    z = ZSet(c, a[1])
    bounds = score_range(z, lo, hi) if z.existed else None
    return _remove_items(c, z, list(z.entries(c, *bounds)) if bounds else [])


@command("zremrangebylex", 4, "write", (1, 1, 1), group="sorted-set", since="2.8.9")
def zremrangebylex(c: Conn, a: list[bytes]) -> bytes:
    """Remove members in a lex range."""
    lo, hi = parse_lex_bound(a[2]), parse_lex_bound(a[3])
    z = ZSet(c, a[1])
    bounds = lex_range(z, lo, hi) if z.existed else None
    return _remove_items(c, z, list(lex_entries(c, z, bounds)) if bounds else [])


# -- reads ---------------------------------------------------------------------------------------
@command("zscore", 3, "readonly fast", (1, 1, 1), group="sorted-set", since="1.2.0")
def zscore(c: Conn, a: list[bytes]) -> bytes:
    """A member's score."""
    s = ZSet(c, a[1]).score(c, a[2])
    return c.enc.null if s is None else _score(c, s)


@command("zmscore", -3, "readonly fast", (1, 1, 1), group="sorted-set", since="6.2.0")
def zmscore(c: Conn, a: list[bytes]) -> bytes:
    """Several members' scores (nil for missing ones)."""
    scores = ZSet(c, a[1]).scores(c, a[2:])
    return reply.array([c.enc.null if s is None else _score(c, s) for s in scores])


@command("zcard", 2, "readonly fast", (1, 1, 1), group="sorted-set", since="1.2.0")
def zcard(c: Conn, a: list[bytes]) -> bytes:
    """Number of members (O(1): from the metadata)."""
    return reply.integer(ZSet(c, a[1]).size)


@command("zcount", 4, "readonly fast", (1, 1, 1), group="sorted-set", since="2.0.0")
def zcount(c: Conn, a: list[bytes]) -> bytes:
    """Members with scores in [min, max] (O(log n): an engine count)."""
    lo, hi = parse_score_bound(a[2]), parse_score_bound(a[3])
    z = ZSet(c, a[1])
    bounds = score_range(z, lo, hi) if z.existed else None
    return reply.integer(c.db.count(z.sec, *bounds) if bounds else 0)


@command("zlexcount", 4, "readonly fast", (1, 1, 1), group="sorted-set", since="2.8.9")
def zlexcount(c: Conn, a: list[bytes]) -> bytes:
    """Members in a lex range (O(log n))."""
    lo, hi = parse_lex_bound(a[2]), parse_lex_bound(a[3])
    z = ZSet(c, a[1])
    bounds = lex_range(z, lo, hi) if z.existed else None
    return reply.integer(c.db.count(z.prefix, *bounds) if bounds else 0)


def _rank(c: Conn, a: list[bytes], reverse: bool) -> bytes:
    z = ZSet(c, a[1])
    s = z.score(c, a[2])
    if s is None:
        return c.enc.null
    below = c.db.count(z.sec, None, z.sec + sortable(s) + a[2])
    return reply.integer(z.size - 1 - below if reverse else below)


@command("zrank", 3, "readonly fast", (1, 1, 1), group="sorted-set", since="2.0.0")
def zrank(c: Conn, a: list[bytes]) -> bytes:
    """A member's rank, lowest score first (O(log n))."""
    return _rank(c, a, False)


@command("zrevrank", 3, "readonly fast", (1, 1, 1), group="sorted-set", since="2.0.0")
def zrevrank(c: Conn, a: list[bytes]) -> bytes:
    """A member's rank, highest score first."""
    return _rank(c, a, True)


@command("zscan", -3, "readonly", (1, 1, 1), group="sorted-set", since="2.8.0")
def zscan(c: Conn, a: list[bytes]) -> bytes:
    """Iterate members and scores (scores are bulk strings even in RESP3, as Redis)."""
    scan_cursor(a)
    z = ZSet(c, a[1])
    return scan_reply(c, a, z.prefix, z.size, lambda m, v: [
        reply.bulk(m), reply.bulk(format_double(unsortable(v)))])


@command("zrandmember", -2, "readonly", (1, 1, 1), group="sorted-set", since="6.2.0")
def zrandmember(c: Conn, a: list[bytes]) -> bytes:
    """Random members (and scores): positive count distinct, negative may repeat."""
    from tuffdb.server.resp.commands.sets import random_members  # noqa: PLC0415  (cycle)

    return random_members(c, a, lambda: ZSet(c, a[1]), "zrandmember")


# -- pops -----------------------------------------------------------------------------------------
def _pop(c: Conn, z: ZSet, count: int, maximum: bool) -> list[tuple[bytes, float]]:
    items = z.take(c, count, reverse=maximum)
    for m, s in items:
        z.remove(m, s)
    if items:
        z.finish(c, z.meta())
    return items


def _zpop(c: Conn, a: list[bytes], maximum: bool) -> bytes:
    if len(a) > 3:  # noqa: PLR2004
        raise CommandError(SYNTAX)
    count = positive_count(a[2]) if len(a) == 3 else None  # noqa: PLR2004
    z = ZSet(c, a[1])
    if count == 0 or not z.existed:
        return reply.EMPTY_ARRAY
    items = _pop(c, z, 1 if count is None else count, maximum)
    if count is None:
        m, s = items[0]
        return reply.array([reply.bulk(m), _score(c, s)])
    return pairs_reply(c, items, True)


@command("zpopmin", -2, "write fast", (1, 1, 1), group="sorted-set", since="5.0.0")
def zpopmin(c: Conn, a: list[bytes]) -> bytes:
    """Remove and return the lowest-scored members."""
    return _zpop(c, a, False)


@command("zpopmax", -2, "write fast", (1, 1, 1), group="sorted-set", since="5.0.0")
def zpopmax(c: Conn, a: list[bytes]) -> bytes:
    """Remove and return the highest-scored members."""
    return _zpop(c, a, True)


def _bzpop(c: Conn, a: list[bytes], maximum: bool) -> bytes:
    timeout = parse_timeout(a[-1])
    keys = a[1:-1]

    def attempt(key: bytes) -> bytes | None:
        z = ZSet(c, key)
        if not z.size:
            return None
        m, s = _pop(c, z, 1, maximum)[0]
        return reply.array([reply.bulk(key), reply.bulk(m), _score(c, s)])

    return serve_or_wait(c, keys, timeout, attempt, c.enc.null_array, ZSET_TAGS)


@command("bzpopmin", -3, "write noscript fast", (1, -2, 1), group="sorted-set", since="5.0.0")
def bzpopmin(c: Conn, a: list[bytes]) -> bytes:
    """ZPOPMIN from the first non-empty zset, waiting up to timeout seconds."""
    return _bzpop(c, a, False)


@command("bzpopmax", -3, "write noscript fast", (1, -2, 1), group="sorted-set", since="5.0.0")
def bzpopmax(c: Conn, a: list[bytes]) -> bytes:
    """ZPOPMAX from the first non-empty zset, waiting up to timeout seconds."""
    return _bzpop(c, a, True)


def _mpop_from(c: Conn, key: bytes, maximum: bool, count: int) -> bytes | None:
    z = ZSet(c, key)
    if not z.size:
        return None
    items = _pop(c, z, count, maximum)
    return reply.array([reply.bulk(key), reply.array(
        [reply.array([reply.bulk(m), _score(c, s)]) for m, s in items])])


@command("zmpop", -4, "write", (0, 0, 0), group="sorted-set", since="7.0.0")
def zmpop(c: Conn, a: list[bytes]) -> bytes:
    """Pop from the first non-empty zset of several."""
    keys, minimum, count = mpop_args(a, 1, (b"min", b"max"))
    return first_served(keys, lambda key: _mpop_from(c, key, not minimum, count)) \
        or c.enc.null_array


@command("bzmpop", -5, "write", (0, 0, 0), group="sorted-set", since="7.0.0")
def bzmpop(c: Conn, a: list[bytes]) -> bytes:
    """ZMPOP, waiting up to timeout seconds."""
    timeout = parse_timeout(a[1])
    keys, minimum, count = mpop_args(a, 2, (b"min", b"max"))
    return serve_or_wait(c, keys, timeout, lambda key: _mpop_from(c, key, not minimum, count),
                         c.enc.null_array, ZSET_TAGS)


# -- algebra --------------------------------------------------------------------------------------
def store_zset(c: Conn, dst: bytes, items: list[tuple[bytes, float]]) -> None:
    """Overwrite ``dst`` (whatever it held) with a zset of ``items``; empty deletes it."""
    sdst = stored(dst)
    old = c.db.get(sdst)
    ops: list[Op] = []
    if items:
        cid = new_collection(ops, c.srv.ids, dst)
        prefix, sec = elements(cid), secondary(cid)
        for m, s in items:
            enc = sortable(s)
            ops.append((prefix + m, enc))
            ops.append((sec + enc + m, b""))
        ops.append((sdst, META.pack(TAG_ZSET, cid, len(items))))
    elif old is not None:
        ops.append((sdst, None))
    commit(c, dst, ops)
    if old is not None:
        c.srv.dropped(old)
    if items:
        c.srv.signal(dst, ops[-1][1])


def _members_with_scores(c: Conn, key: bytes) -> dict[bytes, float] | None:
    """A zset's members and scores, or a set's members at score 1; None if absent."""
    raw = c.db.get(stored(key))
    if raw is None:
        return None
    if raw[0] == TAG_SET:
        prefix = elements(int(META.unpack_from(raw)[1]))
        n = len(prefix)
        return {k[n:]: 1.0 for k in c.db.keys_in_range(prefix)}
    z = ZSet(c, key)
    return dict(z.entries(c))


def _aggregate(how: bytes, old: float, new: float) -> float:
    if how == b"min":
        return min(old, new)
    if how == b"max":
        return max(old, new)
    total = old + new
    return 0.0 if math.isnan(total) else total


def _algebra(c: Conn, a: list[bytes], op: str, first: int, store: bool) -> bytes:  # noqa: C901, PLR0912
    """ZUNION/ZINTER/ZDIFF[STORE]: ``a[first]`` is numkeys."""
    n = to_int(a[first])
    if n < 1:
        raise CommandError(f"ERR at least 1 input key is needed for "
                           f"'{a[0].lower().decode()}' command")
    if n > len(a) - first - 1:
        raise CommandError(SYNTAX)
    keys = a[first + 1 : first + 1 + n]
    for key in keys:  # WRONGTYPE before the options are looked at (as Redis)
        raw = c.db.get(stored(key))
        if raw is not None and raw[0] not in (TAG_ZSET, TAG_SET):
            raise CommandError(WRONGTYPE)
    weights = [1.0] * n
    how = b"sum"
    withscores = False
    limit = 0
    j = first + 1 + n
    while j < len(a):
        left = len(a) - j
        opt = a[j].lower()
        if op in ("union", "inter") and left >= n + 1 and opt == b"weights":
            weights = [to_score(x, "ERR weight value is not a float")
                       for x in a[j + 1 : j + 1 + n]]
            j += n + 1
        elif op in ("union", "inter") and left >= 2 and opt == b"aggregate":  # noqa: PLR2004
            how = a[j + 1].lower()
            if how not in (b"sum", b"min", b"max"):
                raise CommandError(SYNTAX)
            j += 2
        elif op == "card" and left >= 2 and opt == b"limit":  # noqa: PLR2004
            limit = to_int(a[j + 1], "ERR LIMIT can't be negative")
            if limit < 0:
                raise CommandError("ERR LIMIT can't be negative")
            j += 2
        elif not store and op != "card" and opt == b"withscores":
            withscores = True
            j += 1
        else:
            raise CommandError(SYNTAX)
    sources = [_members_with_scores(c, k) for k in keys]
    result: dict[bytes, float] = {}
    if op == "union":
        for src, w in zip(sources, weights, strict=True):
            for m, s in (src or {}).items():
                x = s * w
                if math.isnan(x):
                    x = 0.0
                result[m] = x if m not in result else _aggregate(how, result[m], x)
    elif op in ("inter", "card"):
        if all(src for src in sources):
            ordered = sorted(zip(sources, weights, strict=True), key=lambda p: len(p[0] or {}))
            base, w0 = ordered[0]
            for m, s in (base or {}).items():
                x = s * w0
                if math.isnan(x):
                    x = 0.0
                for src, w in ordered[1:]:
                    assert src is not None
                    other = src.get(m)
                    if other is None:
                        break
                    y = other * w
                    if math.isnan(y):
                        y = 0.0
                    x = _aggregate(how, x, y)
                else:
                    result[m] = x
    else:
        base = sources[0] or {}
        others = [src for src in sources[1:] if src]
        result = {m: s for m, s in base.items() if not any(m in o for o in others)}
    if op == "card":
        return reply.integer(min(len(result), limit) if limit else len(result))
    items = sorted(result.items(), key=lambda p: (p[1], p[0]))
    if store:
        store_zset(c, a[1], items)
        return reply.integer(len(items))
    return pairs_reply(c, items, withscores)


@command("zunionstore", -4, "write denyoom", (1, 1, 1), group="sorted-set", since="2.0.0")
def zunionstore(c: Conn, a: list[bytes]) -> bytes:
    """Union of zsets (and sets) into a key: WEIGHTS, AGGREGATE."""
    return _algebra(c, a, "union", 2, True)


@command("zinterstore", -4, "write denyoom", (1, 1, 1), group="sorted-set", since="2.0.0")
def zinterstore(c: Conn, a: list[bytes]) -> bytes:
    """Intersection of zsets (and sets) into a key: WEIGHTS, AGGREGATE."""
    return _algebra(c, a, "inter", 2, True)


@command("zdiffstore", -4, "write denyoom", (1, 1, 1), group="sorted-set", since="6.2.0")
def zdiffstore(c: Conn, a: list[bytes]) -> bytes:
    """Members of the first zset in none of the others, into a key."""
    return _algebra(c, a, "diff", 2, True)


@command("zunion", -3, "readonly", (0, 0, 0), group="sorted-set", since="6.2.0")
def zunion(c: Conn, a: list[bytes]) -> bytes:
    """Union of zsets (and sets)."""
    return _algebra(c, a, "union", 1, False)


@command("zinter", -3, "readonly", (0, 0, 0), group="sorted-set", since="6.2.0")
def zinter(c: Conn, a: list[bytes]) -> bytes:
    """Intersection of zsets (and sets)."""
    return _algebra(c, a, "inter", 1, False)


@command("zdiff", -3, "readonly", (0, 0, 0), group="sorted-set", since="6.2.0")
def zdiff(c: Conn, a: list[bytes]) -> bytes:
    """Members of the first zset in none of the others."""
    return _algebra(c, a, "diff", 1, False)


@command("zintercard", -3, "readonly", (0, 0, 0), group="sorted-set", since="7.0.0")
def zintercard(c: Conn, a: list[bytes]) -> bytes:
    """How many members ZINTER would return (LIMIT stops counting early)."""
    return _algebra(c, a, "card", 1, False)
