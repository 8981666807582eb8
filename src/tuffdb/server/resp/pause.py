"""CLIENT PAUSE: hold clients' commands for a while, as Redis 7.0 does.

``ALL`` holds every command of every client (CLIENT UNPAUSE included, so in practice the
timeout ends it, as in Redis); ``WRITE`` holds a batch that writes or may write
(scripts, PUBLISH) and lets reads run. A held connection keeps its commands queued and
runs them when the pause ends (CLIENT UNPAUSE or the timeout), in order.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from tuffdb.server.resp.table import TABLE

if TYPE_CHECKING:
    from tuffdb.server.resp.conn import Conn
    from tuffdb.server.resp.server import RespServer

MAY_WRITE = frozenset((b"publish", b"spublish"))


class Pause:
    def __init__(self, srv: RespServer, seconds: float, *, writes_only: bool) -> None:
        self.srv = srv
        self.writes_only = writes_only
        self.held: dict[Conn, None] = {}  # in the order they were held (an ordered set)
        self.timer = asyncio.get_running_loop().call_later(seconds, self.end)

    def holds(self, queue: list[list[bytes]]) -> bool:
        """Whether a batch of these commands must wait for the pause to end."""
        if not self.writes_only:
            return True
        for args in queue:
            spec = TABLE.get(args[0].lower())
            if spec is not None and (spec.write or "may_replicate" in spec.flags
                                     or args[0].lower() in MAY_WRITE):
                return True
        return False

    def end(self) -> None:
        """The pause is over: every held connection runs its queued commands, in the
        order they were held (as Redis does: a write held first runs first)."""
        self.timer.cancel()
        if self.srv.pause is self:
            self.srv.pause = None
        held, self.held = self.held, {}
        for c in held:
            if not c.closing:
                c.resume()
