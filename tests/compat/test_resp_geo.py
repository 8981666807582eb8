"""Geo commands (GEOADD GEOPOS GEODIST GEOHASH GEOSEARCH GEOSEARCHSTORE and the GEORADIUS
family) against a real redis-server, byte for byte: positions, distances and hashes digit
for digit, search results in Redis's order (cell by cell when unsorted), the errors; a
scripted sequence with seeded random points and searches, and Hypothesis-generated
searches anywhere on the globe (poles, the antimeridian, radii up to 20,000 km).
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))
from resp_harness import NEEDS_REDIS, compare, run_script, tuffdb_and_redis  # noqa: E402

pytestmark = NEEDS_REDIS

Script = list[tuple[str, ...]]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, int]]:
    yield from tuffdb_and_redis(tmp_path_factory, "geo")


FIXED: Script = [tuple(cmd) for cmd in [["GEOADD", "g", "13.361389", "38.115556", "Palermo", "15.087269", "37.502669", "Catania", "2.3522", "48.8566", "Paris", "-73.9857", "40.7484", "NY", "151.2093", "-33.8688", "Sydney"],
 ["ZRANGE", "g", "0", "-1", "WITHSCORES"], ["GEOPOS", "g", "Palermo", "NY", "nosuch"], ["GEOPOS", "nokey", "a"],
 ["GEODIST", "g", "Palermo", "Catania"], ["GEODIST", "g", "Palermo", "Catania", "km"], ["GEODIST", "g", "Palermo", "Sydney", "MI"], ["GEODIST", "g", "Palermo", "x"], ["GEODIST", "g", "Palermo", "Catania", "yd"],
 ["GEOHASH", "g", "Palermo", "Sydney", "nosuch"], ["GEOADD", "g", "200", "100", "bad"], ["GEOADD", "g", "x", "1", "bad"], ["GEOADD", "g", "1", "2"], ["GEOADD", "g", "NX", "XX", "1", "2", "m"],
 ["GEOADD", "g", "NX", "CH", "13.361389", "38.115556", "Palermo", "1", "1", "new"], ["GEOADD", "g", "XX", "CH", "1.5", "1.5", "new"], ["GEOPOS", "g", "new"],
 ["GEOADD", "g", "180", "85.05112878", "corner", "-180", "-85.05112878", "corner2"], ["GEOPOS", "g", "corner", "corner2"], ["GEOHASH", "g", "corner", "corner2"],
 ["GEOSEARCH", "g", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km"],
 ["GEOSEARCH", "g", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "ASC", "WITHCOORD", "WITHDIST", "WITHHASH"],
 ["GEORADIUS", "g", "15", "37", "200", "km", "WITHDIST"], ["GEORADIUS_RO", "g", "15", "37", "200", "km", "STORE", "x"],
 ["GEOSEARCH", "g", "FROMMEMBER", "Paris", "BYBOX", "2000", "2000", "km", "DESC", "COUNT", "2"],
 ["GEOSEARCH", "g", "FROMMEMBER", "nosuch", "BYRADIUS", "1", "km"], ["GEOSEARCH", "nokey", "FROMMEMBER", "nosuch", "BYRADIUS", "1", "km"],
 ["GEOSEARCH", "g", "FROMLONLAT", "0", "0", "BYRADIUS", "20000", "km"], ["GEOSEARCH", "g", "FROMLONLAT", "0", "0", "BYRADIUS", "20000", "km", "COUNT", "3", "ANY"],
 ["GEOSEARCH", "g", "FROMLONLAT", "0", "0", "BYRADIUS", "20000", "km", "ANY"], ["GEOSEARCH", "g", "FROMLONLAT", "0", "0", "BYRADIUS", "-1", "km"],
 ["GEOSEARCH", "g", "FROMLONLAT", "0", "0"], ["GEOSEARCH", "g", "BYRADIUS", "1", "m"], ["GEOSEARCH", "g", "FROMLONLAT", "0", "0", "FROMMEMBER", "x", "BYRADIUS", "1", "m"],
 ["GEOSEARCH", "g", "FROMLONLAT", "0", "0", "BYRADIUS", "1", "m", "BYBOX", "1", "1", "m"], ["GEOSEARCH", "g", "FROMLONLAT", "0", "0", "BYRADIUS", "1", "m", "COUNT", "0"],
 ["GEOSEARCH", "g", "FROMLONLAT", "0", "0", "BYRADIUS", "1", "m", "BOGUS"], ["GEOSEARCH", "g", "FROMLONLAT", "0", "0", "BYBOX", "-1", "1", "m"],
 ["GEOSEARCHSTORE", "d", "g", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km"], ["ZRANGE", "d", "0", "-1", "WITHSCORES"],
 ["GEOSEARCHSTORE", "d2", "g", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "STOREDIST"], ["ZRANGE", "d2", "0", "-1", "WITHSCORES"],
 ["GEOSEARCHSTORE", "d", "nokey", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km"], ["EXISTS", "d"],
 ["GEOSEARCHSTORE", "d2", "g", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "m"], ["EXISTS", "d2"],
 ["GEOSEARCHSTORE", "d3", "g", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "WITHDIST"],
 ["GEORADIUS", "g", "15", "37", "200", "km", "STORE", "d4"], ["ZRANGE", "d4", "0", "-1"], ["GEORADIUS", "g", "15", "37", "200", "km", "STORE", "d4", "WITHDIST"],
 ["GEORADIUSBYMEMBER", "g", "Palermo", "300", "km", "WITHDIST", "ASC"], ["GEORADIUSBYMEMBER_RO", "g", "Palermo", "300", "km", "WITHCOORD"],
 ["GEORADIUS", "g", "15", "37", "x", "km"], ["GEORADIUS", "g", "15", "37", "200"],
 ["SET", "str", "x"], ["GEOADD", "str", "1", "1", "a"], ["GEOPOS", "str", "a"], ["GEOSEARCH", "str", "FROMLONLAT", "0", "0", "BYRADIUS", "1", "m"],
]]


def _points(rng: random.Random) -> tuple[str, ...]:
    """400 members: half clustered around (10, 45), half anywhere."""
    out: list[str] = []
    for i in range(400):
        lon, lat = rng.uniform(-180, 180), rng.uniform(-85, 85)
        if i < 200:  # noqa: PLR2004
            lon, lat = rng.gauss(10, 3), rng.gauss(45, 3)
        out += [f"{lon:.6f}", f"{lat:.6f}", f"p{i}"]
    return ("GEOADD", "r", *out)


def _script() -> Script:
    rng = random.Random(3)
    script = [*FIXED, _points(rng)]
    for i in range(60):
        lon, lat = rng.gauss(10, 4), rng.gauss(45, 4)
        r = rng.choice(["1", "10", "50", "100", "300", "1000", "5000"])
        u = rng.choice(["km", "mi", "m", "ft"])
        if u in ("m", "ft"):
            r = str(int(r) * 1000)
        if i % 2:
            script.append(("GEOSEARCH", "r", "FROMLONLAT", f"{lon:.5f}", f"{lat:.5f}",
                           "BYRADIUS", r, u, "WITHDIST", "WITHHASH"))
        else:
            script.append(("GEOSEARCH", "r", "FROMLONLAT", f"{lon:.5f}", f"{lat:.5f}", "BYBOX",
                           r, str(int(float(r) * 1.5)), u, "WITHCOORD"))
        script.append(("GEOSEARCH", "r", "FROMMEMBER", f"p{i}", "BYRADIUS", r, u, "COUNT", "5"))
        script.append(("GEOSEARCH", "r", "FROMMEMBER", f"p{i + 200}", "BYBOX", r, r, u,
                       "COUNT", "3", "ANY", "DESC"))
    return script


def test_geo_commands_reply_like_redis_byte_for_byte(servers: tuple[int, int]) -> None:
    script = _script()
    compare(servers, script, exact=True)
    compare(servers, [("HELLO", "3"), *script], exact=True)


# Scores no GEOADD wrote (ZADD, ZINCRBY) decode where Redis's C cast puts them: inf, -inf,
# NaN-free negatives and values past 2**52 and 2**63 gave "internal error" before.
ODD_SCORES: Script = [
    ("ZADD", "g", "inf", "a", "-inf", "b", "-5", "c", "1e300", "d", "5e15", "e",
     "4503599627370496", "f", "-9.3e18", "h", "1.8e19", "i", "1e19", "j"),
    ("GEOPOS", "g", "a", "b", "c", "d", "e", "f", "h", "i", "j"),
    ("GEOHASH", "g", "a", "b", "c", "d", "e", "f", "h", "i", "j"),
    ("GEODIST", "g", "a", "c"), ("GEODIST", "g", "e", "f", "km"), ("ZINCRBY", "z", "inf", "x"),
    ("GEODIST", "z", "x", "x"),
    ("GEOSEARCH", "g", "FROMMEMBER", "e", "BYRADIUS", "50000", "km", "ASC", "WITHCOORD",
     "WITHHASH"),
    ("GEORADIUSBYMEMBER", "g", "a", "100", "km"),
]


def test_scores_not_written_by_geoadd_decode_as_in_redis(servers: tuple[int, int]) -> None:
    compare(servers, ODD_SCORES, exact=True)


LON = st.floats(min_value=-180, max_value=180).map(lambda x: f"{x:.6f}")
LAT = st.floats(min_value=-85.05, max_value=85.05).map(lambda x: f"{x:.6f}")
DIST = st.sampled_from(["0", "1", "75", "500", "2500", "8000", "20000"])
SEARCH = st.one_of(
    st.tuples(st.just("BYRADIUS"), DIST),
    st.tuples(st.just("BYBOX"), DIST, DIST),
).map(lambda t: (*t, "km"))
OPTIONS = st.lists(st.sampled_from([("ASC",), ("DESC",), ("WITHDIST",), ("WITHCOORD",),
                                    ("WITHHASH",), ("COUNT", "4"), ("COUNT", "2", "ANY")]),
                   max_size=3, unique=True)


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lon=LON, lat=LAT, shape=SEARCH, options=OPTIONS)
def test_random_searches_anywhere_reply_like_redis(servers: tuple[int, int], lon: str,
                                                   lat: str, shape: tuple[str, ...],
                                                   options: list[tuple[str, ...]]) -> None:
    points = _points(random.Random(11))
    query = ("GEOSEARCH", "r", "FROMLONLAT", lon, lat, *shape, *[x for o in options for x in o])
    ours = run_script(servers[0], [points, query])
    theirs = run_script(servers[1], [points, query])
    assert ours == theirs, query


def _dense_script() -> Script:
    """3,000 members in one square degree, so a search's cells hold hundreds each (the
    NumPy pre-test's path), searched at radii and boxes of 0.5-60 km, and from members at
    exactly the distance of another (its GEODIST in metres): members on the edge."""
    rng = random.Random(5)
    points: list[str] = []
    for i in range(3000):
        points += [f"{13 + rng.random():.6f}", f"{52 + rng.random():.6f}", f"d{i}"]
    script: Script = [("GEOADD", "dense", *points),
                      # a twin of d5 at its very position, found by a radius of 0
                      ("GEOADD", "dense", points[15], points[16], "twin"),
                      ("GEOSEARCH", "dense", "FROMMEMBER", "d5", "BYRADIUS", "0", "m",
                       "WITHDIST", "ASC")]
    for i in range(40):
        lon, lat = f"{13 + rng.random():.5f}", f"{52 + rng.random():.5f}"
        r = rng.choice(["0.5", "2", "7", "20", "60"])
        script.append(("GEOSEARCH", "dense", "FROMLONLAT", lon, lat, "BYRADIUS", r, "km",
                       "WITHDIST", "WITHCOORD"))
        script.append(("GEOSEARCH", "dense", "FROMLONLAT", lon, lat, "BYBOX", r, "3", "km",
                       "ASC", "COUNT", "7", "WITHDIST"))
        script.append(("GEOSEARCH", "dense", "FROMMEMBER", f"d{i}", "BYBOX", "9", r, "km",
                       "DESC", "WITHHASH"))
    return script


def test_dense_cells_reply_like_redis(servers: tuple[int, int]) -> None:
    script = _dense_script()
    compare(servers, script, exact=True)
    # Members on the edge: a radius of exactly the distance Redis reports between two.
    add = script[0]
    pairs = range(0, 60, 2)
    dists = run_script(servers[1], [add, *[("GEODIST", "dense", f"d{i}", f"d{i + 1}", "m")
                                           for i in pairs]])[1:]
    edges: Script = [("GEOSEARCH", "dense", "FROMMEMBER", f"d{i}", "BYRADIUS",
                      raw.split(b"\r\n")[1].decode(), "m", "ASC", "WITHDIST")
                     for i, raw in zip(pairs, dists, strict=True)]
    compare(servers, [add, *edges], exact=True)
