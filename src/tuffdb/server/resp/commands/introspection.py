"""MEMORY, SLOWLOG and LATENCY: what monitoring tools (redis_exporter, RedisInsight,
redis-cli --memkeys) ask of a server.

MEMORY USAGE estimates a key's bytes from what the engine holds for it: the metadata
entry and, for a collection, its element entries (a sample of ``SAMPLES`` elements, 5 by
default, 0 for all, scaled to the size), each charged the engine's per-record overhead.
The figures are tuffdb's, not Redis's encodings. Commands are not timed one by one
(that would tax every command), so SLOWLOG and LATENCY answer with empty histories
rather than invented ones.
"""

# Every handler takes (conn, args), used or not: one signature for the command table.
# ruff: noqa: ARG001

from __future__ import annotations

import itertools
import resource
from typing import TYPE_CHECKING

from tuffdb._format.resp import LIST_META, META, TAG_LIST, TAG_ZSET
from tuffdb.kv.hot_tier import RECORD_OVERHEAD_BYTES
from tuffdb.server.resp import reply
from tuffdb.server.resp.commands.admin import engine_stats, rss_bytes
from tuffdb.server.resp.commands.common import to_int
from tuffdb.server.resp.commands.keys import count_keys
from tuffdb.server.resp.keyspace import elements, is_collection, stored
from tuffdb.server.resp.table import SYNTAX, CommandError, command

if TYPE_CHECKING:
    from tuffdb.server.resp.conn import Conn

DEFAULT_SAMPLES = 5


def _help(name: str, lines: list[str]) -> bytes:
    head = f"{name} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    return reply.array([reply.simple(x.encode()) for x in [head, *lines, "HELP",
                                                            "    Prints this help."]])


def _unknown(name: str, sub: bytes) -> CommandError:
    return CommandError(f"ERR unknown subcommand '{sub.decode('utf-8', 'replace')}'. "
                        f"Try {name} HELP.")


def usage(c: Conn, key: bytes, samples: int) -> int | None:
    """Estimated bytes held for ``key`` (None: no such key)."""
    raw = c.db.get(stored(key))
    if raw is None:
        return None
    total = len(stored(key)) + len(raw) + RECORD_OVERHEAD_BYTES
    if not is_collection(raw):
        return total
    cid = int(META.unpack_from(raw)[1])
    size = int((LIST_META if raw[0] == TAG_LIST else META).unpack_from(raw)[2])
    entries = c.db.scan(elements(cid))
    seen = list(entries if samples == 0 else itertools.islice(entries, samples))
    if seen:
        per = sum(len(k) + len(v) + RECORD_OVERHEAD_BYTES for k, v in seen) / len(seen)
        if raw[0] == TAG_ZSET:
            per *= 2  # each member has a score-index entry too
        total += round(per * size)
    return total


@command("memory", -2, "readonly", group="server", since="4.0.0")
def memory(c: Conn, a: list[bytes]) -> bytes:  # noqa: PLR0911
    """MEMORY USAGE key [SAMPLES n] | STATS | DOCTOR | PURGE | MALLOC-STATS | HELP."""
    sub = a[1].lower()
    if sub == b"usage" and len(a) >= 3:  # noqa: PLR2004
        samples = DEFAULT_SAMPLES
        if len(a) == 5 and a[3].lower() == b"samples":  # noqa: PLR2004
            samples = to_int(a[4])
        elif len(a) != 3:  # noqa: PLR2004
            raise CommandError(SYNTAX)
        n = usage(c, a[2], max(samples, 0))
        return c.enc.null if n is None else reply.integer(n)
    if sub == b"stats" and len(a) == 2:  # noqa: PLR2004
        rss = rss_bytes()
        engine = engine_stats(c.srv)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        fields: list[tuple[str, int]] = [
            ("peak.allocated", max(peak, rss)), ("total.allocated", rss),
            ("keys.count", count_keys(c.db)),
            ("dataset.bytes", int(engine.get("disk_bytes", 0))),  # type: ignore[call-overload]
            ("tuffdb.hot.bytes", int(engine.get("hot_bytes", 0))),  # type: ignore[call-overload]
            ("tuffdb.cache.bytes", int(engine.get("cache_bytes", 0))),  # type: ignore[call-overload]
            ("clients.normal", len(c.srv.clients))]
        return c.enc.map([(reply.bulk(k.encode()), reply.integer(v)) for k, v in fields])
    if sub == b"doctor" and len(a) == 2:  # noqa: PLR2004
        return c.enc.verbatim(b"tuffdb keeps its data in its engine's tiers (hot, block cache, "
                              b"cold segments on disk): see INFO persistence and MEMORY STATS. "
                              b"No memory problem to report.")
    if sub == b"purge" and len(a) == 2:  # noqa: PLR2004
        return reply.OK
    if sub == b"malloc-stats" and len(a) == 2:  # noqa: PLR2004
        return c.enc.verbatim(b"Stats not supported for the current allocator")
    if sub == b"help" and len(a) == 2:  # noqa: PLR2004
        return _help("MEMORY", ["DOCTOR", "    Return memory problems reports.",
                                "MALLOC-STATS", "    Return internal statistics report "
                                "from the memory allocator.", "PURGE",
                                "    Attempt to purge dirty pages for reclamation by the "
                                "allocator.", "STATS", "    Return information about the "
                                "memory usage of the server.", "USAGE <key> [SAMPLES <count>]",
                                "    Return memory in bytes used by <key> and its value. "
                                "Nested values are", "    sampled up to <count> times "
                                "(default: 5, 0 means sample all)."])
    raise _unknown("MEMORY", a[1])


@command("slowlog", -2, "admin loading stale", group="server", since="2.2.12")
def slowlog(c: Conn, a: list[bytes]) -> bytes:
    """SLOWLOG GET [count] | LEN | RESET | HELP (commands are not timed: always empty)."""
    sub = a[1].lower()
    if sub == b"get" and len(a) <= 3:  # noqa: PLR2004
        if len(a) == 3:  # noqa: PLR2004
            to_int(a[2], "ERR count should be greater than or equal to -1")
            if to_int(a[2]) < -1:
                raise CommandError("ERR count should be greater than or equal to -1")
        return reply.array([])
    if sub == b"len" and len(a) == 2:  # noqa: PLR2004
        return reply.ZERO
    if sub == b"reset" and len(a) == 2:  # noqa: PLR2004
        return reply.OK
    if sub == b"help" and len(a) == 2:  # noqa: PLR2004
        return _help("SLOWLOG", ["GET [<count>]", "    Return top <count> entries from the "
                                 "slowlog (default: 10, -1 mean all).", "LEN",
                                 "    Return the length of the slowlog.", "RESET",
                                 "    Reset the slowlog."])
    raise _unknown("SLOWLOG", a[1])


@command("latency", -2, "admin loading stale", group="server", since="2.8.13")
def latency(c: Conn, a: list[bytes]) -> bytes:
    """LATENCY LATEST | HISTORY event | RESET [event...] | DOCTOR | GRAPH event |
    HISTOGRAM [command...] | HELP (no latency events are recorded)."""
    sub = a[1].lower()
    if sub == b"latest" and len(a) == 2:  # noqa: PLR2004
        return reply.array([])
    if sub == b"history" and len(a) == 3:  # noqa: PLR2004
        return reply.array([])
    if sub == b"reset":
        return reply.ZERO
    if sub == b"histogram":
        return c.enc.map([])
    if sub == b"graph" and len(a) == 3:  # noqa: PLR2004
        raise CommandError(f"ERR No samples available for event "
                           f"'{a[2].decode('utf-8', 'replace')}'")
    if sub == b"doctor" and len(a) == 2:  # noqa: PLR2004
        return c.enc.verbatim(b"tuffdb does not record latency events; measure with "
                              b"redis-cli --latency or the /metrics endpoint of tuffdb serve.")
    if sub == b"help" and len(a) == 2:  # noqa: PLR2004
        return _help("LATENCY", ["DOCTOR", "    Return a human readable latency analysis "
                                 "report.", "HISTORY <event>", "    Return time-latency "
                                 "samples for the <event> class.", "LATEST",
                                 "    Return the latest latency samples for all events.",
                                 "RESET [<event> ...]", "    Reset latency data of one or "
                                 "more <event> classes."])
    raise _unknown("LATENCY", a[1])
