"""HyperLogLog (PFADD PFCOUNT PFMERGE) against a real redis-server: the same sketch, so
the same counts and the same bytes (GET), sparse and dense, and sketches moved between
the two servers by GET/SET count the same on either side.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))
from resp_harness import NEEDS_REDIS, compare, tuffdb_and_redis  # noqa: E402

pytestmark = NEEDS_REDIS

Script = list[tuple[str | bytes, ...]]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, int]]:
    yield from tuffdb_and_redis(tmp_path_factory, "hll")


def _script() -> Script:
    rng = random.Random(7)
    script: Script = [
        ("PFADD", "h"), ("PFADD", "h"), ("PFCOUNT", "h"), ("GET", "h"),
        ("PFADD", "h", "a", "b", "c"), ("PFADD", "h", "a"), ("PFCOUNT", "h"), ("GET", "h"),
        ("PFCOUNT", "nokey"), ("PFCOUNT", "h", "nokey"),
        ("SET", "s", "notanhll"), ("PFADD", "s", "x"), ("PFCOUNT", "s"), ("PFMERGE", "d", "s"),
        ("LPUSH", "l", "x"), ("PFADD", "l", "x"), ("PFCOUNT", "l"),
        ("SET", "bad", b"HYLL\x01" + bytes(11) + b"\x7f"), ("PFCOUNT", "bad"),
    ]
    # 10 to 20,000 distinct elements: sparse sketches, the switch to dense, dense ones.
    for n in (10, 100, 1000, 5000, 20000):
        elements = [f"el:{i}:{rng.random()}" for i in range(n)]
        for i in range(0, n, 500):
            script.append(("PFADD", f"k{n}", *elements[i : i + 500]))
        script += [("GET", f"k{n}"), ("PFCOUNT", f"k{n}"), ("GET", f"k{n}")]
    script += [
        ("PFMERGE", "m", "k10", "k100", "k1000"), ("PFCOUNT", "m"), ("GET", "m"),
        ("PFCOUNT", "k10", "k100", "k1000"), ("PFMERGE", "m2", "k20000", "nokey"),
        ("PFCOUNT", "m2"), ("PFMERGE", "k10", "k5000"), ("PFCOUNT", "k10"),
        ("PFADD", "bin", b"\x00", b"", b"\xff" * 9, "abcdefgh", "abcdefghi"),
        ("PFCOUNT", "bin"), ("GET", "bin"),
    ]
    return script


def test_hyperloglogs_count_and_encode_like_redis_byte_for_byte(
        servers: tuple[int, int]) -> None:
    script = _script()
    compare(servers, script, exact=True)
    compare(servers, [("HELLO", "3"), *script], exact=True)


def test_a_sketch_moves_between_redis_and_tuffdb_by_get_and_set(
        servers: tuple[int, int]) -> None:
    ours, theirs = (redis.Redis(port=p) for p in servers)
    for source, target in ((ours, theirs), (theirs, ours)):
        source.delete("moved")
        source.pfadd("moved", *[f"m{i}" for i in range(3000)])
        source.pfadd("moved", *[f"n{i}" for i in range(40)])
        target.set("moved", source.get("moved"))
        assert target.pfcount("moved") == source.pfcount("moved")
        target.pfadd("moved", "one more")
        source.pfadd("moved", "one more")
        assert target.get("moved") == source.get("moved")


KEYS = st.sampled_from(["a", "b", "c"])
ELEMENTS = st.lists(st.text(alphabet="xyz01", max_size=3), max_size=6)
COMMAND = st.one_of(
    st.builds(lambda k, els: ("PFADD", k, *els), KEYS, ELEMENTS),
    st.tuples(st.just("PFCOUNT"), KEYS),
    st.tuples(st.just("PFCOUNT"), KEYS, KEYS),
    st.tuples(st.just("PFMERGE"), KEYS, KEYS),
    st.tuples(st.sampled_from(["GET", "DEL"]), KEYS),
)


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=st.lists(COMMAND, min_size=1, max_size=20))
def test_random_hyperloglog_sequences_reply_like_redis(servers: tuple[int, int],
                                                       script: Script) -> None:
    compare(servers, script, exact=True)
