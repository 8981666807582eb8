"""DUMP and RESTORE with Redis's payloads (``_format/rdb.py``): a value dumped by Redis
7.x restores here and one dumped here restores in Redis, which makes DUMP/RESTORE-based
migration tools work both ways. Streams are not carried (DUMP refuses them).
"""

# Every handler takes (conn, args), used or not: one signature for the command table.
# ruff: noqa: ARG001

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from tuffdb._format.rdb import RdbError, dumps, loads
from tuffdb._format.resp import TAG_HASH, TAG_LIST, TAG_SET, TAG_STRING, TAG_ZSET
from tuffdb.server.resp import reply
from tuffdb.server.resp.commands.collection import commit
from tuffdb.server.resp.commands.common import to_int
from tuffdb.server.resp.commands.lists import ListState, store_list
from tuffdb.server.resp.commands.hashes import field_pairs
from tuffdb.server.resp.commands.sets import member_names, store_set
from tuffdb.server.resp.commands.zsets import ZSet, store_zset
from tuffdb.server.resp.keyspace import (
    Op,
    cid_of,
    elements,
    hash_meta,
    new_collection,
    stored,
)
from tuffdb.server.resp.table import SYNTAX, CommandError, command

if TYPE_CHECKING:
    from tuffdb.server.resp.conn import Conn


def _value(c: Conn, key: bytes, raw: bytes) -> tuple[str, Any]:
    tag = raw[0]
    if tag == TAG_STRING:
        return "string", raw[1:]
    if tag == TAG_LIST:
        lst = ListState(c, key)
        return "list", lst.values(c, 0, lst.size)
    if tag == TAG_SET:
        return "set", member_names(c, cid_of(raw))
    if tag == TAG_HASH:
        return "hash", field_pairs(c, cid_of(raw))
    if tag == TAG_ZSET:
        return "zset", list(ZSet(c, key).entries(c))
    raise CommandError("ERR DUMP of a stream is not offered by tuffdb")


@command("dump", 2, "readonly", (1, 1, 1), group="keyspace", since="2.6.0")
def dump(c: Conn, a: list[bytes]) -> bytes:
    """A key's value as a Redis DUMP payload (nil for no key)."""
    raw = c.db.get(stored(a[1]))
    if raw is None:
        return c.enc.null
    try:
        return reply.bulk(dumps(*_value(c, a[1], raw)))
    except RdbError as exc:
        raise CommandError(str(exc)) from None


def _store_hash(c: Conn, key: bytes, pairs: list[tuple[bytes, bytes]]) -> None:
    ops: list[Op] = []
    fields = dict(pairs)
    cid = new_collection(ops, c.srv.ids, key)
    prefix = elements(cid)
    ops += [(prefix + f, v) for f, v in fields.items()]
    ops.append((stored(key), hash_meta(cid, len(fields))))
    commit(c, key, ops)


@command("restore", -4, "write denyoom", (1, 1, 1), group="keyspace", since="2.6.0")
def restore(c: Conn, a: list[bytes]) -> bytes:  # noqa: C901, PLR0912
    """RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f]."""
    replace = absttl = False
    lru = lfu = False
    i = 4
    while i < len(a):
        opt = a[i].lower()
        if opt == b"replace":
            replace = True
        elif opt == b"absttl":
            absttl = True
        elif opt == b"idletime" and i + 1 < len(a) and not lfu:
            lru = True
            if to_int(a[i + 1]) < 0:
                raise CommandError("ERR Invalid IDLETIME value, must be >= 0")
            i += 1
        elif opt == b"freq" and i + 1 < len(a) and not lru:
            lfu = True
            if not 0 <= to_int(a[i + 1]) <= 255:  # noqa: PLR2004
                raise CommandError("ERR Invalid FREQ value, must be >= 0 and <= 255")
            i += 1
        else:
            raise CommandError(SYNTAX)
        i += 1
    ttl_ms = to_int(a[2])
    if ttl_ms < 0:
        raise CommandError("ERR Invalid TTL value, must be >= 0")
    skey = stored(a[1])
    old = c.db.get(skey)
    if old is not None and not replace:
        raise CommandError("BUSYKEY Target key name already exists.")
    try:
        kind, value = loads(a[3])
    except RdbError as exc:
        raise CommandError(str(exc)) from None
    ttl = None
    if ttl_ms:
        ttl = (ttl_ms / 1000 - time.time()) if absttl else ttl_ms / 1000
        if ttl <= 0:  # already expired: nothing is created (an old value is deleted)
            if old is not None:
                c.db.delete(skey, sync=False)
                c.srv.dropped(old)
                c.srv.touch(a[1])
            return reply.OK
    if old is not None:
        c.db.delete(skey, sync=False)
        c.srv.dropped(old)
    if kind == "string":
        c.db.put(skey, b"s" + value, ttl, sync=False)
        c.srv.touch(a[1])
    elif kind == "list":
        store_list(c, a[1], value)
    elif kind == "set":
        store_set(c, a[1], value)
    elif kind == "zset":
        store_zset(c, a[1], value)
    else:
        _store_hash(c, a[1], value)
    if ttl is not None and absttl:
        c.db.expire_at(skey, ttl_ms, sync=False)  # the deadline itself, to the millisecond
    elif ttl is not None and kind != "string":
        c.db.expire(skey, ttl, sync=False)
    return reply.OK
