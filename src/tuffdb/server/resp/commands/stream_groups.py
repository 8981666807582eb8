"""Consumer groups of streams: XGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM, and XINFO.

The records they keep (group state, consumers, pending entries) are laid out in
streams.py's module docstring and docs/format/resp.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tuffdb.server.resp import reply
from tuffdb.server.resp.commands.collection import commit
from tuffdb.server.resp.commands.common import to_int
from tuffdb.server.resp.commands.streams import (
    INVALID_READ,
    MAX_ID,
    Id,
    Stream,
    decode_any,
    entry_reply,
    id_text,
    interval,
    now_ms,
    parse_id,
)
from tuffdb.server.resp.table import SYNTAX, CommandError, command

if TYPE_CHECKING:
    from tuffdb.server.resp.conn import Conn


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
            made = not s.existed  # MKSTREAM: a new key is a change to WATCH
            if made:
                s = Stream(c, key, create=True)
            s.put_group(gname, [gid[0], gid[1],
                                INVALID_READ if entries_read is None else entries_read])
        else:
            made = False
            _group_or_error(c, s, key, gname)
            s.put_group(gname, [gid[0], gid[1],
                                INVALID_READ if entries_read is None else entries_read])
        s.finish(c, touch=made)  # a group's state alone is not (Redis 7.0)
        return reply.OK
    if sub == b"destroy":
        if s.group(c, gname) is None:
            return reply.ZERO
        s.ops.append((s.group_key(gname), None))
        s.ops.extend((s.pel_key(gname, i), None) for i, _, _, _ in s.pending(c, gname))
        s.ops.extend((s.consumer_key(gname, n), None) for n, _ in s.consumers(c, gname))
        s.finish(c, touch=False)
        c.srv.signal(key, s.meta())
        return reply.ONE
    _group_or_error(c, s, key, gname)
    cname = a[4]
    exists = c.db.get(s.consumer_key(gname, cname)) is not None
    if sub == b"createconsumer":
        if exists:
            return reply.ZERO
        s.touch_consumer(gname, cname, now_ms())
        s.finish(c, touch=False)
        return reply.ONE
    if not exists:
        return reply.ZERO
    mine = [i for i, owner, _, _ in s.pending(c, gname) if owner == cname]
    s.ops.extend((s.pel_key(gname, i), None) for i in mine)
    s.ops.append((s.consumer_key(gname, cname), None))
    s.finish(c, touch=False)
    return reply.integer(len(mine))


@command("xack", -4, "write fast", (1, 1, 1), group="stream", since="5.0.0")
def xack(c: Conn, a: list[bytes]) -> bytes:
    """Acknowledge entries (drop them from the group's PEL); reply how many were pending."""
    s = Stream(c, a[1])
    state = s.group(c, a[2]) if s.existed else None
    if state is None:  # no key or no group: nothing to acknowledge, ids unread (as Redis)
        return reply.ZERO
    ids = [parse_id(x, strict=True)[0] for x in a[3:]]
    n = 0
    for i in dict.fromkeys(ids):
        k = s.pel_key(a[2], i)
        if c.db.get(k) is not None:
            s.ops.append((k, None))
            n += 1
    if n:
        commit(c, a[1], s.ops, touch=False)
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
    now = now_ms()
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
    s = Stream(c, key)  # the key and group first, then the arguments (Redis's order)
    state = s.group(c, gname) if s.existed else None
    if state is None:
        raise _nogroup_plain(key, gname)
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
    now = now_ms()
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
            _, delivered_at, deliveries = decode_any(raw)
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
    if out:  # the consumer is made (or seen) by a claim, not by asking (as Redis 7.0)
        s.touch_consumer(gname, cname, now)
    commit(c, key, s.ops, touch=False)
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
    now = now_ms()
    claimed: list[bytes] = []
    deleted: list[bytes] = []
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
    if claimed:  # as XCLAIM
        s.touch_consumer(gname, cname, now)
    commit(c, key, s.ops, touch=False)
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
    now = now_ms()
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
