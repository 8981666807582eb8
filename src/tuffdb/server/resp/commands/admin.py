"""Server commands: INFO CONFIG COMMAND TIME DBSIZE FLUSHDB FLUSHALL SAVE BGSAVE LASTSAVE WAIT."""

# Every handler takes (conn, args), used or not: one signature for the command table.
# ruff: noqa: ARG001

from __future__ import annotations

import asyncio
import itertools
import os
import platform
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from tuffdb.server.face import request_shutdown
from tuffdb.server.resp import reply
from tuffdb.server.resp.blocking import Waiter
from tuffdb.server.resp.commands.cluster import replication_section
from tuffdb.server.resp.commands.common import to_int
from tuffdb.server.resp.commands.keys import count_keys
from tuffdb.server.resp.keyspace import user_ranges
from tuffdb.server.resp.glob import compile_glob
from tuffdb.server.resp.server import REDIS_COMPAT_VERSION, TO_ENGINE, hard_limits
from tuffdb.server.resp.table import (
    SYNTAX,
    TABLE,
    CommandError,
    arity_ok,
    command,
    command_docs,
    command_info,
)

if TYPE_CHECKING:
    from tuffdb.server.resp.conn import Conn
    from tuffdb.server.resp.server import RespServer


# -- keyspace-wide ----------------------------------------------------------------------
@command("dbsize", 1, "readonly fast", group="server")
def dbsize(c: Conn, a: list[bytes]) -> bytes:
    """Number of keys (O(log n): two range counts of the engine's ordered view)."""
    return reply.integer(count_keys(c.db))


def _flush(c: Conn, a: list[bytes]) -> bytes:
    """Delete every key's metadata; collections' elements are left to the sweeper."""
    if len(a) > 2 or (len(a) == 2 and a[1].lower() not in (b"async", b"sync")):
        raise CommandError("ERR syntax error")
    c.srv.touch_existing()
    c.srv.key_count_cache = None
    db = c.db
    for eprefix, lo, hi in user_ranges(b""):
        while True:
            batch = list(itertools.islice(db.scan_keys(eprefix, lo, hi), 4096))
            if not batch:
                break
            db.write_batch([(k, None) for k in batch], sync=False)
    c.srv.sweeper.walk_soon()
    return reply.OK


@command("flushdb", -1, "write", group="server")
def flushdb(c: Conn, a: list[bytes]) -> bytes:
    """Delete every key."""
    return _flush(c, a)


@command("flushall", -1, "write", group="server")
def flushall(c: Conn, a: list[bytes]) -> bytes:
    """Delete every key (there is one database)."""
    return _flush(c, a)


# -- persistence ------------------------------------------------------------------------
def _sync_in_thread(srv: RespServer) -> asyncio.Future[None]:
    loop = asyncio.get_running_loop()
    fut = loop.run_in_executor(None, srv.store.sync)

    def done(f: asyncio.Future[None]) -> None:
        if not f.cancelled() and f.exception() is None:
            srv.last_save = int(time.time())

    fut.add_done_callback(done)
    return fut


@command("swapdb", 3, "write fast", group="keyspace", since="4.0.0")
def swapdb(c: Conn, a: list[bytes]) -> bytes:
    """SWAPDB 0 0 (there is one database)."""
    first = _db_index(a[1], "ERR invalid first DB index")
    second = _db_index(a[2], "ERR invalid second DB index")
    if first != 0 or second != 0:
        raise CommandError("ERR DB index is out of range")
    return reply.OK


def _db_index(raw: bytes, message: str) -> int:
    return to_int(raw, message)


@command("bgrewriteaof", 1, "admin noscript", group="server", since="1.0.0")
def bgrewriteaof(c: Conn, a: list[bytes]) -> bytes:
    """Compact the engine's logs in the background (what rewriting Redis's AOF achieves:
    dead records dropped)."""
    loop = asyncio.get_running_loop()
    loop.run_in_executor(None, c.srv.store.compact)
    return reply.simple(b"Background append only file rewriting started")


@command("lolwut", -1, "readonly fast", group="server", since="5.0.0")
def lolwut(c: Conn, a: list[bytes]) -> bytes:
    """Redis's toy command: here, the version line alone."""
    return c.enc.verbatim(b"tuffdb, speaking Redis ver. " + REDIS_COMPAT_VERSION.encode() + b"\n")


@command("debug", -2, "admin noscript loading stale", group="server", since="1.0.0")
def debug(c: Conn, a: list[bytes]) -> bytes:
    """Refused, as Redis 7.0 refuses it by default (enable-debug-command no)."""
    raise CommandError("ERR DEBUG command not allowed. If the enable-debug-command option is "
                       "set to \"local\", you can run it from a local connection, otherwise "
                       "you need to set this option in the configuration file, and then "
                       "restart the server.")


@command("monitor", 1, "admin noscript loading stale", group="server", since="1.0.0")
def monitor(c: Conn, a: list[bytes]) -> bytes:
    """Stream every command the server runs to this client (monitor.py)."""
    if c.multi is not None:
        raise CommandError("ERR MONITOR isn't allowed for DENY BLOCKING client")
    c.srv.monitors.add(c)
    return reply.OK


@command("shutdown", -1, "admin noscript loading stale", group="server")
def shutdown(c: Conn, a: list[bytes]) -> bytes:
    """Stop the server as SIGTERM does (every face of ``tuffdb serve``): in-flight writes
    are answered, the stores fsynced and closed. The connection closes without a reply.
    NOSAVE also stops a script past its busy threshold, even one that wrote, dropping its
    writes (the way out Redis offers); SAVE, NOW and FORCE change nothing here: every
    stop makes acknowledged writes durable."""
    opts = [x.lower() for x in a[1:]]
    if any(o not in (b"nosave", b"save", b"now", b"force", b"abort") for o in opts) or \
            (b"save" in opts and b"nosave" in opts) or (b"abort" in opts and len(opts) > 1):
        raise CommandError("ERR syntax error")
    if b"abort" in opts:
        raise CommandError("ERR No shutdown in progress.")
    scripts = c.srv.scripts
    if scripts.busy and scripts.owner is not None and scripts.owner is not c:
        if b"nosave" not in opts:
            raise CommandError("BUSY Redis is busy running a script. You can only call "
                               "SCRIPT KILL or SHUTDOWN NOSAVE.")
        scripts.abandon()
    if not request_shutdown():
        raise CommandError("ERR SHUTDOWN is not offered here: this RESP face runs inside "
                           "another program, which stops it")
    c.close_now()
    return b""


@command("save", 1, "admin noscript", group="server")
def save(c: Conn, a: list[bytes]) -> bytes:
    """fsync everything written so far (in a thread; this client waits, others do not)."""
    c.defer(_sync_in_thread(c.srv))
    return reply.OK


@command("bgsave", -1, "admin noscript", group="server")
def bgsave(c: Conn, a: list[bytes]) -> bytes:
    """fsync everything written so far, in the background."""
    _sync_in_thread(c.srv)
    return reply.simple("Background saving started")


@command("lastsave", 1, "loading stale fast", group="server")
def lastsave(c: Conn, a: list[bytes]) -> bytes:
    """Unix time of the last completed SAVE/BGSAVE (start-up time before any)."""
    return reply.integer(c.srv.last_save)


@command("time", 1, "loading stale fast", group="server", since="2.6.0")
def time_(c: Conn, a: list[bytes]) -> bytes:
    """Server time: seconds and microseconds."""
    now = time.time_ns() // 1000
    return reply.array([reply.bulk(b"%d" % (now // 1_000_000)),
                        reply.bulk(b"%d" % (now % 1_000_000))])


# -- CONFIG -----------------------------------------------------------------------------
def _config_values(srv: RespServer) -> dict[str, str]:
    return {
        "appendfsync": srv.appendfsync,
        "appendonly": "yes",
        "maxclients": str(srv.maxclients),
        "requirepass": srv.requirepass or "",
        "protected-mode": "yes" if srv.protected_mode else "no",
        "proto-max-bulk-len": str(srv.max_bulk_len),
        "timeout": str(srv.timeout),
        "client-output-buffer-limit": srv.output_limits,
        "save": "",
        "busy-reply-threshold": str(srv.scripts.busy_ms),
        "tuffdb-sweep-interval-ms": str(int(srv.sweeper.pass_interval_s * 1000)),
        "lua-time-limit": str(srv.scripts.busy_ms),
        "databases": "1",
        "port": str(srv.port),
        "bind": srv.host,
        "dir": str(srv.data_dir),
        # tuffdb never evicts (every key lives in the engine's tiers, not in a RAM budget)
        # and sends no keyspace notifications: tools that check these see so.
        "maxmemory": "0",
        "maxmemory-policy": "noeviction",
        "notify-keyspace-events": "",
    }


def _config_set(srv: RespServer, name: str, value: str) -> None:  # noqa: C901  (a dispatch)
    if name == "appendfsync":
        if value not in TO_ENGINE:
            raise ValueError("argument(s) must be one of the following: always, everysec, no")
        srv.set_appendfsync(value)
    elif name == "maxclients":
        srv.maxclients = max(int(value), 1)
    elif name == "requirepass":
        srv.requirepass = value or None
    elif name == "protected-mode":
        if value.lower() not in ("yes", "no"):
            raise ValueError("argument must be 'yes' or 'no'")
        srv.protected_mode = value.lower() == "yes"
    elif name == "proto-max-bulk-len":
        n = int(value)
        if n < 1024 * 1024:
            raise ValueError("argument must be a memory value of at least 1mb")
        srv.max_bulk_len = n
        for cl in srv.clients.values():
            cl.parser.max_bulk_len = n
    elif name in ("maxmemory", "maxmemory-policy"):  # only what is true: no eviction
        wanted = {"0"} if name == "maxmemory" else {"noeviction"}
        if value.lower() not in wanted:
            raise ValueError("tuffdb never evicts keys (maxmemory 0, maxmemory-policy "
                             "noeviction)")
    elif name == "notify-keyspace-events":
        if value:
            raise ValueError("tuffdb sends no keyspace notifications")
    elif name == "timeout":
        srv.timeout = max(int(value), 0)
    elif name in ("busy-reply-threshold", "lua-time-limit"):
        srv.scripts.busy_ms = max(int(value), 0)
    elif name == "tuffdb-sweep-interval-ms":
        srv.sweeper.pass_interval_s = max(int(value), 10) / 1000
    elif name == "client-output-buffer-limit":
        srv.normal_hard_limit, srv.pubsub_hard_limit = hard_limits(value)
        srv.output_limits = value
    elif name in _config_values(srv):
        raise ValueError("can't set immutable config")
    else:
        raise KeyError(name)


@command("config", -2, "admin noscript loading stale", group="server", since="2.0.0")
def config(c: Conn, a: list[bytes]) -> bytes:  # noqa: C901  (one branch per subcommand)
    """CONFIG GET pattern... | SET name value... | RESETSTAT | REWRITE."""
    sub = a[1].lower()
    srv = c.srv
    if sub == b"get" and len(a) >= 3:
        values = _config_values(srv)
        pairs = []
        for name, value in values.items():
            if any(compile_glob(p.lower())(name.encode()) for p in a[2:]):
                pairs.append((reply.bulk(name.encode()), reply.bulk(value.encode())))
        return c.enc.map(pairs)
    if sub == b"set" and len(a) < 4:  # noqa: PLR2004
        raise CommandError("ERR wrong number of arguments for 'config|set' command")
    if sub == b"set" and len(a) % 2:
        raise CommandError(SYNTAX)
    if sub == b"set":
        for i in range(2, len(a), 2):
            name = a[i].decode("utf-8", "replace").lower()
            try:
                _config_set(srv, name, a[i + 1].decode("utf-8", "replace"))
            except KeyError:
                raise CommandError("ERR Unknown option or number of arguments for CONFIG SET "
                                   f"- '{a[i].decode('utf-8', 'replace')}'") from None
            except ValueError as exc:
                raise CommandError(f"ERR CONFIG SET failed (possibly related to argument "
                                   f"'{name}') - {exc}") from None
        return reply.OK
    if sub == b"resetstat" and len(a) == 2:
        for k in srv.stats:
            srv.stats[k] = 0
        return reply.OK
    if sub == b"rewrite" and len(a) == 2:
        raise CommandError("ERR The server is running without a config file")
    if sub in (b"get", b"resetstat", b"rewrite"):
        raise CommandError(f"ERR wrong number of arguments for 'config|{sub.decode()}' command")
    raise CommandError(
        f"ERR unknown subcommand '{a[1].decode('utf-8', 'replace')}'. Try CONFIG HELP.")


# -- COMMAND ----------------------------------------------------------------------------
@command("command", -1, "loading stale", group="server", since="2.8.13")
def command_(c: Conn, a: list[bytes]) -> bytes:
    """COMMAND | COUNT | INFO name... | DOCS [name...] | LIST."""
    if len(a) == 1:
        return reply.array([command_info(s, c.enc) for s in TABLE.values()])
    sub = a[1].lower()
    if sub == b"count":
        return reply.integer(len(TABLE))
    if sub == b"getkeys":
        return _getkeys(c, a)
    if sub == b"list":
        return c.enc.bulks(list(TABLE))
    if sub == b"info":
        names = a[2:] or list(TABLE)
        specs = [TABLE.get(n.lower()) for n in names]
        return reply.array([c.enc.null if s is None else command_info(s, c.enc) for s in specs])
    if sub == b"docs":
        names = [n.lower() for n in a[2:]] or list(TABLE)
        return c.enc.map([(reply.bulk(n), command_docs(TABLE[n], c.enc))
                          for n in names if n in TABLE])
    raise CommandError(
        f"ERR unknown subcommand '{a[1].decode('utf-8', 'replace')}'. Try COMMAND HELP.")


def _getkeys(c: Conn, a: list[bytes]) -> bytes:
    """COMMAND GETKEYS cmd arg...: the keys by the command's key spec (first, last, step)."""
    if len(a) < 4:  # noqa: PLR2004 - a command and at least one argument
        raise CommandError("ERR wrong number of arguments for 'command|getkeys' command")
    spec = TABLE.get(a[2].lower())
    if spec is None:
        raise CommandError("ERR Invalid command specified")
    argv = a[2:]
    if not arity_ok(spec, len(argv)):
        raise CommandError("ERR Invalid number of arguments specified for command")
    first, last, step = spec.first_key, spec.last_key, spec.step
    if first <= 0:
        raise CommandError("ERR The command has no key arguments")
    end = len(argv) + last if last < 0 else last
    return reply.array([reply.bulk(argv[i]) for i in range(first, min(end, len(argv) - 1) + 1,
                                                            max(step, 1))])


# -- INFO -------------------------------------------------------------------------------
def rss_bytes() -> int:
    try:
        statm = Path("/proc/self/statm").read_bytes()
        return int(statm.split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def engine_stats(srv: RespServer) -> dict[str, object]:
    wanted = ("hot_bytes", "hot_segments", "cold_segments", "disk_bytes", "cache_bytes")
    try:
        stats = srv.store.stats()
    except Exception:  # noqa: BLE001  (INFO must answer even if the engine cannot)
        return {}
    return {k: stats[k] for k in wanted if k in stats}


def _sections(c: Conn) -> dict[str, list[tuple[str, object]]]:
    srv = c.srv
    now = time.time()
    up = int(now - srv.started)
    rss = rss_bytes()
    blocked = sum(1 for x in srv.clients.values() if isinstance(x.blocked, Waiter))
    sections: dict[str, list[tuple[str, object]]] = {
        "server": [("redis_version", REDIS_COMPAT_VERSION), ("tuffdb_face", "resp"),
                   ("redis_mode", "standalone"),
                   ("os", f"{platform.system()} {platform.release()} {platform.machine()}"),
                   ("arch_bits", 64), ("multiplexing_api", "asyncio"),
                   ("python_version", platform.python_version()),
                   ("process_id", os.getpid()), ("run_id", srv.run_id),
                   ("tcp_port", srv.port), ("uptime_in_seconds", up),
                   ("uptime_in_days", up // 86400), ("executable", sys.executable)],
        "clients": [("connected_clients", len(srv.clients)),
                    ("maxclients", srv.maxclients), ("blocked_clients", blocked),
                    ("pubsub_clients", sum(1 for x in srv.clients.values() if x.subscribed))],
        "memory": [("used_memory", rss), ("used_memory_rss", rss),
                   ("used_memory_human", f"{rss / 1048576:.2f}M"),
                   ("maxmemory", 0), ("maxmemory_policy", "noeviction")],
        "persistence": [("loading", 0), ("aof_enabled", 1),
                        ("appendfsync", srv.appendfsync),
                        *((f"tuffdb_{k}", v) for k, v in engine_stats(srv).items()),
                        ("tuffdb_changes", srv.store.changes),  # writes applied (a counter)
                        ("tuffdb_swept_entries", srv.sweeper.deleted),
                        ("tuffdb_sweeper_busy", int(srv.sweeper.busy)),
                        ("rdb_last_save_time", srv.last_save),
                        ("aof_last_write_status", "err" if srv.degraded else "ok")],
        "stats": [("total_connections_received", srv.stats["connections"]),
                  ("total_commands_processed", srv.stats["commands"]),
                  ("rejected_connections", srv.stats["rejected"]),
                  ("keyspace_hits", srv.stats["hits"]),
                  ("keyspace_misses", srv.stats["misses"]),
                  # commands run in a batch with other clients' (gather.py)
                  ("tuffdb_gathered_commands", srv.stats["gathered"]),
                  ("pubsub_channels", len(srv.hub.channels)),
                  ("pubsub_patterns", len(srv.hub.patterns))],
        "replication": replication_section(c),
        "keyspace": [],
    }
    return sections


_KEY_COUNT_TTL_S = 1.0


def _key_counts(srv: RespServer) -> tuple[int, int]:
    """(keys, keys with a TTL). Counting keys is O(n) in this engine, so monitoring
    tools calling INFO in a loop get a count at most one second old."""
    now = time.monotonic()
    cached = srv.key_count_cache
    if cached is None or now - cached[0] > _KEY_COUNT_TTL_S:
        n = count_keys(srv.store)
        expires = int(srv.store.stats().get("ttl_keys", 0))
        cached = srv.key_count_cache = (now, n, min(expires, n))
    return cached[1], cached[2]


@command("info", -1, "loading stale", group="server")
def info(c: Conn, a: list[bytes]) -> bytes:
    """Server facts in Redis's INFO format."""
    sections = _sections(c)
    wanted = [x.decode("utf-8", "replace").lower() for x in a[1:]]
    if not wanted or any(w in ("all", "everything", "default") for w in wanted):
        wanted = list(sections)
    out = []
    for name in wanted:
        fields = sections.get(name)
        if fields is None:
            continue
        if name == "keyspace":
            n, expires = _key_counts(c.srv)
            fields = [("db0", f"keys={n},expires={expires},avg_ttl=0")] if n else []
        out.append(f"# {name.capitalize()}\r\n")
        out.extend(f"{k}:{v}\r\n" for k, v in fields)
        out.append("\r\n")
    return c.enc.verbatim("".join(out).rstrip("\r\n").encode() + b"\r\n")
