"""HyperLogLog: PFADD, PFCOUNT and PFMERGE, counting as Redis 7.0 counts.

The same sketch as Redis's, so the same answers: 16,384 six-bit registers, elements
hashed by MurmurHash64A (seed 0xadc83b19), the register index from the low 14 bits and
the run of zeros after them, and Otmar Ertl's estimator (the one Redis uses since 5.0).
The value is a Redis HyperLogLog string ("HYLL" header, cached cardinality, then the
registers: the sparse encoding while every register fits it and it stays under 3,000
bytes, the dense one after), so GET/SET move sketches between tuffdb and Redis both
ways. Sparse values are written in their shortest form, which Redis's incremental
updates do not always reach: GET of a sparse sketch may differ from Redis's byte for byte
while meaning the same registers.
"""

# Every handler takes (conn, args), used or not: one signature for the command table.
# ruff: noqa: ARG001

from __future__ import annotations

import math
import re
from bisect import bisect_right
from typing import TYPE_CHECKING

import numpy as np

from tuffdb.server.resp import reply
from tuffdb.server.resp.commands.common import put_keep_ttl
from tuffdb.server.resp.commands.strings import get_string
from tuffdb.server.resp.keyspace import STRING_PREFIX, stored
from tuffdb.server.resp.table import CommandError, command

if TYPE_CHECKING:
    from tuffdb.server.resp.conn import Conn

P = 14
REGISTERS = 1 << P
Q = 64 - P
MAX_VALUE = Q + 1  # the largest register value
DENSE_BYTES = REGISTERS * 6 // 8
HEADER = 16
MAGIC = b"HYLL"
DENSE, SPARSE = 0, 1
_SPARSE_TAG = bytes((SPARSE,))
SPARSE_MAX_BYTES = 3000  # Redis's hll-sparse-max-bytes
SPARSE_MAX_VALUE = 32
FEW_RUNS = 128  # below this many runs a sparse body is built by a loop (_runs_body)
SHORT_SPARSE = 192  # sparse bodies up to this long are read (and PFADD changes them) by loops over their runs
EMPTY_SPARSE = bytes((0x40 | ((REGISTERS - 1) >> 8), (REGISTERS - 1) & 0xFF))  # one XZERO
ALPHA_INF = 0.721347520444481703680  # 1 / (2 ln 2)
SEED = 0xADC83B19
M64 = 0xC6A4A7935BD1E995
MASK64 = (1 << 64) - 1
INVALID_HLL = "WRONGTYPE Key is not a valid HyperLogLog string value."
CORRUPT = "INVALIDOBJ Corrupted HLL object detected"
_XZERO = re.compile(rb"[\x40-\x7f]")  # an XZERO op's first byte: 01xxxxxx


def murmur64a(data: bytes, seed: int = SEED) -> int:
    """MurmurHash64A (Austin Appleby), little-endian, as Redis hashes HLL elements."""
    n = len(data)
    h = (seed ^ (n * M64)) & MASK64
    end = n - (n & 7)
    for i in range(0, end, 8):
        k = (int.from_bytes(data[i : i + 8], "little") * M64) & MASK64
        k ^= k >> 47
        k = (k * M64) & MASK64
        h = ((h ^ k) * M64) & MASK64
    tail = n & 7
    if tail:
        h ^= int.from_bytes(data[end:], "little")
        h = (h * M64) & MASK64
    h ^= h >> 47
    h = (h * M64) & MASK64
    return h ^ (h >> 47)


def register_of(element: bytes) -> tuple[int, int]:
    """(register index, value): the run of zeros (plus one) above the index bits."""
    h = murmur64a(element)
    index = h & (REGISTERS - 1)
    rest = (h >> P) | (1 << Q)
    return index, (rest & -rest).bit_length()


# -- encodings ------------------------------------------------------------------------------
def check(raw: bytes) -> None:
    """Redis's test that a string is a HyperLogLog: the header (and a dense body's size)."""
    if len(raw) < HEADER or raw[:4] != MAGIC or raw[4] not in (DENSE, SPARSE) or \
            (raw[4] == DENSE and len(raw) != HEADER + DENSE_BYTES):
        raise CommandError(INVALID_HLL)


def decode(raw: bytes) -> np.ndarray:
    """The 16,384 registers of a HyperLogLog string; CommandError if it is none."""
    check(raw)
    if raw[4] == DENSE:
        return _dense_registers(raw[HEADER:])
    return _sparse_registers(raw[HEADER:])


def _dense_registers(body: bytes) -> np.ndarray:
    # Register i holds bits 6i..6i+5, least significant first: four registers per 3 bytes.
    b = np.frombuffer(body, dtype=np.uint8).reshape(-1, 3).astype(np.uint32)
    word = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)
    regs = np.empty((len(word), 4), dtype=np.uint8)
    for j in range(4):
        regs[:, j] = (word >> (6 * j)) & 63
    return regs.reshape(-1)


def _sparse_registers(body: bytes) -> np.ndarray:
    """The registers of a sparse body, by C loops: the regex finds each XZERO (the only
    two-byte op, so the only thing that needs a sequential walk), NumPy decodes every op
    at once and ``np.repeat`` expands the runs. ~15 us whatever the sketch's size, against
    ~20-700 us for a Python loop over the ops."""
    n = len(body)
    if n <= SHORT_SPARSE:  # a loop over few ops costs less than the NumPy calls below
        run_starts, run_values = _parse_runs(body)
        return np.repeat(np.array(run_values, dtype=np.uint8), np.diff([*run_starts, REGISTERS]))
    xz: list[int] = []
    pos = 0
    search = _XZERO.search
    while (m := search(body, pos)) is not None:
        pos = m.start()
        xz.append(pos)
        pos += 2
    if pos > n:  # an XZERO cut short by the end of the value
        raise CommandError(CORRUPT)
    b = np.frombuffer(body, dtype=np.uint8)
    if xz:
        at = np.array(xz, dtype=np.intp)
        starts = np.ones(n, dtype=bool)
        starts[at + 1] = False
        ops = b[starts].astype(np.int64)
        xz_runs = (((b[at].astype(np.int64) & 0x3F) << 8) | b[at + 1]) + 1
    else:
        ops = b.astype(np.int64)
    val = (ops & 0x80) != 0
    runs = np.where(val, (ops & 3) + 1, (ops & 0x3F) + 1)
    if xz:
        runs[(ops & 0xC0) == 0x40] = xz_runs  # noqa: PLR2004 - XZERO's tag bits
    if int(runs.sum()) != REGISTERS:
        raise CommandError(CORRUPT)
    values = np.where(val, ((ops >> 2) & 0x1F) + 1, 0).astype(np.uint8)
    return np.repeat(values, runs)


def encode(regs: np.ndarray, cache: bytes, *, dense: bool = False) -> bytes:
    """A HyperLogLog string of ``regs`` with the 8 bytes of ``cache`` (the cached count,
    its top bit set when stale): sparse if it can be, unless ``dense`` (a sketch once
    dense stays dense, as in Redis)."""
    sparse = None if dense else _sparse_body(regs)
    if sparse is not None:
        return MAGIC + bytes((SPARSE, 0, 0, 0)) + cache + sparse
    return MAGIC + bytes((DENSE, 0, 0, 0)) + cache + _dense_body(regs)


def _dense_get(body: bytes | bytearray | memoryview, index: int) -> int:
    """Register ``index`` of a dense body (6 bits, least significant first)."""
    pos = index * 6
    b, shift = pos >> 3, pos & 7
    v = body[b] >> shift
    if shift > 2:  # noqa: PLR2004 - the register runs into the next byte
        v |= body[b + 1] << (8 - shift)
    return v & 63


def _dense_set(body: bytearray, index: int, value: int) -> None:
    pos = index * 6
    b, shift = pos >> 3, pos & 7
    word = body[b] | ((body[b + 1] << 8) if b + 1 < len(body) else 0)
    word = (word & ~(63 << shift)) | (value << shift)
    body[b] = word & 0xFF
    if b + 1 < len(body):
        body[b + 1] = (word >> 8) & 0xFF


def stale(raw: bytes | None) -> bytes:
    """The cache bytes of ``raw`` (a new sketch's: 0) marked stale, as Redis leaves them."""
    cache = bytearray(raw[8:16] if raw is not None else bytes(8))
    cache[7] |= 0x80
    return bytes(cache)


def _dense_body(regs: np.ndarray) -> bytes:
    r = regs.reshape(-1, 4).astype(np.uint32)
    word = r[:, 0] | (r[:, 1] << 6) | (r[:, 2] << 12) | (r[:, 3] << 18)
    out = np.empty((len(word), 3), dtype=np.uint8)
    out[:, 0] = word & 0xFF
    out[:, 1] = (word >> 8) & 0xFF
    out[:, 2] = (word >> 16) & 0xFF
    return out.tobytes()


def _sparse_body(regs: np.ndarray) -> bytes | None:
    """The shortest sparse body of ``regs`` (None if it does not fit), built by NumPy:
    each run of equal registers is one ZERO (up to 64 zeros) or XZERO op, or one VAL op
    per 4 registers of a value."""
    if int(regs.max()) > SPARSE_MAX_VALUE:
        return None
    change = np.flatnonzero(regs[1:] != regs[:-1]) + 1
    if len(change) < FEW_RUNS:
        run_starts = [0, *change.tolist()]
        return _runs_body(run_starts, regs[run_starts].tolist())
    starts = np.concatenate(([0], change))
    runs = np.diff(np.concatenate((starts, [REGISTERS])))
    values = regs[starts].astype(np.int64)
    nops = np.where(values == 0, 1, (runs + 3) >> 2)
    total = int(nops.sum())
    if total == len(runs):  # every run is one op (values in runs of at most 4): no split
        op_runs, op_values, take = runs, values, runs
    else:
        run_of = np.repeat(np.arange(len(runs)), nops)
        k = np.arange(total) - np.repeat(np.cumsum(nops) - nops, nops)  # op number in its run
        op_runs, op_values = runs[run_of], values[run_of]
        take = np.minimum(4, op_runs - 4 * k)
    two = (op_values == 0) & (op_runs > 64)  # noqa: PLR2004 - an XZERO (two bytes)
    width = 1 + two
    ends = np.cumsum(width)
    if int(ends[-1]) > SPARSE_MAX_BYTES:
        return None
    first = np.where(op_values != 0, 0x80 | ((op_values - 1) << 2) | (take - 1),
                     np.where(two, 0x40 | ((op_runs - 1) >> 8), op_runs - 1))
    offsets = ends - width
    out = np.empty(int(ends[-1]), dtype=np.uint8)
    out[offsets] = first
    out[offsets[two] + 1] = (op_runs[two] - 1) & 0xFF
    return out.tobytes()


def _runs_body(starts: list[int], values: list[int]) -> bytes | None:
    """The sparse body of the runs starting at ``starts`` with ``values`` (neighbours
    differ; every value at most 32), None if over the size limit: a loop over the runs,
    cheaper than NumPy's per-call overhead for a sketch of few runs."""
    out = bytearray()
    ends = [*starts[1:], REGISTERS]
    for start, end, value in zip(starts, ends, values, strict=True):
        run = end - start
        if value == 0:
            if run > 64:  # noqa: PLR2004
                out += bytes((0x40 | ((run - 1) >> 8), (run - 1) & 0xFF))
            else:
                out.append(run - 1)
            continue
        code = 0x80 | ((value - 1) << 2)
        while run > 4:  # noqa: PLR2004
            out.append(code | 3)
            run -= 4
        out.append(code | (run - 1))
    return bytes(out) if len(out) <= SPARSE_MAX_BYTES else None


def _parse_runs(body: bytes) -> tuple[list[int], list[int]]:
    """A sparse body as runs (starts, values; neighbours merged when equal), by a loop
    over its ops: for short bodies (a few elements added), where it beats NumPy."""
    starts: list[int] = []
    values: list[int] = []
    pos = i = 0
    n = len(body)
    while i < n:
        op = body[i]
        if op & 0x80:  # VAL: 1vvvvvxx, value v+1 for xx+1 registers
            run, value = (op & 3) + 1, ((op >> 2) & 0x1F) + 1
            i += 1
        elif op & 0x40:  # XZERO: 01xxxxxx yyyyyyyy, 14-bit run - 1
            if i + 1 >= n:
                raise CommandError(CORRUPT)
            run, value = (((op & 0x3F) << 8) | body[i + 1]) + 1, 0
            i += 2
        else:  # ZERO: 00xxxxxx
            run, value = (op & 0x3F) + 1, 0
            i += 1
        if not values or values[-1] != value:
            starts.append(pos)
            values.append(value)
        pos += run
        if pos > REGISTERS:
            raise CommandError(CORRUPT)
    if pos != REGISTERS:
        raise CommandError(CORRUPT)
    return starts, values


def _sparse_add(body: bytes, elements: list[bytes]) -> tuple[bool, bytes | None]:
    """PFADD on a short sparse body without the 16,384 registers: each element's register
    is found among the runs by bisect and split out when it grows. Returns (changed, new
    body); the body is None when the sketch no longer fits the sparse form (the caller
    then takes the register-array path)."""
    starts, values = _parse_runs(body)
    changed = False
    for element in elements:
        index, value = register_of(element)
        r = bisect_right(starts, index) - 1
        cur = values[r]
        if value <= cur:
            continue
        changed = True
        start = starts[r]
        end = starts[r + 1] if r + 1 < len(starts) else REGISTERS
        new_starts, new_values = [index], [value]
        if index > start:
            new_starts.insert(0, start)
            new_values.insert(0, cur)
        if index + 1 < end:
            new_starts.append(index + 1)
            new_values.append(cur)
        starts[r : r + 1] = new_starts
        values[r : r + 1] = new_values
    if not changed:
        return False, body
    merged_starts, merged_values = [starts[0]], [values[0]]
    for start, value in zip(starts, values, strict=True):
        if value != merged_values[-1]:
            merged_starts.append(start)
            merged_values.append(value)
    if max(merged_values) > SPARSE_MAX_VALUE:
        return True, None
    return True, _runs_body(merged_starts, merged_values)


# -- the estimator (Ertl, "New cardinality estimation algorithms for HyperLogLog") --------
def _sigma(x: float) -> float:
    if x == 1.0:
        return math.inf
    y, z = 1.0, x
    while True:
        x *= x
        before = z
        z += x * y
        y += y
        if before == z:
            return z


def _tau(x: float) -> float:
    if x in (0.0, 1.0):
        return 0.0
    y, z = 1.0, 1.0 - x
    while True:
        x = math.sqrt(x)
        before = z
        y *= 0.5
        z -= (1 - x) ** 2 * y
        if before == z:
            return z / 3


def count(regs: np.ndarray) -> int:
    histo = np.bincount(regs, minlength=Q + 2).tolist()
    m = float(REGISTERS)
    z = m * _tau((m - histo[Q + 1]) / m)
    for j in range(Q, 0, -1):
        z += histo[j]
        z *= 0.5
    z += m * _sigma(histo[0] / m)
    return int(_round_half_away(ALPHA_INF * m * m / z))


def _round_half_away(x: float) -> float:
    """C's llroundl: halves away from zero."""
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)


# -- commands -------------------------------------------------------------------------------
def _registers(c: Conn, key: bytes) -> np.ndarray | None:
    raw = get_string(c, key)
    return None if raw is None else decode(raw)


def _write(c: Conn, key: bytes, value: bytes, existed: bool) -> None:
    put_keep_ttl(c.db, stored(key), STRING_PREFIX + value, existed)
    c.srv.touch(key)


@command("pfadd", -2, "write denyoom fast", (1, 1, 1), group="hyperloglog", since="2.8.9")
def pfadd(c: Conn, a: list[bytes]) -> bytes:
    """Add elements to a HyperLogLog; 1 if its registers (or the key) changed."""
    raw = get_string(c, a[1])
    if raw is not None and len(raw) == HEADER + DENSE_BYTES and raw[:5] == MAGIC + b"\x00":
        # Dense: registers read and patched where they are, no decoding of the 16,384.
        buf: bytearray | None = None
        view = memoryview(raw)[HEADER:]
        for element in a[2:]:
            index, value = register_of(element)
            if value > _dense_get(buf if buf is not None else view, index):
                if buf is None:
                    buf = bytearray(view)
                _dense_set(buf, index, value)
        if buf is None:
            return reply.ZERO
        _write(c, a[1], raw[:8] + stale(raw) + bytes(buf), True)
        return reply.ONE
    if raw is None or (len(raw) <= HEADER + SHORT_SPARSE and raw[4:5] == _SPARSE_TAG):
        if raw is not None:
            check(raw)
        changed, body = _sparse_add(EMPTY_SPARSE if raw is None else raw[HEADER:], a[2:])
        if body is not None:
            if changed or raw is None:
                _write(c, a[1], MAGIC + bytes((SPARSE, 0, 0, 0)) + stale(raw) + body,
                       raw is not None)
            return reply.ONE if changed or raw is None else reply.ZERO
    old = None if raw is None else decode(raw)
    regs = np.zeros(REGISTERS, dtype=np.uint8) if old is None else old.copy()
    updated = False
    for element in a[2:]:
        index, value = register_of(element)
        if value > regs[index]:
            regs[index] = value
            updated = True
    if updated or old is None:
        _write(c, a[1], encode(regs, stale(raw)), old is not None)
    return reply.ONE if updated or old is None else reply.ZERO


@command("pfcount", -2, "readonly", (1, -1, 1), group="hyperloglog", since="2.8.9")
def pfcount(c: Conn, a: list[bytes]) -> bytes:
    """The estimated number of distinct elements of one HyperLogLog, or of their union."""
    if len(a) == 2:  # noqa: PLR2004 - one sketch: its cached count, or count and cache it
        raw = get_string(c, a[1])
        if raw is None:
            return reply.ZERO
        check(raw)
        if not raw[15] & 0x80:
            return reply.integer(int.from_bytes(raw[8:16], "little"))
        n = count(decode(raw))
        node = c.srv.node
        if node is None or node.is_leader():  # a follower's copy is the leader's to change
            _write(c, a[1], raw[:8] + n.to_bytes(8, "little") + raw[16:], True)
        return reply.integer(n)
    merged: np.ndarray | None = None
    for key in a[1:]:
        regs = _registers(c, key)
        if regs is not None:
            merged = regs if merged is None else np.maximum(merged, regs)
    return reply.integer(0 if merged is None else count(merged))


@command("pfmerge", -2, "write denyoom", (1, -1, 1), group="hyperloglog", since="2.8.9")
def pfmerge(c: Conn, a: list[bytes]) -> bytes:
    """Merge HyperLogLogs into the destination (which takes part if it exists)."""
    raw = get_string(c, a[1])
    dest = None if raw is None else decode(raw)
    merged = np.zeros(REGISTERS, dtype=np.uint8) if dest is None else dest
    dense = raw is not None and raw[4] == DENSE  # any dense input makes the result dense
    for key in a[2:]:
        source = get_string(c, key)
        if source is not None:
            merged = np.maximum(merged, decode(source))
            dense = dense or source[4] == DENSE
    _write(c, a[1], encode(merged, stale(raw), dense=dense), dest is not None)
    return reply.OK
