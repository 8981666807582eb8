"""One batch for the same write command from many clients in a loop pass.

A command with a batch form (``table.BATCHED``: SET, LPUSH/RPUSH, LPOP/RPOP, SADD, HSET,
ZADD, XADD; GET and LRANGE among reads) runs a pipeline of itself in one call: one
metadata read per key, one ``write_batch``, one pass over the replies. Fifty clients each
sending one LPUSH (``redis-benchmark -c 50 -P 1``), or a pipeline of 16, gave it one
client's commands to batch at a time: each batch paid what one batch of them all pays
once. Here a connection whose whole queue one write's batch form can run
(``Conn.batch_form``) leaves it with :class:`Gatherer` instead of running it; once the
loop pass has read every readable socket, each group of such queues (same command, same
protocol version, same store) runs as one batch: the queues end to end, in the order
their connections were read, so the replies are those of running the connections one
after another, and each connection gets its own slice. A group of one runs as it
always did.

Why it is correct: clients in one pass are concurrent, and any serial order of their
commands is one Redis could have produced; each connection's commands keep their
order, and a batch form is, by its contract, the same as running its commands one by
one. What would break that is re-checked when the group runs: a script that took the
server, a CLIENT PAUSE, a MONITOR or a lost leadership since the queue was left make
every connection of the pass run its queue alone (``Conn.resume_alone``), which
applies them.
A batch form that declines (arguments it has no fast form for, WRONGTYPE, a value over
the limits: it answers nothing) leaves each connection to run alone, as a declined
pipeline always did.

Only writes are gathered: what a batch saves them (a metadata read per key, one
``write_batch``, one round's bookkeeping) is per batch, while a read's batch form does
per key what its pipeline does. Gathered, reads measured slower: LRANGE -P 1 ran 0.75x
(its single form takes the keys from the engine's ordered view, objects whose hashes
are known, where the batch form builds them), and LRANGE_600 -P 16 from 50 clients, one
batch of 480,000 elements, ran 0.55x in a full run of the suite.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from tuffdb import errors
from tuffdb._failpoints import failpoint
from tuffdb.server.resp import reply
from tuffdb.server.resp.table import BATCHED, TABLE

if TYPE_CHECKING:
    import asyncio

    from tuffdb.server.resp.conn import Conn
    from tuffdb.server.resp.server import RespServer

log = logging.getLogger("tuffdb.resp")

#: Commands in one gathered batch at most (the queues of a pass beyond it run next).
GATHER_MAX_COMMANDS = 1024


class BatchFormBug(Exception):  # noqa: N818 - a carrier, not an error of the API
    """A batch form raised an unexpected error (a bug; logged): ``reply`` answers its
    commands if it wrote something."""

    def __init__(self, bug: Exception) -> None:
        super().__init__(str(bug))
        self.reply = reply.error(f"ERR internal error: {type(bug).__name__}: {bug}")


def run_batch_form(c: Conn, lname: bytes, cmds: list[list[bytes]]) -> list[bytes]:
    """``lname``'s batch form over ``cmds``: a reply per command, or none (declined, or
    refused before anything was written: a value over the limits, a store that stopped
    leading or failed; the caller then runs them one by one, so each gets its own reply).

    :raises BatchFormBug: it failed unexpectedly (logged here)."""
    try:
        failpoint("resp_batch")
        out = BATCHED[lname](c, cmds)
        failpoint("resp_batch_done")
    except errors.Error:
        return []
    except Exception as bug:  # never let a batch form take the connection
        log.exception("internal error in the batch form of %r", lname.decode(errors="replace"))
        raise BatchFormBug(bug) from bug
    return out


class Gatherer:
    """The queues left in this loop pass, by (command, protocol, store)."""

    def __init__(self, srv: RespServer) -> None:
        self.srv = srv
        self._groups: dict[tuple[bytes, int, int], list[Conn]] = {}
        self._count = 0

    def gather(self, c: Conn, lname: bytes, loop: asyncio.AbstractEventLoop | None) -> bool:
        """Take ``c``'s queue for the end of the pass; False: run it now."""
        if loop is None or self._count + len(c.queue) > GATHER_MAX_COMMANDS:
            return False
        if not self._groups:
            loop.call_soon(self.run)
        self._groups.setdefault((lname, c.enc.proto, id(c.db)), []).append(c)
        self._count += len(c.queue)
        return True

    def run(self) -> None:
        """Run every group left in this pass (a loop callback)."""
        groups = self._groups
        self._groups = {}
        self._count = 0
        srv = self.srv
        changed = srv.scripts.owner is not None or srv.pause is not None or bool(srv.monitors)
        for (lname, _, _), conns in groups.items():
            live = [c for c in conns if not c.closing]
            if len(live) > 1 and not changed and not (TABLE[lname].write and not _leads(srv)):
                live = self._together(lname, live)
            for c in live:
                c.resume_alone()
        srv.flush_now()

    def _together(self, lname: bytes, conns: list[Conn]) -> list[Conn]:
        """Run the group's queues as one batch and answer each connection; returns the
        connections still to run alone (all of them if the form declined)."""
        store = conns[0].store
        since = self.srv.rounds.opening()
        changes = store.changes
        cmds = [args for c in conns for args in c.queue]
        try:
            out = run_batch_form(conns[0], lname, cmds)
        except BatchFormBug as bug:
            if store.changes == changes:
                return conns
            out = [bug.reply] * len(cmds)
        if not out:  # declined: nothing was written
            return conns
        self.srv.stats["gathered"] += len(out)
        at = 0
        for c in conns:
            n = len(c.queue)
            c.waiting = False
            c.run_batch(lname, out[at : at + n], changes, since)
            at += n
            c.after_gathered()
        return []


def _leads(srv: RespServer) -> bool:
    node = srv.node
    return node is None or node.is_leader()
