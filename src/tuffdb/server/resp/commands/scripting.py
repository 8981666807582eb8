"""EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT (scripts.py runs them, lua.py is Lua)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tuffdb.server.resp import reply
from tuffdb.server.resp.commands.common import to_int
from tuffdb.server.resp.lua import shebang_flags
from tuffdb.server.resp.scripts import ScriptRun
from tuffdb.server.resp.table import CommandError, command

if TYPE_CHECKING:
    from tuffdb.server.resp.conn import Conn

NOSCRIPT = "NOSCRIPT No matching script. Please use EVAL."


def _load(c: Conn, body: bytes) -> tuple[str, frozenset[str] | None]:
    """Compile and cache ``body``; (sha, shebang flags)."""
    try:
        flags = shebang_flags(body)
        sha = c.srv.scripts.engine.load(body)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    c.srv.script_flags[sha] = flags
    return sha, flags


def _eval(c: Conn, a: list[bytes], *, by_sha: bool, readonly: bool) -> bytes:
    n = to_int(a[2])
    if n < 0:
        raise CommandError("ERR Number of keys can't be negative")
    if n > len(a) - 3:
        raise CommandError("ERR Number of keys can't be greater than number of args")
    keys, argv = a[3 : 3 + n], a[3 + n :]
    scripts = c.srv.scripts
    if by_sha:
        sha = a[1].lower().decode("latin-1")
        if sha not in scripts.engine.scripts:
            raise CommandError(NOSCRIPT)
        flags = c.srv.script_flags.get(sha)
    else:
        sha, flags = _load(c, a[1])
    if flags is not None and "no-writes" in flags:
        readonly = True
    elif readonly and flags is not None:
        raise CommandError("ERR Can not execute a script with write flag using *_ro command.")
    if c.no_block or scripts.owner is not None:
        # Inside EXEC (the loop is already ours): run here, to the end.
        return scripts.run_inline(c, sha, keys, argv, readonly)
    raise ScriptRun(sha, keys, argv, readonly)


@command("eval", -3, "noscript skip_monitor may_replicate no_mandatory_keys", (0, 0, 0),
         group="scripting", since="2.6.0")
def eval_(c: Conn, a: list[bytes]) -> bytes:
    """Run a Lua script (cached under its SHA1)."""
    return _eval(c, a, by_sha=False, readonly=False)


@command("evalsha", -3, "noscript skip_monitor may_replicate no_mandatory_keys", (0, 0, 0),
         group="scripting", since="2.6.0")
def evalsha(c: Conn, a: list[bytes]) -> bytes:
    """Run a cached script by its SHA1."""
    return _eval(c, a, by_sha=True, readonly=False)


@command("eval_ro", -3, "noscript skip_monitor no_mandatory_keys readonly", (0, 0, 0),
         group="scripting", since="7.0.0")
def eval_ro(c: Conn, a: list[bytes]) -> bytes:
    """EVAL for scripts that do not write."""
    return _eval(c, a, by_sha=False, readonly=True)


@command("evalsha_ro", -3, "noscript skip_monitor no_mandatory_keys readonly", (0, 0, 0),
         group="scripting", since="7.0.0")
def evalsha_ro(c: Conn, a: list[bytes]) -> bytes:
    """EVALSHA for scripts that do not write."""
    return _eval(c, a, by_sha=True, readonly=True)


@command("script", -2, "noscript", group="scripting", since="2.6.0")
def script(c: Conn, a: list[bytes]) -> bytes:  # noqa: PLR0911  (one branch per subcommand)
    """SCRIPT LOAD | EXISTS | FLUSH | KILL | HELP."""
    sub = a[1].lower()
    scripts = c.srv.scripts
    if sub == b"load" and len(a) == 3:  # noqa: PLR2004
        return reply.bulk(_load(c, a[2])[0].encode())
    if sub == b"exists" and len(a) >= 3:  # noqa: PLR2004
        cached = scripts.engine.scripts
        return reply.array([reply.ONE if x.lower().decode("latin-1") in cached else reply.ZERO
                            for x in a[2:]])
    if sub == b"flush" and len(a) <= 3:  # noqa: PLR2004
        if len(a) == 3 and a[2].lower() not in (b"async", b"sync"):  # noqa: PLR2004
            raise CommandError("ERR SCRIPT FLUSH only support SYNC|ASYNC option")
        scripts.engine.flush()
        c.srv.script_flags.clear()
        return reply.OK
    if sub == b"kill" and len(a) == 2:  # noqa: PLR2004
        line = scripts.kill()
        if line:
            raise CommandError(line)
        return reply.OK
    if sub == b"help" and len(a) == 2:  # noqa: PLR2004
        lines = [b"SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                 b"EXISTS <sha1> [<sha1> ...]", b"FLUSH [ASYNC|SYNC]", b"KILL",
                 b"LOAD <script>", b"HELP"]
        return reply.array([reply.simple(x) for x in lines])
    if sub in (b"load", b"exists", b"flush", b"kill"):
        raise CommandError(f"ERR wrong number of arguments for 'script|{sub.decode()}' "
                           "command")
    raise CommandError(
        f"ERR unknown subcommand '{a[1].decode('utf-8', 'replace')}'. Try SCRIPT HELP.")

