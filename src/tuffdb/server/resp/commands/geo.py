"""Geospatial commands on sorted sets, as Redis 7.0 answers them: GEOADD, GEOPOS, GEODIST,
GEOHASH, GEOSEARCH, GEOSEARCHSTORE and the older GEORADIUS family.

A position is a zset member whose score is its 52-bit geohash (26 bits of longitude and
26 of latitude, interleaved, over Web Mercator's latitude range), so GEOADD is a ZADD
and every zset command works on geo sets, as in Redis. A search covers the shape with
the geohash cell of the centre and its eight neighbours at a step chosen from the
radius (narrowed when the cells do not reach the shape's bounding box), reads each
cell's score range, and keeps the members inside the shape by the haversine distance on
Redis's earth radius. The arithmetic follows Redis's order of operations, so positions,
distances and hashes come back digit for digit.
"""

# Every handler takes (conn, args), used or not: one signature for the command table.
# ruff: noqa: ARG001

from __future__ import annotations

import math
from operator import itemgetter
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from tuffdb.server.resp import reply
from tuffdb.server.resp.commands.common import to_int
from tuffdb.server.resp.commands.zsets import ZSet, store_zset, strtod, zadd
from tuffdb.server.resp.keyspace import sortable, unsortable
from tuffdb.server.resp.table import SYNTAX, CommandError, command

if TYPE_CHECKING:
    from collections.abc import Iterable

    from tuffdb.server.resp.conn import Conn

STEP = 26
LON_MIN, LON_MAX = -180.0, 180.0
LAT_MIN, LAT_MAX = -85.05112878, 85.05112878
EARTH_RADIUS_M = 6372797.560856
MERCATOR_MAX = 20037726.37
D_R = math.pi / 180.0
UNITS = {b"m": 1.0, b"km": 1000.0, b"ft": 0.3048, b"mi": 1609.34}
BASE32 = b"0123456789bcdefghjkmnpqrstuvwxyz"
EVEN = 0x5555555555555555  # latitude bits
ODD = 0xAAAAAAAAAAAAAAAA  # longitude bits
MASK64 = (1 << 64) - 1


# -- geohash --------------------------------------------------------------------------------
def _spread(v: int) -> int:
    """The 32 bits of ``v`` at the even bit positions of a 64-bit word."""
    v &= 0xFFFFFFFF
    v = (v | (v << 16)) & 0x0000FFFF0000FFFF
    v = (v | (v << 8)) & 0x00FF00FF00FF00FF
    v = (v | (v << 4)) & 0x0F0F0F0F0F0F0F0F
    v = (v | (v << 2)) & 0x3333333333333333
    return (v | (v << 1)) & EVEN


def _squash(v: int) -> int:
    """Inverse of :func:`_spread`: the even bits of ``v`` packed into 32."""
    v &= EVEN
    v = (v | (v >> 1)) & 0x3333333333333333
    v = (v | (v >> 2)) & 0x0F0F0F0F0F0F0F0F
    v = (v | (v >> 4)) & 0x00FF00FF00FF00FF
    v = (v | (v >> 8)) & 0x0000FFFF0000FFFF
    return (v | (v >> 16)) & 0xFFFFFFFF


def encode(lon: float, lat: float, step: int = STEP, lat_min: float = LAT_MIN,
           lat_max: float = LAT_MAX) -> int:
    """The geohash bits of a position (latitude in the even bits)."""
    lat_offset = (lat - lat_min) / (lat_max - lat_min) * float(1 << step)
    lon_offset = (lon - LON_MIN) / (LON_MAX - LON_MIN) * float(1 << step)
    return _spread(int(lat_offset)) | (_spread(int(lon_offset)) << 1)


class Area(NamedTuple):
    lon_min: float
    lon_max: float
    lat_min: float
    lat_max: float


def area_of(bits: int, step: int) -> Area:
    ilat, ilon = _squash(bits), _squash(bits >> 1)
    cells = float(1 << step)
    lat_scale, lon_scale = LAT_MAX - LAT_MIN, LON_MAX - LON_MIN
    return Area(LON_MIN + (ilon * 1.0 / cells) * lon_scale,
                LON_MIN + ((ilon + 1) * 1.0 / cells) * lon_scale,
                LAT_MIN + (ilat * 1.0 / cells) * lat_scale,
                LAT_MIN + ((ilat + 1) * 1.0 / cells) * lat_scale)


def score_bits(score: float) -> int:
    """The geohash bits Redis reads from a score: C's ``(uint64_t)`` cast as x86-64 does it,
    so a score no GEOADD wrote (ZADD, ZINCRBY: inf, negative, past 2**52) decodes where
    Redis's does instead of failing. Below 2**63 the signed conversion (truncation; a
    negative number wraps; out of range, the "integer indefinite" 2**63); from 2**63,
    2**63 less converts and the sign bit is flipped (inf and NaN: 0)."""
    if score != score:  # noqa: PLR0124 - NaN
        return 0
    if score < 2.0**63:
        return 1 << 63 if score <= -(2.0**63) else int(score) & MASK64
    rest = score - 2.0**63
    return 0 if rest >= 2.0**63 else int(rest) ^ (1 << 63)


def decode(score: float) -> tuple[float, float]:
    """(longitude, latitude) of a geo member's score: the centre of its cell."""
    a = area_of(score_bits(score), STEP)
    lon = min(max((a.lon_min + a.lon_max) / 2, LON_MIN), LON_MAX)
    lat = min(max((a.lat_min + a.lat_max) / 2, LAT_MIN), LAT_MAX)
    return lon, lat


def _move(bits: int, step: int, dx: int, dy: int) -> int:
    """The neighbouring cell ``dx`` east/west and ``dy`` north/south (wrapping)."""
    shift = 64 - step * 2
    for d, own, other in ((dx, ODD, EVEN), (dy, EVEN, ODD)):
        if d == 0:
            continue
        x, y = bits & own, bits & other
        zz = other >> shift
        x = (x + (zz + 1)) if d > 0 else ((x | zz) - (zz + 1))
        bits = ((x & MASK64) & (own >> shift)) | y
    return bits


def distance(lon1: float, lat1: float, lon2: float, lat2: float) -> float:
    """Haversine metres, as geohashGetDistance computes them."""
    lon1r, lon2r = lon1 * D_R, lon2 * D_R
    v = math.sin((lon2r - lon1r) / 2)
    if v == 0.0:
        return EARTH_RADIUS_M * abs(lat2 * D_R - lat1 * D_R)
    lat1r, lat2r = lat1 * D_R, lat2 * D_R
    u = math.sin((lat2r - lat1r) / 2)
    a = u * u + math.cos(lat1r) * math.cos(lat2r) * v * v
    return 2.0 * EARTH_RADIUS_M * math.asin(math.sqrt(a))


# -- replies ----------------------------------------------------------------------------------
def human(x: float) -> bytes:
    """Redis's long double "human" form: 17 decimals, trailing zeros dropped."""
    text = b"%.17f" % x
    text = text.rstrip(b"0").rstrip(b".") if b"." in text else text
    return b"0" if text in (b"-0", b"") else text


def _coord(c: Conn, x: float) -> bytes:
    return c.enc.double(human(x))


def _dist(d: float) -> bytes:
    return reply.bulk(b"%.4f" % d)


def _unit(raw: bytes) -> float:
    factor = UNITS.get(raw.lower())
    if factor is None:
        raise CommandError("ERR unsupported unit provided. please use M, KM, FT, MI")
    return factor


def _lonlat(raw_lon: bytes, raw_lat: bytes) -> tuple[float, float]:
    lon, lat = strtod(raw_lon, strict=True), strtod(raw_lat, strict=True)
    if lon is None or lat is None:
        raise CommandError("ERR value is not a valid float")
    if not (LON_MIN <= lon <= LON_MAX and LAT_MIN <= lat <= LAT_MAX):
        raise CommandError(f"ERR invalid longitude,latitude pair {lon:f},{lat:f}")
    return lon, lat


# -- GEOADD, GEOPOS, GEODIST, GEOHASH ---------------------------------------------------------
@command("geoadd", -5, "write denyoom", (1, 1, 1), group="geo", since="3.2.0")
def geoadd(c: Conn, a: list[bytes]) -> bytes:
    """Add positions (a ZADD of their geohashes; NX, XX and CH as ZADD's)."""
    i = 2
    opts: list[bytes] = []
    while i < len(a) and a[i].lower() in (b"nx", b"xx", b"ch"):
        opts.append(a[i])
        i += 1
    lowered = {o.lower() for o in opts}
    if (len(a) - i) % 3 or (b"nx" in lowered and b"xx" in lowered):
        raise CommandError(SYNTAX)
    args = [b"zadd", a[1], *opts]
    for j in range(i, len(a), 3):
        lon, lat = _lonlat(a[j], a[j + 1])
        args += [b"%d" % encode(lon, lat), a[j + 2]]
    return zadd(c, args)


@command("geopos", -2, "readonly", (1, 1, 1), group="geo", since="3.2.0")
def geopos(c: Conn, a: list[bytes]) -> bytes:
    """[longitude, latitude] of each member (nil for a missing one)."""
    z = ZSet(c, a[1])
    out = []
    for score in z.scores(c, a[2:]):
        if score is None:
            out.append(c.enc.null_array)
        else:
            lon, lat = decode(score)
            out.append(reply.array([_coord(c, lon), _coord(c, lat)]))
    return reply.array(out)


@command("geodist", -4, "readonly", (1, 1, 1), group="geo", since="3.2.0")
def geodist(c: Conn, a: list[bytes]) -> bytes:
    """The distance between two members, in m, km, ft or mi."""
    if len(a) > 5:  # noqa: PLR2004
        raise CommandError(SYNTAX)
    factor = _unit(a[4]) if len(a) == 5 else 1.0  # noqa: PLR2004
    first, second = ZSet(c, a[1]).scores(c, [a[2], a[3]])
    if first is None or second is None:
        return c.enc.null
    return _dist(distance(*decode(first), *decode(second)) / factor)


@command("geohash", -2, "readonly", (1, 1, 1), group="geo", since="3.2.0")
def geohash(c: Conn, a: list[bytes]) -> bytes:
    """The standard 11-character geohash of each member."""
    out = []
    for score in ZSet(c, a[1]).scores(c, a[2:]):
        if score is None:
            out.append(c.enc.null)
            continue
        lon, lat = decode(score)
        bits = encode(lon, lat, STEP, -90.0, 90.0)  # the standard latitude range
        chars = bytes(BASE32[(bits >> (52 - (i + 1) * 5)) & 0x1F] if i < 10 else BASE32[0]
                      for i in range(11))
        out.append(reply.bulk(chars))
    return reply.array(out)


# -- searches ---------------------------------------------------------------------------------
class Shape(NamedTuple):
    lon: float
    lat: float
    factor: float
    radius: float | None  # a circle, in the unit
    width: float  # a box, in the unit
    height: float


def _bounds(s: Shape) -> tuple[float, float, float, float]:
    """(min lon, min lat, max lon, max lat) around the shape (geohashBoundingBox)."""
    if s.radius is not None:
        height = width = s.factor * s.radius
    else:
        height, width = s.factor * (s.height / 2), s.factor * (s.width / 2)
    lat_delta = (height / EARTH_RADIUS_M) / D_R
    top = (width / EARTH_RADIUS_M / math.cos((s.lat + lat_delta) * D_R)) / D_R
    bottom = (width / EARTH_RADIUS_M / math.cos((s.lat - lat_delta) * D_R)) / D_R
    delta = bottom if s.lat < 0 else top
    return s.lon - delta, s.lat - lat_delta, s.lon + delta, s.lat + lat_delta


def _steps(range_m: float, lat: float) -> int:
    if range_m == 0:
        return STEP
    step = 1
    while range_m < MERCATOR_MAX:
        range_m *= 2
        step += 1
    step -= 2
    if lat > 66 or lat < -66:  # noqa: PLR2004
        step -= 1
        if lat > 80 or lat < -80:  # noqa: PLR2004
            step -= 1
    return min(max(step, 1), STEP)


NEIGHBOURS = ((0, 1), (0, -1), (1, 0), (-1, 0), (1, 1), (-1, 1), (1, -1), (-1, -1))  # N S E W NE NW SE SW


def _cells(s: Shape) -> tuple[list[int | None], int]:
    """The centre cell and its neighbours (None: excluded), in Redis's order, and their step."""
    min_lon, min_lat, max_lon, max_lat = _bounds(s)
    if s.radius is not None:
        radius_m = s.radius * s.factor
    else:
        radius_m = math.sqrt((s.width / 2) * (s.width / 2) + (s.height / 2) * (s.height / 2)) \
            * s.factor
    step = _steps(radius_m, s.lat)

    def around(step: int) -> tuple[int, list[int]]:
        centre = encode(s.lon, s.lat, step)
        return centre, [_move(centre, step, dx, dy) for dx, dy in NEIGHBOURS]

    centre, near = around(step)
    north, south = area_of(near[0], step), area_of(near[1], step)
    east, west = area_of(near[2], step), area_of(near[3], step)
    if step > 1 and (north.lat_max < max_lat or south.lat_min > min_lat
                     or east.lon_max < max_lon or west.lon_min > min_lon):
        step -= 1
        centre, near = around(step)
    cells: list[int | None] = [centre, *near]
    if step >= 2:  # noqa: PLR2004 - cells wholly outside the bounding box are skipped
        area = area_of(centre, step)
        for outside, which in ((area.lat_min < min_lat, (2, 8, 7)),
                               (area.lat_max > max_lat, (1, 5, 6)),
                               (area.lon_min < min_lon, (4, 8, 6)),
                               (area.lon_max > max_lon, (3, 7, 5))):
            if outside:
                for k in which:
                    cells[k] = None
    return cells, step


def _inside(s: Shape, lon: float, lat: float) -> float | None:
    """Metres from the centre when (lon, lat) is inside the shape."""
    if s.radius is not None:
        d = distance(s.lon, s.lat, lon, lat)
        return None if d > s.radius * s.factor else d
    if EARTH_RADIUS_M * abs(s.lat * D_R - lat * D_R) > s.height * s.factor / 2:
        return None
    if distance(lon, lat, s.lon, lat) > s.width * s.factor / 2:
        return None
    return distance(s.lon, s.lat, lon, lat)


def search(c: Conn, z: ZSet, s: Shape, limit: int) -> list[tuple[bytes, float, float]]:
    """(member, score, metres) inside the shape, in the order the cells find them.

    A cell of many members is read as one list of index keys and tested by NumPy (scores,
    positions and distances for the whole cell at once); only the members that test may
    be inside (a margin of 1e-9 covers NumPy's last-digit differences from libm) go
    through the exact scalar test, whose distance is the one reported, as Redis's."""
    if not z.existed:
        return []
    cells, step = _cells(s)
    shift = 52 - step * 2
    sec = z.sec
    n = len(sec)
    found: list[tuple[bytes, float, float]] = []
    last = 0  # index of the last cell read; as in Redis, a repeat of the centre is read again
    for i, cell in enumerate(cells):
        if cell is None or (last and cell == cells[last]):
            continue
        if limit and len(found) >= limit:
            break
        lo, hi = cell << shift, (cell + 1) << shift
        keys = c.db.keys_in_range(sec, sec + sortable(float(lo)), sec + sortable(float(hi)))
        if len(keys) < VECTOR_MIN:
            candidates: Iterable[int] = range(len(keys))
            scores = [unsortable(k, n) for k in keys]
            positions = [decode(score) for score in scores]
            lons, lats = [p[0] for p in positions], [p[1] for p in positions]
        else:
            score_array = _scores(keys, n)
            lon, lat = _positions(score_array)
            candidates = np.flatnonzero(_maybe_inside(s, lon, lat)).tolist()
            scores, lons, lats = score_array.tolist(), lon.tolist(), lat.tolist()
        for j in candidates:
            d = _inside(s, lons[j], lats[j])
            if d is not None:
                found.append((keys[j][n + 8 :], scores[j], d))
                if limit and len(found) >= limit:
                    break
        last = i
    return found


VECTOR_MIN = 32  # a cell of this many members is tested by NumPy first
_EVEN_U = np.uint64(EVEN)
_SQUASH = [(np.uint64(sh), np.uint64(m)) for sh, m in (
    (1, 0x3333333333333333), (2, 0x0F0F0F0F0F0F0F0F), (4, 0x00FF00FF00FF00FF),
    (8, 0x0000FFFF0000FFFF), (16, 0xFFFFFFFF))]
SLACK = 1e-9  # relative margin of the NumPy pre-test over the exact one
EDGE_M = 1e-6  # and an absolute one, in metres (a radius of 0)


def _scores(keys: list[bytes], n: int) -> np.ndarray:
    """The scores in zset index keys (``prefix`` of ``n`` bytes, 8 sortable bytes, member)."""
    raw = b"".join(map(itemgetter(slice(n, n + 8)), keys))
    bits = np.frombuffer(raw, dtype=">u8").astype(np.uint64)
    sign = np.uint64(1 << 63)
    return np.where(bits & sign, bits ^ sign, ~bits).view(np.float64)


def _squash_many(v: np.ndarray) -> np.ndarray:
    """:func:`_squash` of every word of ``v``."""
    v = v & _EVEN_U
    for shift, mask in _SQUASH:
        v = (v | (v >> shift)) & mask
    return v


def _positions(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(longitudes, latitudes) of geo scores, as :func:`decode` computes each."""
    bits = scores.astype(np.uint64)
    cells = float(1 << STEP)
    out = []
    for ibits, low, scale in ((bits >> np.uint64(1), LON_MIN, LON_MAX - LON_MIN),
                              (bits, LAT_MIN, LAT_MAX - LAT_MIN)):
        i = _squash_many(ibits).astype(np.float64)
        lo = low + (i * 1.0 / cells) * scale
        hi = low + ((i + 1) * 1.0 / cells) * scale
        out.append(np.clip((lo + hi) / 2, low, low + scale))
    return out[0], out[1]


def _distances(lon1: float | np.ndarray, lat1: float | np.ndarray, lon2: float | np.ndarray,
               lat2: np.ndarray) -> np.ndarray:
    """:func:`distance` for many pairs (NumPy's trigonometry: within a few units in the
    last place of libm's)."""
    v = np.sin((lon2 * D_R - lon1 * D_R) / 2)
    lat1r, lat2r = lat1 * D_R, lat2 * D_R
    u = np.sin((lat2r - lat1r) / 2)
    a = u * u + np.cos(lat1r) * np.cos(lat2r) * v * v
    far = 2.0 * EARTH_RADIUS_M * np.arcsin(np.sqrt(np.minimum(a, 1.0)))
    return np.where(v == 0.0, EARTH_RADIUS_M * np.abs(lat2r - lat1r), far)


def _maybe_inside(s: Shape, lon: np.ndarray, lat: np.ndarray) -> np.ndarray:
    """A mask of the positions that may be inside the shape (every one that is, and a
    few on its edge that the exact test then turns away)."""
    if s.radius is not None:
        return _distances(s.lon, s.lat, lon, lat) <= s.radius * s.factor * (1 + SLACK) + EDGE_M
    half_h = s.height * s.factor / 2 * (1 + SLACK) + EDGE_M
    half_w = s.width * s.factor / 2 * (1 + SLACK) + EDGE_M
    ok = EARTH_RADIUS_M * np.abs(s.lat * D_R - lat * D_R) <= half_h
    # The east-west distance at the member's own latitude, as _inside measures it.
    inside: np.ndarray = ok & (_distances(lon, lat, s.lon, lat) <= half_w)
    return inside


class Query(NamedTuple):
    shape: Shape | None  # None: FROMMEMBER's member is absent
    sort: int  # 0 none, 1 ASC, -1 DESC
    limit: int  # COUNT (0: none)
    any: bool
    coord: bool
    dist: bool
    hash: bool
    store: bytes | None
    store_dist: bool


def _parse(c: Conn, a: list[bytes], z: ZSet, *, modern: bool, at: int,  # noqa: C901, PLR0912, PLR0915
           center: tuple[float, float] | bytes | None, shape_args: tuple[float, float, float,
                                                                        bytes] | None,
           store: bytes | None) -> Query:
    """The options of GEOSEARCH(STORE) (``modern``) or GEORADIUS* from ``a[at]`` on."""
    sort, count, any_, coord, dist, hash_ = 0, 0, False, False, False, False
    store_dist = False
    by: tuple[float | None, float, float, float] | None = None
    if shape_args is not None:
        radius, _, _, unit = shape_args
        by = (radius, 0.0, 0.0, _unit(unit))
    i = at
    while i < len(a):
        opt = a[i].lower()
        left = len(a) - i - 1
        if opt == b"withdist":
            dist = True
        elif opt == b"withhash":
            hash_ = True
        elif opt == b"withcoord":
            coord = True
        elif opt == b"any":
            any_ = True
        elif opt == b"asc":
            sort = 1
        elif opt == b"desc":
            sort = -1
        elif opt == b"count" and left >= 1:
            count = to_int(a[i + 1])
            if count <= 0:
                raise CommandError("ERR COUNT must be > 0")
            i += 1
        elif not modern and opt in (b"store", b"storedist") and left >= 1 and store is None:
            store, store_dist = a[i + 1], opt == b"storedist"
            i += 1
        elif modern and opt == b"storedist" and store is not None:
            store_dist = True
        elif modern and opt == b"frommember" and left >= 1 and center is None:
            center = a[i + 1]
            i += 1
        elif modern and opt == b"fromlonlat" and left >= 2 and center is None:  # noqa: PLR2004
            center = _lonlat(a[i + 1], a[i + 2])
            i += 2
        elif modern and opt == b"byradius" and left >= 2 and by is None:  # noqa: PLR2004
            r = strtod(a[i + 1], strict=True)
            if r is None:
                raise CommandError("ERR need numeric radius")
            if r < 0:
                raise CommandError("ERR radius cannot be negative")
            by = (r, 0.0, 0.0, _unit(a[i + 2]))
            i += 2
        elif modern and opt == b"bybox" and left >= 3 and by is None:  # noqa: PLR2004
            w, h = strtod(a[i + 1], strict=True), strtod(a[i + 2], strict=True)
            if w is None or h is None:
                raise CommandError("ERR need numeric width")
            if w < 0 or h < 0:
                raise CommandError("ERR height or width cannot be negative")
            by = (None, w, h, _unit(a[i + 3]))
            i += 3
        else:
            raise CommandError(SYNTAX)
        i += 1
    if modern and center is None:
        raise CommandError("ERR exactly one of FROMMEMBER or FROMLONLAT can be specified "
                           "for GEOSEARCH")
    if modern and by is None:
        raise CommandError("ERR exactly one of BYRADIUS and BYBOX arguments must be provided "
                           "for GEOSEARCH")
    if store is not None and (dist or hash_ or coord):
        raise CommandError(("ERR GEOSEARCHSTORE is" if modern else "ERR STORE option in "
                            "GEORADIUS is") + " not compatible with WITHDIST, WITHHASH and "
                           "WITHCOORD options")
    if any_ and not count:
        raise CommandError("ERR the ANY argument requires COUNT argument")
    assert by is not None
    if count and not any_ and sort == 0:
        sort = 1  # COUNT without ANY returns the nearest
    shape = None
    if isinstance(center, bytes):
        score = z.score(c, center)
        if score is None and z.existed:
            raise CommandError("ERR could not decode requested zset member")
        if score is not None:
            center = decode(score)
    if isinstance(center, tuple):
        circle, w, h, factor = by
        shape = Shape(center[0], center[1], factor, circle, w, h)
    return Query(shape, sort, count, any_, coord, dist, hash_, store, store_dist)


def _georadius(c: Conn, a: list[bytes], *, by_member: bool, readonly: bool,  # noqa: C901
               modern: bool = False, store: bytes | None = None) -> bytes:
    src = a[2] if store is not None else a[1]
    z = ZSet(c, src)
    if modern:
        q = _parse(c, a, z, modern=True, at=3 if store is not None else 2, center=None,
                   shape_args=None, store=store)
    else:
        at = 5 if by_member else 6
        if len(a) < at:
            raise CommandError(SYNTAX)
        radius = strtod(a[at - 2], strict=True)
        if radius is None:
            raise CommandError("ERR need numeric radius")
        if radius < 0:
            raise CommandError("ERR radius cannot be negative")
        center: tuple[float, float] | bytes = a[2] if by_member else _lonlat(a[2], a[3])
        q = _parse(c, a, z, modern=False, at=at, center=center,
                   shape_args=(radius, 0.0, 0.0, a[at - 1]), store=None)
        if readonly and q.store is not None:
            raise CommandError(SYNTAX)
        store = q.store
    if not z.existed or q.shape is None:
        if store is not None:
            return reply.integer(_store(c, store, [], q))
        return reply.array([])
    found = search(c, z, q.shape, q.limit if q.any else 0)
    if q.sort:
        found.sort(key=lambda f: f[2], reverse=q.sort < 0)
    if q.limit:
        found = found[: q.limit]
    if store is not None:
        return reply.integer(_store(c, store, found, q))
    factor = q.shape.factor
    out = []
    for member, score, d in found:
        if not (q.dist or q.hash or q.coord):
            out.append(reply.bulk(member))
            continue
        item = [reply.bulk(member)]
        if q.dist:
            item.append(_dist(d / factor))
        if q.hash:
            item.append(reply.integer(int(score)))
        if q.coord:
            lon, lat = decode(score)
            item.append(reply.array([_coord(c, lon), _coord(c, lat)]))
        out.append(reply.array(item))
    return reply.array(out)


def _store(c: Conn, dest: bytes, found: list[tuple[bytes, float, float]], q: Query) -> int:
    factor = q.shape.factor if q.shape is not None else 1.0
    store_zset(c, dest, [(m, d / factor if q.store_dist else s) for m, s, d in found])
    return len(found)


@command("geosearch", -7, "readonly", (1, 1, 1), group="geo", since="6.2.0")
def geosearch(c: Conn, a: list[bytes]) -> bytes:
    """Members within a radius or a box around a member or a position."""
    return _georadius(c, a, by_member=False, readonly=True, modern=True)


@command("geosearchstore", -8, "write denyoom", (1, 2, 1), group="geo", since="6.2.0")
def geosearchstore(c: Conn, a: list[bytes]) -> bytes:
    """GEOSEARCH into a destination zset (STOREDIST: scores are distances)."""
    return _georadius(c, a, by_member=False, readonly=False, modern=True, store=a[1])


@command("georadius", -6, "write denyoom", (1, 1, 1), group="geo", since="3.2.0")
def georadius(c: Conn, a: list[bytes]) -> bytes:
    """Members within a radius of a position (deprecated form of GEOSEARCH)."""
    return _georadius(c, a, by_member=False, readonly=False)


@command("georadius_ro", -6, "readonly", (1, 1, 1), group="geo", since="3.2.10")
def georadius_ro(c: Conn, a: list[bytes]) -> bytes:
    """GEORADIUS without STORE."""
    return _georadius(c, a, by_member=False, readonly=True)


@command("georadiusbymember", -5, "write denyoom", (1, 1, 1), group="geo", since="3.2.0")
def georadiusbymember(c: Conn, a: list[bytes]) -> bytes:
    """Members within a radius of a member (deprecated form of GEOSEARCH)."""
    return _georadius(c, a, by_member=True, readonly=False)


@command("georadiusbymember_ro", -5, "readonly", (1, 1, 1), group="geo", since="3.2.10")
def georadiusbymember_ro(c: Conn, a: list[bytes]) -> bytes:
    """GEORADIUSBYMEMBER without STORE."""
    return _georadius(c, a, by_member=True, readonly=True)
