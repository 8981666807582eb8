"""The pub/sub hub: who listens to which channel or pattern, and message fan-out.

Messages are written straight to each subscriber's transport (RESP3 clients get ``>``
push frames, RESP2 clients arrays). A subscriber whose unsent output passes the pubsub
hard limit is disconnected by :meth:`Conn.push`, so a slow reader cannot grow memory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tuffdb.server.resp.glob import compile_glob
from tuffdb.server.resp.reply import bulk

if TYPE_CHECKING:
    from tuffdb.server.resp.conn import Conn

_MESSAGE = bulk(b"message")
_PMESSAGE = bulk(b"pmessage")
_SMESSAGE = bulk(b"smessage")


class Hub:
    __slots__ = ("channels", "patterns", "shard")

    def __init__(self) -> None:
        self.channels: dict[bytes, set[Conn]] = {}
        self.patterns: dict[bytes, set[Conn]] = {}
        self.shard: dict[bytes, set[Conn]] = {}  # SSUBSCRIBE's channels, apart from PUBLISH's

    def subscribe(self, c: Conn, channel: bytes) -> None:
        _join(c.channels, self.channels, channel, c)

    def unsubscribe(self, c: Conn, channel: bytes) -> None:
        _part(c.channels, self.channels, channel, c)

    def psubscribe(self, c: Conn, pattern: bytes) -> None:
        _join(c.patterns, self.patterns, pattern, c)

    def punsubscribe(self, c: Conn, pattern: bytes) -> None:
        _part(c.patterns, self.patterns, pattern, c)

    def ssubscribe(self, c: Conn, channel: bytes) -> None:
        _join(c.shard_channels, self.shard, channel, c)

    def sunsubscribe(self, c: Conn, channel: bytes) -> None:
        _part(c.shard_channels, self.shard, channel, c)

    def drop(self, c: Conn) -> None:
        for ch in list(c.channels):
            self.unsubscribe(c, ch)
        for p in list(c.patterns):
            self.punsubscribe(c, p)
        for ch in list(c.shard_channels):
            self.sunsubscribe(c, ch)

    def spublish(self, channel: bytes, message: bytes) -> int:
        """Deliver to the shard channel's subscribers (SSUBSCRIBE); how many got it."""
        return _deliver(self.shard.get(channel), _SMESSAGE, channel, message)

    def publish(self, channel: bytes, message: bytes) -> int:
        """Deliver to channel and pattern subscribers; return how many received it."""
        n = _deliver(self.channels.get(channel), _MESSAGE, channel, message)
        if self.patterns:
            tail = bulk(channel) + bulk(message)
            for pattern, pconns in list(self.patterns.items()):
                if compile_glob(pattern)(channel):
                    body = _PMESSAGE + bulk(pattern) + tail
                    for c in list(pconns):
                        n += c.push((b">4\r\n" if c.enc.proto == 3 else b"*4\r\n") + body)
        return n


def _deliver(conns: set[Conn] | None, kind: bytes, channel: bytes, message: bytes) -> int:
    """Push a three-part message (``kind`` already a bulk) to ``conns``; how many got it."""
    n = 0
    if conns:
        body = kind + bulk(channel) + bulk(message)
        for c in list(conns):
            n += c.push((b">3\r\n" if c.enc.proto == 3 else b"*3\r\n") + body)
    return n


def _join(mine: set[bytes], index: dict[bytes, set[Conn]], name: bytes, c: Conn) -> None:
    """Subscribe ``c`` to ``name``: in its own set and in the hub's index."""
    if name not in mine:
        mine.add(name)
        index.setdefault(name, set()).add(c)


def _part(mine: set[bytes], index: dict[bytes, set[Conn]], name: bytes, c: Conn) -> None:
    """Undo :func:`_join`."""
    if name in mine:
        mine.discard(name)
        _discard(index, name, c)


def _discard(index: dict[bytes, set[Conn]], name: bytes, c: Conn) -> None:
    conns = index.get(name)
    if conns is not None:
        conns.discard(c)
        if not conns:
            del index[name]
