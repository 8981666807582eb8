"""YCSB workload definitions (PROTOCOL.md section 3): keys, records, request distributions, op streams.

Written from the YCSB core workload's published definitions:

* key of record n: ``"user" + str(fnv64(n))`` where fnv64 is YCSB's FNV-1a-64 over the 8
  little-endian bytes of n, made non-negative (insertorder = hashed);
* 10 fields ``field0``..``field9`` of 100 seeded random printable bytes;
* ScrambledZipfian (theta 0.99): a Zipfian rank over YCSB's 10,000,000,000-item space
  (zeta precomputed as YCSB does), hashed with fnv64 and taken modulo the record count;
* SkewedLatest (workload D): ``newest - Zipfian(newest)``, the Zipfian's zeta grown
  incrementally as inserts land;
* mixes A (50 read / 50 update), B (95/5), C (100 read), D (95 read / 5 insert),
  F (50 read / 50 read-modify-write).

An op stream is a list of ``(op, n, field)``, generated per worker from its own seed before
the clock starts so the generator never runs inside a timed operation. Workload D inserts
take disjoint key ranges per worker (``recordcount + worker + k * workers``); a worker's
latest-reads skew towards the newest key it inserted and only touch keys that exist (the
preloaded ones and its own), so no read misses; after a D run the harness fills the gaps
between workers' ranges (untimed) so the next run starts from a dense table.
"""

# Benchmark support, not library code.
# ruff: noqa: INP001, CPY001, S311, PLR0913, PLR0917, E501
from __future__ import annotations

import random
import string
from typing import Any

FNV_OFFSET_64 = 0xCBF29CE484222325
FNV_PRIME_64 = 1099511628211
MASK_64 = (1 << 64) - 1
ZIPF_THETA = 0.99
YCSB_ITEM_COUNT = 10_000_000_000
YCSB_ZETAN = 26.46902820178302  # zeta(10^10, 0.99), the constant YCSB hard-codes
FIELDS = [f"field{i}" for i in range(10)]
FIELD_BYTES = 100

MIXES: dict[str, dict[str, float]] = {
    "A": {"read": 0.5, "update": 0.5},
    "B": {"read": 0.95, "update": 0.05},
    "C": {"read": 1.0},
    "D": {"read": 0.95, "insert": 0.05},
    "F": {"read": 0.5, "rmw": 0.5},
}
ORDER = ("A", "B", "C", "F", "D")  # D last: it grows the table


def fnv64(n: int) -> int:
    h = FNV_OFFSET_64
    for _ in range(8):
        h ^= n & 0xFF
        h = (h * FNV_PRIME_64) & MASK_64
        n >>= 8
    if h >= 1 << 63:  # Java's Math.abs of a signed long
        h = (1 << 64) - h
    return h


def key(n: int) -> str:
    return f"user{fnv64(n)}"


def value(rng: random.Random, size: int = FIELD_BYTES) -> str:
    alphabet = string.ascii_letters + string.digits
    return "".join(rng.choices(alphabet, k=size))


def record(n: int, seed: int) -> dict[str, str]:
    rng = random.Random(seed * 1_000_003 + n)
    return {f: value(rng) for f in FIELDS}


class Zipfian:
    """Gray et al.'s Zipfian generator over [0, items), as YCSB's ZipfianGenerator."""

    def __init__(self, items: int, theta: float = ZIPF_THETA, zetan: float | None = None) -> None:
        self.items, self.theta = items, theta
        self.zeta2 = 1.0 + 0.5**theta
        self.alpha = 1.0 / (1.0 - theta)
        self.counted = items if zetan is not None else 0
        self.zetan = zetan if zetan is not None else 0.0
        self.grow(items)

    def grow(self, items: int) -> None:
        """Extend to ``items`` (incremental zeta, as YCSB does for a growing key space)."""
        for i in range(self.counted + 1, items + 1):
            self.zetan += 1.0 / i**self.theta
        self.counted = max(self.counted, items)
        self.items = items
        self.eta = (1 - (2.0 / items) ** (1 - self.theta)) / (1 - self.zeta2 / self.zetan)

    def next(self, rng: random.Random) -> int:
        u = rng.random()
        uz = u * self.zetan
        if uz < 1.0:
            return 0
        if uz < 1.0 + 0.5**self.theta:
            return 1
        return min(int(self.items * (self.eta * u - self.eta + 1) ** self.alpha), self.items - 1)


def op_stream(
    workload: str, count: int, recordcount: int, worker: int, workers: int, seed: int
) -> list[tuple[str, int, int]]:
    """``count`` ops ``(op, record number, field index)`` for one worker."""
    rng = random.Random(seed * 7919 + worker)
    mix = MIXES[workload]
    ops, weights = list(mix), list(mix.values())
    ops_out: list[tuple[str, int, int]] = []
    if workload == "D":
        latest = Zipfian(recordcount)
        newest = recordcount - 1
        inserted = 0
        for op in rng.choices(ops, weights, k=count):
            if op == "insert":
                n = recordcount + worker + inserted * workers
                inserted += 1
                newest = n
                ops_out.append(("insert", n, 0))
                continue
            n = max(0, newest - latest.next(rng))
            if n >= recordcount:  # another worker's key may not exist yet: read our own
                idx = (n - recordcount - worker) // workers
                n = recordcount + worker + idx * workers if idx >= 0 else recordcount - 1
            ops_out.append(("read", n, 0))
        return ops_out
    zipf = Zipfian(YCSB_ITEM_COUNT, zetan=YCSB_ZETAN)
    for op in rng.choices(ops, weights, k=count):
        n = fnv64(zipf.next(rng)) % recordcount
        ops_out.append((op, n, rng.randrange(len(FIELDS))))
    return ops_out


def describe() -> dict[str, Any]:
    return {
        "fields": len(FIELDS),
        "field_bytes": FIELD_BYTES,
        "distribution": "ScrambledZipfian theta 0.99 (A, B, C, F); SkewedLatest (D)",
        "mixes": MIXES,
    }


def inserted_keys(recordcount: int, workers: int, count: int, seed: int) -> list[int]:
    """Record numbers a D run of ``workers`` x ``count`` ops inserts (for the gap fill)."""
    out = []
    for w in range(workers):
        out.extend(
            n for op, n, _ in op_stream("D", count, recordcount, w, workers, seed) if op == "insert"
        )
    return out
