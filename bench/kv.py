#!/usr/bin/env python3
"""KV benchmark: tuffdb.KVStore side by side with embedded Python peers.

The corrected kvbench protocol (``../shared/bench/PROTOCOL.md`` sections 2 and 4) and the cells
of issue 2 section 4. Registered workloads x registered implementations; every store in a cell
runs in the same invocation, repetitions interleaved (rep 1 of every store, then rep 2, ...).

Cells (``--cell``, repeatable; default: ingest durable readrandom space reopen):

  ingest      300,000 fresh random keys x 1 KiB, 1 and 8 threads, DEFAULT durability
  durable     8 threads, fresh random keys, every engine in its per-write durable mode (FULL),
              fixed window (``--duration``, default 10 s) capped at ``--ops`` (default 100,000)
  readrandom  300,000 keys loaded, closed, reopened; uniform random gets, 1 thread, for a
              fixed window; cache budget 1.25 x working ("in-cache") and working / 8
  space       Sum of apparent file sizes after close() / (keys x 1,040), for half-compressible,
              kvbench-template and incompressible values; then every key overwritten
              ``--overwrite-rounds`` times (default 10), closed, compacted, closed again
  reopen      wall time of open() + first get() over 1,000,000 keys (tuffdb by default)
  workloads   the section 2.1 table at 100,000 keys: fillseq fillrandom overwrite readrandom
              deleterandom readseq ycsb-a ycsb-b ycsb-c ycsb-d ycsb-e ycsb-f
  openloop    gets and overwrites at fixed offered rates (``--rates``); latency from the due
              time, i.e. corrected for coordinated omission

Examples::

    python bench/kv.py --cell ingest                       # the issue's cell, real sizes
    python bench/kv.py --cell durable --impl tuffdb-always,plyvel-sync
    python bench/kv.py --keys 2000 --reps 1 --duration 1   # smoke run, every cell
    python bench/kv.py --list                              # registered impls and workloads

Results: ``<--out>/<run-id>/<cell>.json`` (raw, per rep, with the exact command) plus
``environment.json`` (manifest, fsync probe at start and end). ``bench/kv.py plot <run dir>``
regenerates the plots and a markdown table from those files only.
"""

# Benchmark script, not library code: prints progress, long signatures of registered
# builders, and runtime imports of optional peers are deliberate.
# ruff: noqa: T201, PLR0913, PLR0917, CPY001, EXE001, TC003, ARG001, C901, SIM115
from __future__ import annotations

import argparse
import contextlib
import dbm.dumb
import faulthandler
import fnmatch
import functools
import gc
import itertools
import math
import os
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    MASK64,
    REPO,
    run_tool,
    SplitMix64,
    apparent_size,
    bench_dir,
    check_real_disk,
    client_seed,
    environment,
    file_listing,
    fmt_rate,
    fsync_probe,
    latency_summary,
    median_index,
    rep_seed,
    spread,
    utc_now,
    write_json,
)

KEY_BYTES = 16
VALUE_BYTES = 1024
RECORD_BYTES = KEY_BYTES + VALUE_BYTES  # 1,040: the kvbench "working" unit
KEY_SUFFIX = b"0" * 8
TEMPLATE = bytes(ord("a") + i % 26 for i in range(VALUE_BYTES))
TEMPLATE_TAIL16 = TEMPLATE[16:]
TEMPLATE_TAIL_HALF = TEMPLATE[VALUE_BYTES // 2 :]
LOAD_BATCH = 1000
DEFAULT_SEED = 42
VALUE_KINDS = ("template", "half", "random")
PEER_PACKAGES = ("rocksdict", "plyvel", "lmdb", "diskcache", "psutil", "matplotlib")

PUT, GET, DELETE, SCAN, RMW = 0, 1, 2, 3, 4
COMMAND = shlex.join(["python", *sys.argv])
OP_NAMES = {PUT: "put", GET: "get", DELETE: "delete", SCAN: "scan", RMW: "rmw"}


def key_of(i: int) -> bytes:
    """16 B: 8-byte big-endian index + b'0' x 8 (kvbench)."""
    return i.to_bytes(8, "big") + KEY_SUFFIX


# =========================================================================== values
class ValueMaker:
    """Seeded 1 KiB values of one kind.

    template  kvbench: a-z repeating; bytes 0-8 random (splitmix64), bytes 8-16 = key[:8]
              (the 8-byte index; a 16-byte key does not fit in 8 bytes). ~41x with zlib -1.
    half      bytes 0-512 seeded random, bytes 512-1024 the template: "half-compressible".
    random    1,024 seeded random bytes: incompressible, distinct per key and per version.
    """

    def __init__(self, kind: str, seed: int) -> None:
        if kind not in VALUE_KINDS:
            raise ValueError(f"unknown value kind {kind!r}; choose from {VALUE_KINDS}")
        self.kind = kind
        self.rng = SplitMix64(seed)
        self._np = None
        if kind != "template":
            import numpy as np  # noqa: PLC0415

            self._np = np.random.default_rng(seed & MASK64)

    def one(self, key: bytes) -> bytes:
        if self.kind == "template":
            return self.rng.next().to_bytes(8, "little") + key[:8] + TEMPLATE_TAIL16
        return self.many([key])[0]

    def many(self, keys: list[bytes]) -> list[bytes]:
        n = len(keys)
        if self.kind == "template":
            nxt = self.rng.next
            tail = TEMPLATE_TAIL16
            return [nxt().to_bytes(8, "little") + k[:8] + tail for k in keys]
        assert self._np is not None
        if self.kind == "random":
            buf = self._np.bytes(n * VALUE_BYTES)
            return [buf[i * VALUE_BYTES : (i + 1) * VALUE_BYTES] for i in range(n)]
        half = VALUE_BYTES // 2
        buf = self._np.bytes(n * half)
        tail = TEMPLATE_TAIL_HALF
        return [buf[i * half : (i + 1) * half] + tail for i in range(n)]


def permutation(n: int, seed: int) -> list[int]:
    """A seeded shuffle of range(n) (fresh random keys: every index once, random order)."""
    import numpy as np  # noqa: PLC0415

    return np.random.default_rng(seed & MASK64).permutation(n).tolist()


# =========================================================================== key choosers
class Zipfian:
    """YCSB ZipfianGenerator (Gray et al.), theta = 0.99, over [0, n)."""

    def __init__(self, n: int, theta: float = 0.99) -> None:
        self.n = n
        self.theta = theta
        self.zetan = self._zeta(n, theta)
        self.zeta2 = self._zeta(2, theta)
        self.alpha = 1.0 / (1.0 - theta)
        self.eta = (1 - (2.0 / n) ** (1 - theta)) / (1 - self.zeta2 / self.zetan)

    @staticmethod
    @functools.cache
    def _zeta(n: int, theta: float) -> float:
        return math.fsum(1.0 / (i + 1) ** theta for i in range(n))

    def next(self, u: float) -> int:
        uz = u * self.zetan
        if uz < 1.0:
            return 0
        if uz < 1.0 + 0.5**self.theta:
            return 1
        return int(self.n * (self.eta * u - self.eta + 1) ** self.alpha)


def fnv64(v: int) -> int:
    """YCSB FNVhash64 over the 8 bytes of v (scrambles zipfian ranks over the key space)."""
    h = 0xCBF29CE484222325
    for _ in range(8):
        h ^= v & 0xFF
        h = (h * 0x100000001B3) & MASK64
        v >>= 8
    return h


def uniform01(rng: SplitMix64) -> float:
    return (rng.next() >> 11) * (1.0 / (1 << 53))


# =========================================================================== adapters
class Adapter:
    """What a benchmark needs from a store. Subclasses bind fast paths as attributes."""

    ordered = False
    durable = False
    atomic_batch = False
    put: Callable[[bytes, bytes], Any]
    get: Callable[[bytes], bytes | None]
    delete: Callable[[bytes], Any]

    def put_batch(self, items: list[tuple[bytes, bytes]]) -> None:
        for k, v in items:
            self.put(k, v)

    def scan(self, start: bytes, n: int) -> int:
        raise NotImplementedError("unordered store")

    def flush(self) -> None:  # make everything written so far durable, if the engine can
        pass

    def compact(self) -> str | None:  # returns what was run, or None if nothing exists
        return None

    def stats(self) -> dict[str, Any] | None:
        return None

    def close(self) -> None:
        raise NotImplementedError


class TuffdbAdapter(Adapter):
    ordered = True
    atomic_batch = True

    def __init__(self, path: Path, durability: str, cache_bytes: int | None) -> None:
        from tuffdb import KVStore  # noqa: PLC0415

        kw: dict[str, Any] = {"durability": durability}
        if cache_bytes is not None:
            kw["cache_bytes"] = cache_bytes
        self.db = KVStore.open(str(path), **kw)
        self.durable = durability == "always"
        self.put = self.db.put
        self.get = self.db.get
        self.delete = self.db.delete

    def put_batch(self, items: list[tuple[bytes, bytes]]) -> None:
        self.db.put_many(items)

    def scan(self, start: bytes, n: int) -> int:
        return sum(1 for _ in itertools.islice(self.db.scan(start=start), n))

    def flush(self) -> None:
        self.db.sync()

    def compact(self) -> str:
        self.db.compact()
        return "KVStore.compact()"

    def stats(self) -> dict[str, Any] | None:
        try:
            return dict(self.db.stats())
        except Exception as exc:  # noqa: BLE001 - stats are informational
            return {"error": repr(exc)}

    def close(self) -> None:
        self.db.close()


class RocksdictAdapter(Adapter):
    ordered = True
    atomic_batch = True

    def __init__(self, path: Path, sync: bool, cache_bytes: int | None) -> None:
        import rocksdict  # noqa: PLC0415

        self._r = rocksdict
        opt = rocksdict.Options(raw_mode=True)
        if cache_bytes is not None:
            bbo = rocksdict.BlockBasedOptions()
            bbo.set_block_cache(rocksdict.Cache(cache_bytes))
            opt.set_block_based_table_factory(bbo)
        self.db = rocksdict.Rdict(str(path), opt)
        wo = rocksdict.WriteOptions()
        wo.sync = sync
        self.db.set_write_options(wo)
        self.durable = sync
        self.put = self.db.put
        self.get = self.db.get
        self.delete = self.db.delete

    def put_batch(self, items: list[tuple[bytes, bytes]]) -> None:
        wb = self._r.WriteBatch(raw_mode=True)
        for k, v in items:
            wb.put(k, v)
        self.db.write(wb)

    def scan(self, start: bytes, n: int) -> int:
        it = self.db.iter()
        it.seek(start)
        c = 0
        while c < n and it.valid():
            it.key()
            it.value()
            it.next()
            c += 1
        return c

    def flush(self) -> None:
        self.db.flush_wal(True)

    def compact(self) -> str:
        self.db.compact_range(None, None)
        return "Rdict.compact_range(None, None)"

    def close(self) -> None:
        self.db.close()


class PlyvelAdapter(Adapter):
    ordered = True
    atomic_batch = True

    def __init__(self, path: Path, sync: bool, cache_bytes: int | None) -> None:
        import plyvel  # noqa: PLC0415

        kw: dict[str, Any] = {"create_if_missing": True}
        if cache_bytes is not None:
            kw["lru_cache_size"] = cache_bytes
        self.db = plyvel.DB(str(path), **kw)
        self.sync = sync
        self.durable = sync
        self.put = functools.partial(self.db.put, sync=True) if sync else self.db.put
        self.get = self.db.get
        self.delete = functools.partial(self.db.delete, sync=True) if sync else self.db.delete

    def put_batch(self, items: list[tuple[bytes, bytes]]) -> None:
        with self.db.write_batch(sync=self.sync) as wb:
            for k, v in items:
                wb.put(k, v)

    def scan(self, start: bytes, n: int) -> int:
        c = 0
        with self.db.iterator(start=start) as it:
            for _k, _v in it:
                c += 1
                if c >= n:
                    break
        return c

    def flush(self) -> None:
        self.db.write_batch(sync=True).write()

    def compact(self) -> str:
        self.db.compact_range()
        return "DB.compact_range()"

    def close(self) -> None:
        self.db.close()


class LmdbAdapter(Adapter):
    ordered = True
    atomic_batch = True
    MAP_SIZE = 1 << 36  # 64 GiB of address space; the file grows only as pages are used

    def __init__(self, path: Path, sync: bool, cache_bytes: int | None) -> None:
        import lmdb  # noqa: PLC0415

        del cache_bytes  # no cache knob: LMDB reads through the OS page cache (mmap)
        self.env = lmdb.open(str(path), map_size=self.MAP_SIZE, sync=sync, metasync=sync)
        self.durable = sync
        env = self.env

        def put(k: bytes, v: bytes) -> None:
            with env.begin(write=True) as txn:
                txn.put(k, v)

        def get(k: bytes) -> bytes | None:
            with env.begin() as txn:
                return txn.get(k)

        def delete(k: bytes) -> bool:
            with env.begin(write=True) as txn:
                return txn.delete(k)

        self.put, self.get, self.delete = put, get, delete

    def put_batch(self, items: list[tuple[bytes, bytes]]) -> None:
        with self.env.begin(write=True) as txn:
            for k, v in items:
                txn.put(k, v)

    def scan(self, start: bytes, n: int) -> int:
        c = 0
        with self.env.begin() as txn, txn.cursor() as cur:
            if not cur.set_range(start):
                return 0
            for _k, _v in cur:
                c += 1
                if c >= n:
                    break
        return c

    def flush(self) -> None:
        self.env.sync(True)

    def close(self) -> None:
        self.env.close()


class SqliteAdapter(Adapter):
    """One connection shared by all threads behind a lock (sqlite3 objects are not
    thread-safe); autocommit, so every put is its own transaction (commit per put)."""

    ordered = True
    atomic_batch = True

    def __init__(
        self, path: Path, journal: str | None, synchronous: str | None, cache_bytes: int | None
    ) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self.con = sqlite3.connect(
            str(path / "kv.sqlite"), isolation_level=None, check_same_thread=False, timeout=60
        )
        if journal:
            self.con.execute(f"PRAGMA journal_mode={journal}")
        if synchronous:
            self.con.execute(f"PRAGMA synchronous={synchronous}")
        if cache_bytes is not None:
            self.con.execute(f"PRAGMA cache_size=-{max(1, cache_bytes // 1024)}")
        self.con.execute("CREATE TABLE IF NOT EXISTS kv (k BLOB PRIMARY KEY, v BLOB NOT NULL)")
        self.wal = (journal or "").lower() == "wal"
        lock = threading.Lock()
        ex = self.con.execute
        self.lock = lock
        sync_mode = (synchronous or "FULL").upper()
        self.durable = sync_mode in {"FULL", "2", "EXTRA", "3"}

        def put(k: bytes, v: bytes) -> None:
            with lock:
                ex("INSERT OR REPLACE INTO kv (k, v) VALUES (?, ?)", (k, v))

        def get(k: bytes) -> bytes | None:
            with lock:
                row = ex("SELECT v FROM kv WHERE k = ?", (k,)).fetchone()
            return None if row is None else row[0]

        def delete(k: bytes) -> bool:
            with lock:
                return ex("DELETE FROM kv WHERE k = ?", (k,)).rowcount > 0

        self.put, self.get, self.delete = put, get, delete

    def put_batch(self, items: list[tuple[bytes, bytes]]) -> None:
        with self.lock:
            self.con.execute("BEGIN")
            self.con.executemany("INSERT OR REPLACE INTO kv (k, v) VALUES (?, ?)", items)
            self.con.execute("COMMIT")

    def scan(self, start: bytes, n: int) -> int:
        with self.lock:
            rows = self.con.execute(
                "SELECT k, v FROM kv WHERE k >= ? ORDER BY k LIMIT ?", (start, n)
            ).fetchall()
        return len(rows)

    def flush(self) -> None:
        if self.wal:
            with self.lock:
                self.con.execute("PRAGMA wal_checkpoint(FULL)")

    def compact(self) -> str:
        with self.lock:
            self.con.execute("VACUUM")
        return "VACUUM"

    def close(self) -> None:
        self.con.close()


class DiskcacheAdapter(Adapter):
    def __init__(self, path: Path, synchronous: int | None, cache_bytes: int | None) -> None:
        import diskcache  # noqa: PLC0415

        kw: dict[str, Any] = {}
        if synchronous is not None:
            kw["sqlite_synchronous"] = synchronous
        if cache_bytes is not None:
            kw["sqlite_cache_size"] = max(1, cache_bytes // 4096)  # pages of 4 KiB
        self.cache = diskcache.Cache(str(path), **kw)
        self.durable = synchronous == 2
        self.put = self.cache.set
        self.get = self.cache.get
        self.delete = self.cache.delete

    def put_batch(self, items: list[tuple[bytes, bytes]]) -> None:
        with self.cache.transact():
            s = self.cache.set
            for k, v in items:
                s(k, v)

    def close(self) -> None:
        self.cache.close()


class DbmDumbAdapter(Adapter):
    """dbm.dumb behind a lock (not thread-safe). No fsync at all."""

    def __init__(self, path: Path, cache_bytes: int | None) -> None:
        del cache_bytes
        path.mkdir(parents=True, exist_ok=True)
        self.db = dbm.dumb.open(str(path / "db"), "c")
        lock = threading.Lock()
        db = self.db

        def put(k: bytes, v: bytes) -> None:
            with lock:
                db[k] = v

        def get(k: bytes) -> bytes | None:
            with lock:
                return db.get(k)

        def delete(k: bytes) -> bool:
            with lock:
                try:
                    del db[k]
                except KeyError:
                    return False
                return True

        self.put, self.get, self.delete = put, get, delete

    def flush(self) -> None:
        self.db.sync()

    def close(self) -> None:
        self.db.close()


# =========================================================================== registry
@dataclass(frozen=True)
class Impl:
    name: str
    family: str  # tuffdb or the peer package
    regime: str  # "DEFAULT" (as shipped) or "FULL" (fsync before every acknowledged write)
    settings: str  # what a reader needs to know about the configuration
    opener: Callable[[Path, int | None], Adapter]
    requires: str | None  # module to import-check, None = stdlib
    cache_knob: str | None  # what cache_bytes maps to, None = engine has no cache knob
    compaction: str | None
    ordered: bool
    durable: bool
    note: str = ""

    @property
    def is_tuffdb(self) -> bool:
        return self.family == "tuffdb"


def _tuff(d: str) -> Callable[[Path, int | None], Adapter]:
    return lambda p, c: TuffdbAdapter(p, d, c)


IMPLS: dict[str, Impl] = {}


def register(impl: Impl) -> None:
    IMPLS[impl.name] = impl


for _name, _dur, _reg, _note in (
    ("tuffdb", "interval", "DEFAULT", "shipped default: on disk within interval_ms (200 ms)"),
    ("tuffdb-none", "none", "DEFAULT", "non-default, weaker: on disk at spill/sync()/close()"),
    ("tuffdb-always", "always", "FULL", "put returns after its record is fsynced (group commit)"),
):
    register(
        Impl(
            name=_name,
            family="tuffdb",
            regime=_reg,
            settings=f'durability="{_dur}"',
            opener=_tuff(_dur),
            requires="tuffdb.KVStore",
            cache_knob="KVStore.open(cache_bytes=...)",
            compaction="KVStore.compact()",
            ordered=True,
            durable=_dur == "always",
            note=_note,
        )
    )
register(
    Impl(
        "rocksdict",
        "rocksdict",
        "DEFAULT",
        "Options(raw_mode=True), WriteOptions.sync=False (WAL on)",
        lambda p, c: RocksdictAdapter(p, False, c),
        "rocksdict",
        "BlockBasedOptions.set_block_cache(Cache(cache_bytes))",
        "Rdict.compact_range(None, None)",
        ordered=True,
        durable=False,
        note="survives a process crash, not OS/power loss",
    )
)
register(
    Impl(
        "rocksdict-sync",
        "rocksdict",
        "FULL",
        "Options(raw_mode=True), WriteOptions.sync=True",
        lambda p, c: RocksdictAdapter(p, True, c),
        "rocksdict",
        "BlockBasedOptions.set_block_cache(Cache(cache_bytes))",
        "Rdict.compact_range(None, None)",
        ordered=True,
        durable=True,
    )
)
register(
    Impl(
        "plyvel",
        "plyvel",
        "DEFAULT",
        "DB(create_if_missing=True), put(sync=False)",
        lambda p, c: PlyvelAdapter(p, False, c),
        "plyvel",
        "DB(lru_cache_size=cache_bytes)",
        "DB.compact_range()",
        ordered=True,
        durable=False,
        note="survives a process crash, not OS/power loss",
    )
)
register(
    Impl(
        "plyvel-sync",
        "plyvel",
        "FULL",
        "DB(create_if_missing=True), put(sync=True)",
        lambda p, c: PlyvelAdapter(p, True, c),
        "plyvel",
        "DB(lru_cache_size=cache_bytes)",
        "DB.compact_range()",
        ordered=True,
        durable=True,
    )
)
register(
    Impl(
        "lmdb",
        "lmdb",
        "DEFAULT",
        f"open(map_size={LmdbAdapter.MAP_SIZE >> 30} GiB), sync=True, metasync=True (shipped; "
        "durable); one write txn per put",
        lambda p, c: LmdbAdapter(p, True, c),
        "lmdb",
        None,
        None,
        ordered=True,
        durable=True,
        note="shipped default is already per-commit durable",
    )
)
register(
    Impl(
        "lmdb-durable",
        "lmdb",
        "FULL",
        f"open(map_size={LmdbAdapter.MAP_SIZE >> 30} GiB), sync=True, metasync=True; one write txn "
        "per put (same configuration as the DEFAULT row)",
        lambda p, c: LmdbAdapter(p, True, c),
        "lmdb",
        None,
        None,
        ordered=True,
        durable=True,
    )
)
register(
    Impl(
        "sqlite",
        "sqlite3",
        "DEFAULT",
        "journal_mode=DELETE, synchronous=FULL (shipped); commit per put",
        lambda p, c: SqliteAdapter(p, None, None, c),
        None,
        "PRAGMA cache_size=-KiB",
        "VACUUM",
        ordered=True,
        durable=True,
        note="shipped default is already per-commit durable",
    )
)
register(
    Impl(
        "sqlite-wal",
        "sqlite3",
        "DEFAULT",
        "journal_mode=WAL, synchronous=NORMAL; commit per put",
        lambda p, c: SqliteAdapter(p, "WAL", "NORMAL", c),
        None,
        "PRAGMA cache_size=-KiB",
        "VACUUM",
        ordered=True,
        durable=False,
        note="common tuning; may roll back recent commits on power loss",
    )
)
register(
    Impl(
        "sqlite-full",
        "sqlite3",
        "FULL",
        "journal_mode=DELETE, synchronous=FULL; commit per put",
        lambda p, c: SqliteAdapter(p, None, "FULL", c),
        None,
        "PRAGMA cache_size=-KiB",
        "VACUUM",
        ordered=True,
        durable=True,
    )
)
register(
    Impl(
        "sqlite-wal-full",
        "sqlite3",
        "FULL",
        "journal_mode=WAL, synchronous=FULL; commit per put",
        lambda p, c: SqliteAdapter(p, "WAL", "FULL", c),
        None,
        "PRAGMA cache_size=-KiB",
        "VACUUM",
        ordered=True,
        durable=True,
    )
)
register(
    Impl(
        "diskcache",
        "diskcache",
        "DEFAULT",
        "Cache(dir) defaults: WAL, sqlite_synchronous=1, size_limit 1 GiB (eviction)",
        lambda p, c: DiskcacheAdapter(p, None, c),
        "diskcache",
        "sqlite_cache_size=cache_bytes/4096",
        None,
        ordered=False,
        durable=False,
    )
)
register(
    Impl(
        "diskcache-full",
        "diskcache",
        "FULL",
        "Cache(dir, sqlite_synchronous=2): WAL + FULL; values < 32 KiB live in SQLite",
        lambda p, c: DiskcacheAdapter(p, 2, c),
        "diskcache",
        "sqlite_cache_size=cache_bytes/4096",
        None,
        ordered=False,
        durable=True,
    )
)
register(
    Impl(
        "dbm.dumb",
        "dbm.dumb",
        "DEFAULT",
        "dbm.dumb.open(path, 'c'), one lock around it",
        DbmDumbAdapter,
        None,
        None,
        None,
        ordered=False,
        durable=False,
        note="no fsync anywhere; no per-write durable mode, so no FULL row",
    )
)

OMITTED_ALWAYS = {
    "dbm.dumb (FULL)": "dbm.dumb has no fsync/per-write durable mode",
    "dbm.gnu / dbm.ndbm": "not built into this Python (dbm falls back to dbm.dumb)",
    "redis (server peer)": "server peers belong to the RESP benchmark, not this embedded one",
}


def import_error(impl: Impl) -> str | None:
    if impl.requires is None:
        return None
    mod, _, attr = impl.requires.partition(".")
    try:
        m = __import__(mod)
        if attr and not hasattr(m, attr):
            return f"{mod}.{attr} not present (installed {mod} has no {attr} yet)"
    except Exception as exc:  # noqa: BLE001 - any import failure omits the peer
        return f"import {mod} failed: {exc!r}"
    return None


# =========================================================================== measurement
@dataclass
class Phase:
    ops: int
    elapsed_s: float
    errors: int
    first_error: str | None
    get_misses: int
    stopped_by: str
    latencies_ns: list[int] = field(repr=False)
    per_op: dict[str, int]

    @property
    def throughput(self) -> float:
        return self.ops / self.elapsed_s if self.elapsed_s > 0 else 0.0


def _worker_loop(
    a: Adapter,
    ops: Iterable[tuple[int, bytes, Any]],
    quota: int,
    duration_ns: int,
    barrier: threading.Barrier,
    out: list,
    idx: int,
) -> None:
    put, get, delete, scan = a.put, a.get, a.delete, a.scan
    pc = time.perf_counter_ns
    lat: list[int] = []
    app = lat.append
    n = errors = misses = 0
    first: str | None = None
    counts = [0, 0, 0, 0, 0]
    stopped = "ops"
    it = iter(ops)
    barrier.wait()
    deadline = pc() + duration_ns if duration_ns else 1 << 62
    for code, k, v in it:
        t0 = pc()
        try:
            if code == PUT:
                put(k, v)
            elif code == GET:
                if get(k) is None:
                    misses += 1
            elif code == DELETE:
                delete(k)
            elif code == SCAN:
                scan(k, v)
            else:  # RMW: read, modify, write: one latency sample
                old = get(k)
                if old is None:
                    misses += 1
                put(k, v)
        except Exception as exc:  # noqa: BLE001 - errors are results
            errors += 1
            if first is None:
                first = repr(exc)
        t1 = pc()
        app(t1 - t0)
        counts[code] += 1
        n += 1
        if n >= quota:
            break
        if t1 >= deadline:
            stopped = "time"
            break
    out[idx] = (n, errors, first, misses, lat, counts, stopped)


def measure(
    a: Adapter,
    sources: list[Iterable[tuple[int, bytes, Any]]],
    *,
    quota: int | None = None,
    duration_s: float | None = None,
    profile: bool = True,
) -> Phase:
    """Closed loop: one thread per source; ``quota`` ops per thread and/or a fixed window.

    Throughput = ops / wall time from the barrier release to the last thread's exit.
    """
    w = len(sources)
    barrier = threading.Barrier(w + 1)
    out: list[Any] = [None] * w
    q = quota if quota is not None else 1 << 62
    dur = int(duration_s * 1e9) if duration_s else 0
    threads = [
        threading.Thread(target=_worker_loop, args=(a, s, q, dur, barrier, out, i), daemon=True)
        for i, s in enumerate(sources)
    ]
    for t in threads:
        t.start()
    gc.collect()
    with _profiled(profile):
        barrier.wait()
        t0 = time.perf_counter_ns()
        for t in threads:
            t.join()
        elapsed = (time.perf_counter_ns() - t0) / 1e9
    lat: list[int] = []
    n = errors = misses = 0
    first = None
    counts = [0] * 5
    stops = set()
    for r in out:
        n += r[0]
        errors += r[1]
        first = first or r[2]
        misses += r[3]
        lat.extend(r[4])
        counts = [x + y for x, y in zip(counts, r[5], strict=True)]
        stops.add(r[6])
    return Phase(
        ops=n,
        elapsed_s=elapsed,
        errors=errors,
        first_error=first,
        get_misses=misses,
        stopped_by="time" if "time" in stops else "ops",
        latencies_ns=lat,
        per_op={OP_NAMES[i]: c for i, c in enumerate(counts) if c},
    )


def _openloop_worker(
    a: Adapter,
    ops: Iterable[tuple[int, bytes, Any]],
    interval_ns: int,
    duration_ns: int,
    barrier: threading.Barrier,
    out: list,
    idx: int,
) -> None:
    """Open loop: op i is due at start + i x interval; latency = completion - due time, so a
    stall is charged to every operation queued behind it (no coordinated omission)."""
    put, get = a.put, a.get
    pc = time.perf_counter_ns
    resp: list[int] = []
    serv: list[int] = []
    n = errors = misses = 0
    first: str | None = None
    it = iter(ops)
    barrier.wait()
    start = pc()
    end = start + duration_ns
    due = start
    hard_end = end + 1_000_000_000  # an overloaded store stops 1 s after the window
    unissued = 0
    for code, k, v in it:
        now = pc()
        if due >= end:
            break
        if now >= hard_end:
            unissued = (end - due + interval_ns - 1) // interval_ns
            break
        while now < due:  # sleep when far ahead, else yield the GIL until due
            gap = due - now
            time.sleep(gap / 1e9 - 0.0002 if gap > 1_000_000 else 0)
            now = pc()
        t0 = pc()
        try:
            if code == PUT:
                put(k, v)
            elif get(k) is None:
                misses += 1
        except Exception as exc:  # noqa: BLE001 - errors are results
            errors += 1
            if first is None:
                first = repr(exc)
        t1 = pc()
        resp.append(t1 - due)
        serv.append(t1 - t0)
        n += 1
        due += interval_ns
    out[idx] = (n, errors, first, misses, resp, serv, (pc() - start) / 1e9, unissued)


def measure_open(
    a: Adapter, sources: list[Iterable[tuple[int, bytes, Any]]], rate: float, duration_s: float
) -> dict[str, Any]:
    w = len(sources)
    barrier = threading.Barrier(w + 1)
    out: list[Any] = [None] * w
    interval = int(1e9 * w / rate)
    threads = [
        threading.Thread(
            target=_openloop_worker,
            args=(a, s, interval, int(duration_s * 1e9), barrier, out, i),
            daemon=True,
        )
        for i, s in enumerate(sources)
    ]
    for t in threads:
        t.start()
    gc.collect()
    with _profiled():
        barrier.wait()
        for t in threads:
            t.join()
    n = sum(r[0] for r in out)
    elapsed = max(r[6] for r in out)
    resp = [x for r in out for x in r[4]]
    serv = [x for r in out for x in r[5]]
    return {
        "target_rate": rate,
        "threads": w,
        "ops": n,
        "elapsed_s": round(elapsed, 6),
        "achieved_rate": n / max(elapsed, duration_s) if elapsed else None,
        "kept_up": bool(elapsed)
        and n / max(elapsed, duration_s) >= 0.95 * rate
        and not any(r[7] for r in out),
        # ops due inside the window but never issued because the store fell > 1 s behind;
        # they are not in the percentiles, which therefore understate an overloaded store
        "unissued": sum(r[7] for r in out),
        "errors": sum(r[1] for r in out),
        "first_error": next((r[2] for r in out if r[2]), None),
        "get_misses": sum(r[3] for r in out),
        "latency": latency_summary(resp),  # response time: completion - due time
        "service_latency": latency_summary(serv),  # the store call alone
    }


def phase_record(p: Phase, threads: int) -> dict[str, Any]:
    lat = latency_summary(p.latencies_ns)
    mean_s = (lat["mean"] or 0) / 1e6
    return {
        "ops": p.ops,
        "per_op": p.per_op,
        "threads": threads,
        "elapsed_s": round(p.elapsed_s, 6),
        "throughput": p.throughput,
        "stopped_by": p.stopped_by,
        "errors": p.errors,
        "first_error": p.first_error,
        "get_misses": p.get_misses,
        "latency": lat,
        # Closed loop: throughput x mean latency / threads should be ~1 (Little's law);
        # well below 1 means time went outside the store call (harness, GIL hand-offs).
        "littles_law": round(p.throughput * mean_s / threads, 3) if mean_s else None,
        "short_window": p.elapsed_s < 1.0,
    }


def rss_bytes() -> int | None:
    try:
        import psutil  # noqa: PLC0415

        return int(psutil.Process().memory_info().rss)
    except Exception:  # noqa: BLE001
        return None


def load(a: Adapter, n: int, kind: str, seed: int, order: list[int] | None = None) -> dict:
    """One thread, ``n`` keys in batches of 1,000 (sequential unless ``order``), then flush."""
    vm = ValueMaker(kind, seed)
    t0 = time.perf_counter()
    idx = order if order is not None else range(n)
    for s in range(0, n, LOAD_BATCH):
        keys = [key_of(i) for i in idx[s : s + LOAD_BATCH]]
        a.put_batch(list(zip(keys, vm.many(keys), strict=True)))
    t1 = time.perf_counter()
    a.flush()
    t2 = time.perf_counter()
    return {
        "keys": n,
        "batch": LOAD_BATCH,
        "value_kind": kind,
        "put_s": round(t1 - t0, 6),
        "flush_s": round(t2 - t1, 6),
        "ingest_rate": n / (t2 - t0) if t2 > t0 else None,
    }


def verify_sample(a: Adapter, n: int, sample: int = 1000) -> dict[str, int]:
    """After a phase (outside timing): sampled keys must be present with 1 KiB values."""
    step = max(1, n // sample)
    bad = missing = 0
    for i in range(0, n, step):
        v = a.get(key_of(i))
        if v is None:
            missing += 1
        elif len(v) != VALUE_BYTES:
            bad += 1
    return {"checked": len(range(0, n, step)), "missing": missing, "wrong_size": bad}


# =========================================================================== op sources
def fresh_put_sources(n: int, threads: int, kind: str, seed: int) -> list[list]:
    """``n`` fresh random keys (a seeded permutation of 0..n-1), split over threads."""
    perm = permutation(n, seed)
    out = []
    for w in range(threads):
        keys = [key_of(i) for i in perm[w::threads]]
        vals = ValueMaker(kind, client_seed(seed, w)).many(keys)
        out.append([(PUT, k, v) for k, v in zip(keys, vals, strict=True)])
    return out


def fresh_put_stream(start: int, stride: int, kind: str, seed: int) -> Iterator[tuple]:
    """Endless fresh keys (start, start+stride, ...) scrambled; values made on the fly."""
    vm = ValueMaker(kind, seed)
    i = start
    while True:
        k = key_of(fnv64(i))  # scrambled: random order, never repeats for distinct i
        yield (PUT, k, vm.one(k))
        i += stride


def uniform_get_sources(n: int, threads: int, seed: int, length: int) -> list[Iterable]:
    """Uniform random gets, ``length`` precomputed per thread, cycled for a fixed window."""
    out: list[Iterable] = []
    for w in range(threads):
        rng = SplitMix64(client_seed(seed, w))
        ops = [(GET, key_of(rng.below(n)), None) for _ in range(length)]
        out.append(itertools.cycle(ops))
    return out


# =========================================================================== workloads (2.1)
@dataclass(frozen=True)
class Workload:
    name: str
    mix: str
    loads: bool  # load `keys` first (one thread, batches of 1,000)
    ordered_only: bool
    build: Callable[[int, int, int, int, str, int], list[list]]
    # build(keys, ops_per_thread, threads, thread_index, kind, seed) is per thread


WORKLOADS: dict[str, Workload] = {}


def workload(
    name: str, mix: str, *, loads: bool = True, ordered_only: bool = False
) -> Callable[[Callable[..., list]], Callable[..., list]]:
    def deco(fn: Callable[..., list]) -> Callable[..., list]:
        WORKLOADS[name] = Workload(name, mix, loads, ordered_only, fn)
        return fn

    return deco


def _chooser(dist: str, n: int, rng: SplitMix64) -> Callable[[], int]:
    if dist == "uniform":
        return lambda: rng.below(n)
    z = Zipfian(n)
    return lambda: fnv64(z.next(uniform01(rng))) % n


def _mixed(reads: float, other: int, dist: str) -> Callable[..., list]:
    def build(n: int, ops: int, threads: int, w: int, kind: str, seed: int) -> list:
        rng = SplitMix64(client_seed(seed, w))
        pick = _chooser(dist, n, rng)
        vm = ValueMaker(kind, client_seed(seed, w) ^ 0xABCDEF)
        out = []
        for _ in range(ops):
            k = key_of(pick())
            if uniform01(rng) < reads:
                out.append((GET, k, None))
            else:
                out.append((other, k, vm.one(k)))
        return out

    return build


@workload("fillseq", "insert, sequential keys, fresh store", loads=False)
def _fillseq(n: int, ops: int, threads: int, w: int, kind: str, seed: int) -> list:
    del n
    keys = [key_of(w * ops + i) for i in range(ops)]
    return [
        (PUT, k, v)
        for k, v in zip(keys, ValueMaker(kind, client_seed(seed, w)).many(keys), strict=True)
    ]


@workload("fillrandom", "insert after load: key = rand % keyspace (kvbench; mostly overwrites)")
def _fillrandom(n: int, ops: int, threads: int, w: int, kind: str, seed: int) -> list:
    return _mixed(0.0, PUT, "uniform")(n, ops, threads, w, kind, seed)


@workload("overwrite", "update, uniform")
def _overwrite(n: int, ops: int, threads: int, w: int, kind: str, seed: int) -> list:
    return _mixed(0.0, PUT, "uniform")(n, ops, threads, w, kind, seed ^ 0x5555)


@workload("readrandom", "read, uniform")
def _readrandom(n: int, ops: int, threads: int, w: int, kind: str, seed: int) -> list:
    return _mixed(1.0, PUT, "uniform")(n, ops, threads, w, kind, seed)


@workload("deleterandom", "delete, uniform (rand % keyspace; repeats delete missing keys)")
def _deleterandom(n: int, ops: int, threads: int, w: int, kind: str, seed: int) -> list:
    rng = SplitMix64(client_seed(seed, w))
    return [(DELETE, key_of(rng.below(n)), None) for _ in range(ops)]


@workload("readseq", "ordered scan of 1-100 keys from a uniform start", ordered_only=True)
def _readseq(n: int, ops: int, threads: int, w: int, kind: str, seed: int) -> list:
    rng = SplitMix64(client_seed(seed, w))
    return [(SCAN, key_of(rng.below(n)), 1 + rng.below(100)) for _ in range(ops)]


@workload("ycsb-a", "50 read / 50 update, zipfian 0.99 scrambled")
def _ya(n: int, ops: int, threads: int, w: int, kind: str, seed: int) -> list:
    return _mixed(0.5, PUT, "zipf")(n, ops, threads, w, kind, seed)


@workload("ycsb-b", "95 read / 5 update, zipfian")
def _yb(n: int, ops: int, threads: int, w: int, kind: str, seed: int) -> list:
    return _mixed(0.95, PUT, "zipf")(n, ops, threads, w, kind, seed)


@workload("ycsb-c", "100 read, zipfian")
def _yc(n: int, ops: int, threads: int, w: int, kind: str, seed: int) -> list:
    return _mixed(1.0, PUT, "zipf")(n, ops, threads, w, kind, seed)


def _latest_build(scan: bool) -> Callable[..., list]:
    def build(n: int, ops: int, threads: int, w: int, kind: str, seed: int) -> list:
        # Inserts continue the sequence from n; thread w owns indices n + w, n + w + threads, ...
        # Reads skew to the latest key this thread knows about (YCSB SkewedLatest).
        rng = SplitMix64(client_seed(seed, w))
        vm = ValueMaker(kind, client_seed(seed, w) ^ 0x1234)
        z = Zipfian(n)
        nxt = n + w
        latest = n - 1
        out = []
        for _ in range(ops):
            if uniform01(rng) < 0.95:
                i = max(0, latest - z.next(uniform01(rng)))
                k = key_of(i)
                out.append((SCAN, k, 1 + rng.below(100)) if scan else (GET, k, None))
            else:
                k = key_of(nxt)
                out.append((PUT, k, vm.one(k)))
                latest = nxt
                nxt += threads
        return out

    return build


WORKLOADS["ycsb-d"] = Workload(
    "ycsb-d", "95 read / 5 insert, latest", True, False, _latest_build(scan=False)
)
WORKLOADS["ycsb-e"] = Workload(
    "ycsb-e", "95 scan (1-100) / 5 insert, latest", True, True, _latest_build(scan=True)
)


@workload("ycsb-f", "50 read / 50 read-modify-write, zipfian")
def _yf(n: int, ops: int, threads: int, w: int, kind: str, seed: int) -> list:
    return _mixed(0.5, RMW, "zipf")(n, ops, threads, w, kind, seed)


# =========================================================================== cells
class Run:
    """One invocation: output directory, impl selection, fsync probes, cell results."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.data_parent = Path(args.dir).resolve()
        self.out = Path(args.out).resolve() / args.run_id
        self.selected = [s.strip() for s in args.impl.split(",")] if args.impl else None
        self.invocation: dict[str, Any] = {}  # filled by main(): command, git, fsync probe

    def impls_for(self, regimes: Iterable[str], only_tuffdb: bool = False) -> tuple[list, dict]:
        chosen: list[Impl] = []
        omitted: dict[str, str] = {}
        for impl in IMPLS.values():
            if impl.regime not in regimes:
                continue
            if only_tuffdb and not impl.is_tuffdb and self.selected is None:
                continue
            if self.selected is not None and not any(
                fnmatch.fnmatchcase(impl.name, pat) for pat in self.selected
            ):
                continue
            err = import_error(impl)
            if err:
                omitted[impl.name] = err
            else:
                chosen.append(impl)
        return chosen, omitted

    def cell_doc(self, cell: str, params: dict, impls: list[Impl], omitted: dict) -> dict:
        return {
            "cell": cell,
            "schema": "tuffdb-bench-kv/1",
            "run_id": self.args.run_id,
            "command": COMMAND,
            "started_at": utc_now(),
            "finished_at": None,
            "invocation": self.invocation,
            "params": params,
            "impls": {
                i.name: {
                    "family": i.family,
                    "regime": i.regime,
                    "settings": i.settings,
                    "ordered": i.ordered,
                    "durable": i.durable,
                    "cache_knob": i.cache_knob,
                    "compaction": i.compaction,
                    "note": i.note,
                }
                for i in impls
            },
            "omitted": {**omitted, **OMITTED_ALWAYS},
            "groups": [],
        }

    def save(self, doc: dict) -> Path:
        path = self.out / f"{doc['cell']}.json"
        write_json(path, doc)
        return path

    def log(self, msg: str) -> None:
        if not self.args.quiet:
            print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def new_group(
    gid: str, title: str, regime: str, metric: str, unit: str, better: str, params: dict
) -> dict:
    return {
        "id": gid,
        "title": title,
        "regime": regime,
        "metric": metric,
        "unit": unit,
        "better": better,
        "params": params,
        "rows": {},
    }


def add_rep(group: dict, impl: Impl, rep: dict) -> None:
    row = group["rows"].setdefault(impl.name, {"reps": []})
    row["reps"].append(rep)


def finish_group(group: dict) -> None:
    """Median/min/max per row, latency from the median rep, ratios vs the best peer."""
    metric = group["metric"]
    for row in group["rows"].values():
        vals = [r.get(metric) for r in row["reps"]]
        valid = [v for v in vals if v is not None]
        row[metric] = spread(valid)
        if valid and all("phase" in r for r in row["reps"]):
            mi = median_index([v if v is not None else -1 for v in vals])
            row["median_rep"] = mi
            row["latency"] = row["reps"][mi]["phase"]["latency"]
            row["errors"] = sum(r["phase"]["errors"] for r in row["reps"])
    higher = group["better"] == "higher"
    best_peer, best = None, None
    for name, row in group["rows"].items():
        m = row[metric]["median"]
        if m is None or IMPLS[name].is_tuffdb:
            continue
        if best is None or (m > best if higher else m < best):
            best_peer, best = name, m
    group["best_peer"] = best_peer
    for row in group["rows"].values():
        m = row[metric]["median"]
        row["ratio_vs_best_peer"] = (m / best) if (m is not None and best) else None
    if metric == "space" and "rocksdict" in group["rows"]:
        rd = group["rows"]["rocksdict"][metric]["median"]
        for row in group["rows"].values():
            m = row[metric]["median"]
            row["ratio_vs_rocksdict"] = (m / rd) if (m is not None and rd) else None


def open_impl(impl: Impl, path: Path, cache_bytes: int | None) -> tuple[Adapter, float]:
    t0 = time.perf_counter()
    a = impl.opener(path, cache_bytes)
    return a, time.perf_counter() - t0


def close_timed(a: Adapter) -> float:
    t0 = time.perf_counter()
    a.close()
    return time.perf_counter() - t0


def _hung(impl: Impl, seconds: float, data_dir: Path) -> None:
    """Watchdog: a store that hangs cannot be recovered in-process (threads cannot be killed).
    Dump every thread's stack, say which store hung, and exit 3; results so far are saved."""
    sys.stderr.write(
        f"\nbench/kv.py: {impl.name} did not finish one repetition within {seconds:g} s "
        "(--store-timeout); stacks follow, exiting 3\n"
    )
    faulthandler.dump_traceback(all_threads=True)
    sys.stderr.flush()
    shutil.rmtree(data_dir, ignore_errors=True)  # os._exit skips bench_dir's cleanup
    os._exit(3)


def run_guarded(run: Run, impl: Impl, fn: Callable[[Path], dict], label: str = "") -> dict:
    """Fresh directory per run, deleted afterwards; a crash of one store is a result.

    With ``--profile GLOB`` matching the store, each measured phase inside ``fn`` is recorded
    by py-spy into ``<run>/profiles/<label>-<store>-<k>.svg`` and the rep says so.
    """
    pat = run.args.profile
    if pat and any(fnmatch.fnmatchcase(impl.name, x) for x in pat.split(",")):
        _PROFILE["base"] = run.out / "profiles" / f"{label}-{impl.name}"
    _PROFILE["written"] = []
    with bench_dir(run.data_parent, impl.name.replace(".", "_")) as d:
        timer = threading.Timer(run.args.store_timeout, _hung, (impl, run.args.store_timeout, d))
        timer.daemon = True
        timer.start()
        try:
            out = fn(d / "db")
        except Exception as exc:  # noqa: BLE001 - errors are results
            run.log(f"  {impl.name}: FAILED {exc!r}")
            out = {"failed": repr(exc)}
        finally:
            timer.cancel()
            _PROFILE["base"] = None
    if _PROFILE["written"]:
        out["profiled"] = True  # timings of this rep include py-spy sampling overhead
        out["profiles"] = [str(p.relative_to(run.out)) for p in _PROFILE["written"]]
    return out


_PROFILE: dict[str, Any] = {"base": None, "written": []}


@contextlib.contextmanager
def _profiled(enabled: bool = True) -> Iterator[None]:
    """py-spy (all threads, incl. native-released GIL time as idle) around one phase."""
    base = _PROFILE["base"]
    if not enabled or base is None:
        yield
        return
    exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    path = base.with_name(f"{base.name}-{len(_PROFILE['written'])}.svg")
    path.parent.mkdir(parents=True, exist_ok=True)
    cmd = [
        exe,
        "record",
        "--pid",
        str(os.getpid()),
        "-o",
        str(path),
        "-f",
        "flamegraph",
        "--threads",
        "--nonblocking",
        "--rate",
        "250",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # noqa: S603
    time.sleep(0.5)  # let it attach before the phase starts
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            _out, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            err = b"timeout"
        if path.exists():
            _PROFILE["written"].append(path)
        else:
            sys.stderr.write(f"py-spy wrote no profile: {err.decode(errors='replace')[-500:]}\n")


def cell_ingest(run: Run) -> dict:
    a = run.args
    n = a.keys or 300_000
    impls, omitted = run.impls_for({"DEFAULT"})
    params = {
        "keys": n,
        "threads": a.threads or [8, 1],
        "value_kind": a.values[0],
        "max_seconds": a.max_seconds,
        "durability_regime": "DEFAULT",
        "seed": a.seed,
        "what": "fresh store; n fresh random keys (seeded permutation) split over threads; "
        "throughput = ops / measured wall time; then close() and Space",
    }
    doc = run.cell_doc("ingest", params, impls, omitted)
    for threads in params["threads"]:
        g = new_group(
            f"ingest-t{threads}",
            f"ingest: {n:,} fresh random keys x 1 KiB "
            f"({params['value_kind']}), {threads} thread(s)",
            "DEFAULT",
            "throughput",
            "ops/s",
            "higher",
            {"threads": threads, "keys": n, "window": "ops"},
        )
        doc["groups"].append(g)
        for rep in range(a.reps):
            seed = rep_seed(a.seed, rep)
            for impl in impls:
                sources = fresh_put_sources(n, threads, params["value_kind"], seed)

                def body(
                    p: Path,
                    impl: Impl = impl,
                    sources: list = sources,
                    rep: int = rep,
                    seed: int = seed,
                    threads: int = threads,
                ) -> dict:
                    ad, open_s = open_impl(impl, p, None)
                    ph = measure(
                        ad, sources, quota=math.ceil(n / threads), duration_s=a.max_seconds
                    )
                    rec = phase_record(ph, threads)
                    rss = rss_bytes()
                    stats = ad.stats()
                    t0 = time.perf_counter()
                    ad.flush()
                    flush_s = time.perf_counter() - t0
                    close_s = close_timed(ad)
                    size = apparent_size(p)
                    return {
                        "rep": rep,
                        "seed": seed,
                        "open_s": open_s,
                        "phase": rec,
                        "throughput": ph.throughput,
                        "flush_s": flush_s,
                        "close_s": close_s,
                        # the same ops over phase + flush + close: what it costs to have
                        # everything on disk (a store that defers work shows it here)
                        "throughput_incl_close": ph.ops / (ph.elapsed_s + flush_s + close_s),
                        "space_after_close": size / (ph.ops * RECORD_BYTES) if ph.ops else None,
                        "bytes_on_disk": size,
                        "rss_after_phase": rss,
                        "store_stats": stats,
                    }

                r = run_guarded(run, impl, body, f"ingest-t{threads}-rep{rep}")
                add_rep(g, impl, r)
                run.log(
                    f"ingest t{threads} rep{rep} {impl.name}: "
                    f"{fmt_rate(r.get('throughput'))} ops/s"
                    + (" (TIME CAP)" if r.get("phase", {}).get("stopped_by") == "time" else "")
                )
                run.save(doc)
        finish_group(g)
    return doc


def cell_durable(run: Run) -> dict:
    a = run.args
    impls, omitted = run.impls_for({"FULL"})
    threads_list = a.threads or [8]
    params = {
        "threads": threads_list,
        "duration_s": a.duration,
        "ops_cap": a.ops or 100_000,
        "value_kind": a.values[0],
        "durability_regime": "FULL",
        "seed": a.seed,
        "what": "fresh store; fresh random keys; every put acknowledged only after fsync; "
        "window = duration_s or ops_cap, whichever comes first",
    }
    doc = run.cell_doc("durable", params, impls, omitted)
    for threads in threads_list:
        g = new_group(
            f"durable-t{threads}",
            f"durable puts (FULL: fsync before ack), {threads} thread(s)",
            "FULL",
            "throughput",
            "ops/s",
            "higher",
            {"threads": threads, "window": "time or ops cap"},
        )
        doc["groups"].append(g)
        for rep in range(a.reps):
            seed = rep_seed(a.seed, rep)
            for impl in impls:

                def body(
                    p: Path,
                    impl: Impl = impl,
                    seed: int = seed,
                    rep: int = rep,
                    threads: int = threads,
                ) -> dict:
                    ad, open_s = open_impl(impl, p, None)
                    sources = [
                        fresh_put_stream(
                            w + seed * 7919, threads, params["value_kind"], client_seed(seed, w)
                        )
                        for w in range(threads)
                    ]
                    ph = measure(
                        ad,
                        sources,
                        quota=math.ceil(params["ops_cap"] / threads),
                        duration_s=a.duration,
                    )
                    rec = phase_record(ph, threads)
                    stats = ad.stats()
                    close_s = close_timed(ad)
                    return {
                        "rep": rep,
                        "seed": seed,
                        "open_s": open_s,
                        "phase": rec,
                        "throughput": ph.throughput,
                        "close_s": close_s,
                        "store_stats": stats,
                    }

                r = run_guarded(run, impl, body, f"durable-t{threads}-rep{rep}")
                add_rep(g, impl, r)
                run.log(
                    f"durable t{threads} rep{rep} {impl.name}: "
                    f"{fmt_rate(r.get('throughput'))} ops/s"
                )
                run.save(doc)
        finish_group(g)
    return doc


def cell_readrandom(run: Run) -> dict:
    a = run.args
    n = a.keys or 300_000
    working = n * RECORD_BYTES
    budgets = {
        "in-cache": max(8 << 20, int(working * 1.25)),
        "out-of-cache": max(1 << 20, working // 8),
    }
    impls, omitted = run.impls_for({"DEFAULT"})
    threads_list = a.threads or [1]
    params = {
        "keys": n,
        "working_bytes": working,
        "cache_budgets": budgets,
        "threads": threads_list,
        "duration_s": a.duration,
        "warmup_s": a.warmup,
        "value_kind": a.values[0],
        "durability_regime": "DEFAULT",
        "seed": a.seed,
        "what": "load n sequential keys (1 thread, batches of 1,000), flush, close; "
        "reopen with the cache budget; warmup_s of unmeasured uniform gets (other seed); "
        "uniform random gets for a fixed window. "
        "The OS page cache is NOT dropped (24 GiB RAM): out-of-cache measures the "
        "engine's own cache + decode path, not device reads.",
    }
    doc = run.cell_doc("readrandom", params, impls, omitted)
    for threads in threads_list:
        for regime_name, budget in budgets.items():
            g = new_group(
                f"readrandom-{regime_name}-t{threads}",
                f"readrandom after reopen: {n:,} keys, uniform, {threads} thread(s), "
                f"cache {regime_name} ({budget / 2**20:.1f} MiB)",
                "DEFAULT",
                "throughput",
                "ops/s",
                "higher",
                {"threads": threads, "cache_bytes": budget, "keys": n, "window": "time"},
            )
            doc["groups"].append(g)
            for rep in range(a.reps):
                seed = rep_seed(a.seed, rep)
                for impl in impls:

                    def body(
                        p: Path,
                        impl: Impl = impl,
                        seed: int = seed,
                        budget: int = budget,
                        rep: int = rep,
                        threads: int = threads,
                    ) -> dict:
                        ad, _ = open_impl(impl, p, budget)
                        ld = load(ad, n, params["value_kind"], seed)
                        close_timed(ad)
                        ad, reopen_s = open_impl(impl, p, budget)
                        sources = uniform_get_sources(n, threads, seed, min(1 << 20, 4 * n))
                        warm = None
                        if a.warmup > 0:  # unmeasured gets with another seed: fill caches
                            wsrc = uniform_get_sources(n, threads, seed ^ 0x77, 1 << 16)
                            wph = measure(ad, wsrc, duration_s=a.warmup, profile=False)
                            warm = {"seconds": a.warmup, "ops": wph.ops}
                        ph = measure(ad, sources, duration_s=a.duration)
                        rec = phase_record(ph, threads)
                        stats = ad.stats()
                        rss = rss_bytes()
                        ver = verify_sample(ad, n)
                        close_timed(ad)
                        return {
                            "rep": rep,
                            "seed": seed,
                            "load": ld,
                            "reopen_s": reopen_s,
                            "warmup": warm,
                            "phase": rec,
                            "throughput": ph.throughput,
                            "verify": ver,
                            "cache_bytes": budget if impl.cache_knob else None,
                            "cache_setting": impl.cache_knob or "engine has no cache knob",
                            "rss_after_phase": rss,
                            "store_stats": stats,
                        }

                    r = run_guarded(
                        run, impl, body, f"readrandom-{regime_name}-t{threads}-rep{rep}"
                    )
                    add_rep(g, impl, r)
                    run.log(
                        f"readrandom {regime_name} t{threads} rep{rep} {impl.name}: "
                        f"{fmt_rate(r.get('throughput'))} gets/s"
                    )
                    run.save(doc)
            finish_group(g)
    return doc


def cell_space(run: Run) -> dict:
    a = run.args
    n = a.keys or 300_000
    rounds = a.overwrite_rounds
    kinds = a.values if a.values_given else ["half", "template", "random"]
    impls, omitted = run.impls_for({"DEFAULT"})
    params = {
        "keys": n,
        "overwrite_rounds": rounds,
        "value_kinds": kinds,
        "seed": a.seed,
        "durability_regime": "DEFAULT",
        "what": "Space = sum of apparent file sizes / (keys x 1,040). load (1 thread, "
        "batches of 1,000) -> close -> measure; reopen -> overwrite every key "
        "`rounds` times (batches of 1,000) -> close -> measure; reopen -> the "
        "engine's compaction (if any) -> close -> measure",
    }
    doc = run.cell_doc("space", params, impls, omitted)
    groups = {}
    for kind in kinds:
        for stage in ("after-load", "after-overwrite", "after-compact"):
            g = new_group(
                f"space-{kind}-{stage}",
                f"Space {stage} ({kind} values, {n:,} keys"
                + (f", {rounds} overwrites" if stage != "after-load" else "")
                + ")",
                "DEFAULT",
                "space",
                "x raw (keys x 1,040 B)",
                "lower",
                {"value_kind": kind, "stage": stage, "keys": n},
            )
            groups[(kind, stage)] = g
            doc["groups"].append(g)
    for kind in kinds:
        for rep in range(a.reps):
            seed = rep_seed(a.seed, rep)
            for impl in impls:

                def body(
                    p: Path, impl: Impl = impl, seed: int = seed, kind: str = kind, rep: int = rep
                ) -> dict:
                    raw = n * RECORD_BYTES
                    ad, _ = open_impl(impl, p, None)
                    ld = load(ad, n, kind, seed)
                    close_timed(ad)
                    s1, f1 = apparent_size(p), file_listing(p)
                    ad, _ = open_impl(impl, p, None)
                    t0 = time.perf_counter()
                    for r in range(rounds):
                        vm = ValueMaker(kind, seed + 7 * (r + 1))
                        for s in range(0, n, LOAD_BATCH):
                            keys = [key_of(i) for i in range(s, min(n, s + LOAD_BATCH))]
                            ad.put_batch(list(zip(keys, vm.many(keys), strict=True)))
                    ad.flush()
                    ow_s = time.perf_counter() - t0
                    close_timed(ad)
                    s2 = apparent_size(p)
                    ad, _ = open_impl(impl, p, None)
                    t0 = time.perf_counter()
                    what = ad.compact()
                    compact_s = time.perf_counter() - t0
                    ver = verify_sample(ad, n)
                    close_timed(ad)
                    s3, f3 = apparent_size(p), file_listing(p)
                    return {
                        "rep": rep,
                        "seed": seed,
                        "load": ld,
                        "raw_bytes": raw,
                        "bytes_after_load": s1,
                        "bytes_after_overwrite": s2,
                        "bytes_after_compact": s3,
                        "space_after_load": s1 / raw,
                        "space_after_overwrite": s2 / raw,
                        "space_after_compact": s3 / raw,
                        "overwrite_s": ow_s,
                        "compaction": what,
                        "compact_s": compact_s,
                        "verify": ver,
                        "files_after_load": f1,
                        "files_after_compact": f3,
                    }

                r = run_guarded(run, impl, body, f"space-{kind}-rep{rep}")
                for stage in ("after-load", "after-overwrite", "after-compact"):
                    # the full record once (after-load); slim copies for the other stages
                    rr = (
                        dict(r)
                        if stage == "after-load"
                        else {k: v for k, v in r.items() if not k.startswith(("files_", "load"))}
                    )
                    rr["space"] = r.get("space_" + stage.replace("-", "_"))
                    add_rep(groups[(kind, stage)], impl, rr)
                run.log(
                    f"space {kind} rep{rep} {impl.name}: load "
                    f"{r.get('space_after_load', float('nan')):.3f}x, overwritten "
                    f"{r.get('space_after_overwrite', float('nan')):.3f}x, compacted "
                    f"{r.get('space_after_compact', float('nan')):.3f}x"
                )
                run.save(doc)
    for g in groups.values():
        finish_group(g)
    return doc


def cell_reopen(run: Run) -> dict:
    a = run.args
    n = a.keys or 1_000_000
    impls, omitted = run.impls_for({"DEFAULT"}, only_tuffdb=True)
    impls = [i for i in impls if i.name == "tuffdb" or run.selected is not None]
    params = {
        "keys": n,
        "value_kind": a.values[0],
        "reopens_per_rep": 3,
        "seed": a.seed,
        "what": "load n sequential keys (batches of 1,000), close; then 3 x (open + first "
        "get of key 0 + close); reopen_s = the first; page cache warm",
    }
    doc = run.cell_doc("reopen", params, impls, omitted)
    g = new_group(
        "reopen",
        f"reopen: open() + first get over {n:,} keys",
        "DEFAULT",
        "reopen_s",
        "s",
        "lower",
        {"keys": n},
    )
    doc["groups"].append(g)
    for rep in range(a.reps):
        seed = rep_seed(a.seed, rep)
        for impl in impls:

            def body(p: Path, impl: Impl = impl, seed: int = seed, rep: int = rep) -> dict:
                ad, _ = open_impl(impl, p, None)
                ld = load(ad, n, params["value_kind"], seed)
                close_s = close_timed(ad)
                times = []
                for _ in range(3):
                    gc.collect()
                    t0 = time.perf_counter()
                    ad = impl.opener(p, None)
                    v = ad.get(key_of(0))
                    times.append(time.perf_counter() - t0)
                    if v is None:
                        raise RuntimeError("first get after reopen returned None")
                    close_timed(ad)
                return {
                    "rep": rep,
                    "seed": seed,
                    "load": ld,
                    "close_s": close_s,
                    "reopen_s": times[0],
                    "reopen_all_s": times,
                    "files": file_listing(p),
                    "bytes": apparent_size(p),
                }

            r = run_guarded(run, impl, body, f"reopen-rep{rep}")
            add_rep(g, impl, r)
            run.log(f"reopen rep{rep} {impl.name}: {r.get('reopen_s', float('nan')):.3f} s")
            run.save(doc)
    finish_group(g)
    return doc


def cell_workloads(run: Run) -> dict:
    a = run.args
    n = a.keys or 100_000
    regime = a.regime.upper()
    impls, omitted = run.impls_for({regime})
    names = a.workload or list(WORKLOADS)
    threads_list = a.threads or [1, 8]
    ops = a.ops or 100_000
    working = n * RECORD_BYTES
    cache = max(8 << 20, int(working * 1.25))
    params = {
        "keys": n,
        "ops": ops,
        "threads": threads_list,
        "workloads": names,
        "value_kind": a.values[0],
        "cache_bytes": cache,
        "durability_regime": regime,
        "max_seconds": a.max_seconds,
        "seed": a.seed,
        "what": "kvbench 2.2: fresh dir; load n sequential keys (1 thread, batches of "
        "1,000, reported as ingest); gc; `ops` closed-loop ops split over threads",
    }
    doc = run.cell_doc("workloads", params, impls, omitted)
    for wname in names:
        wl = WORKLOADS[wname]
        for threads in threads_list:
            g = new_group(
                f"{wname}-t{threads}",
                f"{wname} ({wl.mix}), {n:,} keys, {threads} thread(s), {regime}",
                regime,
                "throughput",
                "ops/s",
                "higher",
                {"workload": wname, "threads": threads, "keys": n, "window": "ops"},
            )
            doc["groups"].append(g)
            for rep in range(a.reps):
                seed = rep_seed(a.seed, rep)
                for impl in impls:
                    if wl.ordered_only and not impl.ordered:
                        g.setdefault("skipped", {})[impl.name] = "unordered store: no scan"
                        continue
                    per = math.ceil(ops / threads)
                    sources = [
                        wl.build(n, per, threads, w, params["value_kind"], seed)
                        for w in range(threads)
                    ]

                    def body(
                        p: Path,
                        impl: Impl = impl,
                        sources: list = sources,
                        rep: int = rep,
                        wl: Workload = wl,
                        per: int = per,
                        seed: int = seed,
                        threads: int = threads,
                    ) -> dict:
                        ad, _ = open_impl(impl, p, cache)
                        ld = load(ad, n, params["value_kind"], seed) if wl.loads else None
                        ph = measure(ad, sources, quota=per, duration_s=a.max_seconds)
                        rec = phase_record(ph, threads)
                        stats = ad.stats()
                        ad.flush()
                        close_timed(ad)
                        return {
                            "rep": rep,
                            "seed": seed,
                            "load": ld,
                            "phase": rec,
                            "throughput": ph.throughput,
                            "space_after_close": apparent_size(p) / working,
                            "store_stats": stats,
                        }

                    r = run_guarded(run, impl, body, f"{wname}-t{threads}-rep{rep}")
                    add_rep(g, impl, r)
                    run.log(
                        f"{wname} t{threads} rep{rep} {impl.name}: "
                        f"{fmt_rate(r.get('throughput'))} ops/s"
                    )
                    run.save(doc)
            finish_group(g)
    return doc


def cell_openloop(run: Run) -> dict:
    a = run.args
    n = a.keys or 100_000
    regime = a.regime.upper()
    impls, omitted = run.impls_for({regime})
    threads = (a.threads or [1])[0]
    rates = a.rates
    params = {
        "keys": n,
        "rates": rates,
        "threads": threads,
        "duration_s": a.duration,
        "value_kind": a.values[0],
        "durability_regime": regime,
        "seed": a.seed,
        "what": "load n sequential keys (batches of 1,000), flush; then, on the same store, "
        "uniform random gets and then overwrites at each fixed offered rate (open loop: op i "
        "is due at start + i / rate; latency = completion - due time, corrected for "
        "coordinated omission); a rate the store cannot sustain shows kept_up = false",
    }
    doc = run.cell_doc("openloop", params, impls, omitted)
    groups = {}
    for op in ("get", "put"):
        for rate in rates:
            g = new_group(
                f"openloop-{op}-r{rate:g}",
                f"open-loop {op} at {rate:,.0f} ops/s offered, {n:,} keys, {threads} thread(s), "
                f"{regime}: p99 response time",
                regime,
                "p99_us",
                "us",
                "lower",
                {"op": op, "rate": rate, "threads": threads, "window": "time"},
            )
            groups[(op, rate)] = g
            doc["groups"].append(g)
    for rep in range(a.reps):
        seed = rep_seed(a.seed, rep)
        for impl in impls:

            def body(p: Path, impl: Impl = impl, seed: int = seed, rep: int = rep) -> dict:
                ad, _ = open_impl(impl, p, None)
                ld = load(ad, n, params["value_kind"], seed)
                res = {}
                for op in ("get", "put"):
                    for rate in rates:
                        length = max(1000, int(rate * a.duration / threads) + 1000)
                        if op == "get":
                            srcs = uniform_get_sources(n, threads, seed, min(length, 1 << 20))
                        else:
                            srcs = [
                                _mixed(0.0, PUT, "uniform")(
                                    n, length, threads, w, params["value_kind"], seed + 11
                                )
                                for w in range(threads)
                            ]
                        res[(op, rate)] = measure_open(ad, srcs, rate, a.duration)
                close_timed(ad)
                return {"rep": rep, "seed": seed, "load": ld, "results": res}

            r = run_guarded(run, impl, body, f"openloop-rep{rep}")
            for (op, rate), g in groups.items():
                ph = r.get("results", {}).get((op, rate))
                if ph is None:
                    add_rep(g, impl, {"rep": rep, "failed": r.get("failed", "no result")})
                    continue
                pcts = ph["latency"].get("percentiles") or {}
                add_rep(
                    g, impl, {"rep": rep, "seed": r["seed"], "phase": ph, "p99_us": pcts.get("p99")}
                )
                run.log(
                    f"openloop {op} {rate:g}/s rep{rep} {impl.name}: p99 {pcts.get('p99')} us, "
                    f"achieved {fmt_rate(ph['achieved_rate'])} ops/s"
                )
            run.save(doc)
    for g in groups.values():
        finish_group(g)
    return doc


CELLS: dict[str, Callable[[Run], dict]] = {
    "ingest": cell_ingest,
    "durable": cell_durable,
    "readrandom": cell_readrandom,
    "space": cell_space,
    "reopen": cell_reopen,
    "workloads": cell_workloads,
    "openloop": cell_openloop,
}
DEFAULT_CELLS = ("ingest", "durable", "readrandom", "space", "reopen")


# =========================================================================== main
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    p.add_argument(
        "--cell",
        action="append",
        choices=sorted(CELLS),
        help="cell to run (repeatable); default: " + " ".join(DEFAULT_CELLS),
    )
    p.add_argument(
        "--impl",
        help="comma-separated implementation names or globs "
        "(e.g. 'tuffdb*,rocksdict*'); default: every registered one for the cell",
    )
    p.add_argument(
        "--keys",
        type=int,
        help="override the cell's key count "
        "(ingest/readrandom/space 300,000; reopen 1,000,000; workloads 100,000)",
    )
    p.add_argument("--ops", type=int, help="durable: ops cap (100,000); workloads: ops (100,000)")
    p.add_argument(
        "--threads",
        type=lambda s: [int(x) for x in s.split(",")],
        help="comma-separated thread counts (ingest 8,1; durable 8; readrandom 1; workloads 1,8)",
    )
    p.add_argument(
        "--duration",
        type=float,
        default=10.0,
        help="fixed measured window in s for durable and readrandom (10)",
    )
    p.add_argument(
        "--warmup",
        type=float,
        default=2.0,
        help="readrandom: unmeasured uniform gets before the window, in s (2; 0 = measure "
        "from the first get after reopen)",
    )
    p.add_argument(
        "--max-seconds",
        type=float,
        default=60.0,
        help="cap on a fixed-ops phase (ingest, workloads); a capped phase is "
        "flagged stopped_by=time (60)",
    )
    p.add_argument("--reps", type=int, default=3, help="repetitions (>= 3 for reported numbers)")
    p.add_argument(
        "--values",
        type=lambda s: s.split(","),
        default=None,
        help="value kind(s): template, half, random (template; space: all three)",
    )
    p.add_argument("--overwrite-rounds", type=int, default=10)
    p.add_argument(
        "--rates",
        type=lambda s: [float(x) for x in s.split(",")],
        default=[1000.0, 10000.0, 50000.0],
        help="openloop cell: offered rates in ops/s (1000,10000,50000)",
    )
    p.add_argument(
        "--workload",
        action="append",
        choices=sorted(WORKLOADS),
        help="workloads cell: which workloads (repeatable; default all)",
    )
    p.add_argument(
        "--regime",
        default="default",
        choices=["default", "full"],
        help="workloads cell: DEFAULT or FULL implementations",
    )
    p.add_argument("--seed", type=int, default=DEFAULT_SEED)
    p.add_argument(
        "--dir",
        default=str(REPO / "bench" / "results" / "tmp"),
        help="parent of the fresh data directories (real disk, never tmpfs)",
    )
    p.add_argument(
        "--out",
        default=str(REPO / "docs" / "benchmarks" / "kv"),
        help="results root; the run goes to <out>/<run-id>/",
    )
    p.add_argument("--run-id", default=None, help="default: UTC timestamp")
    p.add_argument(
        "--profile",
        help="comma-separated store globs (e.g. 'tuffdb*'): record each measured phase of those "
        "stores with py-spy into <run>/profiles/*.svg; those reps are flagged 'profiled' "
        "(sampling overhead), so profile in a separate --run-id",
    )
    p.add_argument(
        "--store-timeout",
        type=float,
        default=900.0,
        help="watchdog per store per repetition: dump stacks and exit 3 if one "
        "store run takes longer (900 s)",
    )
    p.add_argument(
        "--allow-tmpfs",
        action="store_true",
        help="smoke tests only: run even if --dir is on tmpfs (recorded in the "
        "manifest; such numbers are never reported)",
    )
    p.add_argument("--list", action="store_true", help="list impls, workloads and cells")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    args.values_given = args.values is not None
    if args.values is None:
        args.values = ["template"]
    for v in args.values:
        if v not in VALUE_KINDS:
            p.error(f"--values: unknown kind {v!r}")
    if args.run_id is None:
        args.run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return args


def list_registry() -> None:
    print("implementations:")
    for i in IMPLS.values():
        err = import_error(i)
        print(f"  {i.name:16} {i.regime:8} {i.settings}" + (f"   [OMITTED: {err}]" if err else ""))
    print("workloads (cell 'workloads'):")
    for w in WORKLOADS.values():
        print(f"  {w.name:13} {w.mix}" + ("  [ordered only]" if w.ordered_only else ""))
    print("cells:", ", ".join(CELLS), "; default:", " ".join(DEFAULT_CELLS))


# python bench/kv.py TOOL ...: plot a run's results again; a bare ingest loop for a profiler.
TOOLS = {"plot": "_plot_kv", "profile-ingest": "_kv_profile"}


def main(argv: list[str] | None = None) -> int:
    if run_tool("kv.py", sys.argv[1:] if argv is None else argv, TOOLS):
        return 0
    args = parse_args(argv)
    if args.list:
        list_registry()
        return 0
    run = Run(args)
    run.data_parent.mkdir(parents=True, exist_ok=True)
    if not args.allow_tmpfs:
        check_real_disk(run.data_parent)
    env = environment(run.data_parent, PEER_PACKAGES)
    env["allow_tmpfs"] = args.allow_tmpfs
    env["sqlite_version"] = sqlite3.sqlite_version
    with contextlib.suppress(Exception):
        import plyvel  # noqa: PLC0415

        env["leveldb_version"] = plyvel.__leveldb_version__
    with contextlib.suppress(Exception):
        import lmdb  # noqa: PLC0415

        env["lmdb_library_version"] = ".".join(map(str, lmdb.version()))
    env["fsync_probe_start"] = fsync_probe(run.data_parent)
    env["cells"] = list(dict.fromkeys(args.cell or DEFAULT_CELLS))
    env["fsync_modes"] = {i.name: i.settings for i in IMPLS.values()}
    env_path = run.out / "environment.json"
    if env_path.exists():  # a second invocation into the same run directory: keep the first
        with contextlib.suppress(Exception):
            import json  # noqa: PLC0415

            prev = json.loads(env_path.read_text())
            env["previous_invocations"] = [
                *prev.pop("previous_invocations", []),
                {
                    k: prev.get(k)
                    for k in (
                        "command",
                        "recorded_at",
                        "cells",
                        "git",
                        "fsync_probe_start",
                        "fsync_probe_end",
                    )
                },
            ]
            env["cells"] = [*dict.fromkeys([*prev.get("cells", []), *env["cells"]])]
    write_json(env_path, env)
    run.invocation.update(
        {
            "command": env["command"],
            "git": env["git"],
            "loadavg_at_start": env["loadavg_at_start"],
            "fsync_probe_start": env["fsync_probe_start"],
        }
    )
    probe = env["fsync_probe_start"]
    run.log(
        f"run {args.run_id} -> {run.out}; data under {run.data_parent} "
        f"({env['filesystem'].get('type', '?')}); fsync avg {probe['avg_us']} us "
        f"p99 {probe['p99_us']} us" + ("  [SUSPICIOUS: < 50 us]" if probe["suspicious"] else "")
    )
    for cell in dict.fromkeys(args.cell or DEFAULT_CELLS):
        run.log(f"== cell {cell}")
        doc = CELLS[cell](run)
        doc["finished_at"] = utc_now()
        path = run.save(doc)
        run.log(f"   wrote {path}")
    env["fsync_probe_end"] = fsync_probe(run.data_parent)
    env["finished_at"] = utc_now()
    with contextlib.suppress(OSError):
        env["loadavg_at_end"] = Path("/proc/loadavg").read_text().strip()
    write_json(run.out / "environment.json", env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
