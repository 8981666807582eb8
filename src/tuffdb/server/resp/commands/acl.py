"""ACL as Redis 7.0 answers it for a server with one user, ``default`` (its password is
``requirepass`` when set): WHOAMI, USERS, LIST, GETUSER, CAT, GENPASS, DRYRUN, LOG, HELP.
Creating or changing users (SETUSER, DELUSER, LOAD, SAVE) is refused with a clear
error: tuffdb's RESP face has no per-user permissions (docs/guides/redis.md).
"""

# Every handler takes (conn, args), used or not: one signature for the command table.
# ruff: noqa: ARG001

from __future__ import annotations

import hashlib
import secrets
from typing import TYPE_CHECKING

from tuffdb.server.resp import reply
from tuffdb.server.resp.commands.common import to_int
from tuffdb.server.resp.table import TABLE, CommandError, Spec, arity_ok, command

if TYPE_CHECKING:
    from tuffdb.server.resp.conn import Conn

# Redis 7.0's categories, in ACL CAT's order.
CATEGORIES = ("keyspace", "read", "write", "set", "sortedset", "list", "hash", "string",
              "bitmap", "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow",
              "blocking", "dangerous", "connection", "transaction", "scripting")
_GROUPS = {"keyspace": "keyspace", "generic": "keyspace", "set": "set", "zset": "sortedset",
           "sorted-set": "sortedset", "list": "list", "hash": "hash", "string": "string",
           "bitmap": "bitmap",
           "hyperloglog": "hyperloglog", "geo": "geo", "stream": "stream",
           "pubsub": "pubsub", "connection": "connection", "transactions": "transaction",
           "scripting": "scripting"}
NOT_OFFERED = ("ERR tuffdb's RESP face has one user, 'default' (its password is "
               "requirepass): ACL {} is not offered")


def categories(spec: Spec) -> set[str]:
    """The ACL categories of a command, from its group and flags."""
    cats = {_GROUPS.get(spec.group, "")} - {""}
    flags = spec.flags
    cats.add("write" if spec.write else ("read" if "readonly" in flags else ""))
    cats.add("fast" if "fast" in flags else "slow")
    if "admin" in flags:
        cats.update(("admin", "dangerous"))
    if spec.name.startswith("b") and spec.name[1:] in ("lpop", "rpop", "lmove", "rpoplpush",
                                                      "lmpop", "zpopmin", "zpopmax", "zmpop"):
        cats.add("blocking")
    return cats - {""}


def _user_line(c: Conn) -> bytes:
    secret = c.srv.requirepass
    pw = b"nopass" if secret is None else b"#" + hashlib.sha256(
        secret if isinstance(secret, bytes) else str(secret).encode()).hexdigest().encode()
    return b"user default on " + pw + b" ~* &* +@all"


@command("acl", -2, "noscript loading stale", group="server", since="6.0.0")
def acl(c: Conn, a: list[bytes]) -> bytes:  # noqa: C901, PLR0911, PLR0912
    """ACL WHOAMI | USERS | LIST | GETUSER | CAT | GENPASS | DRYRUN | LOG | HELP."""
    sub = a[1].lower()
    n = len(a)
    if sub == b"whoami" and n == 2:  # noqa: PLR2004
        return reply.bulk(b"default")
    if sub == b"users" and n == 2:  # noqa: PLR2004
        return reply.array([reply.bulk(b"default")])
    if sub == b"list" and n == 2:  # noqa: PLR2004
        return reply.array([reply.bulk(_user_line(c))])
    if sub == b"getuser" and n == 3:  # noqa: PLR2004
        if a[2] != b"default":
            return c.enc.null
        secret = c.srv.requirepass
        passwords = [] if secret is None else [reply.bulk(_user_line(c).split()[3][1:])]
        return c.enc.map([
            (reply.bulk(b"flags"), reply.array([reply.bulk(b"on"), *(
                [reply.bulk(b"nopass")] if secret is None else [])])),
            (reply.bulk(b"passwords"), reply.array(passwords)),
            (reply.bulk(b"commands"), reply.bulk(b"+@all")),
            (reply.bulk(b"keys"), reply.bulk(b"~*")),
            (reply.bulk(b"channels"), reply.bulk(b"&*")),
            (reply.bulk(b"selectors"), reply.array([]))])
    if sub == b"cat" and n == 2:  # noqa: PLR2004
        return reply.array([reply.bulk(x.encode()) for x in CATEGORIES])
    if sub == b"cat" and n == 3:  # noqa: PLR2004
        wanted = a[2].lower().decode("utf-8", "replace")
        if wanted not in CATEGORIES:
            raise CommandError(f"ERR Unknown category '{a[2].decode('utf-8', 'replace')}'")
        return reply.array([reply.bulk(spec.name.encode()) for spec in TABLE.values()
                            if wanted in categories(spec)])
    if sub == b"genpass" and n <= 3:  # noqa: PLR2004
        bits = 256 if n == 2 else to_int(a[2])  # noqa: PLR2004
        if not 0 < bits <= 4096:  # noqa: PLR2004
            raise CommandError("ERR ACL GENPASS argument must be the number of bits for the "
                               "output password, a positive number up to 4096")
        return reply.bulk(secrets.token_hex((bits + 7) // 8)[: (bits + 3) // 4].encode())
    if sub == b"dryrun" and n >= 4:  # noqa: PLR2004
        if a[2] != b"default":
            raise CommandError(f"ERR User '{a[2].decode('utf-8', 'replace')}' not found")
        spec = TABLE.get(a[3].lower())
        if spec is None:
            raise CommandError(f"ERR Command '{a[3].decode('utf-8', 'replace')}' not found")
        if not arity_ok(spec, n - 3):
            raise CommandError(f"ERR wrong number of arguments for '{spec.name}' command")
        return reply.OK
    if sub == b"log" and n <= 3:  # noqa: PLR2004
        return reply.array([]) if n == 2 or a[2].lower() != b"reset" else reply.OK  # noqa: PLR2004
    if sub == b"deluser" and n >= 3:  # noqa: PLR2004
        if b"default" in a[2:]:
            raise CommandError("ERR The 'default' user cannot be removed")
        return reply.ZERO
    if sub in (b"setuser", b"load", b"save"):
        raise CommandError(NOT_OFFERED.format(sub.upper().decode()))
    if sub == b"help" and n == 2:  # noqa: PLR2004
        lines = [b"ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                 b"CAT [<category>]", b"DELUSER <username> [<username> ...]",
                 b"DRYRUN <username> <command> [<arg> ...]", b"GETUSER <username>",
                 b"LIST", b"USERS", b"WHOAMI", b"LOG [<count> | RESET]",
                 b"GENPASS [<bits>]", b"HELP"]
        return reply.array([reply.simple(x) for x in lines])
    if sub in (b"whoami", b"users", b"list", b"getuser", b"cat", b"genpass", b"dryrun", b"log",
               b"deluser", b"help"):
        raise CommandError(f"ERR wrong number of arguments for 'acl|{sub.decode()}' command")
    raise CommandError(
        f"ERR unknown subcommand '{a[1].decode('utf-8', 'replace')}'. Try ACL HELP.")
