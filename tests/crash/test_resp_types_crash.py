"""SIGKILL the RESP server while it writes lists, sets, zsets, streams, hashes and scripts.

Story: a collection here is a metadata entry plus one engine entry per element, and a
command, a MULTI/EXEC or a script writes several entries. Under ``appendfsync always``
nothing acknowledged may be lost, and nothing may be half applied: writers pipeline
LPUSH, SADD, ZADD, XADD, HSET, an LMOVE between two lists, a two-key MULTI/EXEC and a
two-key Lua script, recording each acknowledgement; the server is killed with SIGKILL
mid-stream and restarted on the same directory. Then:

- every acknowledged element is there (list, set, zset, stream, hash);
- every collection's size in its metadata equals the elements it really has
  (LLEN = len(LRANGE), SCARD = len(SMEMBERS), ...): no batch was torn;
- the MULTI/EXEC pair and the script pair are equal (both writes or neither), and the
  LMOVE source + destination hold each pushed element exactly once.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tuffdb.server.resp._process import ServerProcess, start_tuffdb

ACKED_ROUNDS = 300  # per writer, before the kill
PAIR_SCRIPT = ("redis.call('RPUSH', KEYS[1], ARGV[1]) "
               "redis.call('HINCRBY', KEYS[2], 'n', 1) return 1")


class Writer(threading.Thread):
    def __init__(self, port: int, w: int) -> None:
        super().__init__(daemon=True)
        self.w = w
        self.client = redis.Redis(port=port, socket_timeout=30, retry=Retry(NoBackoff(), 0))
        self.acked: list[int] = []

    def run(self) -> None:
        w, c = self.w, self.client
        script = c.register_script(PAIR_SCRIPT)
        i = 0
        try:
            while True:
                pipe = c.pipeline(transaction=False)
                pipe.lpush(f"l{w}", i)
                pipe.sadd(f"s{w}", i)
                pipe.zadd(f"z{w}", {f"m{i}": i})
                pipe.xadd(f"x{w}", {"i": i}, id=f"{i + 1}-0")
                pipe.hset(f"h{w}", f"f{i}", i)
                pipe.rpush(f"src{w}", i)
                pipe.lmove(f"src{w}", f"dst{w}", "LEFT", "RIGHT")
                pipe.execute()
                tx = c.pipeline(transaction=True)
                tx.rpush(f"t1-{w}", i)
                tx.rpush(f"t2-{w}", i)
                tx.execute()
                script(keys=[f"pair{w}", f"cnt{w}"], args=[i])
                self.acked.append(i)
                i += 1
        except (redis.ConnectionError, redis.TimeoutError, ConnectionError):
            return


def _kill_mid_stream(proc: ServerProcess) -> list[Writer]:
    writers = [Writer(proc.port, w) for w in range(3)]
    for w in writers:
        w.start()
    while min(len(w.acked) for w in writers) < ACKED_ROUNDS:
        if not all(w.is_alive() for w in writers):
            pytest.fail("a writer stopped before the kill")
        writers[0].join(0.05)
    proc.kill()
    for w in writers:
        w.join(30)
    return writers


def _check(port: int, writers: list[Writer]) -> None:
    c = redis.Redis(port=port, decode_responses=True)
    try:
        for wr in writers:
            w = wr.w
            acked = {str(i) for i in wr.acked}
            items = c.lrange(f"l{w}", 0, -1)
            assert c.llen(f"l{w}") == len(items)
            assert acked <= set(items), "an acknowledged LPUSH was lost"
            members = c.smembers(f"s{w}")
            assert c.scard(f"s{w}") == len(members)
            assert acked <= members, "an acknowledged SADD was lost"
            zs = dict(c.zrange(f"z{w}", 0, -1, withscores=True))
            assert c.zcard(f"z{w}") == len(zs)
            assert all(zs.get(f"m{i}") == float(i) for i in wr.acked), "a ZADD was lost"
            entries = c.xrange(f"x{w}")
            assert c.xlen(f"x{w}") == len(entries)
            ids = {e[0] for e in entries}
            assert {f"{i + 1}-0" for i in wr.acked} <= ids, "an acknowledged XADD was lost"
            fields = c.hgetall(f"h{w}")
            assert c.hlen(f"h{w}") == len(fields)
            assert all(fields.get(f"f{i}") == str(i) for i in wr.acked), "an HSET was lost"
            moved = c.lrange(f"src{w}", 0, -1) + c.lrange(f"dst{w}", 0, -1)
            assert len(moved) == len(set(moved)), "an LMOVE duplicated an element"
            assert acked <= set(moved), "an LMOVE lost an element"
            t1, t2 = c.lrange(f"t1-{w}", 0, -1), c.lrange(f"t2-{w}", 0, -1)
            assert t1 == t2, "a MULTI/EXEC was half applied"
            assert acked <= set(t1)
            pair = c.lrange(f"pair{w}", 0, -1)
            assert int(c.hget(f"cnt{w}", "n") or 0) == len(pair), "a script was half applied"
            assert acked <= set(pair), "an acknowledged script write was lost"
    finally:
        c.close()


def test_sigkill_under_always_loses_no_acknowledged_collection_write(tmp_path: Path) -> None:
    proc = start_tuffdb(tmp_path, appendfsync="always")
    writers = _kill_mid_stream(proc)
    restarted = start_tuffdb(tmp_path, appendfsync="always")
    try:
        _check(restarted.port, writers)
        # And the data stays usable: new writes to the same collections work.
        c = redis.Redis(port=restarted.port)
        assert c.lpush("l0", "after") > 0
        assert c.xadd("x0", {"after": 1})
    finally:
        restarted.stop()


def test_a_blocked_client_is_answered_after_the_fsync_under_always(tmp_path: Path) -> None:
    """Under always the popped element's reply waits for its round; it must arrive."""
    proc = start_tuffdb(tmp_path, appendfsync="always")
    try:
        got: list[object] = []
        waiter = threading.Thread(
            target=lambda: got.append(redis.Redis(port=proc.port).blpop(["jobs"], timeout=30)))
        waiter.start()
        admin = redis.Redis(port=proc.port)
        deadline = time.monotonic() + 30
        while admin.info("clients")["blocked_clients"] != 1:
            assert time.monotonic() < deadline
        admin.rpush("jobs", "j1")
        waiter.join(30)
        assert got == [(b"jobs", b"j1")]
        assert admin.llen("jobs") == 0
    finally:
        proc.stop()
