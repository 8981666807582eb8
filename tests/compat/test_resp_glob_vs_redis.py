"""Glob patterns (KEYS, SCAN MATCH, PSUBSCRIBE, CONFIG GET) against a real redis-server:
random patterns over random keys, from an alphabet rich in the pattern's own metacharacters
(escapes, classes, ranges, negation, an unterminated ``[``), select the same keys on both.
And a pattern of many stars against a long key is answered at once, as by Redis: the
glob was one regex with ``.*`` per star, whose backtracking took 0.6 s for six stars
against 60 a's and held the server for good from ten on."""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))
from resp_harness import NEEDS_REDIS, tuffdb_and_redis  # noqa: E402

pytestmark = NEEDS_REDIS

KEY_BYTES = b"ab[]^-\\*?x"
TOKENS = [b"*", b"?", b"a", b"b", b"x", b"[ab]", b"[^a]", b"[a-c]", b"[c-a]", b"\\*", b"\\?",
          b"\\[", b"[\\]]", b"[", b"]", b"^", b"-", b"\\", b"[]", b"[^]", b"**"]


@pytest.fixture(scope="module")
def clients(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[redis.Redis, redis.Redis]]:
    for ports in tuffdb_and_redis(tmp_path_factory, "glob"):
        yield redis.Redis(port=ports[0]), redis.Redis(port=ports[1])


def test_random_patterns_select_the_same_keys(clients: tuple[redis.Redis, redis.Redis]) -> None:
    rng = random.Random(31)
    keys = {bytes(rng.choice(KEY_BYTES) for _ in range(rng.randint(0, 12))) for _ in range(300)}
    keys.discard(b"")
    for r in clients:
        r.flushall()
        r.mset({k: b"1" for k in keys})
    for _ in range(400):
        pattern = b"".join(rng.choice(TOKENS) for _ in range(rng.randint(1, 8)))
        ours, theirs = (sorted(r.keys(pattern)) for r in clients)
        assert ours == theirs, pattern


def test_many_stars_against_a_long_key_are_answered(
        clients: tuple[redis.Redis, redis.Redis]) -> None:
    for r in clients:
        r.flushall()
        r.set(b"a" * 60, b"1")
        r.set(b"a" * 59 + b"b", b"2")
    for stars in (6, 14, 40):
        pattern = b"*a" * stars + b"b"
        ours, theirs = (sorted(r.keys(pattern)) for r in clients)
        assert ours == theirs == [b"a" * 59 + b"b"], stars
    ours, theirs = (sorted(r.scan_iter(match=b"*a" * 20 + b"*")) for r in clients)
    assert ours == theirs == [b"a" * 60, b"a" * 59 + b"b"]
