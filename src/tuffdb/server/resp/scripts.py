"""Running Lua scripts: atomic, one batch, and killable while they have not written.

A top-level EVAL runs on a dedicated script thread while the event loop stays free:
every other client's commands wait (``Conn._run`` defers them) until the script ends, so
nothing interleaves with it (Redis's atomicity). Past ``busy-reply-threshold``
(Redis's ``lua-time-limit``, 5 s by default) the waiting clients get ``-BUSY`` instead,
and SCRIPT KILL stops a script that has not written (Lua's count hook polls the flag);
one that has written runs to its end (``-UNKILLABLE``).

The script's commands run in-process (``redis.call`` -> the command table) against an
overlay, committed as one ``write_batch`` when the script ends: a crash never leaves
half a script applied. Writes before a runtime error stay, as in Redis. Clients blocked
on keys the script pushed to are served after it ends. Inside MULTI/EXEC (or with the
loop already ours) a script runs inline on the loop thread.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from tuffdb.server.resp import reply
from tuffdb.server.resp.blocking import Parked
from tuffdb.server.resp.functions import Functions
from tuffdb.server.resp.lua import CallError, ErrorReply, LuaEngine, parse_reply
from tuffdb.server.resp.overlay import Overlay
from tuffdb.server.resp.reply import Resp2, Resp3
from tuffdb.server.resp.table import TABLE, arity_ok

if TYPE_CHECKING:
    from tuffdb.server.resp.conn import Conn
    from tuffdb.server.resp.functions import Function
    from tuffdb.server.resp.server import RespServer

log = logging.getLogger("tuffdb.resp")

DEFAULT_BUSY_MS = 5000


class Context:
    """The script being run."""

    __slots__ = ("abandoned", "conn", "function", "killed", "readonly", "sha", "wrote")

    def __init__(self, conn: Conn, sha: str, readonly: bool,
                 function: str | None = None) -> None:
        self.conn = conn
        self.sha = sha
        self.function = function  # the name, for a library's function (FCALL)
        self.abandoned = False  # SHUTDOWN NOSAVE stopped it: its writes are dropped
        self.readonly = readonly
        self.wrote = False
        self.killed = False


class Handle:
    """What a connection parked on its script keeps (``conn.blocked``)."""

    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = False


class ScriptRun(Parked):
    """EVAL's (FCALL's) signal to the connection: park until the script thread answers."""

    def __init__(self, sha: str, keys: list[bytes], argv: list[bytes], readonly: bool,
                 function: Function | None = None) -> None:
        super().__init__()
        self.sha = sha
        self.keys = keys
        self.argv = argv
        self.readonly = readonly
        self.function = function

    def park(self, conn: Conn) -> Handle:
        return conn.srv.scripts.start(conn, self)


class Scripts:
    """The Lua engine of one server and who runs it."""

    def __init__(self, srv: RespServer) -> None:
        self.srv = srv
        self._engine: LuaEngine | None = None
        self._functions: Functions | None = None
        self._executor: ThreadPoolExecutor | None = None
        self.current: Context | None = None
        self.owner: Conn | None = None  # the client whose script runs on the thread
        self.busy = False
        self.busy_ms = DEFAULT_BUSY_MS
        # Clients whose commands wait for the script to end, in arrival order (a dict
        # used as an ordered set).
        self.deferred: dict[Conn, None] = {}
        self._busy_timer: asyncio.TimerHandle | None = None

    @property
    def engine(self) -> LuaEngine:
        if self._engine is None:
            from tuffdb.server.resp.server import REDIS_COMPAT_VERSION  # noqa: PLC0415

            self._engine = LuaEngine(self._call, self._interrupted, self._acl_check,
                                     REDIS_COMPAT_VERSION)
        return self._engine

    @property
    def functions(self) -> Functions:
        """The function libraries, as stored (reloaded if the stored entry changed)."""
        if self._functions is None:
            self._functions = Functions(self.engine)
        self._functions.sync(self.srv.store)
        return self._functions

    def functions_entry(self) -> tuple[bytes, bytes | None]:
        """The stored entry of the libraries as they are now (functions.py)."""
        assert self._functions is not None
        return self._functions.entry()

    def running_function(self) -> str | None:
        """The name of the function running now (FUNCTION STATS), if one is."""
        ctx = self.current
        if ctx is None or self.owner is None or ctx.function is None:
            return None
        return ctx.function

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)

    # -- running ----------------------------------------------------------------------------
    def run_inline(self, conn: Conn, sha: str, keys: list[bytes], argv: list[bytes],
                   readonly: bool, function: Function | None = None) -> bytes:
        """Run a cached script (or a library's ``function``, named by ``sha`` then) to its
        end on this thread; its reply."""
        engine = self.engine
        ctx = Context(conn, sha, readonly, None if function is None else function.name)
        outer_db, outer_enc = conn.db, conn.enc
        overlay = outer_db if isinstance(outer_db, Overlay) else Overlay(conn.store)
        previous = self.current
        self.current = ctx
        conn.db = overlay
        conn.no_block += 1
        conn.enc = Resp2
        try:
            ok, result = engine.run(sha, keys, argv) if function is None \
                else engine.run_function(function.fn, keys, argv)
            if ok:
                return engine.to_reply(result, outer_enc)
            return reply.error(engine.error_line(result, sha))
        except engine.LuaError as exc:  # an error outside the xpcall (e.g. out of memory)
            return reply.error(f"ERR Error running script {sha}: {exc}")
        finally:
            self.current = previous
            conn.db = outer_db
            conn.enc = outer_enc
            conn.no_block -= 1
            if overlay is not outer_db and not ctx.abandoned:
                overlay.commit()

    def start(self, conn: Conn, run: ScriptRun) -> Handle:
        """Run ``run`` on the script thread; the connection is parked meanwhile."""
        loop = asyncio.get_running_loop()
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="tuffdb-lua")
        handle = Handle()
        self.owner = conn
        self._busy_timer = loop.call_later(self.busy_ms / 1000, self._go_busy)
        fut = loop.run_in_executor(
            self._executor, self.run_inline, conn, run.sha, run.keys, run.argv, run.readonly,
            run.function)
        fut.add_done_callback(lambda f: self._finished(conn, handle, f))
        return handle

    def _go_busy(self) -> None:
        self._busy_timer = None
        if self.owner is None:
            return
        self.busy = True
        log.warning("a script has run for over %d ms: other clients get -BUSY", self.busy_ms)
        self._resume_deferred()

    def _finished(self, conn: Conn, handle: Handle, fut: asyncio.Future[bytes]) -> None:
        if self._busy_timer is not None:
            self._busy_timer.cancel()
            self._busy_timer = None
        self.owner = None
        self.busy = False
        handle.done = True
        exc = fut.exception()
        if exc is not None:
            log.error("script failed: %r", exc)
            out = reply.error(f"ERR internal error running the script: {exc}")
        else:
            out = fut.result()
        blocking = self.srv.blocking
        if blocking.ready:
            blocking.serve()
        conn.unblocked(out, wrote=True)
        self._resume_deferred()

    def _resume_deferred(self) -> None:
        """Let the waiting clients carry on, oldest first. Once one of them starts a
        script, the rest would only wait again behind it: they keep their places until
        it ends. (Before, each script's end resumed every waiting client in no fixed
        order, and the next script's start sent all but one back to wait: work per
        script for every waiting client, and no order among them.) Past the busy
        threshold every one is resumed (each gets -BUSY)."""
        deferred = self.deferred
        while deferred and (self.owner is None or self.busy):
            c = next(iter(deferred))
            del deferred[c]
            if not c.closing:
                c.resume()

    # -- callbacks from Lua ------------------------------------------------------------------
    def _interrupted(self) -> bool:
        ctx = self.current
        return ctx is not None and ctx.killed

    def kill(self) -> str:
        """SCRIPT KILL: the reply line."""
        ctx = self.current
        if ctx is None or self.owner is None:
            return "NOTBUSY No scripts in execution right now."
        if ctx.wrote:
            return ("UNKILLABLE Sorry the script already executed write commands against the "
                    "dataset. You can either wait the script termination or kill the server in "
                    "a hard way using the SHUTDOWN NOSAVE command.")
        ctx.killed = True
        return ""

    def abandon(self) -> None:
        """SHUTDOWN NOSAVE: stop the running script at its next line, written or not, and
        drop its writes (they are in its overlay, never committed)."""
        ctx = self.current
        if ctx is not None and self.owner is not None:
            ctx.abandoned = True
            ctx.killed = True

    def _acl_check(self, *args: Any) -> bool:
        if not args:
            raise ValueError("Please specify at least one argument for this redis lib call")
        name = args[0] if isinstance(args[0], bytes) else str(args[0]).encode()
        spec = TABLE.get(name.lower())
        if spec is None:
            raise ValueError("Invalid command passed to redis.acl_check_cmd()")
        return True

    def _call(self, protected: bool, args: tuple[Any, ...]) -> Any:  # noqa: C901, PLR0911
        engine = self.engine
        ctx = self.current
        assert ctx is not None
        if not args:
            return self._fail(protected,
                              "ERR Please specify at least one argument for this redis lib call",
                              checked=False)
        argv: list[bytes] = []
        for x in args:
            if isinstance(x, bytes):
                argv.append(x)
            elif isinstance(x, bool) or not isinstance(x, (int, float)):
                return self._fail(protected, "ERR Lua redis lib command arguments must be "
                                             "strings or integers", checked=False)
            elif isinstance(x, int) or x == int(x):
                argv.append(b"%d" % int(x))
            else:
                argv.append(b"%.14g" % x)
        spec = TABLE.get(argv[0].lower())
        if spec is None:
            return self._fail(protected, "ERR Unknown Redis command called from script")
        if not arity_ok(spec, len(argv)):
            return self._fail(protected,
                              "ERR Wrong number of args calling Redis command from script")
        if "noscript" in spec.flags:
            return self._fail(protected, "ERR This Redis command is not allowed from script")
        if spec.write:
            if ctx.readonly:
                return self._fail(protected, "ERR Write commands are not allowed from "
                                             "read-only scripts.")
            ctx.wrote = True
        conn = ctx.conn
        conn.enc = Resp3 if engine.resp3 else Resp2
        try:
            raw = conn.call(spec, argv)
        finally:
            conn.enc = Resp2
        value = parse_reply(raw)
        if type(value) is ErrorReply:
            return self._fail(protected, bytes(value).decode("utf-8", "replace"))
        return engine.to_lua(value)

    def _fail(self, protected: bool, text: str, *, checked: bool = True) -> Any:
        """redis.pcall returns ``{err=text}``; redis.call raises (see lua.py). An error of
        the call itself (``checked``: past the arguments' conversion, as Redis 7.0's
        scriptCall) also carries ``ignore_error_stats_update = true``, as Redis's does."""
        if not protected:
            raise CallError(text)
        if checked:
            return self.engine.lua.table_from({b"err": text.encode(),
                                               b"ignore_error_stats_update": True})
        return self.engine.lua.table_from({b"err": text.encode()})
