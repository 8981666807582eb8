"""Pub/sub commands: SUBSCRIBE UNSUBSCRIBE PSUBSCRIBE PUNSUBSCRIBE PUBLISH PUBSUB."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tuffdb.server.resp import reply
from tuffdb.server.resp.glob import compile_glob
from tuffdb.server.resp.table import CommandError, command

if TYPE_CHECKING:
    from tuffdb.server.resp.conn import Conn


def _frame(c: Conn, kind: bytes, name: bytes | None) -> bytes:
    # Shard subscriptions are counted apart, as in Redis 7.0.
    count = len(c.shard_channels) if kind in (b"ssubscribe", b"sunsubscribe") \
        else len(c.channels) + len(c.patterns)
    return c.enc.push([reply.bulk(kind), c.enc.null if name is None else reply.bulk(name),
                       reply.integer(count)])


@command("subscribe", -2, "pubsub noscript loading stale", group="pubsub", since="2.0.0")
def subscribe(c: Conn, a: list[bytes]) -> bytes:
    """Listen to channels."""
    return _join(c, b"subscribe", a[1:], c.srv.hub.subscribe)


@command("psubscribe", -2, "pubsub noscript loading stale", group="pubsub", since="2.0.0")
def psubscribe(c: Conn, a: list[bytes]) -> bytes:
    """Listen to channels matching glob patterns."""
    return _join(c, b"psubscribe", a[1:], c.srv.hub.psubscribe)


@command("unsubscribe", -1, "pubsub noscript loading stale", group="pubsub", since="2.0.0")
def unsubscribe(c: Conn, a: list[bytes]) -> bytes:
    """Stop listening to channels (all of them without arguments)."""
    return _leave(c, b"unsubscribe", a[1:] or sorted(c.channels), c.srv.hub.unsubscribe)


@command("punsubscribe", -1, "pubsub noscript loading stale", group="pubsub", since="2.0.0")
def punsubscribe(c: Conn, a: list[bytes]) -> bytes:
    """Stop listening to patterns (all of them without arguments)."""
    return _leave(c, b"punsubscribe", a[1:] or sorted(c.patterns), c.srv.hub.punsubscribe)


def _join(c: Conn, kind: bytes, names: list[bytes], add: Any) -> bytes:
    """One (P|S)SUBSCRIBE reply frame per name, each with the count after it."""
    out = []
    for name in names:
        add(c, name)
        out.append(_frame(c, kind, name))
    return b"".join(out)


def _leave(c: Conn, kind: bytes, names: list[bytes], remove: Any) -> bytes:
    """One (P)UNSUBSCRIBE reply frame per name; a lone frame with a nil name if none."""
    if not names:
        return _frame(c, kind, None)
    out = []
    for name in names:
        remove(c, name)
        out.append(_frame(c, kind, name))
    return b"".join(out)


@command("ssubscribe", -2, "pubsub noscript loading stale", (1, -1, 1), group="pubsub",
         since="7.0.0")
def ssubscribe(c: Conn, a: list[bytes]) -> bytes:
    """Listen to shard channels (a namespace of their own: SPUBLISH reaches them)."""
    return _join(c, b"ssubscribe", a[1:], c.srv.hub.ssubscribe)


@command("sunsubscribe", -1, "pubsub noscript loading stale", (1, -1, 1), group="pubsub",
         since="7.0.0")
def sunsubscribe(c: Conn, a: list[bytes]) -> bytes:
    """Stop listening to shard channels (all of them without arguments)."""
    return _leave(c, b"sunsubscribe", a[1:] or sorted(c.shard_channels),
                  c.srv.hub.sunsubscribe)


@command("spublish", 3, "pubsub loading stale fast", (1, 1, 1), group="pubsub", since="7.0.0")
def spublish(c: Conn, a: list[bytes]) -> bytes:
    """Send a message to a shard channel; reply how many clients received it."""
    return reply.integer(c.srv.hub.spublish(a[1], a[2]))


@command("publish", 3, "pubsub loading stale fast", group="pubsub", since="2.0.0")
def publish(c: Conn, a: list[bytes]) -> bytes:
    """Send a message to a channel; reply how many clients received it."""
    return reply.integer(c.srv.hub.publish(a[1], a[2]))


@command("pubsub", -2, "pubsub loading stale", group="pubsub", since="2.8.0")
def pubsub(c: Conn, a: list[bytes]) -> bytes:
    """PUBSUB CHANNELS [pattern] | NUMSUB [channel...] | NUMPAT."""
    hub = c.srv.hub
    sub = a[1].lower()
    if sub == b"channels" and len(a) <= 3:
        match = compile_glob(a[2]) if len(a) == 3 else None
        return c.enc.bulks([ch for ch in hub.channels if match is None or match(ch)])
    if sub == b"numsub":
        flat = []  # Redis 7 replies a flat array here even in RESP3
        for ch in a[2:]:
            flat += [reply.bulk(ch), reply.integer(len(hub.channels.get(ch, ())))]
        return reply.array(flat)
    if sub == b"numpat" and len(a) == 2:
        return reply.integer(len(hub.patterns))
    if sub == b"shardchannels" and len(a) <= 3:
        match = compile_glob(a[2]) if len(a) == 3 else None
        return c.enc.bulks([ch for ch in hub.shard if match is None or match(ch)])
    if sub == b"shardnumsub":
        flat = []
        for ch in a[2:]:
            flat += [reply.bulk(ch), reply.integer(len(hub.shard.get(ch, ())))]
        return reply.array(flat)
    raise CommandError(
        f"ERR unknown subcommand '{a[1].decode('utf-8', 'replace')}'. Try PUBSUB HELP.")
