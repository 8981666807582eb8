"""Connection commands: PING ECHO AUTH HELLO SELECT QUIT RESET CLIENT."""

# Every handler takes (conn, args), used or not: one signature for the command table.
# ruff: noqa: ARG001

from __future__ import annotations

import hmac
import time
from typing import TYPE_CHECKING, Any

from tuffdb.server.resp import reply
from tuffdb.server.resp.blocking import Waiter
from tuffdb.server.resp.pause import Pause
from tuffdb.server.resp.commands.common import to_int
from tuffdb.server.resp.conn import REPLY_OFF, REPLY_ON, REPLY_SKIP_SET
from tuffdb.server.resp.reply import ENCODERS, Resp2
from tuffdb.server.resp.server import REDIS_COMPAT_VERSION
from tuffdb.server.resp.table import SYNTAX, CommandError, command

if TYPE_CHECKING:
    from tuffdb.server.resp.conn import Conn

WRONGPASS = "WRONGPASS invalid username-password pair or user is disabled."


@command("ping", -1, "fast stale loading pubsub noauth", group="connection")
def ping(c: Conn, a: list[bytes]) -> bytes:
    """Reply PONG, or echo the argument."""
    if len(a) > 2:
        raise CommandError("ERR wrong number of arguments for 'ping' command")
    if c.subscribed and c.enc.proto == 2:
        return reply.array([reply.bulk(b"pong"), reply.bulk(a[1] if len(a) > 1 else b"")])
    return reply.PONG if len(a) == 1 else reply.bulk(a[1])


@command("echo", 2, "fast stale loading", group="connection")
def echo(c: Conn, a: list[bytes]) -> bytes:
    """Echo the argument."""
    return reply.bulk(a[1])


def check_credentials(c: Conn, user: bytes | None, password: bytes) -> bool:
    """Only the ``default`` user exists; it needs ``requirepass`` when one is set."""
    required = c.srv.requirepass
    if user is not None and user != b"default":
        return False
    if required is None:
        return True
    return hmac.compare_digest(password, required.encode())


@command("auth", -2, "noauth noscript loading stale fast", group="connection")
def auth(c: Conn, a: list[bytes]) -> bytes:
    """Authenticate: AUTH password, or AUTH default password."""
    if len(a) > 3:
        raise CommandError(SYNTAX)
    if len(a) == 2 and c.srv.requirepass is None:
        raise CommandError(
            "ERR AUTH <password> called without any password configured for the default "
            "user. Are you sure your configuration is correct?")
    user = a[1] if len(a) == 3 else None
    if not check_credentials(c, user, a[-1]):
        raise CommandError(WRONGPASS)
    c.authed = True
    return reply.OK


@command("hello", -1, "noauth noscript loading stale fast", group="connection",
         since="6.0.0")
def hello(c: Conn, a: list[bytes]) -> bytes:
    """Switch protocol (2 or 3), optionally AUTH and SETNAME; reply server facts."""
    proto = c.enc.proto
    if len(a) > 1:
        try:
            proto = to_int(a[1])
        except CommandError:
            raise CommandError(
                "ERR Protocol version is not an integer or out of range") from None
        if proto not in (2, 3):
            raise CommandError("NOPROTO unsupported protocol version")
    i, name = 2, None
    while i < len(a):
        opt = a[i].lower()
        if opt == b"auth" and i + 2 < len(a):
            if not check_credentials(c, a[i + 1], a[i + 2]):
                raise CommandError(WRONGPASS)
            c.authed = True
            i += 3
        elif opt == b"setname" and i + 1 < len(a):
            name = a[i + 1]
            i += 2
        else:
            opt_text = a[i].decode("utf-8", "replace")
            raise CommandError(f"ERR Syntax error in HELLO option '{opt_text}'")
    if not c.authed:
        raise CommandError(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise "
            "the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the "
            "client and select the RESP protocol version at the same time")
    if name is not None:
        _check_name(name)
        c.name = name
    c.enc = ENCODERS[proto]
    return c.enc.map([
        (reply.bulk(b"server"), reply.bulk(b"tuffdb")),
        (reply.bulk(b"version"), reply.bulk(REDIS_COMPAT_VERSION.encode())),
        (reply.bulk(b"proto"), reply.integer(proto)),
        (reply.bulk(b"id"), reply.integer(c.id)),
        (reply.bulk(b"mode"), reply.bulk(b"standalone")),
        (reply.bulk(b"role"), reply.bulk(b"master")),
        (reply.bulk(b"modules"), reply.EMPTY_ARRAY),
    ])


@command("select", 2, "loading stale fast", group="connection")
def select(c: Conn, a: list[bytes]) -> bytes:
    """Only database 0 exists."""
    if to_int(a[1]) != 0:
        raise CommandError("ERR DB index is out of range")
    return reply.OK


@command("quit", -1, "noauth loading stale fast pubsub", group="connection")
def quit_(c: Conn, a: list[bytes]) -> bytes:
    """Reply OK and close the connection."""
    c.close_after_reply()
    return reply.OK


@command("reset", 1, "noauth noscript loading stale fast pubsub", group="connection",
         since="6.2.0")
def reset(c: Conn, a: list[bytes]) -> bytes:
    """Back to a fresh connection: no MULTI, WATCH, subscriptions, name; RESP2."""
    c.multi = None
    c.multi_error = False
    c.unwatch()
    if c.subscribed:
        c.srv.hub.drop(c)
    c.name = b""
    c.enc = Resp2
    c.authed = c.srv.requirepass is None
    c.srv.monitors.discard(c)
    return b"+RESET\r\n"


def _check_name(name: bytes) -> None:
    if any(ch < 33 or ch > 126 for ch in name):
        raise CommandError(
            "ERR Client names cannot contain spaces, newlines or special characters.")


def _kill(c: Conn, a: list[bytes]) -> bytes:  # noqa: C901, PLR0912
    """CLIENT KILL ip:port (OK or an error), or by filters (how many were killed)."""
    clients = list(c.srv.clients.values())
    if len(a) == 3:  # noqa: PLR2004 - the old form
        victims = [x for x in clients if x.addr.encode() == a[2]]
        if not victims:
            raise CommandError("ERR No such client")
        _close(c, victims[:1])
        return reply.OK
    if len(a) % 2:
        raise CommandError("ERR syntax error")
    skipme = True
    filters: list[tuple[bytes, Any]] = []
    for i in range(2, len(a), 2):
        opt, value = a[i].lower(), a[i + 1]
        if opt == b"id":
            wanted = to_int(value, "ERR client-id should be greater than 0")
            if wanted <= 0:
                raise CommandError("ERR client-id should be greater than 0")
            filters.append((opt, wanted))
        elif opt == b"type":
            kind = value.lower()
            if kind not in (b"normal", b"master", b"slave", b"replica", b"pubsub"):
                raise CommandError(
                    f"ERR Unknown client type '{value.decode('utf-8', 'replace')}'")
            filters.append((opt, kind))
        elif opt == b"user":
            if value != b"default":
                raise CommandError(f"ERR No such user '{value.decode('utf-8', 'replace')}'")
        elif opt in (b"addr", b"laddr"):
            filters.append((opt, value.decode("utf-8", "replace")))
        elif opt == b"skipme":
            if value.lower() not in (b"yes", b"no"):
                raise CommandError("ERR syntax error")
            skipme = value.lower() == b"yes"
        else:
            raise CommandError("ERR syntax error")
    victims = [x for x in clients if _matches(x, filters) and not (skipme and x is c)]
    _close(c, victims)
    return reply.integer(len(victims))


def _matches(x: Conn, filters: list[tuple[bytes, Any]]) -> bool:
    for opt, value in filters:
        if opt == b"id" and x.id != value:
            return False
        if opt == b"type" and not (value in (b"normal", b"pubsub")
                                   and (value == b"pubsub") == x.subscribed):
            return False
        if (opt == b"addr" and x.addr != value) or (opt == b"laddr" and x.laddr != value):
            return False
    return True


def _close(c: Conn, victims: list[Conn]) -> None:
    for x in victims:
        if x is c:
            c.close_after_reply()  # the killer itself: after this reply, as Redis does
        else:
            x.close_now()


def _pause(c: Conn, a: list[bytes]) -> bytes:
    """CLIENT PAUSE ms [WRITE|ALL] (pause.py); a new pause replaces one in force."""
    ms = to_int(a[2], "ERR timeout is not an integer or out of range")
    if ms < 0:
        raise CommandError("ERR timeout is negative")
    mode = a[3].lower() if len(a) == 4 else b"all"  # noqa: PLR2004
    if mode not in (b"write", b"all"):
        raise CommandError("ERR CLIENT PAUSE mode must be WRITE or ALL")
    srv = c.srv
    old = srv.pause
    srv.pause = Pause(srv, ms / 1000, writes_only=mode == b"write")
    if old is not None:  # it ends: its held clients go on, or the new one holds them again
        old.end()
    return reply.OK


def _unblock(c: Conn, a: list[bytes]) -> bytes:
    """CLIENT UNBLOCK id [TIMEOUT|ERROR]: end a blocking command as if it timed out."""
    target = c.srv.clients.get(to_int(a[2]))
    how = a[3].lower() if len(a) == 4 else b"timeout"  # noqa: PLR2004
    if how not in (b"timeout", b"error"):
        raise CommandError("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")
    waiter = target.blocked if target is not None else None
    if not isinstance(waiter, Waiter) or waiter.done:
        return reply.ZERO
    c.srv.blocking.unblock(waiter, None if how == b"timeout" else
                           reply.error("UNBLOCKED client unblocked via CLIENT UNBLOCK"))
    return reply.ONE


def client_line(c: Conn) -> bytes:
    now = time.time()
    idle = int(time.monotonic() - c.last_active)
    pause = c.srv.pause
    held = c.blocked is not None or (pause is not None and c in pause.held)
    flags = ("P" if c.subscribed else "") + ("x" if c.multi is not None else "") + \
        ("b" if held else "") or "N"
    return (
        f"id={c.id} addr={c.addr} laddr={c.laddr} fd=-1 name={c.name.decode('latin-1')} "
        f"age={int(now - c.created)} idle={idle} flags={flags} db=0 sub={len(c.channels)} "
        f"psub={len(c.patterns)} ssub={len(c.shard_channels)} multi={-1 if c.multi is None else len(c.multi)} "
        f"qbuf={c.parser.buffered()} qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 "
        f"oll=0 omem={c.transport.get_write_buffer_size() if c.transport else 0} tot-mem=0 "
        f"events=r cmd=client|list user=default redir=-1 resp={c.enc.proto} "
        f"lib-name={c.lib_name.decode('latin-1')} lib-ver={c.lib_ver.decode('latin-1')}\n"
    ).encode()


@command("client", -2, "noscript loading stale", group="connection", since="2.4.0")
def client(c: Conn, a: list[bytes]) -> bytes:  # noqa: C901, PLR0911  (one branch per subcommand)
    """CLIENT ID | SETNAME | GETNAME | INFO | LIST | SETINFO | KILL | UNBLOCK | NO-EVICT |
    GETREDIR | HELP."""
    sub = a[1].lower()
    if sub == b"id" and len(a) == 2:
        return reply.integer(c.id)
    if sub == b"setname" and len(a) == 3:
        _check_name(a[2])
        c.name = a[2]
        return reply.OK
    if sub == b"getname" and len(a) == 2:
        return reply.bulk(c.name) if c.name else c.enc.null
    if sub == b"info" and len(a) == 2:
        return c.enc.verbatim(client_line(c))
    if sub == b"list":
        return c.enc.verbatim(b"".join(client_line(x) for x in c.srv.clients.values()))
    if sub == b"setinfo" and len(a) == 4:
        attr = a[2].lower()
        if attr not in (b"lib-name", b"lib-ver"):
            raise CommandError(f"ERR Unrecognized option '{a[2].decode('utf-8', 'replace')}'")
        if attr == b"lib-name":
            _check_name(a[3])
            c.lib_name = a[3]
        else:
            c.lib_ver = a[3]
        return reply.OK
    if sub == b"kill" and len(a) >= 3:  # noqa: PLR2004
        return _kill(c, a)
    if sub == b"unblock" and len(a) in (3, 4):
        return _unblock(c, a)
    if sub == b"pause" and len(a) in (3, 4):
        return _pause(c, a)
    if sub == b"unpause" and len(a) == 2:  # noqa: PLR2004
        if c.srv.pause is not None:
            c.srv.pause.end()
        return reply.OK
    if sub == b"no-evict" and len(a) == 3:  # noqa: PLR2004 - nothing is evicted here
        if a[2].lower() not in (b"on", b"off"):
            raise CommandError("ERR syntax error")
        return reply.OK
    if sub == b"reply" and len(a) == 3:  # noqa: PLR2004
        mode = a[2].lower()
        if mode == b"on":
            c.reply_mode = REPLY_ON
            return reply.OK
        if mode in (b"off", b"skip"):
            c.reply_mode = REPLY_OFF if mode == b"off" else REPLY_SKIP_SET
            return b""  # dropped (conn.py)
        raise CommandError("ERR syntax error")
    if sub == b"getredir" and len(a) == 2:  # noqa: PLR2004 - no client-side caching
        return reply.integer(-1)
    if sub == b"help":
        lines = [b"CLIENT <subcommand> [<arg> ...]. Subcommands are:", b"ID", b"GETNAME",
                 b"SETNAME <name>", b"INFO", b"LIST", b"SETINFO <LIB-NAME|LIB-VER> <value>",
                 b"KILL <ip:port>", b"KILL <option> <value> [<option> <value> [...]]",
                 b"UNBLOCK <clientid> [TIMEOUT|ERROR]", b"NO-EVICT (ON|OFF)", b"GETREDIR"]
        return reply.array([reply.simple(x) for x in lines])
    if sub in (b"id", b"setname", b"getname", b"info", b"setinfo"):
        raise CommandError(
            f"ERR wrong number of arguments for 'client|{sub.decode()}' command")
    raise CommandError(
        f"ERR unknown subcommand '{a[1].decode('utf-8', 'replace')}'. Try CLIENT HELP.")
