"""Blocked clients: BLPOP & co., BZPOPMIN & co., XREAD/XREADGROUP BLOCK.

A blocking command that finds nothing raises :class:`Blocked` with an ``attempt(key)``
closure: "try to serve me from this key now; None if still nothing". The connection
parks itself (its later pipelined commands wait behind it) and :class:`Blocking` files it
under each key, first come first served.

A write that makes a key poppable calls ``srv.signal(key, raw)``; the key is marked
ready, and once the command that wrote it has finished (a whole EXEC or script counts as
one command) :meth:`Blocking.serve` runs each waiter's attempt in the order they blocked,
so a waiter never sees a transaction half done, and an element pushed and popped by the
same EXEC is never seen at all. A served BLMOVE pushes to its destination, which may
serve the next waiter in the same pass (chains). A waiter whose key holds another type
stays blocked. Timeouts reply with the command's timeout reply (a null array).
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import TYPE_CHECKING, Any

from tuffdb.server.resp.keyspace import stored

if TYPE_CHECKING:
    from collections.abc import Callable

    from tuffdb.server.resp.conn import Conn
    from tuffdb.server.resp.server import RespServer


class Parked(BaseException):  # noqa: N818  (a control-flow signal, like StopIteration)
    """Raised by a command whose reply comes later: the connection parks (its later
    commands wait) until ``conn.unblocked(reply)``. A BaseException: handlers' generic
    ``except Exception`` must not swallow it."""

    def park(self, conn: Conn) -> Any:
        """Start waiting; returns the handle the connection keeps in ``conn.blocked``."""
        raise NotImplementedError


class Blocked(Parked):
    """Raised by a blocking command that must wait for a key."""

    def __init__(self, keys: list[bytes], timeout_s: float,
                 attempt: Callable[[bytes], bytes | None], tags: frozenset[int],
                 timeout_reply: bytes) -> None:
        super().__init__()
        self.keys = list(dict.fromkeys(keys))
        self.timeout_s = timeout_s  # 0: forever
        self.attempt = attempt
        self.tags = tags  # the metadata tags a ready key must have to be tried
        self.timeout_reply = timeout_reply

    def park(self, conn: Conn) -> Waiter:
        return conn.srv.blocking.block(conn, self)


class Waiter:
    __slots__ = ("blocked", "conn", "done", "timer")

    def __init__(self, conn: Conn, blocked: Blocked) -> None:
        self.conn = conn
        self.blocked = blocked
        self.done = False
        self.timer: asyncio.TimerHandle | None = None


class Blocking:
    """Who waits on which key, and the keys made ready by the current command."""

    __slots__ = ("ready", "srv", "waiters")

    def __init__(self, srv: RespServer) -> None:
        self.srv = srv
        self.waiters: dict[bytes, deque[Waiter]] = {}
        self.ready: dict[bytes, None] = {}  # an ordered set: keys in signal order

    def signal(self, key: bytes, raw: bytes) -> None:
        queue = self.waiters.get(key)
        if queue and any(raw[0] in w.blocked.tags for w in queue):
            self.ready[key] = None

    def block(self, conn: Conn, blocked: Blocked) -> Waiter:
        w = Waiter(conn, blocked)
        for key in blocked.keys:
            self.waiters.setdefault(key, deque()).append(w)
        if blocked.timeout_s > 0:
            w.timer = asyncio.get_running_loop().call_later(
                blocked.timeout_s, self._timed_out, w)
        return w

    def _forget(self, w: Waiter) -> None:
        w.done = True
        if w.timer is not None:
            w.timer.cancel()
            w.timer = None
        for key in w.blocked.keys:
            queue = self.waiters.get(key)
            if queue is not None:
                try:
                    queue.remove(w)
                except ValueError:
                    pass
                if not queue:
                    del self.waiters[key]

    def _timed_out(self, w: Waiter) -> None:
        if w.done:
            return
        self._forget(w)
        w.conn.unblocked(w.blocked.timeout_reply, wrote=False)

    def unblock(self, w: Waiter, out: bytes | None) -> None:
        """CLIENT UNBLOCK: answer ``out``, or the command's timeout reply when None."""
        self._forget(w)
        w.conn.unblocked(w.blocked.timeout_reply if out is None else out, wrote=False)

    def drop(self, conn: Conn) -> None:
        """The connection closed while parked: a blocked command stops waiting (a script
        it runs goes on, as in Redis, its reply to nobody)."""
        w = conn.blocked
        if isinstance(w, Waiter) and not w.done:
            self._forget(w)

    def serve(self) -> None:
        """Serve the waiters of every ready key, in blocking order (see the module doc)."""
        ready = self.ready
        get = self.srv.store.get
        while ready:
            key = next(iter(ready))
            del ready[key]
            queue = self.waiters.get(key)
            if not queue:
                continue
            skey = stored(key)
            for w in list(queue):
                if w.done:
                    continue
                raw = get(skey)
                if raw is None or raw[0] not in w.blocked.tags:
                    break  # nothing (left) to serve from this key
                conn = w.conn
                out = conn.run_attempt(w.blocked.attempt, key)
                if out is None:
                    continue
                self._forget(w)
                conn.unblocked(out, wrote=True)
