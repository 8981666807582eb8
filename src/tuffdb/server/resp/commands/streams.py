"""Stream commands: entries, trimming, XRANGE, XREAD and XREADGROUP (groups: stream_groups.py).

A stream is metadata ``(id, length, last id, max deleted id, entries added)`` plus one
entry per stream entry under ``ms u64 | seq u64`` (byte order = id order, so XRANGE and
XREVRANGE are seeks), and secondary records for consumer groups (docs/format/resp.md):

    g | group                    -> msgpack [last ms, last seq, entries read or -1]
    c | len u32 | group | name   -> msgpack [seen ms]
    p | len u32 | group | ms seq -> msgpack [consumer, delivery ms, delivery count]

An emptied stream stays (as in Redis). ``~`` trimming is exact here (Redis may keep a
few more entries; both are valid).
"""

from __future__ import annotations

import itertools
import re
import struct
import time
from typing import TYPE_CHECKING, Any

import msgspec

from tuffdb._format.resp import STREAM_META, TAG_STREAM, U64_PAIR
from tuffdb.server.resp import reply
from tuffdb.server.resp.commands.collection import batchable, commit, commit_batch
from tuffdb.server.resp.commands.common import to_int
from tuffdb.server.resp.commands.lists import serve_or_wait
from tuffdb.server.resp.keyspace import (
    Op,
    elements,
    lookup,
    meta_op,
    new_collection,
    secondary,
    stored,
)
from tuffdb.server.resp.table import SYNTAX, CommandError, batched, command

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    from tuffdb.server.resp.conn import Conn

STREAM_TAGS = frozenset((TAG_STREAM,))
U64_MAX = (1 << 64) - 1
MAX_ID = (U64_MAX, U64_MAX)
INVALID_ID = "ERR Invalid stream ID specified as stream command argument"
INVALID_READ = -1  # a group's entries-read counter that is not known
_LEN = struct.Struct(">I")
_encode = msgspec.msgpack.Encoder().encode
_decode_fields = msgspec.msgpack.Decoder(list[bytes]).decode
decode_any = msgspec.msgpack.Decoder().decode
_DIGITS = re.compile(rb"\s*\+?[0-9]+\Z")

Id = tuple[int, int]


# -- ids ---------------------------------------------------------------------------------------
def _u64(raw: bytes) -> int | None:
    """Redis's string2ull: a strict int64, else what strtoull accepts (whole string)."""
    if raw[:1] == b"-":
        return None
    if not _DIGITS.match(raw):
        return None
    n = int(raw)
    return n if n <= U64_MAX else None


def parse_id(raw: bytes, missing_seq: int = 0, *, strict: bool = False,
             auto_seq: bool = False) -> tuple[Id, bool]:
    """(id, seq given) of ``ms-seq``, ``ms`` (seq = ``missing_seq``), ``-``/``+`` (not when
    ``strict``) or ``ms-*`` (``auto_seq``: XADD)."""
    if raw in (b"-", b"+"):
        if strict:
            raise CommandError(INVALID_ID)
        return ((0, 0) if raw == b"-" else MAX_ID), True
    ms_raw, dash, seq_raw = raw.partition(b"-")
    ms = _u64(ms_raw)
    if ms is None:
        raise CommandError(INVALID_ID)
    if not dash:
        return (ms, missing_seq), True
    if auto_seq and seq_raw == b"*":
        return (ms, 0), False
    seq = _u64(seq_raw)
    if seq is None:
        raise CommandError(INVALID_ID)
    return (ms, seq), True


def id_text(i: Id) -> bytes:
    return b"%d-%d" % i


def _id_key(i: Id) -> bytes:
    return U64_PAIR.pack(i[0], i[1])


def _incr(i: Id) -> Id | None:
    ms, seq = i
    if seq < U64_MAX:
        return ms, seq + 1
    return (ms + 1, 0) if ms < U64_MAX else None


def _decr(i: Id) -> Id | None:
    ms, seq = i
    if seq > 0:
        return ms, seq - 1
    return (ms - 1, U64_MAX) if ms > 0 else None


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# -- one stream ----------------------------------------------------------------------------------
class Stream:
    """A stream being read or changed by one command."""

    __slots__ = ("added", "cid", "existed", "key", "last", "length", "maxdel", "ops", "prefix",
                 "sec", "skey")
    added: int
    cid: int
    length: int

    def __init__(self, c: Conn, key: bytes, *, create: bool = False) -> None:
        self.key = key
        self.skey = stored(key)
        self.ops: list[Op] = []
        raw = lookup(c.db, key, TAG_STREAM)
        self.existed = raw is not None
        if raw is not None:
            (_, self.cid, self.length, lms, lseq, dms, dseq,
             self.added) = STREAM_META.unpack(raw)
            self.last: Id = (lms, lseq)
            self.maxdel: Id = (dms, dseq)
        else:
            self.cid = new_collection(self.ops, c.srv.ids, key) if create else 0
            self.length = self.added = 0
            self.last = self.maxdel = (0, 0)
        self.prefix = elements(self.cid)
        self.sec = secondary(self.cid)

    def meta(self) -> bytes:
        last, maxdel = self.last, self.maxdel
        return STREAM_META.pack(TAG_STREAM, self.cid, self.length, last[0], last[1], maxdel[0],
                                maxdel[1], self.added)

    def finish(self, c: Conn, *, signal: bool = False, touch: bool = True) -> None:
        """Queue the metadata (an emptied stream stays), write, notify (``touch``: see
        ``collection.commit``)."""
        meta = self.meta()
        self.ops.append(meta_op(self.skey, meta, self.existed))
        commit(c, self.key, self.ops, touch=touch)
        self.existed = True
        self.ops = []
        if signal:
            c.srv.signal(self.key, meta)

    # -- entries
    def entries(self, c: Conn, start: Id, end: Id, *, reverse: bool = False
                ) -> Iterator[tuple[Id, list[bytes]]]:
        if not self.existed or start > end:
            return
        p = self.prefix
        n = len(p)
        hi = _incr(end)
        for k, v in c.db.scan(p, p + _id_key(start), None if hi is None else p + _id_key(hi),
                              reverse=reverse):
            yield U64_PAIR.unpack_from(k, n), _decode_fields(v)

    def entry(self, c: Conn, i: Id) -> list[bytes] | None:
        raw = c.db.get(self.prefix + _id_key(i)) if self.existed else None
        return None if raw is None else _decode_fields(raw)

    def first_id(self, c: Conn) -> Id:
        for i, _ in self.entries(c, (0, 0), MAX_ID):
            return i
        return (0, 0)

    def delete(self, i: Id) -> None:
        self.ops.append((self.prefix + _id_key(i), None))
        self.length -= 1

    # -- groups
    def group_key(self, group: bytes) -> bytes:
        return self.sec + b"g" + group

    def group(self, c: Conn, group: bytes) -> list[Any] | None:
        """[last ms, last seq, entries read] or None."""
        if not self.existed:
            return None
        raw = c.db.get(self.group_key(group))
        return None if raw is None else list(decode_any(raw))

    def put_group(self, group: bytes, state: list[Any]) -> None:
        self.ops.append((self.group_key(group), _encode(state)))

    def groups(self, c: Conn) -> list[tuple[bytes, list[Any]]]:
        p = self.sec + b"g"
        n = len(p)
        return [(k[n:], list(decode_any(v))) for k, v in c.db.scan(p)]

    def _scoped(self, kind: bytes, group: bytes) -> bytes:
        return self.sec + kind + _LEN.pack(len(group)) + group

    def consumer_key(self, group: bytes, name: bytes) -> bytes:
        return self._scoped(b"c", group) + name

    def consumers(self, c: Conn, group: bytes) -> list[tuple[bytes, int]]:
        """(name, seen ms) of every consumer of ``group``, by name."""
        p = self._scoped(b"c", group)
        n = len(p)
        return [(k[n:], int(decode_any(v)[0])) for k, v in c.db.scan(p)]

    def touch_consumer(self, group: bytes, name: bytes, now: int) -> None:
        self.ops.append((self.consumer_key(group, name), _encode([now])))

    def pel_key(self, group: bytes, i: Id) -> bytes:
        return self._scoped(b"p", group) + _id_key(i)

    def pending(self, c: Conn, group: bytes, start: Id = (0, 0), end: Id = MAX_ID
                ) -> Iterator[tuple[Id, bytes, int, int]]:
        """(id, consumer, delivery ms, deliveries) of the group's PEL in id order."""
        if start > end:
            return
        p = self._scoped(b"p", group)
        n = len(p)
        hi = _incr(end)
        for k, v in c.db.scan(p, p + _id_key(start), None if hi is None else p + _id_key(hi)):
            consumer, when, count = decode_any(v)
            yield U64_PAIR.unpack_from(k, n), consumer, int(when), int(count)

    def put_pending(self, group: bytes, i: Id, consumer: bytes, when: int, count: int) -> None:
        self.ops.append((self.pel_key(group, i), _encode([consumer, when, count])))

    def has_tombstones(self, start: Id | None = None) -> bool:
        """Redis's streamRangeHasTombstones(s, start, NULL)."""
        if not self.length or self.maxdel == (0, 0):
            return False
        return (start or (0, 0)) <= self.maxdel

    def estimate_read(self, c: Conn, i: Id) -> int:
        """Redis's streamEstimateDistanceFromFirstEverEntry."""
        if not self.added:
            return 0
        if not self.length and i <= self.last:
            return self.added
        if i == self.last:
            return self.added
        if i > self.last:
            return INVALID_READ
        first = self.first_id(c)
        if self.maxdel == (0, 0) or self.maxdel < first:
            if i < first:
                return self.added - self.length
            if i == first:
                return self.added - self.length + 1
        return INVALID_READ

    def lag(self, c: Conn, state: list[Any]) -> int | None:
        if not self.added:
            return 0
        read = int(state[2])
        if read != INVALID_READ and not self.has_tombstones((state[0], state[1])):
            return self.added - read
        read = self.estimate_read(c, (state[0], state[1]))
        return None if read == INVALID_READ else self.added - read


# -- replies --------------------------------------------------------------------------------------
def entry_reply(c: Conn, i: Id, fields: list[bytes] | None) -> bytes:
    body = c.enc.null_array if fields is None else c.enc.bulks(fields)  # type: ignore[arg-type]
    return reply.array([reply.bulk(id_text(i)), body])


def entries_reply(c: Conn, items: list[tuple[Id, list[bytes]]]) -> bytes:
    return reply.array([entry_reply(c, i, f) for i, f in items])


def _streams_reply(c: Conn, per_key: list[tuple[bytes, bytes]]) -> bytes:
    """XREAD/XREADGROUP: [[key, entries], ...] (RESP3: a map)."""
    if not per_key:
        return c.enc.null_array
    if c.enc.proto == 3:  # noqa: PLR2004
        return c.enc.map([(reply.bulk(k), v) for k, v in per_key])
    return reply.array([reply.array([reply.bulk(k), v]) for k, v in per_key])


# -- XADD / trimming --------------------------------------------------------------------------------
def _trim_args(a: list[bytes], i: int, xadd: bool) -> tuple[int, dict[str, Any]]:  # noqa: C901, PLR0912
    """Redis's streamParseAddOrTrimArgsOrReply; returns (index after the options, args)."""
    args: dict[str, Any] = {"strategy": None, "approx": False, "maxlen": 0, "minid": (0, 0),
                            "limit": 0, "nomk": False, "id": None, "seq_given": True}
    limit_given = False
    while i < len(a):
        more = len(a) - 1 - i
        opt = a[i].lower()
        if xadd and a[i] == b"*":
            break
        if opt in (b"maxlen", b"minid") and more:
            if args["strategy"] is not None:
                raise CommandError("ERR syntax error, MAXLEN and MINID options at the same time "
                                   "are not compatible")
            args["approx"] = False
            nxt = a[i + 1]
            if more >= 2 and nxt in (b"~", b"="):  # noqa: PLR2004
                args["approx"] = nxt == b"~"
                i += 1
            if opt == b"maxlen":
                args["maxlen"] = to_int(a[i + 1])
                if args["maxlen"] < 0:
                    raise CommandError("ERR The MAXLEN argument must be >= 0.")
            else:
                args["minid"] = parse_id(a[i + 1], strict=True)[0]
            args["strategy"] = opt
            i += 1
        elif opt == b"limit" and more:
            args["limit"] = to_int(a[i + 1])
            if args["limit"] < 0:
                raise CommandError("ERR The LIMIT argument must be >= 0.")
            limit_given = True
            i += 1
        elif xadd and opt == b"nomkstream":
            args["nomk"] = True
        elif xadd:
            args["id"], args["seq_given"] = parse_id(a[i], strict=True, auto_seq=True)
            break
        else:
            raise CommandError(SYNTAX)
        i += 1
    if args["limit"] and args["strategy"] is None:
        raise CommandError("ERR syntax error, LIMIT cannot be used without specifying a "
                           "trimming strategy")
    if not xadd and args["strategy"] is None:
        raise CommandError("ERR syntax error, XTRIM must be called with a trimming strategy")
    if limit_given and not args["approx"]:
        raise CommandError("ERR syntax error, LIMIT cannot be used without the special ~ "
                           "option")
    return i, args


def _trim(c: Conn, s: Stream, args: dict[str, Any], added: Id | None = None) -> int:
    """Delete entries from the head by MAXLEN or MINID (exactly; LIMIT caps an approximate
    trim). The number deleted. ``added``: the entry XADD has just queued (not yet in the
    store, after every stored one), which the trim may take too (MAXLEN 0, or a MINID past
    it), as Redis trims after appending."""
    if args["strategy"] is None:
        return 0
    cap = args["limit"] if args["approx"] and args["limit"] else None
    gone = 0
    ids: Iterable[Id] = (i for i, _ in s.entries(c, (0, 0), MAX_ID))
    if added is not None:
        ids = itertools.chain(ids, (added,))
    for i in ids:
        if args["strategy"] == b"maxlen":
            if s.length <= args["maxlen"]:
                break
        elif i >= args["minid"]:
            break
        if cap is not None and gone >= cap:
            break
        s.delete(i)
        gone += 1
    return gone


@command("xadd", -5, "write denyoom fast", (1, 1, 1), group="stream", since="5.0.0")
def xadd(c: Conn, a: list[bytes]) -> bytes:
    """Append an entry (id ``*``, ``ms-*`` or explicit); optionally trim."""
    pos, args = _xadd_args(a)
    s = Stream(c, a[1])
    if not s.existed:
        if args["nomk"]:
            return c.enc.null
        s = Stream(c, a[1], create=True)
    new = _append(s, a, pos, args)
    _trim(c, s, args, new)
    s.finish(c, signal=True)
    return reply.bulk(id_text(new))


@batched("xadd")
def xadd_batch(c: Conn, cmds: list[list[bytes]]) -> list[bytes]:
    """Pipelined XADDs without trimming or NOMKSTREAM: one metadata read per stream and
    one write_batch for them all (a trimming XADD reads the entries it deletes, which
    must be written first: those pipelines run one by one, as does one with an error,
    before anything is written)."""
    if not batchable(c, cmds, 5, exact=False):
        return []
    states: dict[bytes, Stream] = {}
    out = []
    try:
        for a in cmds:
            pos, args = _xadd_args(a)
            if args["strategy"] is not None or args["nomk"]:
                return []
            s = states.get(a[1])
            if s is None:
                s = states[a[1]] = Stream(c, a[1], create=True)
            out.append(reply.bulk(id_text(_append(s, a, pos, args))))
    except CommandError:
        return []
    ops: list[Op] = []
    for s in states.values():
        ops += s.ops
        ops.append(meta_op(s.skey, s.meta(), s.existed))
    commit_batch(c, ops, list(states))
    for s in states.values():
        c.srv.signal(s.key, s.meta())
    return out


def _xadd_args(a: list[bytes]) -> tuple[int, dict[str, Any]]:
    """XADD's options and id (``a[pos]``), checked; the field-value pairs follow."""
    pos, args = _trim_args(a, 2, True)
    if len(a) - pos < 3 or (len(a) - pos) % 2 == 0:  # noqa: PLR2004  (the id + pairs)
        raise CommandError("ERR wrong number of arguments for 'xadd' command")
    given: Id | None = args["id"]
    if given is not None and args["seq_given"] and given == (0, 0):
        raise CommandError("ERR The ID specified in XADD must be greater than 0-0")
    return pos, args


def _append(s: Stream, a: list[bytes], pos: int, args: dict[str, Any]) -> Id:
    """Queue XADD's entry (the field-value pairs after ``a[pos]``) in ``s``; its id."""
    if s.last == MAX_ID:
        raise CommandError("ERR The stream has exhausted the last possible ID, unable to add "
                           "more items")
    given: Id | None = args["id"]
    if given is None:
        ms = max(now_ms(), s.last[0])
        new: Id = (ms, s.last[1] + 1) if ms == s.last[0] else (ms, 0)
        if new[1] > U64_MAX:
            new = (ms + 1, 0)
    elif not args["seq_given"]:
        if given[0] == s.last[0]:
            if s.last[1] == U64_MAX:
                raise CommandError("ERR The ID specified in XADD is equal or smaller than the "
                                   "target stream top item")
            new = (given[0], s.last[1] + 1)
        else:
            new = given
    else:
        new = given
    if new <= s.last:
        raise CommandError("ERR The ID specified in XADD is equal or smaller than the target "
                           "stream top item")
    s.ops.append((s.prefix + _id_key(new), _encode(a[pos + 1 :])))
    s.length += 1
    s.added += 1
    s.last = new
    return new


@command("xtrim", -4, "write", (1, 1, 1), group="stream", since="5.0.0")
def xtrim(c: Conn, a: list[bytes]) -> bytes:
    """Trim a stream by MAXLEN or MINID; reply how many entries went."""
    pos, args = _trim_args(a, 2, False)
    if pos != len(a):
        raise CommandError(SYNTAX)
    s = Stream(c, a[1])
    if not s.existed:
        return reply.ZERO
    gone = _trim(c, s, args)
    if gone:
        s.finish(c)
    return reply.integer(gone)


@command("xdel", -3, "write fast", (1, 1, 1), group="stream", since="5.0.0")
def xdel(c: Conn, a: list[bytes]) -> bytes:
    """Delete entries by id; reply how many existed."""
    s = Stream(c, a[1])
    if not s.existed:  # before the ids are read (as Redis)
        return reply.ZERO
    ids = [parse_id(x, strict=True)[0] for x in a[2:]]
    gone = 0
    for i in dict.fromkeys(ids):
        if s.entry(c, i) is not None:
            s.delete(i)
            gone += 1
            s.maxdel = max(s.maxdel, i)
    if gone:
        s.finish(c)
    return reply.integer(gone)


@command("xlen", 2, "readonly fast", (1, 1, 1), group="stream", since="5.0.0")
def xlen(c: Conn, a: list[bytes]) -> bytes:
    """Number of entries (O(1): from the metadata)."""
    return reply.integer(Stream(c, a[1]).length)


@command("xsetid", -3, "write denyoom fast", (1, 1, 1), group="stream", since="5.0.0")
def xsetid(c: Conn, a: list[bytes]) -> bytes:  # noqa: C901
    """Set a stream's last id (and ENTRIESADDED, MAXDELETEDID)."""
    new = parse_id(a[2], strict=True)[0]
    added = -1
    maxdel = (0, 0)
    i = 3
    while i < len(a):
        opt = a[i].lower()
        if opt == b"entriesadded" and i + 1 < len(a):
            added = to_int(a[i + 1])
            if added < 0:
                raise CommandError("ERR entries_added must be positive")
        elif opt == b"maxdeletedid" and i + 1 < len(a):
            maxdel = parse_id(a[i + 1], strict=True)[0]
            if new < maxdel:
                raise CommandError("ERR The ID specified in XSETID is smaller than the provided "
                                   "max_deleted_entry_id")
        else:
            raise CommandError(SYNTAX)
        i += 2
    s = Stream(c, a[1])
    if not s.existed:
        raise CommandError("ERR no such key")
    if s.length > 0:
        top = next(iter(s.entries(c, (0, 0), MAX_ID, reverse=True)))[0]
        if new < top:
            raise CommandError("ERR The ID specified in XSETID is smaller than the target "
                               "stream top item")
        if added != -1 and s.length > added:
            raise CommandError("ERR The entries_added specified in XSETID is smaller than the "
                               "target stream length")
    s.last = new
    if added != -1:
        s.added = added
    if maxdel != (0, 0):
        s.maxdel = maxdel
    s.finish(c, touch=False)  # not a change to WATCH (Redis 7.0)
    return reply.OK


# -- reading ----------------------------------------------------------------------------------------
def interval(lo_raw: bytes, hi_raw: bytes) -> tuple[Id, Id]:
    """XRANGE/XPENDING bounds: ``-``/``+``, a bare ``ms``, ``(`` exclusive; inclusive ids."""
    lo_ex = lo_raw[:1] == b"(" and len(lo_raw) > 1
    hi_ex = hi_raw[:1] == b"(" and len(hi_raw) > 1
    lo = parse_id(lo_raw[1:] if lo_ex else lo_raw, 0, strict=lo_ex)[0]
    hi = parse_id(hi_raw[1:] if hi_ex else hi_raw, U64_MAX, strict=hi_ex)[0]
    if lo_ex:
        nxt = _incr(lo)
        if nxt is None:
            raise CommandError("ERR invalid start ID for the interval")
        lo = nxt
    if hi_ex:
        prv = _decr(hi)
        if prv is None:
            raise CommandError("ERR invalid end ID for the interval")
        hi = prv
    return lo, hi


def _range(c: Conn, a: list[bytes], reverse: bool) -> bytes:
    lo, hi = interval(*((a[3], a[2]) if reverse else (a[2], a[3])))
    count: int | None = None
    if len(a) > 4:  # noqa: PLR2004
        if len(a) != 6 or a[4].lower() != b"count":  # noqa: PLR2004
            raise CommandError(SYNTAX)
        count = max(to_int(a[5]), 0)
    s = Stream(c, a[1])
    if count == 0 and s.existed:  # (no key: an empty array, as Redis)
        return c.enc.null_array
    items = []
    for item in s.entries(c, lo, hi, reverse=reverse):
        items.append(item)
        if count is not None and len(items) >= count:
            break
    return entries_reply(c, items)


@command("xrange", -4, "readonly", (1, 1, 1), group="stream", since="5.0.0")
def xrange(c: Conn, a: list[bytes]) -> bytes:
    """Entries with ids in [start, end] (``-``/``+``, ``(`` exclusive); COUNT."""
    return _range(c, a, False)


@command("xrevrange", -4, "readonly", (1, 1, 1), group="stream", since="5.0.0")
def xrevrange(c: Conn, a: list[bytes]) -> bytes:
    """XRANGE backwards (end first)."""
    return _range(c, a, True)


def _read_args(a: list[bytes], group: bool) -> tuple[int | None, int | None, bool, list[bytes],  # noqa: C901
                                                     list[bytes], bytes, bytes, int]:
    """XREAD/XREADGROUP options: (count, block ms, noack, keys, ids, group, consumer, at)."""
    count: int | None = None
    block: int | None = None
    noack = False
    gname = cname = b""
    i = 1
    streams_at = 0
    while i < len(a):
        opt = a[i].lower()
        more = len(a) - i - 1
        if opt == b"block" and more:
            block = to_int(a[i + 1], "ERR timeout is not an integer or out of range")
            if block < 0:
                raise CommandError("ERR timeout is negative")
            i += 2
        elif opt == b"count" and more:
            count = to_int(a[i + 1])
            count = max(count, 0)
            i += 2
        elif opt == b"streams" and more:
            streams_at = i + 1
            break
        elif group and opt == b"group" and more >= 2:  # noqa: PLR2004
            gname, cname = a[i + 1], a[i + 2]
            i += 3
        elif group and opt == b"noack":
            noack = True
            i += 1
        else:
            raise CommandError(SYNTAX)
    if not streams_at:
        raise CommandError(SYNTAX)
    rest = a[streams_at:]
    if len(rest) % 2:
        raise CommandError("ERR Unbalanced XREAD list of streams: for each stream key an ID or "
                           "'$' must be specified.")
    if group and not gname:
        raise CommandError("ERR Missing GROUP option for XREADGROUP")
    half = len(rest) // 2
    return count or None, block, noack, rest[:half], rest[half:], gname, cname, 0


@command("xread", -4, "readonly blocking", (0, 0, 0), group="stream", since="5.0.0")
def xread(c: Conn, a: list[bytes]) -> bytes:
    """Read entries after ids from one or more streams; BLOCK ms waits (``$``: new ones)."""
    count, block, _, keys, raw_ids, _, _, _ = _read_args(a, False)
    if block is not None and c.in_script():
        raise CommandError("ERR xread command is not allowed with BLOCK option from scripts")
    after: dict[bytes, Id] = {}
    for key, raw in zip(keys, raw_ids, strict=True):
        s = Stream(c, key)  # WRONGTYPE before anything
        if raw == b"$":
            after[key] = s.last
        else:
            after[key] = parse_id(raw, 0)[0]

    def read(key: bytes) -> bytes | None:
        s = Stream(c, key)
        start = _incr(after[key])
        if start is None:
            return None
        items = []
        for item in s.entries(c, start, MAX_ID):
            items.append(item)
            if count is not None and len(items) >= count:
                break
        return entries_reply(c, items) if items else None

    return _read_or_wait(c, list(dict.fromkeys(keys)), block, read)


def _read_or_wait(c: Conn, keys: list[bytes], block: int | None,
                  read: Callable[[bytes], bytes | None]) -> bytes:
    """XREAD/XREADGROUP: every stream with something to read, else wait (BLOCK ms) for
    the first that gets something."""
    out = []
    for key in keys:
        got = read(key)
        if got is not None:
            out.append((key, got))
    if out or block is None:
        return _streams_reply(c, out)

    def attempt(key: bytes) -> bytes | None:
        got = read(key)
        return None if got is None else _streams_reply(c, [(key, got)])

    return serve_or_wait(c, keys, block / 1000, attempt, c.enc.null_array, STREAM_TAGS)


def _nogroup(key: bytes, group: bytes) -> CommandError:
    return CommandError(f"NOGROUP No such key '{key.decode('utf-8', 'replace')}' or consumer "
                        f"group '{group.decode('utf-8', 'replace')}' in XREADGROUP with GROUP "
                        "option")


def _read_group(c: Conn, key: bytes, gname: bytes, cname: bytes, raw_id: bytes,
                count: int | None, noack: bool) -> bytes | None:
    """One stream of XREADGROUP; None when ``>`` finds nothing new."""
    s = Stream(c, key)
    state = s.group(c, gname)
    if state is None:
        raise _nogroup(key, gname)
    now = now_ms()
    items: list[tuple[Id, list[bytes] | None]] = []
    if raw_id == b">":
        last = (state[0], state[1])
        start = _incr(last)
        if start is not None:
            for i, fields in s.entries(c, start, MAX_ID):
                items.append((i, fields))
                if state[2] != INVALID_READ and not s.has_tombstones(i):
                    state[2] += 1
                elif s.added:
                    state[2] = s.estimate_read(c, i)
                state[0], state[1] = i
                if not noack:
                    s.put_pending(gname, i, cname, now, 1)
                if count is not None and len(items) >= count:
                    break
        if not items:  # nothing served: the consumer is not made or seen (as Redis 7.0)
            return None
        s.put_group(gname, state)
    else:
        start = parse_id(raw_id, 0)[0]
        for i, owner, _, deliveries in s.pending(c, gname, start):
            if owner != cname:
                continue
            items.append((i, s.entry(c, i)))
            s.put_pending(gname, i, cname, now, deliveries + 1)
            if count is not None and len(items) >= count:
                break
    s.touch_consumer(gname, cname, now)
    commit(c, key, s.ops, touch=False)
    return reply.array([entry_reply(c, i, f) for i, f in items])


@command("xreadgroup", -7, "write blocking", (0, 0, 0), group="stream", since="5.0.0")
def xreadgroup(c: Conn, a: list[bytes]) -> bytes:
    """Read as a consumer of a group: ``>`` new entries (into the PEL), an id: own history."""
    count, block, noack, keys, raw_ids, gname, cname, _ = _read_args(a, True)
    if block is not None and c.in_script():
        raise CommandError("ERR xreadgroup command is not allowed with BLOCK option from "
                           "scripts")
    for key, raw in zip(keys, raw_ids, strict=True):
        s = Stream(c, key)
        if s.group(c, gname) is None:
            raise _nogroup(key, gname)
        if raw == b"$":
            raise CommandError(
                "ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the "
                "history of this consumer by specifying a proper ID, or use the > ID to get new "
                "messages. The $ ID would just return an empty result set.")
        if raw != b">":
            parse_id(raw, 0)
    ids = dict(zip(keys, raw_ids, strict=True))

    def read(key: bytes) -> bytes | None:
        return _read_group(c, key, gname, cname, ids[key], count, noack)

    blocks = block if all(r == b">" for r in raw_ids) else None
    return _read_or_wait(c, list(ids), blocks, read)
