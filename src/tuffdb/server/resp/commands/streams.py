"""Stream commands and consumer groups.

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

import re
import struct
import time
from typing import TYPE_CHECKING, Any

import msgspec

from tuffdb._format.resp import STREAM_META, TAG_STREAM, U64_PAIR
from tuffdb.server.resp import reply
from tuffdb.server.resp.commands.collection import commit
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
from tuffdb.server.resp.table import SYNTAX, CommandError, command

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from tuffdb.server.resp.conn import Conn

STREAM_TAGS = frozenset((TAG_STREAM,))
U64_MAX = (1 << 64) - 1
MAX_ID = (U64_MAX, U64_MAX)
INVALID_ID = "ERR Invalid stream ID specified as stream command argument"
INVALID_READ = -1  # a group's entries-read counter that is not known
_LEN = struct.Struct(">I")
_encode = msgspec.msgpack.Encoder().encode
_decode_fields = msgspec.msgpack.Decoder(list[bytes]).decode
_decode_any = msgspec.msgpack.Decoder().decode
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
    return U64_PAIR.pack(*i)


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


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


# -- one stream ----------------------------------------------------------------------------------
class Stream:
    """A stream being read or changed by one command."""

    __slots__ = ("added", "cid", "existed", "key", "last", "length", "maxdel", "ops", "prefix",
                 "sec", "skey")

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
        return STREAM_META.pack(TAG_STREAM, self.cid, self.length, *self.last, *self.maxdel,
                                self.added)

    def finish(self, c: Conn, *, signal: bool = False) -> None:
        """Queue the metadata (an emptied stream stays), write, notify."""
        self.ops.append(meta_op(self.skey, self.meta(), self.existed))
        commit(c, self.key, self.ops)
        self.existed = True
        self.ops = []
        if signal:
            c.srv.signal(self.key, self.meta())

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
        return None if raw is None else list(_decode_any(raw))

    def put_group(self, group: bytes, state: list[Any]) -> None:
        self.ops.append((self.group_key(group), _encode(state)))

    def groups(self, c: Conn) -> list[tuple[bytes, list[Any]]]:
        p = self.sec + b"g"
        n = len(p)
        return [(k[n:], list(_decode_any(v))) for k, v in c.db.scan(p)]

    def _scoped(self, kind: bytes, group: bytes) -> bytes:
        return self.sec + kind + _LEN.pack(len(group)) + group

    def consumer_key(self, group: bytes, name: bytes) -> bytes:
        return self._scoped(b"c", group) + name

    def consumers(self, c: Conn, group: bytes) -> list[tuple[bytes, int]]:
        """(name, seen ms) of every consumer of ``group``, by name."""
        p = self._scoped(b"c", group)
        n = len(p)
        return [(k[n:], int(_decode_any(v)[0])) for k, v in c.db.scan(p)]

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
            consumer, when, count = _decode_any(v)
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


def _trim(c: Conn, s: Stream, args: dict[str, Any]) -> int:
    """Delete entries from the head by MAXLEN or MINID (exactly; LIMIT caps an approximate
    trim). The number deleted."""
    if args["strategy"] is None:
        return 0
    cap = args["limit"] if args["approx"] and args["limit"] else None
    gone = 0
    for i, _ in s.entries(c, (0, 0), MAX_ID):
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
    pos, args = _trim_args(a, 2, True)
    if len(a) - pos < 3 or (len(a) - pos) % 2 == 0:  # noqa: PLR2004  (the id + pairs)
        raise CommandError("ERR wrong number of arguments for 'xadd' command")
    given: Id | None = args["id"]
    if given is not None and args["seq_given"] and given == (0, 0):
        raise CommandError("ERR The ID specified in XADD must be greater than 0-0")
    s = Stream(c, a[1])
    if not s.existed:
        if args["nomk"]:
            return c.enc.null
        s = Stream(c, a[1], create=True)
    if s.last == MAX_ID:
        raise CommandError("ERR The stream has exhausted the last possible ID, unable to add "
                           "more items")
    if given is None:
        ms = max(_now_ms(), s.last[0])
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
    _trim(c, s, args)
    s.finish(c, signal=True)
    return reply.bulk(id_text(new))


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
    ids = [parse_id(x, strict=True)[0] for x in a[2:]]
    s = Stream(c, a[1])
    if not s.existed:
        return reply.ZERO
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
    s.finish(c)
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
    if count == 0:
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
    now = _now_ms()
    s.touch_consumer(gname, cname, now)
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
        if not items:
            commit(c, key, s.ops)  # the consumer was seen
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
    commit(c, key, s.ops)
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


# -- groups ------------------------------------------------------------------------------------------
def _group_or_error(c: Conn, s: Stream, key: bytes, gname: bytes) -> list[Any]:
    state = s.group(c, gname)
    if state is None:
        raise CommandError(f"NOGROUP No such consumer group '{gname.decode('utf-8', 'replace')}'"
                           f" for key name '{key.decode('utf-8', 'replace')}'")
    return state


def _entries_read_opt(a: list[bytes], i: int) -> int | None:
    if i >= len(a):
        return None
    if len(a) != i + 2 or a[i].lower() != b"entriesread":
        raise CommandError(SYNTAX)
    n = to_int(a[i + 1])
    if n < 0 and n != INVALID_READ:
        raise CommandError("ERR value for ENTRIESREAD must be positive or -1")
    return n


@command("xgroup", -2, "write", (2, 2, 1), group="stream", since="5.0.0")
def xgroup(c: Conn, a: list[bytes]) -> bytes:  # noqa: C901, PLR0911, PLR0912
    """XGROUP CREATE | SETID | DESTROY | CREATECONSUMER | DELCONSUMER | HELP."""
    sub = a[1].lower()
    if sub == b"help" and len(a) == 2:  # noqa: PLR2004
        lines = [b"XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                 b"CREATE <key> <groupname> <id|$> [option]", b"CREATECONSUMER <key> "
                 b"<groupname> <consumer>", b"DELCONSUMER <key> <groupname> <consumername>",
                 b"DESTROY <key> <groupname>", b"SETID <key> <groupname> <id|$> "
                 b"[ENTRIESREAD entries_read]", b"HELP"]
        return reply.array([reply.simple(x) for x in lines])
    arity = {b"create": -5, b"setid": -5, b"destroy": 4, b"createconsumer": 5,
             b"delconsumer": 5}.get(sub)
    if arity is None:
        raise CommandError(f"ERR unknown subcommand '{a[1].decode('utf-8', 'replace')}'. Try "
                           "XGROUP HELP.")
    if (len(a) != arity) if arity > 0 else (len(a) < -arity):
        raise CommandError(f"ERR wrong number of arguments for 'xgroup|{sub.decode()}' "
                           "command")
    key, gname = a[2], a[3]
    mkstream = False
    entries_read: int | None = None
    if sub == b"create":
        rest = a[5:]
        if rest and rest[0].lower() == b"mkstream":
            mkstream = True
            rest = rest[1:]
        entries_read = _entries_read_opt(rest, 0) if rest else None
    elif sub == b"setid":
        entries_read = _entries_read_opt(a, 5)
    s = Stream(c, key)
    if not s.existed:
        if not (sub == b"create" and mkstream):
            raise CommandError("ERR The XGROUP subcommand requires the key to exist. Note that "
                               "for CREATE you may want to use the MKSTREAM option to create an "
                               "empty stream automatically.")
    if sub in (b"create", b"setid"):
        raw = a[4]
        gid = s.last if raw == b"$" else parse_id(raw, 0, strict=True)[0]
        if sub == b"create":
            if s.group(c, gname) is not None:
                raise CommandError("BUSYGROUP Consumer Group name already exists")
            if not s.existed:
                s = Stream(c, key, create=True)
            s.put_group(gname, [gid[0], gid[1],
                                INVALID_READ if entries_read is None else entries_read])
        else:
            _group_or_error(c, s, key, gname)
            s.put_group(gname, [gid[0], gid[1],
                                INVALID_READ if entries_read is None else entries_read])
        s.finish(c)
        return reply.OK
    if sub == b"destroy":
        if s.group(c, gname) is None:
            return reply.ZERO
        s.ops.append((s.group_key(gname), None))
        s.ops.extend((s.pel_key(gname, i), None) for i, _, _, _ in s.pending(c, gname))
        s.ops.extend((s.consumer_key(gname, n), None) for n, _ in s.consumers(c, gname))
        s.finish(c)
        c.srv.signal(key, s.meta())
        return reply.ONE
    _group_or_error(c, s, key, gname)
    cname = a[4]
    exists = c.db.get(s.consumer_key(gname, cname)) is not None
    if sub == b"createconsumer":
        if exists:
            return reply.ZERO
        s.touch_consumer(gname, cname, _now_ms())
        s.finish(c)
        return reply.ONE
    if not exists:
        return reply.ZERO
    mine = [i for i, owner, _, _ in s.pending(c, gname) if owner == cname]
    s.ops.extend((s.pel_key(gname, i), None) for i in mine)
    s.ops.append((s.consumer_key(gname, cname), None))
    s.finish(c)
    return reply.integer(len(mine))


@command("xack", -4, "write fast", (1, 1, 1), group="stream", since="5.0.0")
def xack(c: Conn, a: list[bytes]) -> bytes:
    """Acknowledge entries (drop them from the group's PEL); reply how many were pending."""
    s = Stream(c, a[1])
    state = s.group(c, a[2]) if s.existed else None
    ids = [parse_id(x, strict=True)[0] for x in a[3:]]
    if state is None:
        return reply.ZERO
    n = 0
    for i in dict.fromkeys(ids):
        k = s.pel_key(a[2], i)
        if c.db.get(k) is not None:
            s.ops.append((k, None))
            n += 1
    if n:
        commit(c, a[1], s.ops)
    return reply.integer(n)


def _nogroup_plain(key: bytes, group: bytes) -> CommandError:
    return CommandError(f"NOGROUP No such key '{key.decode('utf-8', 'replace')}' or consumer "
                        f"group '{group.decode('utf-8', 'replace')}'")


@command("xpending", -3, "readonly", (1, 1, 1), group="stream", since="5.0.0")
def xpending(c: Conn, a: list[bytes]) -> bytes:  # noqa: C901
    """The group's pending entries: a summary, or (start end count) the entries."""
    key, gname = a[1], a[2]
    extended = len(a) > 3  # noqa: PLR2004
    min_idle = 0
    i = 3
    if extended:
        if a[3].lower() == b"idle":
            if len(a) < 6:  # noqa: PLR2004
                raise CommandError(SYNTAX)
            min_idle = max(to_int(a[4]), 0)
            i = 5
        if len(a) - i not in (3, 4):
            raise CommandError(SYNTAX)
        lo, hi = interval(a[i], a[i + 1])
        count = max(to_int(a[i + 2]), 0)
        who = a[i + 3] if len(a) - i == 4 else None  # noqa: PLR2004
    s = Stream(c, key)
    if not s.existed or s.group(c, gname) is None:
        raise _nogroup_plain(key, gname)
    now = _now_ms()
    if not extended:
        pel = list(s.pending(c, gname))
        if not pel:
            return reply.array([reply.ZERO, c.enc.null, c.enc.null, c.enc.null_array])
        per: dict[bytes, int] = {}
        for _, owner, _, _ in pel:
            per[owner] = per.get(owner, 0) + 1
        return reply.array([
            reply.integer(len(pel)), reply.bulk(id_text(pel[0][0])),
            reply.bulk(id_text(pel[-1][0])),
            reply.array([reply.array([reply.bulk(k), reply.bulk(b"%d" % v)])
                         for k, v in sorted(per.items())])])
    out = []
    if count:
        for pid, owner, when, deliveries in s.pending(c, gname, lo, hi):
            idle = now - when
            if (who is not None and owner != who) or idle < min_idle:
                continue
            out.append(reply.array([reply.bulk(id_text(pid)), reply.bulk(owner),
                                    reply.integer(idle), reply.integer(deliveries)]))
            if len(out) >= count:
                break
    return reply.array(out)


def _claim_opts(a: list[bytes], i: int) -> dict[str, Any]:  # noqa: C901
    opts: dict[str, Any] = {"idle": None, "time": None, "retry": None, "force": False,
                            "justid": False, "lastid": None}
    while i < len(a):
        opt = a[i].lower()
        more = len(a) - i - 1
        if opt == b"force":
            opts["force"] = True
        elif opt == b"justid":
            opts["justid"] = True
        elif opt == b"idle" and more:
            opts["idle"] = to_int(a[i + 1], "ERR Invalid IDLE option argument for XCLAIM")
            i += 1
        elif opt == b"time" and more:
            opts["time"] = to_int(a[i + 1], "ERR Invalid TIME option argument for XCLAIM")
            i += 1
        elif opt == b"retrycount" and more:
            opts["retry"] = to_int(a[i + 1],
                                   "ERR Invalid RETRYCOUNT option argument for XCLAIM")
            i += 1
        elif opt == b"lastid" and more:
            opts["lastid"] = parse_id(a[i + 1], strict=True)[0]
            i += 1
        else:
            raise CommandError(f"ERR Unrecognized XCLAIM option "
                               f"'{a[i].decode('utf-8', 'replace')}'")
        i += 1
    return opts


@command("xclaim", -6, "write fast", (1, 1, 1), group="stream", since="5.0.0")
def xclaim(c: Conn, a: list[bytes]) -> bytes:  # noqa: C901, PLR0912
    """Take pending entries idle for at least min-idle-time over to another consumer."""
    key, gname, cname = a[1], a[2], a[3]
    min_idle = to_int(a[4], "ERR Invalid min-idle-time argument for XCLAIM")
    min_idle = max(min_idle, 0)
    ids: list[Id] = []
    j = 5
    while j < len(a):
        try:
            ids.append(parse_id(a[j], strict=True)[0])
        except CommandError:
            break
        j += 1
    opts = _claim_opts(a, j)
    s = Stream(c, key)
    state = s.group(c, gname) if s.existed else None
    if state is None:
        raise _nogroup_plain(key, gname)
    now = _now_ms()
    when = now
    if opts["idle"] is not None:
        when = now - max(opts["idle"], 0)
    elif opts["time"] is not None:
        when = opts["time"]
    if opts["lastid"] is not None and opts["lastid"] > (state[0], state[1]):
        state[0], state[1] = opts["lastid"]
        s.put_group(gname, state)
    out = []
    for i in ids:
        raw = c.db.get(s.pel_key(gname, i))
        fields = s.entry(c, i)
        if raw is None:
            if not opts["force"] or fields is None:
                continue
            deliveries = 0
        else:
            _, delivered_at, deliveries = _decode_any(raw)
            if fields is None:  # deleted from the stream: drop it from the PEL
                s.ops.append((s.pel_key(gname, i), None))
                continue
            if min_idle and now - int(delivered_at) < min_idle:
                continue
        if opts["retry"] is not None:
            deliveries = opts["retry"]
        elif not opts["justid"]:
            deliveries += 1
        s.put_pending(gname, i, cname, when, int(deliveries))
        out.append(reply.bulk(id_text(i)) if opts["justid"] else entry_reply(c, i, fields))
    s.touch_consumer(gname, cname, now)
    commit(c, key, s.ops)
    return reply.array(out)


@command("xautoclaim", -6, "write fast", (1, 1, 1), group="stream", since="6.2.0")
def xautoclaim(c: Conn, a: list[bytes]) -> bytes:  # noqa: C901
    """XCLAIM whatever is idle long enough, from a cursor; [next, claimed, deleted ids]."""
    key, gname, cname = a[1], a[2], a[3]
    min_idle = max(to_int(a[4], "ERR Invalid min-idle-time argument for XAUTOCLAIM"), 0)
    start = parse_id(a[5], 0)[0]
    count = 100
    justid = False
    i = 6
    while i < len(a):
        opt = a[i].lower()
        if opt == b"count" and i + 1 < len(a):
            count = to_int(a[i + 1])
            if count < 1 or count > (2**63 - 1) // 10:
                raise CommandError("ERR COUNT must be > 0")
            i += 2
        elif opt == b"justid":
            justid = True
            i += 1
        else:
            raise CommandError(SYNTAX)
    s = Stream(c, key)
    if not s.existed or s.group(c, gname) is None:
        raise _nogroup_plain(key, gname)
    now = _now_ms()
    claimed, deleted = [], []
    nxt: Id = (0, 0)
    attempts = count * 10
    for pid, _, delivered_at, deliveries in s.pending(c, gname, start):
        if attempts == 0 or len(claimed) >= count:
            nxt = pid
            break
        attempts -= 1
        fields = s.entry(c, pid)
        if fields is None:
            s.ops.append((s.pel_key(gname, pid), None))
            deleted.append(reply.bulk(id_text(pid)))
            continue
        if min_idle and now - delivered_at < min_idle:
            continue
        s.put_pending(gname, pid, cname, now, deliveries if justid else deliveries + 1)
        claimed.append(reply.bulk(id_text(pid)) if justid else entry_reply(c, pid, fields))
    s.touch_consumer(gname, cname, now)
    commit(c, key, s.ops)
    return reply.array([reply.bulk(id_text(nxt)), reply.array(claimed), reply.array(deleted)])


# -- XINFO --------------------------------------------------------------------------------------------
def _info_map(c: Conn, pairs: list[tuple[bytes, bytes]]) -> bytes:
    return c.enc.map([(reply.bulk(k), v) for k, v in pairs])


def _entry_or_null(c: Conn, item: tuple[Id, list[bytes]] | None) -> bytes:
    return c.enc.null if item is None else entry_reply(c, *item)


@command("xinfo", -2, "readonly", (2, 2, 1), group="stream", since="5.0.0")
def xinfo(c: Conn, a: list[bytes]) -> bytes:  # noqa: C901, PLR0911
    """XINFO STREAM key [FULL [COUNT n]] | GROUPS key | CONSUMERS key group | HELP."""
    sub = a[1].lower()
    if sub == b"help" and len(a) == 2:  # noqa: PLR2004
        lines = [b"XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                 b"CONSUMERS <key> <groupname>", b"GROUPS <key>",
                 b"STREAM <key> [FULL [COUNT <count>]", b"HELP"]
        return reply.array([reply.simple(x) for x in lines])
    arity = {b"stream": -3, b"groups": 3, b"consumers": 4}.get(sub)
    if arity is None:
        raise CommandError(f"ERR unknown subcommand '{a[1].decode('utf-8', 'replace')}'. Try "
                           "XINFO HELP.")
    if (len(a) != arity) if arity > 0 else (len(a) < -arity):
        raise CommandError(f"ERR wrong number of arguments for 'xinfo|{sub.decode()}' "
                           "command")
    s = Stream(c, a[2])
    if not s.existed:
        raise CommandError("ERR no such key")
    now = _now_ms()
    if sub == b"consumers":
        _group_or_error(c, s, a[2], a[3])
        per: dict[bytes, int] = {}
        for _, owner, _, _ in s.pending(c, a[3]):
            per[owner] = per.get(owner, 0) + 1
        return reply.array([_info_map(c, [
            (b"name", reply.bulk(name)), (b"pending", reply.integer(per.get(name, 0))),
            (b"idle", reply.integer(max(now - seen, 0)))]) for name, seen in s.consumers(c, a[3])])
    if sub == b"groups":
        out = []
        for gname, state in s.groups(c):
            pel = list(s.pending(c, gname))
            lag = s.lag(c, state)
            out.append(_info_map(c, [
                (b"name", reply.bulk(gname)),
                (b"consumers", reply.integer(len(s.consumers(c, gname)))),
                (b"pending", reply.integer(len(pel))),
                (b"last-delivered-id", reply.bulk(id_text((state[0], state[1])))),
                (b"entries-read", c.enc.null if state[2] == INVALID_READ
                 else reply.integer(state[2])),
                (b"lag", c.enc.null if lag is None else reply.integer(lag))]))
        return reply.array(out)
    if len(a) > 3 and a[3].lower() != b"full":  # noqa: PLR2004
        raise CommandError(SYNTAX)
    first = next(iter(s.entries(c, (0, 0), MAX_ID)), None)
    last = next(iter(s.entries(c, (0, 0), MAX_ID, reverse=True)), None)
    keys = (s.length + 99) // 100
    return _info_map(c, [
        (b"length", reply.integer(s.length)),
        (b"radix-tree-keys", reply.integer(keys)),
        (b"radix-tree-nodes", reply.integer(keys + 1)),
        (b"last-generated-id", reply.bulk(id_text(s.last))),
        (b"max-deleted-entry-id", reply.bulk(id_text(s.maxdel))),
        (b"entries-added", reply.integer(s.added)),
        (b"recorded-first-entry-id", reply.bulk(id_text(first[0] if first else (0, 0)))),
        (b"groups", reply.integer(len(s.groups(c)))),
        (b"first-entry", _entry_or_null(c, first)),
        (b"last-entry", _entry_or_null(c, last)),
    ])
