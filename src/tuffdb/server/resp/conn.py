"""One client connection: an ``asyncio.Protocol`` that parses, dispatches and replies.

Lifecycle of a batch (everything the socket delivered in one read):

1. ``data_received`` feeds the parser and takes every complete command.
2. Each command runs in order against the store (writes with ``sync=False``); replies
   are collected, not written.
3. If the batch changed the store and ``appendfsync`` is ``always`` (or a command deferred work,
   e.g. SAVE), the replies wait for the loop pass's fsync round (``srv.rounds``, see
   loop_rounds.py) or the deferred work; bytes arriving meanwhile are buffered (reading
   pauses past ``PAUSE_BUFFERED_SIZE``) and run as the next batch.
4. The replies go out in one ``transport.write``, at the end of the loop pass: a
   connection's output is collected in ``out`` and every connection with output is
   flushed by one callback after the pass has read all its sockets (as Redis writes its
   replies before it sleeps), so a client that is still busy with the replies of one
   pass receives the next without being woken up again. Output past ``FLUSH_SIZE``, a
   closing connection and pub/sub pushes past their limit are flushed at once.

Back-pressure: when the transport's write buffer passes its high-water mark we stop
reading from this client, so a client that does not read its replies cannot grow our
memory; pub/sub subscribers that fall behind past the hard output limit are closed
(``client-output-buffer-limit pubsub``), as Redis does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from operator import itemgetter
from typing import TYPE_CHECKING, Any, cast

from tuffdb import errors
from tuffdb.security.protected import OFF, is_local
from tuffdb.server.resp import reply
from tuffdb.server.resp.blocking import Parked
from tuffdb.server.resp.gather import BatchFormBug, run_batch_form
from tuffdb.server.resp.monitor import feed as feed_monitors
from tuffdb.server.resp.parser import RequestParser
from tuffdb.server.resp.table import BATCHED, TABLE, CommandError

if TYPE_CHECKING:
    from collections.abc import Callable

    from tuffdb.kv.store import KVStore
    from tuffdb.server.resp.server import RespServer
    from tuffdb.server.resp.table import Spec

log = logging.getLogger("tuffdb.resp")

PAUSE_BUFFERED_SIZE = 1024 * 1024
BATCH_OUTPUT_SIZE = 1024 * 1024
WRITE_HIGH_WATER = 4 * 1024 * 1024
FLUSH_SIZE = 64 * 1024  # buffered output past this goes to the socket at once
BATCH_MAX_COMMANDS = 256  # a batch handler gets at most this many commands at once
_name = itemgetter(0)
ALLOWED_IN_MULTI = frozenset((b"exec", b"discard", b"multi", b"watch", b"reset", b"quit"))
NOAUTH = reply.error("NOAUTH Authentication required.")
BUSY = reply.error("BUSY Redis is busy running a script. You can only call SCRIPT KILL or "
                   "SHUTDOWN NOSAVE.")
BUSY_FUNCTION = reply.error("BUSY Redis is busy running a script. You can only call FUNCTION "
                            "KILL or SHUTDOWN NOSAVE.")
REPLY_ON, REPLY_OFF, REPLY_SKIP, REPLY_SKIP_SET = 0, 1, 2, 3  # Conn.reply_mode
ALLOWED_BUSY = frozenset((b"multi", b"exec", b"discard", b"quit"))
# A client from another host while no password is set (security/protected.py): Redis's
# words, then how tuffdb lets it in.
DENIED = ("DENIED Redis is running in protected mode because protected mode is enabled and "
          "no password is set for the default user. In this mode connections are only "
          "accepted from the loopback interface. To connect from other hosts, set a password "
          "(tuffdb serve --requirepass, or CONFIG SET requirepass from the loopback "
          f"interface), or turn protected mode off: {OFF} (or CONFIG SET protected-mode no "
          "from the loopback interface).")


class Conn(asyncio.Protocol):
    """State of one client; handlers read and change it through ``c``."""

    def __init__(self, srv: RespServer) -> None:
        self.srv = srv
        self.store: KVStore = srv.store
        # What handlers read and write: the store, or the overlay of an EXEC or a script.
        self.db: Any = srv.store
        self.no_block = 0  # > 0 inside EXEC or a script: blocking commands time out at once
        self.blocked: Any = None  # parked: a blocking command's Waiter, a running script
        self.held: list[bytes] = []  # a blocked command's reply that came during a wait
        self.enc: type[reply.Resp2] = reply.Resp2
        self.parser = RequestParser(srv.max_bulk_len)
        self.id = 0
        self.name = b""
        self.lib_name = b""
        self.lib_ver = b""
        self.authed = srv.requirepass is None
        self.multi: list[list[bytes]] | None = None
        self.multi_error = False
        self.watched: dict[bytes, bool] = {}  # key -> existed when WATCHed
        self.dirty = False
        self.channels: set[bytes] = set()
        self.patterns: set[bytes] = set()
        self.shard_channels: set[bytes] = set()  # SSUBSCRIBE's (a namespace of its own)
        self.waiting = False
        self.read_paused = False
        self.write_paused = False
        self.closing = False
        self.wrote = False
        self.alone = False  # the next batch runs now, not gathered (gather.py)
        # a cluster node: a ticket taken before this batch's writes (LoopRounds.opening),
        # for the round they join (after a script it ran on its thread, a later one)
        self.since = 0
        self.reply_mode = REPLY_ON  # CLIENT REPLY: ON, OFF, or SKIP (the next command's)
        self.deferred: list[asyncio.Future[Any]] = []
        # Replies known only later (WAIT): the handler returned b"" in their place and the
        # future gives the encoded reply; filled in order once the batch's waits are over.
        self.late: list[asyncio.Future[bytes]] = []
        self.queue: list[list[bytes]] = []  # parsed commands not yet run
        self.drained: asyncio.Future[None] | None = None  # set by stop() while waiting
        self.transport: asyncio.Transport | None = None
        self.out: list[bytes] = []  # replies of this loop pass, not yet handed to transport
        self.out_size = 0
        self.flush_queued = False
        self.addr = "?:0"
        self.laddr = "?:0"
        self.created = time.time()
        self.last_active = time.monotonic()

    # -- asyncio.Protocol -----------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transport is not an asyncio.Transport subclass, but has its methods.
        self.transport = t = cast("asyncio.Transport", transport)
        srv = self.srv
        srv.stats["connections"] += 1
        peer = transport.get_extra_info("peername") or ("?", 0)
        sock = transport.get_extra_info("sockname") or ("?", 0)
        self.addr = f"{peer[0]}:{peer[1]}"
        self.laddr = f"{sock[0]}:{sock[1]}"
        if len(srv.clients) >= srv.maxclients:
            srv.stats["rejected"] += 1
            t.write(reply.error("ERR max number of clients reached"))
            self.closing = True
            t.close()
            return
        if srv.protected_mode and srv.requirepass is None and not is_local(peer[0]):
            srv.stats["rejected"] += 1
            t.write(reply.error(DENIED))
            self.closing = True
            t.close()
            return
        self.id = next(srv.next_id)
        srv.clients[self.id] = self
        t.set_write_buffer_limits(high=WRITE_HIGH_WATER)

    def connection_lost(self, exc: Exception | None) -> None:  # noqa: ARG002
        self.closing = True
        srv = self.srv
        srv.clients.pop(self.id, None)
        srv.monitors.discard(self)
        self.unwatch()
        if self.channels or self.patterns or self.shard_channels:
            srv.hub.drop(self)
        if self.blocked is not None:
            srv.blocking.drop(self)
            self.blocked = None

    def pause_writing(self) -> None:
        self.write_paused = True
        self._pause_reading()

    def resume_writing(self) -> None:
        self.write_paused = False
        if not self.waiting and self.blocked is None:
            self._run()

    def data_received(self, data: bytes) -> None:
        self.parser.feed(data)
        self.last_active = time.monotonic()
        if self.waiting or self.write_paused or self.queue or self.blocked is not None:
            if self.parser.buffered() > PAUSE_BUFFERED_SIZE:
                self._pause_reading()
            return
        self._run()

    # -- batches --------------------------------------------------------------------
    def _run(self) -> None:
        """Run batches until the input is used up or we must wait (fsync, slow reader,
        another client's script)."""
        scripts = self.srv.scripts
        while not (self.closing or self.waiting or self.write_paused or self.blocked):
            if not self.queue:
                try:
                    self.queue = self.parser.commands()
                except errors.ProtocolError as exc:
                    self._protocol_error(str(exc))
                    return
                if not self.queue:
                    self._resume_reading()
                    return
            if scripts.owner is not None and scripts.owner is not self:
                # A script runs: nothing interleaves with it. Past the busy threshold
                # every command but SCRIPT KILL gets -BUSY, as in Redis.
                if not scripts.busy:
                    scripts.deferred[self] = None
                    return
                self._busy_batch()
                continue
            pause = self.srv.pause
            if pause is not None and pause.holds(self.queue):
                pause.held[self] = None  # CLIENT PAUSE: run when it ends (pause.py)
                return
            self._batch()

    def _busy_batch(self) -> None:
        out = []
        # SCRIPT KILL stops an EVAL, FUNCTION KILL an FCALL (each refused for the other)
        killer, busy = (b"function", BUSY_FUNCTION) \
            if self.srv.scripts.running_function() is not None else (b"script", BUSY)
        for args in self.queue:
            name = args[0].lower()
            if name in ALLOWED_BUSY or (name == killer and len(args) == 2  # noqa: PLR2004
                                        and args[1].lower() == b"kill") or name == b"shutdown":
                out.append(self.execute(args))
            else:
                out.append(busy)
        self.queue = []
        self._write(b"".join(out))

    def batch_form(self) -> bytes | None:
        """The command whose batch form can run this connection's whole queue, if one
        can: the queue is one command repeated (any arguments), this connection is in no
        state that changes how commands run (MULTI, AUTH pending, pub/sub, CLIENT REPLY,
        MONITOR anywhere) and, for a write, this node leads. The queue may still turn out
        not to fit the form (its arguments): the form then answers nothing."""
        queue = self.queue
        if not 0 < len(queue) <= BATCH_MAX_COMMANDS or self.multi is not None \
                or not self.authed or self.subscribed or self.reply_mode or self.srv.monitors:
            return None
        name = queue[0][0]
        lname = name.lower()
        if lname not in BATCHED or list(map(_name, queue)).count(name) != len(queue):
            return None
        if TABLE[lname].write:
            node = self.srv.node
            if node is not None and not node.is_leader():
                return None  # a follower: one by one, each command gets -READONLY
        return lname

    def _batch(self) -> None:
        """Execute queued commands; a batch stops once its replies pass BATCH_OUTPUT_SIZE,
        so a pipeline of big GETs cannot build gigabytes of replies in one go.

        A queue that one write's batch form can run waits for the end of the loop pass
        instead (``srv.gather``), so the same write from every client read in the pass
        runs as one batch (gather.py; reads are not gathered, it says why)."""
        lname = self.batch_form()
        if lname is not None and not self.alone and TABLE[lname].write \
                and self.srv.gather(self, lname):
            self.waiting = True  # until the pass's batches ran (bytes arriving are kept)
            return
        self.alone = False
        self.run_batch(lname if lname is not None and len(self.queue) > 1 else None)

    def resume_alone(self) -> None:
        """Run the queue left with the gatherer by itself, now, and carry on as
        ``data_received`` would (gather.py: a group of one, or a form that declined)."""
        self.waiting = False
        self.alone = True
        self._run()
        self._drained_if_idle()

    def after_gathered(self) -> None:
        """The gathered batch answered this connection's queue: carry on with the input."""
        if not (self.waiting or self.blocked is not None or self.closing):
            self._run()
        self._drained_if_idle()

    def _drained_if_idle(self) -> None:
        if not self.waiting and self.drained is not None and not self.drained.done():
            self.drained.set_result(None)  # a shutdown waited for this batch (stop())

    def run_batch(self, lname: bytes | None, done: list[bytes] | None = None,
                  changes: int | None = None, since: int | None = None) -> None:
        """Run the queue: through ``lname``'s batch form if given, else command by command;
        ``done``: replies to the queue's first commands (``lname``), run already in a batch
        with other clients' (``changes`` and ``since``: the store's change count and the
        round ticket taken before that batch)."""
        self.wrote = False
        self.since = self.srv.rounds.opening() if since is None else since  # (0 on one node)
        if changes is None:
            changes = self.store.changes
        execute = self.execute
        queue = self.queue
        out: list[bytes] = []
        size = 0
        i = 0
        if lname is not None:  # e.g. -P 16 GETs: one call (or its replies, done)
            if done is not None:
                out = done
            else:
                try:
                    out = run_batch_form(self, lname, queue)
                except BatchFormBug as bug:
                    out = self._batch_failed(bug, changes)
            i = len(out)
            if i and TABLE[lname].write:
                self.wrote = True
        blocking = self.srv.blocking
        while i < len(queue):
            try:
                r = execute(queue[i])
            except Parked as parked:
                i += 1
                self.blocked = parked.park(self)
                break
            i += 1
            if self.reply_mode:
                self._unanswered()  # CLIENT REPLY OFF or SKIP: this reply is not sent
            else:
                out.append(r)
                size += len(r)
            if blocking.ready:
                blocking.serve()  # clients blocked on keys this command pushed to
            if self.closing or size > BATCH_OUTPUT_SIZE:
                break
        self.queue = queue[i:] if i < len(queue) else []
        srv = self.srv
        srv.stats["commands"] += i
        if self.wrote and self.store.changes == changes:
            # Write commands that changed nothing (SADD of a member already there, a pop
            # from an empty list) are answered as reads are: after the writes they saw.
            self.wrote = False
        # A batch that wrote waits for its writes; one that only read waits for the
        # writes it may have seen (no reply shows data a crash could still lose).
        if self.deferred:
            self._wait_then_reply(out, srv.always)
        elif srv.always and self.wrote:
            self.waiting = True
            srv.rounds.after_round(lambda exc: self._after_wait(exc, out), self.since)
        elif srv.always and srv.rounds.after_writes_seen(
                lambda exc: self._after_wait(exc, out)):
            self.waiting = True
        else:
            self._write(b"".join(out))

    def _batch_failed(self, bug: BatchFormBug, changes: int) -> list[bytes]:
        """A batch form raised an unexpected error (a bug, logged by run_batch_form). If
        it wrote nothing, the commands run one by one (empty list: each gets its own
        reply, as without the batch form); if it wrote something, running them again could
        apply them twice, so every command of the batch is answered with the internal
        error, as one command's bug is."""
        if self.store.changes == changes:
            return []
        self.wrote = True
        return [bug.reply] * len(self.queue)

    def _unanswered(self) -> None:
        """A reply is dropped: CLIENT REPLY OFF drops every one; SKIP its own and the next
        command's."""
        mode = self.reply_mode
        if mode == REPLY_SKIP_SET:  # CLIENT REPLY SKIP itself: arm the skip
            self.reply_mode = REPLY_SKIP
        elif mode == REPLY_SKIP:
            self.reply_mode = REPLY_ON

    def _wait_then_reply(self, out: list[bytes], durable: bool) -> None:
        futures = self.deferred
        self.deferred = []
        if durable:
            futures.append(self.srv.rounds.future(self.since))
        self.waiting = True
        gathered = futures[0] if len(futures) == 1 else asyncio.gather(*futures)
        gathered.add_done_callback(
            lambda fut: self._after_wait(None if fut.cancelled() else fut.exception(), out))

    def _after_wait(self, exc: BaseException | None, out: list[bytes]) -> None:
        self.waiting = False
        if self.drained is not None and not self.drained.done():
            self.drained.set_result(None)
        if self.late:
            late, self.late = iter(self.late), []
            out = [r or _late_reply(next(late)) for r in out]
        if isinstance(exc, (errors.NotEnoughReplicasError, errors.NotLeaderError)):
            # Executed and durable here, but not confirmed by the cluster: not acknowledged,
            # and it may or may not survive (so never READONLY, which says "not executed").
            line = reply.error(UNCONFIRMED if isinstance(exc, errors.NotLeaderError)
                               else error_line(exc))
            out = [line] * len(out)
        elif exc is not None:
            # The batch's writes reached memory but not the disk: no command may be
            # acknowledged. The store is poisoned for later writes.
            msg = f"MISCONF Errors writing to the log: {exc}"
            self.srv.write_error = msg
            log.error("durability wait failed: %s", exc)
            out = [reply.error(msg)] * len(out)
        if self.held:  # a blocked command served meanwhile: its reply comes after these
            out = out + self.held
            self.held = []
        self._write(b"".join(out))
        if self.blocked is not None:
            return
        if self.queue or self.parser.buffered():
            self._run()
        else:
            self._resume_reading()

    def in_script(self) -> bool:
        ctx = self.srv.scripts.current
        return ctx is not None and ctx.conn is self

    def resume(self) -> None:
        """Carry on with queued commands (after another client's script ended)."""
        if not (self.waiting or self.blocked is not None or self.closing):
            self._run()

    # -- blocked commands -----------------------------------------------------------
    def run_attempt(self, attempt: Callable[[bytes], bytes | None], key: bytes) -> bytes | None:
        """Try to serve this parked client from ``key`` (see blocking.py)."""
        try:
            return attempt(key)
        except CommandError as exc:
            return reply.error(str(exc))
        except errors.Error as err:
            return reply.error(error_line(err))

    def unblocked(self, out: bytes, *, wrote: bool) -> None:
        """The parked command has its reply: send it (after its fsync round under
        ``always``) and carry on with the commands that queued up behind it."""
        self.blocked = None
        if self.closing:
            return
        if self.waiting:
            self.held.append(out)
            return
        srv = self.srv
        if srv.always and wrote:
            self.waiting = True
            srv.rounds.after_round(lambda exc: self._after_wait(exc, [out]))
        else:
            self._write(out)
            self._run()

    def _write(self, data: bytes) -> None:
        t = self.transport
        if t is None or t.is_closing():
            return
        self.out.append(data)
        self.out_size += len(data)
        if self.closing:
            self.flush()
            t.close()
        elif self.out_size >= FLUSH_SIZE:
            self.flush()
        elif not self.flush_queued:
            self.flush_queued = True
            self.srv.queue_flush(self)

    def flush(self) -> None:
        """Hand the buffered output to the transport (which may pause_writing us)."""
        out = self.out
        if not out:
            return
        data = out[0] if len(out) == 1 else b"".join(out)
        self.out = []
        self.out_size = 0
        t = self.transport
        if t is not None and not t.is_closing():
            t.write(data)

    def _pause_reading(self) -> None:
        if not self.read_paused and self.transport is not None and not self.closing:
            self.read_paused = True
            self.transport.pause_reading()

    def _resume_reading(self) -> None:
        if self.read_paused and self.transport is not None and not self.closing:
            self.read_paused = False
            self.transport.resume_reading()

    def _protocol_error(self, message: str) -> None:
        self._write(reply.error(f"ERR {message}"))
        self.close_now()

    def close_now(self) -> None:
        self.closing = True
        if self.transport is not None:
            self.flush()
            self.transport.close()

    def close_after_reply(self) -> None:
        self.closing = True

    async def drain_and_close(self, deadline: float) -> None:
        """Shutdown: let an in-flight durable batch answer, then close (bounded)."""
        if self.waiting:
            self.drained = asyncio.get_running_loop().create_future()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.drained, max(deadline - time.monotonic(), 0))
        self.close_now()

    # -- dispatch -------------------------------------------------------------------
    def execute(self, args: list[bytes]) -> bytes:  # noqa: C901, PLR0911
        name = args[0].lower()
        spec = TABLE.get(name)
        if spec is None:
            self.multi_error = self.multi is not None
            return reply.error(unknown_command(args))
        arity = spec.arity
        if (len(args) != arity) if arity > 0 else (len(args) < -arity):
            self.multi_error = self.multi is not None
            return reply.error(f"ERR wrong number of arguments for '{spec.name}' command")
        if self.multi is None and self.authed and not self.channels and not self.patterns \
                and not self.shard_channels:
            if self.srv.monitors:
                return self.call(spec, args)
            # Fast path, the common case: call() inlined.
            if spec.write:
                node = self.srv.node
                if node is not None and not node.is_leader():
                    return READONLY_REPLY
                self.wrote = True
            try:
                return spec.handler(self, args)
            except CommandError as exc:
                return reply.error(str(exc))
            except errors.Error as err:
                return reply.error(error_line(err))
            except Exception as bug:  # never let one command take the server down
                log.exception("internal error in %r", spec.name)
                return reply.error(f"ERR internal error: {type(bug).__name__}: {bug}")
        if not self.authed and "noauth" not in spec.flags:
            self.multi_error = self.multi is not None
            return NOAUTH
        if (self.channels or self.patterns or self.shard_channels) and self.enc.proto == 2 \
                and "pubsub" not in spec.flags:
            return reply.error(
                f"ERR Can't execute '{spec.name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE"
                " / PING / QUIT / RESET are allowed in this context")
        if self.multi is not None and name not in ALLOWED_IN_MULTI:
            self.multi.append(args)
            return reply.QUEUED
        return self.call(spec, args)

    def call(self, spec: Spec, args: list[bytes]) -> bytes:
        if self.srv.monitors:
            if "skip_monitor" in spec.flags:  # a script: reported first, then its calls
                feed_monitors(self, spec, args)
                return self._call(spec, args)
            try:
                return self._call(spec, args)
            finally:
                feed_monitors(self, spec, args)
        return self._call(spec, args)

    def _call(self, spec: Spec, args: list[bytes]) -> bytes:
        if spec.write:
            node = self.srv.node
            if node is not None and not node.is_leader():
                return READONLY_REPLY
            self.wrote = True
        try:
            return spec.handler(self, args)
        except CommandError as exc:
            return reply.error(str(exc))
        except errors.Error as err:
            return reply.error(error_line(err))
        except Exception as bug:  # never let one command take the server down
            log.exception("internal error in %r", spec.name)
            return reply.error(f"ERR internal error: {type(bug).__name__}: {bug}")

    # -- helpers for handlers -------------------------------------------------------
    @property
    def subscribed(self) -> bool:
        return bool(self.channels or self.patterns or self.shard_channels)

    def defer(self, fut: asyncio.Future[Any]) -> None:
        """Hold this batch's replies until ``fut`` is done (e.g. SAVE)."""
        self.deferred.append(fut)

    def push(self, data: bytes) -> bool:
        """Send a pub/sub message now; drop a subscriber past the hard output limit.

        Returns whether the message was handed to the socket (a script's PUBLISH runs on
        the script thread: the write is handed to the loop).
        """
        loop = self.srv.loop
        if loop is not None and threading.get_ident() != self.srv.loop_thread:
            loop.call_soon_threadsafe(self.push, data)
            return not (self.closing or self.transport is None)
        t = self.transport
        if t is None or t.is_closing():
            return False
        limit = self.srv.pubsub_hard_limit
        if limit and t.get_write_buffer_size() + self.out_size + len(data) > limit:
            log.warning("closing client %d: pubsub output buffer over %d bytes", self.id, limit)
            self.srv.hub.drop(self)
            self.out = []  # what is buffered goes with the connection, as in Redis
            self.out_size = 0
            self.close_now()
            return False
        self._write(data)  # after any reply already buffered: the order is kept
        return True

    def unwatch(self) -> None:
        watchers = self.srv.watchers
        for key in self.watched:
            conns = watchers.get(key)
            if conns is not None:
                conns.discard(self)
                if not conns:
                    del watchers[key]
        self.watched.clear()
        self.dirty = False


def unknown_command(args: list[bytes]) -> str:
    """Redis 7's wording, byte for byte (each argument quoted, 128 characters in all)."""
    name = args[0].decode("utf-8", "replace")[:128]
    shown = ""
    for a in args[1:]:
        if len(shown) >= 128:
            break
        text = a.decode("utf-8", "replace")
        shown += f"'{text[: 128 - len(shown)]}' "
    return f"ERR unknown command '{name}', with args beginning with: {shown}"


READONLY_REPLY = b"-READONLY You can't write against a read only replica.\r\n"
# A batch executed on a leader that lost its leadership before followers confirmed it.
UNCONFIRMED = ("NOREPLICAS Not enough good replicas to write: this node lost its cluster "
               "leadership before the write was confirmed; it may or may not have taken effect")


def _late_reply(fut: asyncio.Future[bytes]) -> bytes:
    if fut.cancelled() or fut.exception() is not None:
        return reply.error(f"ERR {fut.exception() if not fut.cancelled() else 'cancelled'}")
    return fut.result()


def error_line(exc: errors.Error) -> str:  # noqa: PLR0911  (the error table)
    """The one table mapping tuffdb's error tree to RESP error lines."""
    if isinstance(exc, errors.PoisonedError):
        return f"MISCONF {exc}"
    if isinstance(exc, errors.ClosedError):
        return "ERR the store is closed (server shutting down)"
    if isinstance(exc, errors.NotEnoughReplicasError):
        return "NOREPLICAS Not enough good replicas to write."
    if isinstance(exc, errors.NotLeaderError):
        return "READONLY You can't write against a read only replica."
    if isinstance(exc, errors.ReadOnlyError):
        return f"READONLY {exc}"
    if isinstance(exc, errors.PermissionDeniedError):
        return f"NOPERM {exc}"
    if isinstance(exc, errors.LimitExceeded):
        return f"ERR {exc}"
    if isinstance(exc, errors.CorruptionError):
        return f"ERR {exc}; run 'tuffdb check'"
    return f"ERR {exc}"

