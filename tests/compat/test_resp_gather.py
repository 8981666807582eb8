"""The same command from several clients in one loop pass runs as one batch (gather.py),
with the replies of running the clients one after another: compared with a real
redis-server.

To have several clients' commands land in one pass without timing, each scenario holds
them with ``CLIENT PAUSE ... WRITE`` (a held client shows flag ``b`` in CLIENT LIST:
polled, never slept on) and releases them with ``CLIENT UNPAUSE``, which resumes every
held client in one loop callback, in the order they were held. On tuffdb, INFO's
``tuffdb_gathered_commands`` says how many ran in a batch with another client's.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from resp_harness import NEEDS_REDIS, RawClient, client_flags, tuffdb_and_redis  # noqa: E402

pytestmark = NEEDS_REDIS

WAIT_S = 30.0


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, int]]:
    yield from tuffdb_and_redis(tmp_path_factory, "gather")


def gathered(admin: RawClient) -> int:
    """tuffdb's count of commands run with other clients' (0 on Redis, which has none)."""
    for line in admin.call("INFO", "stats").decode().splitlines():
        if line.startswith("tuffdb_gathered_commands:"):
            return int(line.split(":", 1)[1])
    return 0


Step = tuple[str, ...]


def held_then_released(port: int, setup: list[Step], writers: list[list[Step]],
                       protocols: list[int] | None = None,
                       after: Callable[[RawClient], list[bytes]] | None = None,
                       ) -> tuple[list[bytes], int]:
    """Run ``setup`` on an admin client, hold each writer's pipeline of commands behind a
    WRITE pause (one client per pipeline, held in order), unpause, and return every
    reply (the writers' in order, then ``after``'s) and how many commands were gathered."""
    admin = RawClient(port)
    clients = [RawClient(port) for _ in writers]
    try:
        admin.call("FLUSHALL")
        out = [admin.call(*step) for step in setup]
        for client, proto in zip(clients, protocols or [2] * len(clients), strict=True):
            if proto == 3:  # noqa: PLR2004
                client.call("HELLO", "3")
        before = gathered(admin)
        out.append(admin.call("CLIENT", "PAUSE", "30000", "WRITE"))
        deadline = time.monotonic() + WAIT_S
        for client, steps in zip(clients, writers, strict=True):
            cid = client.call("CLIENT", "ID").decode()[1:-2]
            for step in steps:
                client.send(*step)
            while "b" not in client_flags(admin, cid):
                assert time.monotonic() < deadline, "a writer was never held"
        out.append(admin.call("CLIENT", "UNPAUSE"))
        for client, steps in zip(clients, writers, strict=True):
            out += [client.read() for _ in steps]
        if after is not None:
            out += after(admin)
        return out, gathered(admin) - before
    finally:
        admin.close()
        for client in clients:
            client.close()


def run_both(servers: tuple[int, int], *args: object, **kwargs: object) -> tuple[list[bytes], int]:
    ours, n = held_then_released(servers[0], *args, **kwargs)  # type: ignore[arg-type]
    theirs, _ = held_then_released(servers[1], *args, **kwargs)  # type: ignore[arg-type]
    assert ours == theirs
    return ours, n


def test_one_command_from_many_clients_runs_as_one_batch_with_serial_replies(
        servers: tuple[int, int]) -> None:
    writers = [[("LPUSH", "q", f"job{i}")] for i in range(8)]
    out, n = run_both(servers, [], writers,
                      after=lambda a: [a.call("LRANGE", "q", "0", "-1")])
    assert n == 8  # noqa: PLR2004
    assert out[2:10] == [b":%d\r\n" % i for i in range(1, 9)]  # in the order they were held
    assert out[-1] == b"*8\r\n" + b"".join(b"$4\r\njob%d\r\n" % i for i in reversed(range(8)))


def test_pipelines_from_several_clients_keep_each_clients_order(
        servers: tuple[int, int]) -> None:
    """Clients' pipelines interleave as each server likes (Redis too), but each client's
    commands run in its order and every reply is the list's length right after that push:
    the element a reply names sits where that length puts it."""
    writers = [[("RPUSH", "q", f"{c}.{k}") for k in range(3)] for c in range(4)]
    for port in servers:
        out, n = held_then_released(port, [], writers,
                                    after=lambda a: [a.call("LRANGE", "q", "0", "-1")])
        lengths = [int(r[1:-2]) for r in out[2:14]]
        assert sorted(lengths) == list(range(1, 13))
        listed = out[-1].split(b"\r\n")[2::2]
        for c in range(4):
            mine = lengths[3 * c : 3 * c + 3]
            assert mine == sorted(mine)
            assert [listed[x - 1] for x in mine] == [b"%d.%d" % (c, k) for k in range(3)]
        if port == servers[0]:
            assert n == 12  # noqa: PLR2004


def test_different_commands_and_keys_run_in_their_own_groups(servers: tuple[int, int]) -> None:
    writers = [[("SET", f"s{i}", "v")] if i % 3 == 0 else
               [("SADD", "set", f"m{i % 4}")] if i % 3 == 1 else
               [("ZADD", "z", str(i), f"m{i}")] for i in range(9)]
    out, n = run_both(servers, [], writers, after=lambda a: [
        a.call("SMISMEMBER", "set", "m0", "m1", "m2", "m3"),
        a.call("ZRANGE", "z", "0", "-1", "WITHSCORES"),
        a.call("MGET", "s0", "s3", "s6")])
    assert n == 9  # noqa: PLR2004
    assert out[2:11].count(b"+OK\r\n") == 3  # noqa: PLR2004


def test_a_batch_one_command_cannot_join_lets_each_client_run_alone(
        servers: tuple[int, int]) -> None:
    """A WRONGTYPE in one client's command: the batch form declines before writing, and
    every client runs its own command, with its own reply."""
    writers = [[("LPUSH", "q", "a")], [("LPUSH", "str", "b")], [("LPUSH", "q", "c")]]
    out, n = run_both(servers, [("SET", "str", "x")], writers,
                      after=lambda a: [a.call("LRANGE", "q", "0", "-1")])
    assert n == 0
    assert out[3:6] == [b":1\r\n", b"-WRONGTYPE Operation against a key holding the wrong kind "
                        b"of value\r\n", b":2\r\n"]


def test_each_protocol_gets_its_own_reply_shapes(servers: tuple[int, int]) -> None:
    writers = [[("LPOP", "empty")], [("LPOP", "empty")], [("LPOP", "empty")],
               [("LPOP", "empty")]]
    out, n = run_both(servers, [], writers, protocols=[2, 3, 2, 3])
    assert n == 4  # noqa: PLR2004 - two groups of two
    assert out[2:6] == [b"$-1\r\n", b"_\r\n", b"$-1\r\n", b"_\r\n"]


def test_a_client_blocked_on_the_key_is_served_as_without_batches(
        servers: tuple[int, int]) -> None:
    """A BLPOP waiting on the key: the pushes run one by one (a batch form declines), so
    the blocked client is served by the first, as in Redis."""
    results = []
    for port in servers:
        admin, blocked = RawClient(port), RawClient(port)
        try:
            admin.call("FLUSHALL")
            blocked.send("BLPOP", "q", "0")
            deadline = time.monotonic() + WAIT_S
            while b"blocked_clients:1\r\n" not in admin.call("INFO", "clients"):
                assert time.monotonic() < deadline
            out, _ = held_then_released(port, [], [[("LPUSH", "q", "a")], [("LPUSH", "q", "b")]],
                                        after=lambda a: [a.call("LRANGE", "q", "0", "-1")])
            results.append([*out, blocked.read()])
        finally:
            admin.close()
            blocked.close()
    assert results[0] == results[1]
    assert results[0][-1] == b"*2\r\n$1\r\nq\r\n$1\r\na\r\n"


def test_concurrent_clients_get_the_replies_of_some_serial_order(
        servers: tuple[int, int]) -> None:
    """Sixteen clients pushing and popping at once, unsynchronised (so their commands may
    meet in the loop's passes and run gathered): every LPUSH reply is the length right
    after one push, so the replies across all clients are distinct, and the pops return
    each pushed value once. (Whether any ran gathered here is up to the scheduler; the
    held-and-released scenarios above are the ones that assert gathering happens.)"""
    port = servers[0]
    admin = RawClient(port)
    try:
        admin.call("DEL", "cq")
    finally:
        admin.close()
    clients, per = 16, 200

    def pusher(n: int) -> list[int]:
        c = RawClient(port)
        try:
            return [int(c.call("LPUSH", "cq", f"{n}.{i}")[1:-2]) for i in range(per)]
        finally:
            c.close()

    def popper(_: int) -> list[bytes]:
        c = RawClient(port)
        try:
            return [c.call("RPOP", "cq") for _ in range(per)]
        finally:
            c.close()

    with ThreadPoolExecutor(clients) as pool:
        lengths = [x for got in pool.map(pusher, range(clients)) for x in got]
    assert sorted(lengths) == list(range(1, clients * per + 1))
    with ThreadPoolExecutor(clients) as pool:
        popped = [v for got in pool.map(popper, range(clients)) for v in got]
    assert sorted(popped) == sorted(b"$%d\r\n%d.%d\r\n" % (len(f"{n}.{i}"), n, i)
                                    for n in range(clients) for i in range(per))
    admin = RawClient(port)
    try:
        assert admin.call("LLEN", "cq") == b":0\r\n"
    finally:
        admin.close()
