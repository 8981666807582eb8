"""EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT, and Redis 7.0's FUNCTION and FCALL(_RO)
(scripts.py runs them, lua.py is Lua, functions.py keeps function libraries)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tuffdb.server.resp import reply
from tuffdb.server.resp.commands.collection import commit_batch
from tuffdb.server.resp.commands.common import to_int
from tuffdb.server.resp.glob import compile_glob
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



# -- functions (Redis 7.0; functions.py keeps the libraries) ---------------------------------
def _fcall(c: Conn, a: list[bytes], *, readonly: bool) -> bytes:
    scripts = c.srv.scripts
    function = scripts.functions.functions.get(a[1].decode("utf-8", "replace"))
    if function is None:  # first, then the key count (Redis 7.0's order and texts)
        raise CommandError("ERR Function not found")
    n = to_int(a[2], "ERR Bad number of keys provided")
    if n > len(a) - 3:
        raise CommandError("ERR Number of keys can't be greater than number of args")
    if n < 0:
        raise CommandError("ERR Number of keys can't be negative")
    if "no-writes" in function.flags:
        readonly = True
    elif readonly:
        raise CommandError("ERR Can not execute a script with write flag using *_ro command.")
    keys, argv = a[3 : 3 + n], a[3 + n :]
    if c.no_block or scripts.owner is not None:
        return scripts.run_inline(c, function.name, keys, argv, readonly, function)
    raise ScriptRun(function.name, keys, argv, readonly, function)


@command("fcall", -3, "noscript skip_monitor may_replicate no_mandatory_keys", (0, 0, 0),
         group="scripting", since="7.0.0")
def fcall(c: Conn, a: list[bytes]) -> bytes:
    """Run a function of a loaded library."""
    return _fcall(c, a, readonly=False)


@command("fcall_ro", -3, "noscript skip_monitor no_mandatory_keys readonly", (0, 0, 0),
         group="scripting", since="7.0.0")
def fcall_ro(c: Conn, a: list[bytes]) -> bytes:
    """FCALL for functions flagged no-writes."""
    return _fcall(c, a, readonly=True)


FLAG_ORDER = ("no-writes", "allow-oom", "allow-stale", "no-cluster", "allow-cross-slot-keys")
FUNCTION_HELP = [
    b"FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    b"LOAD [REPLACE] <FUNCTION CODE>", b"DELETE <LIBRARY NAME>",
    b"LIST [LIBRARYNAME PATTERN] [WITHCODE]", b"FLUSH [ASYNC|SYNC]", b"KILL", b"STATS",
    b"HELP"]


def _writing(c: Conn) -> None:
    """FUNCTION LOAD, DELETE and FLUSH write (the stored libraries): a follower refuses
    them as any write, before its libraries change."""
    node = c.srv.node
    if node is not None and not node.is_leader():
        raise CommandError("READONLY You can't write against a read only replica.")
    c.wrote = True


def _store_functions(c: Conn) -> None:
    key, value = c.srv.scripts.functions_entry()
    commit_batch(c, [(key, value)], [])


def _function_list(c: Conn, a: list[bytes]) -> bytes:
    pattern: bytes | None = None
    with_code = False
    i = 2
    while i < len(a):
        opt = a[i].lower()
        if opt == b"withcode" and not with_code:
            with_code = True
            i += 1
        elif opt == b"libraryname" and pattern is None:
            if i + 1 >= len(a):
                raise CommandError("ERR library name argument was not given")
            pattern = a[i + 1]
            i += 2
        else:
            raise CommandError(
                f"ERR Unknown argument {a[i].decode('utf-8', 'replace')}")
    match = compile_glob(pattern) if pattern is not None else None
    enc = c.enc
    out = []
    for lib in c.srv.scripts.functions.libraries.values():
        if match is not None and not match(lib.name.encode()):
            continue
        fns = [enc.map([(reply.bulk(b"name"), reply.bulk(f.name.encode())),
                        (reply.bulk(b"description"),
                         enc.null if f.description is None else reply.bulk(f.description)),
                        (reply.bulk(b"flags"),
                         enc.set([reply.bulk(x.encode()) for x in FLAG_ORDER if x in f.flags]))])
               for f in lib.functions]
        fields = [(reply.bulk(b"library_name"), reply.bulk(lib.name.encode())),
                  (reply.bulk(b"engine"), reply.bulk(b"LUA")),
                  (reply.bulk(b"functions"), reply.array(fns))]
        if with_code:
            fields.append((reply.bulk(b"library_code"), reply.bulk(lib.code)))
        out.append(enc.map(fields))
    return reply.array(out)


def _function_stats(c: Conn) -> bytes:
    enc = c.enc
    funcs = c.srv.scripts.functions
    running = c.srv.scripts.running_function()
    script = enc.null if running is None else enc.map(
        [(reply.bulk(b"name"), reply.bulk(running.encode())),
         (reply.bulk(b"command"), reply.array([])),
         (reply.bulk(b"duration_ms"), reply.integer(0))])
    lua = enc.map([(reply.bulk(b"libraries_count"), reply.integer(len(funcs.libraries))),
                   (reply.bulk(b"functions_count"), reply.integer(len(funcs.functions)))])
    return enc.map([(reply.bulk(b"running_script"), script),
                    (reply.bulk(b"engines"), enc.map([(reply.bulk(b"LUA"), lua)]))])


@command("function", -2, "noscript", group="scripting", since="7.0.0")
def function(c: Conn, a: list[bytes]) -> bytes:  # noqa: C901, PLR0911, PLR0912
    """FUNCTION LOAD | DELETE | FLUSH | LIST | STATS | KILL | HELP (DUMP and RESTORE, whose
    payload is Redis's RDB encoding, are refused: LIST WITHCODE and LOAD carry libraries)."""
    sub = a[1].lower()
    scripts = c.srv.scripts
    if sub == b"load" and len(a) in (3, 4):
        replace = len(a) == 4  # noqa: PLR2004
        if replace and a[2].lower() != b"replace":
            raise CommandError(f"ERR Unknown option given: {a[2].decode('utf-8', 'replace')}")
        _writing(c)
        name = scripts.functions.load(a[-1], replace=replace)
        _store_functions(c)
        return reply.bulk(name.encode())
    if sub == b"delete" and len(a) == 3:  # noqa: PLR2004
        _writing(c)
        scripts.functions.delete(a[2].decode("utf-8", "replace"))
        _store_functions(c)
        return reply.OK
    if sub == b"flush" and len(a) <= 3:  # noqa: PLR2004
        if len(a) == 3 and a[2].lower() not in (b"async", b"sync"):  # noqa: PLR2004
            raise CommandError("ERR FUNCTION FLUSH only supports SYNC|ASYNC option")
        _writing(c)
        scripts.functions.flush()
        _store_functions(c)
        return reply.OK
    if sub == b"list":
        return _function_list(c, a)
    if sub == b"stats" and len(a) == 2:  # noqa: PLR2004
        return _function_stats(c)
    if sub == b"kill" and len(a) == 2:  # noqa: PLR2004
        line = scripts.kill()
        if line:
            raise CommandError(line)
        return reply.OK
    if sub in (b"dump", b"restore"):
        raise CommandError(f"ERR FUNCTION {sub.upper().decode()} is not supported by tuffdb: "
                           "FUNCTION LIST WITHCODE and FUNCTION LOAD carry libraries")
    if sub == b"help" and len(a) == 2:  # noqa: PLR2004
        return reply.array([reply.simple(x) for x in FUNCTION_HELP])
    if sub in (b"load", b"delete", b"flush", b"stats", b"kill", b"help"):
        raise CommandError(f"ERR wrong number of arguments for 'function|{sub.decode()}' "
                           "command")
    raise CommandError(
        f"ERR unknown subcommand '{a[1].decode('utf-8', 'replace')}'. Try FUNCTION HELP.")
