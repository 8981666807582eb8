"""Blocking commands with several clients, on tuffdb and on a real redis-server.

Each scenario runs the same steps against both servers and compares every reply. A step
that must happen after a client has blocked waits for INFO's ``blocked_clients`` to
reach the expected count (a real condition, polled with a generous bound), never a sleep.
The cases are redis-types.md §2.2: first blocked first served, served only after the
pushing command/EXEC completes, a wrong-type wake-up ignored, BLMOVE chains, MULTI
never blocking, float timeouts, RESP3 nulls.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest


sys.path.insert(0, str(Path(__file__).resolve().parent))
from resp_harness import (  # noqa: E402
    NEEDS_REDIS,
    RawClient,
    client_flags,
    compare,
    tuffdb_and_redis,
)

pytestmark = NEEDS_REDIS

WAIT_S = 20.0


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, int]]:
    yield from tuffdb_and_redis(tmp_path_factory, "blocking")


def wait_blocked(admin: RawClient, n: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        info = admin.call("INFO", "clients")
        if f"blocked_clients:{n}\r\n".encode() in info:
            return
    raise AssertionError(f"never saw {n} blocked clients: {info!r}")


Scenario = Callable[[Callable[[], RawClient], RawClient], list[bytes]]


def both(servers: tuple[int, int], scenario: Scenario) -> list[bytes]:
    results = []
    for port in servers:
        clients: list[RawClient] = []

        def new() -> RawClient:
            c = RawClient(port)
            clients.append(c)
            return c

        admin = new()
        admin.call("FLUSHALL")
        try:
            results.append(scenario(new, admin))
        finally:
            for c in clients:
                c.close()
    assert results[0] == results[1], f"tuffdb {results[0]!r}\nredis  {results[1]!r}"
    return results[0]


def test_first_blocked_is_first_served(servers: tuple[int, int]) -> None:
    def scenario(new: Callable[[], RawClient], admin: RawClient) -> list[bytes]:
        c1, c2 = new(), new()
        c1.send("BLPOP", "k", "0")
        wait_blocked(admin, 1)
        c2.send("BLPOP", "k", "k2", "0")
        wait_blocked(admin, 2)
        pushed = admin.call("RPUSH", "k", "x", "y")
        return [pushed, c1.read(), c2.read(), admin.call("EXISTS", "k")]

    out = both(servers, scenario)
    assert out[1] == b"*2\r\n$1\r\nk\r\n$1\r\nx\r\n"


def test_a_transaction_that_pushes_and_pops_serves_nobody(servers: tuple[int, int]) -> None:
    def scenario(new: Callable[[], RawClient], admin: RawClient) -> list[bytes]:
        c1 = new()
        c1.send("BLPOP", "k", "0.3")
        wait_blocked(admin, 1)
        steps = [admin.call("MULTI"), admin.call("RPUSH", "k", "a"), admin.call("LPOP", "k"),
                 admin.call("EXEC")]
        return [*steps, c1.read()]

    assert both(servers, scenario)[-1] == b"*-1\r\n"


def test_a_wrong_type_wake_up_is_ignored_and_the_timeout_replies(
        servers: tuple[int, int]) -> None:
    def scenario(new: Callable[[], RawClient], admin: RawClient) -> list[bytes]:
        c1, c3 = new(), new()
        c3.call("HELLO", "3")
        c1.send("BLPOP", "k", "0.2")
        c3.send("BZPOPMIN", "k", "0.2")
        wait_blocked(admin, 2)
        return [admin.call("SET", "k", "str"), c1.read(), c3.read()]

    assert both(servers, scenario)[1:] == [b"*-1\r\n", b"_\r\n"]


def test_blmove_chains_into_the_next_waiter(servers: tuple[int, int]) -> None:
    def scenario(new: Callable[[], RawClient], admin: RawClient) -> list[bytes]:
        c1, c2 = new(), new()
        c1.send("BLMOVE", "src", "dst", "RIGHT", "LEFT", "0")
        wait_blocked(admin, 1)
        c2.send("BLPOP", "dst", "0")
        wait_blocked(admin, 2)
        return [admin.call("LPUSH", "src", "v"), c1.read(), c2.read(),
                admin.call("EXISTS", "src", "dst")]

    assert both(servers, scenario)[1:3] == [b"$1\r\nv\r\n", b"*2\r\n$3\r\ndst\r\n$1\r\nv\r\n"]


def test_pipelined_commands_wait_behind_a_blocked_one(servers: tuple[int, int]) -> None:
    def scenario(new: Callable[[], RawClient], admin: RawClient) -> list[bytes]:
        c1 = new()
        c1.send("BRPOP", "q", "0")
        c1.send("GET", "after")
        wait_blocked(admin, 1)
        steps = [admin.call("SET", "after", "set-before-the-push"),
                 admin.call("RPUSH", "q", "job")]
        return [*steps, c1.read(), c1.read()]

    assert both(servers, scenario)[-1] == b"$19\r\nset-before-the-push\r\n"


def test_sorted_set_and_mpop_waiters_are_served(servers: tuple[int, int]) -> None:
    def scenario(new: Callable[[], RawClient], admin: RawClient) -> list[bytes]:
        c1, c2, c3 = new(), new(), new()
        c1.send("BZPOPMAX", "z", "0")
        wait_blocked(admin, 1)
        c2.send("BZMPOP", "0", "2", "z", "z2", "MIN", "COUNT", "2")
        wait_blocked(admin, 2)
        c3.send("BLMPOP", "0", "1", "l", "RIGHT", "COUNT", "5")
        wait_blocked(admin, 3)
        return [admin.call("ZADD", "z", "1", "a", "2", "b", "3", "c"), c1.read(), c2.read(),
                admin.call("RPUSH", "l", "1", "2"), c3.read(), admin.call("EXISTS", "z", "l")]

    both(servers, scenario)


def test_timeouts_reply_null_arrays_and_multi_never_blocks(servers: tuple[int, int]) -> None:
    def scenario(new: Callable[[], RawClient], admin: RawClient) -> list[bytes]:
        c1 = new()
        out = [c1.call("BRPOP", "none", "0.05"), c1.call("BLMOVE", "none", "d", "LEFT", "LEFT",
                                                         "0.01"),
               c1.call("BRPOPLPUSH", "none", "d", "0.01"), c1.call("BLMPOP", "0.01", "1", "n",
                                                                   "LEFT"),
               c1.call("MULTI"), c1.call("BRPOPLPUSH", "none", "d", "0"),
               c1.call("BZPOPMIN", "none", "0"), c1.call("EXEC")]
        c1.call("HELLO", "3")
        out.append(c1.call("BLPOP", "none", "0.01"))
        return out

    out = both(servers, scenario)
    assert out[:2] == [b"*-1\r\n", b"*-1\r\n"]
    assert out[-1] == b"_\r\n"


def test_a_client_that_disconnects_while_blocked_is_forgotten(servers: tuple[int, int]) -> None:
    def scenario(new: Callable[[], RawClient], admin: RawClient) -> list[bytes]:
        c1, c2 = new(), new()
        c1.send("BLPOP", "k", "0")
        wait_blocked(admin, 1)
        c2.send("BLPOP", "k", "0")
        wait_blocked(admin, 2)
        c1.close()
        wait_blocked(admin, 1)
        return [admin.call("RPUSH", "k", "v"), c2.read(), admin.call("LLEN", "k")]

    assert both(servers, scenario)[1] == b"*2\r\n$1\r\nk\r\n$1\r\nv\r\n"


def test_stream_readers_block_until_an_entry_is_added(servers: tuple[int, int]) -> None:
    def scenario(new: Callable[[], RawClient], admin: RawClient) -> list[bytes]:
        c1, c2, c3 = new(), new(), new()
        admin.call("XADD", "s", "1-0", "old", "x")
        admin.call("XGROUP", "CREATE", "s", "g", "$")
        c1.send("XREAD", "BLOCK", "0", "STREAMS", "s", "other", "$", "0")
        wait_blocked(admin, 1)
        c2.send("XREADGROUP", "GROUP", "g", "w1", "BLOCK", "0", "STREAMS", "s", ">")
        wait_blocked(admin, 2)
        c3.call("HELLO", "3")
        c3.send("XREAD", "BLOCK", "50", "STREAMS", "s", "$")
        timed_out = c3.read()
        return [timed_out, admin.call("XADD", "s", "2-0", "new", "y"), c1.read(), c2.read(),
                admin.call("XPENDING", "s", "g")]

    out = both(servers, scenario)
    assert out[0] == b"_\r\n"
    assert b"new" in out[2]


# -- CLIENT UNBLOCK and CLIENT KILL ------------------------------------------------------------
def _id(client: RawClient) -> str:
    return client.call("CLIENT", "ID").decode()[1:-2]


def _unblock_until_blocked(admin: RawClient, target: str, *how: str) -> bytes:
    """CLIENT UNBLOCK answers 0 until the target's BLPOP has reached the server."""
    deadline = time.monotonic() + 30
    while (out := admin.call("CLIENT", "UNBLOCK", target, *how)) == b":0\r\n":
        assert time.monotonic() < deadline
    return out


def _closed(client: RawClient) -> str:
    try:
        return repr(client.read())
    except (ConnectionError, OSError):
        return "closed"


def _kill_and_unblock(port: int) -> list[str]:
    admin, blocked, subscriber = RawClient(port), RawClient(port), RawClient(port)
    try:
        out = []
        bid, sid = _id(blocked), _id(subscriber)
        blocked.send("BLPOP", "q", "0")
        out += [_unblock_until_blocked(admin, bid).decode(), blocked.read().decode()]
        blocked.send("BLPOP", "q", "0")
        out += [_unblock_until_blocked(admin, bid, "ERROR").decode(), blocked.read().decode()]
        out.append(admin.call("CLIENT", "UNBLOCK", sid).decode())
        out.append(subscriber.call("SUBSCRIBE", "ch").decode())
        out.append(admin.call("CLIENT", "KILL", "TYPE", "pubsub").decode())
        out.append(_closed(subscriber))
        out.append(admin.call("CLIENT", "KILL", "ID", bid).decode())
        out.append(_closed(blocked))
        me = next(part.split("=", 1)[1] for part in admin.call("CLIENT", "INFO").decode().split()
                  if part.startswith("addr="))
        out.append(admin.call("CLIENT", "KILL", "ADDR", me).decode())  # SKIPME yes by default
        out.append(admin.call("CLIENT", "KILL", me).decode())  # the old form: itself, after
        out.append(_closed(admin))
        return out
    finally:
        for x in (admin, blocked, subscriber):
            x.close()


def test_client_unblock_and_kill_act_as_in_redis(servers: tuple[int, int]) -> None:
    ours, theirs = _kill_and_unblock(servers[0]), _kill_and_unblock(servers[1])
    assert ours == theirs
    assert ours[:4] == [":1\r\n", "*-1\r\n", ":1\r\n",
                        "-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"]
    assert ours[-1] == "closed"


def test_client_kill_and_unblock_errors_reply_like_redis(servers: tuple[int, int]) -> None:
    compare(servers, [("CLIENT", "KILL", "1.2.3.4:5"), ("CLIENT", "KILL", "ID", "abc"),
                      ("CLIENT", "KILL", "ID", "999999"), ("CLIENT", "KILL", "TYPE", "foo"),
                      ("CLIENT", "KILL", "USER", "nobody"), ("CLIENT", "KILL", "BOGUS", "x"),
                      ("CLIENT", "KILL", "ID"), ("CLIENT", "KILL", "SKIPME", "maybe"),
                      ("CLIENT", "UNBLOCK", "999999"), ("CLIENT", "UNBLOCK", "abc"),
                      ("CLIENT", "UNBLOCK", "1", "foo"), ("CLIENT", "NO-EVICT", "on"),
                      ("CLIENT", "NO-EVICT", "maybe"), ("CLIENT", "GETREDIR")], exact=True)


# -- MONITOR ----------------------------------------------------------------------------------
MONITORED = [
    ("SET", "k", b'a"b\\c\n\x01\xc3\xa9 \x7f'), ("GET", "k"), ("HELLO", "2"),
    ("HELLO", "2", "AUTH", "default", "pw"), ("AUTH", "pw"), ("AUTH", "u", "pw"),
    ("CLIENT", "ID"), ("CLIENT", "LIST"), ("CONFIG", "GET", "timeout"),
    ("EVAL", "return redis.call('GET', KEYS[1])", "1", "k"), ("FCALL", "nosuch", "0"),
    ("MULTI",), ("SET", "t", "1"), ("INCR", "t"), ("EXEC",), ("NOSUCH",), ("LPUSH", "k", "x"),
    ("GET",), ("ECHO", "hi"), ("PING",),
]


def _monitor(port: int) -> list[bytes]:
    """What a MONITOR client sees of another client's commands, times and addresses
    replaced (the script's ``lua`` source kept)."""
    mon, client = RawClient(port), RawClient(port)
    try:
        assert mon.call("MONITOR") == b"+OK\r\n"
        for cmd in MONITORED:
            client.call(*cmd)
        seen = []
        while True:
            line = mon.read()
            seen.append(re.sub(rb"^\+\d+\.\d{6} \[0 ([0-9.:]+|lua)\]",
                               lambda m: b"+T [0 " + (b"lua" if m.group(1) == b"lua"
                                                      else b"ADDR") + b"]", line))
            if line.endswith(b'"PING"\r\n'):
                return seen
    finally:
        mon.close()
        client.close()


def test_monitor_reports_commands_as_redis_does(servers: tuple[int, int]) -> None:
    """Quoting, AUTH redacted, admin commands left out, a script before its calls (from
    ``lua``), MULTI's commands when EXEC runs them, refused commands left out."""
    ours, theirs = _monitor(servers[0]), _monitor(servers[1])
    assert ours == theirs
    assert b"+T [0 lua] \"GET\" \"k\"\r\n" in ours


# -- CLIENT PAUSE -----------------------------------------------------------------------------
def _paused_writes(port: int) -> list[bytes]:
    """A WRITE pause holds a SET (the client shows flag b) while reads run; UNPAUSE lets
    it through."""
    admin, writer = RawClient(port), RawClient(port)
    try:
        admin.call("DEL", "paused")
        wid = _id(writer)
        out = [admin.call("CLIENT", "PAUSE", "30000", "WRITE")]
        writer.send("SET", "paused", "1")
        deadline = time.monotonic() + 30
        while "b" not in client_flags(admin, wid):
            assert time.monotonic() < deadline
        out += [admin.call("GET", "paused"), admin.call("CLIENT", "UNPAUSE"), writer.read(),
                admin.call("GET", "paused")]
        out += [admin.call("CLIENT", "PAUSE", "x"), admin.call("CLIENT", "PAUSE", "100", "BOGUS"),
                admin.call("CLIENT", "PAUSE", "-1"), admin.call("CLIENT", "UNPAUSE")]
        return out
    finally:
        admin.close()
        writer.close()


def test_client_pause_write_holds_writes_and_lets_reads_run(servers: tuple[int, int]) -> None:
    ours, theirs = _paused_writes(servers[0]), _paused_writes(servers[1])
    assert ours == theirs
    assert ours[1:5] == [b"$-1\r\n", b"+OK\r\n", b"+OK\r\n", b"$1\r\n1\r\n"]


def _paused_in_order(port: int) -> list[bytes]:
    """Eight writers held by a WRITE pause, one after another: UNPAUSE runs their
    commands in the order they were held (as Redis does)."""
    admin = RawClient(port)
    writers = [RawClient(port) for _ in range(8)]
    try:
        admin.call("DEL", "order")
        out = [admin.call("CLIENT", "PAUSE", "30000", "WRITE")]
        deadline = time.monotonic() + 30
        for i, w in enumerate(writers):
            wid = _id(w)
            w.send("RPUSH", "order", str(i))
            while "b" not in client_flags(admin, wid):
                assert time.monotonic() < deadline
        out.append(admin.call("CLIENT", "UNPAUSE"))
        out += [w.read() for w in writers]
        out.append(admin.call("LRANGE", "order", "0", "-1"))
        return out
    finally:
        admin.close()
        for w in writers:
            w.close()


def test_client_unpause_runs_held_writes_in_the_order_they_were_held(
        servers: tuple[int, int]) -> None:
    ours, theirs = _paused_in_order(servers[0]), _paused_in_order(servers[1])
    assert ours == theirs
    assert ours[-1] == b"*8\r\n" + b"".join(b"$1\r\n%d\r\n" % i for i in range(8))


# -- CLIENT REPLY -----------------------------------------------------------------------------
def _replies_off_and_skipped(port: int) -> list[bytes]:
    """CLIENT REPLY OFF: nothing comes back until ON (whose +OK does); SKIP: its own reply
    and the next command's are not sent."""
    c = RawClient(port)
    try:
        c.call("DEL", "r1", "r2")
        for cmd in (("CLIENT", "REPLY", "OFF"), ("SET", "r1", "1"), ("GET", "r1"),
                    ("NOSUCH",), ("CLIENT", "REPLY", "ON")):
            c.send(*cmd)
        out = [c.read()]  # the first reply is ON's
        for cmd in (("CLIENT", "REPLY", "SKIP"), ("SET", "r2", "2"), ("GET", "r2")):
            c.send(*cmd)
        out.append(c.read())  # GET's: SKIP's and SET's were not sent
        out += [c.call("GET", "r1"), c.call("CLIENT", "REPLY", "MAYBE")]
        return out
    finally:
        c.close()


def test_client_reply_off_on_and_skip_as_in_redis(servers: tuple[int, int]) -> None:
    ours, theirs = _replies_off_and_skipped(servers[0]), _replies_off_and_skipped(servers[1])
    assert ours == theirs
    assert ours[:3] == [b"+OK\r\n", b"$1\r\n2\r\n", b"$1\r\n1\r\n"]


# -- sharded pub/sub --------------------------------------------------------------------------
def _sharded(port: int, protocol: str) -> list[bytes]:
    """SSUBSCRIBE/SPUBLISH/SUNSUBSCRIBE and their counts, apart from PUBLISH's channels."""
    sub, pub = RawClient(port), RawClient(port)
    try:
        out = [sub.call("HELLO", protocol).split(b"\r\n", 1)[0]]
        sub.send("SSUBSCRIBE", "sa", "sb")
        out += [sub.read(), sub.read(), pub.call("SPUBLISH", "sa", "hi"),
                pub.call("PUBLISH", "sa", "not to shard subscribers"), sub.read(),
                pub.call("PUBSUB", "SHARDCHANNELS", "*b"), pub.call("PUBSUB", "SHARDCHANNELS", "*a"),
                pub.call("PUBSUB", "SHARDNUMSUB", "sa", "sb", "sc"), pub.call("PUBSUB", "CHANNELS")]
        sub.send("SUBSCRIBE", "plain")
        out.append(sub.read())
        sub.send("SUNSUBSCRIBE")  # all: one frame per channel, in no set order (as in Redis)
        frames = [sub.read().split(b"\r\n") for _ in range(2)]
        out += [b" ".join(sorted(f[4] for f in frames)), b" ".join(f[5] for f in frames)]
        sub.send("SUNSUBSCRIBE")
        out.append(sub.read())
        out.append(pub.call("SPUBLISH", "sa", "nobody"))
        return out
    finally:
        sub.close()
        pub.close()


@pytest.mark.parametrize("protocol", ["2", "3"])
def test_sharded_pubsub_as_in_redis(servers: tuple[int, int], protocol: str) -> None:
    ours, theirs = _sharded(servers[0], protocol), _sharded(servers[1], protocol)
    assert ours == theirs
    assert ours[3] == b":1\r\n" and ours[4] == b":0\r\n"
