"""Backup, restore, archiving and tiering against their physical anchors (issue 30; not
part of the test run).

    python bench/backup.py [--gb 4] [--repeats 3] [--out docs/benchmarks/backup]
    python bench/backup.py plot docs/benchmarks/backup/backup-<run>.json

One run on one host, ratios from that run, medians of ``--repeats`` with min and max:

1. **Copies of a data directory** of ``--gb`` GB (a KV store of incompressible 1 KiB
   values, ~90%, and an event store, ~10%), offline, interleaved per repetition (the
   order rotates): ``cp -r``; ``cp -r`` then ``sync -f`` (a durable copy: the anchor a
   backup, which fsyncs every file before its manifest, is comparable with); ``tar cf``;
   ``tuffdb backup`` (copy); ``tuffdb backup --link``; ``tuffdb restore`` of that
   repetition's backup. ``sync`` runs (untimed) before each, and each result is deleted
   (untimed) after it. MB/s = bytes of the data directory / seconds.
2. **Under a write load** (embedded, shared GIL: the store and one writer thread share
   the process, the harshest case for the backup's threads; ``durability="interval"``;
   values of 1 KiB, a load near the disk's bandwidth, and of 100 B, a load bound by the
   interpreter): per repetition, each of ``take_backup``, ``take_backup`` at each of
   ``--throttle-mb`` MB/s (a comma-separated list) and ``cp -r`` + ``sync -f`` of the
   live directory, each followed (after deleting the copy, untimed) by a window of the
   load alone (as long, at most 10 s). Reported: each one's MB/s and the puts/s during
   it against the puts/s alone.
2b. **Under a server's durable load**: ``tuffdb serve --durability always`` (not pinned)
   filled over RESP with ``--gb`` GB of incompressible 1 KiB values and the YCSB records,
   YCSB A from bench/ycsb_gen/ycsb_driver.c (``--ycsb-threads`` connections, not pinned)
   running throughout; per repetition, each of ``POST /backup`` (paced, the default),
   ``POST /backup`` with ``"pace": false`` unthrottled and at each of ``--throttle-mb``
   MB/s, and ``cp -r`` + ``sync -f`` of the server's live directory, each followed
   (after deleting the copy, untimed) by a window of the load alone (as long, at most
   10 s). Reported: each one's MB/s and the KV writes/s (``tuffdb_kv_puts_total``)
   during it against alone (the window after it; and, as
   ``writes_ratio_adjacent_median``, against the mean of the windows before and after
   it): the deployment an operator runs, where the backup's threads share the server's
   process and both share the host's two cores and disk with the load generator.
3. **Restore with ``--check``** (open every store and run its full check) once: what the
   default verification saves.
4. **Archive lag under YCSB A, durable**: ``tuffdb serve --durability always --archive DIR
   --archive-interval 1`` (server on CPU 0), 100,000 YCSB records (10 fields x 100 B, RESP
   hashes), then YCSB A (50/50 read/update, Zipfian) from bench/ycsb_gen/ycsb_driver.c with
   ``--ycsb-threads`` connections (CPU 1) for ``--ycsb-seconds``; the archive lag
   (``tuffdb_archive_lag_seconds``, computed live at every scrape) sampled every 50 ms:
   p50/p99/max with N. Archives: a directory on the same disk, and S3 (a
   ``moto_server`` process on CPU 1); the same YCSB A run without ``--archive`` gives the
   throughput the archiving costs.
5. **Point-in-time restore** of ``--pitr-keys`` keys and as many events: an archiver on
   embedded stores from an empty base, the keys (``put_many`` of 100) and events
   (appends of 100) written by two threads, then a restore to the last write's time
   (every change since the base replayed from chunks) and to the middle of the writes;
   each restored store's counts are checked.
6. **Tiered reads**: a KV store of ``--tier-mb`` MB archived to a directory and to S3 (a
   ``moto_server`` process on CPU 1, reached over HTTP by boto3), every segment tiered
   (``local_bytes=0``), the block cache off (``cache_bytes=0``): point reads of one key per
   1 MiB part, first from local segments (before tiering), then tiered with an empty
   cache (every read a miss: one ranged GET), then the same keys again (every read a
   hit: a local file). Latency p50/p99 with N, reads/s.

Raw results: ``<out>/backup-<UTC time>.json`` (``latest.json`` beside it); the plot
``<out>/backup-<UTC time>.png`` is drawn from the JSON by ``plot``. Page cache is warm
for every contestant alike (caches cannot be dropped for one process on a shared host);
disk writes are real (ext4, fsync probed at start and end).
"""

# Benchmark script, not library code.
# ruff: noqa: INP001, CPY001, S603, S607, T201, PLR0913, PLR0915
from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from _common import (
    REPO,
    bench_dir,
    check_real_disk,
    ensure_native_build,
    environment,
    fsync_probe,
    latency_summary,
    spread,
    utc_now,
    write_json,
)

sys.path.insert(0, str(REPO / "src"))
from tuffdb import KVStore
from tuffdb.backup.archive import Archiver
from tuffdb.backup.datadir import Keys, locked_sources, sources_of
from tuffdb.backup.restore import restore
from tuffdb.backup.take import take_backup
from tuffdb.events.api import Event
from tuffdb.events.store import EventStore
from tuffdb.server.resp._process import free_port
from tuffdb.storage.objstore import open_target

VALUE = 1024
EVENT_BYTES = 256
ALONE_S = 10.0  # the load alone after each copy: at most this long
PITR_BATCH = 100  # keys per put_many, events per append: rounds the restore replays


# --------------------------------------------------------------------------- helpers
def dir_bytes(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def sync() -> None:
    subprocess.run(["sync"], check=True)


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def pin(cpu: int | None) -> list[str]:
    return ["taskset", "-c", str(cpu)] if cpu is not None and shutil.which("taskset") else []


def build(d: Path, gb: float) -> dict[str, int]:
    """A data directory: KV (~90%: incompressible 1 KiB values) and events (~10%)."""
    kv_bytes = int(gb * 0.9 * (1 << 30))
    n = kv_bytes // VALUE
    rnd = os.urandom(VALUE * 4096)
    with KVStore.open(d / "kv", durability="none", hot_bytes=64 << 20) as kv:
        for i in range(0, n, 4096):
            kv.put_many((f"key{j:012d}".encode(), rnd[(j % 4096) * VALUE:(j % 4096 + 1) * VALUE])
                        for j in range(i, min(n, i + 4096)))
    events = int(gb * 0.1 * (1 << 30)) // (EVENT_BYTES + 32)
    payload = os.urandom(EVENT_BYTES)
    with EventStore.open(d / "events") as es:
        for i in range(0, events, 2000):
            es.append([Event("E", payload, [f"s{(i + j) % 1000}"])
                       for j in range(min(2000, events - i))])
    return {"kv_keys": n, "events": events}


def offline_backup(data: Path, dest: Path, *, link: bool = False) -> int:
    sources, held = locked_sources(data)
    try:
        m = take_backup(sources, open_target(dest), data / ".backup-staging", link=link)
    finally:
        for h in held:
            h.release()
    return sum(f.size for s in m.stores.values() for f in s.files)


# --------------------------------------------------------------------------- 1. copies
def copies(data: Path, work: Path, repeats: int) -> dict[str, Any]:
    size = dir_bytes(data)
    cp, bk, tar, rs = work / "cp", work / "bk", work / "t.tar", work / "rs"

    def run_cp() -> None:
        subprocess.run(["cp", "-r", str(data), str(cp)], check=True)

    def run_cp_sync() -> None:
        run_cp()
        subprocess.run(["sync", "-f", str(cp)], check=True)

    contestants: dict[str, tuple[Callable[[], Any], Callable[[], None]]] = {
        "cp -r": (run_cp, lambda: shutil.rmtree(cp)),
        "cp -r + sync": (run_cp_sync, lambda: shutil.rmtree(cp)),
        "tar cf": (lambda: subprocess.run(["tar", "cf", str(tar), "-C", str(data.parent),
                                           data.name], check=True), tar.unlink),
        "tuffdb backup": (lambda: offline_backup(data, bk), lambda: None),  # kept for restore
        "tuffdb restore": (lambda: restore(str(bk), rs, keys=Keys()),
                           lambda: (shutil.rmtree(rs), shutil.rmtree(bk))),
        "tuffdb backup --link": (lambda: offline_backup(data, work / "bkl", link=True),
                                 lambda: shutil.rmtree(work / "bkl")),
    }
    names = list(contestants)
    seconds: dict[str, list[float]] = {n: [] for n in names}
    for rep in range(repeats):
        # Rotate the order (restore stays right after its backup): drift shared alike.
        order = names[rep % 3:3] + names[:rep % 3] + names[3:]
        for name in order:
            run, clean = contestants[name]
            sync()
            seconds[name].append(timed(run))
            clean()
            print(f"  rep {rep}: {name} {seconds[name][-1]:.2f} s", flush=True)
    sync()
    mbps = {n: spread([size / 1e6 / s for s in v]) for n, v in seconds.items()}
    med = {n: v["median"] for n, v in mbps.items()}
    return {
        "data_bytes": size, "seconds": seconds, "mb_per_s": mbps,
        "ratios_of_medians": {
            "backup_vs_cp": med["tuffdb backup"] / med["cp -r"],
            "backup_vs_cp_sync": med["tuffdb backup"] / med["cp -r + sync"],
            "backup_vs_tar": med["tuffdb backup"] / med["tar cf"],
            "restore_vs_cp": med["tuffdb restore"] / med["cp -r"],
            "restore_vs_cp_sync": med["tuffdb restore"] / med["cp -r + sync"],
            "link_backup_vs_cp": med["tuffdb backup --link"] / med["cp -r"],
        },
    }


# --------------------------------------------------------------------------- 2. under load
class Load:
    """One writer thread: put ``value_bytes`` values over 200,000 keys; counts puts."""

    def __init__(self, kv: KVStore, value_bytes: int) -> None:
        self.kv = kv
        self.value_bytes = value_bytes
        self.count = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run)
        self.thread.start()

    def _run(self) -> None:
        v = os.urandom(self.value_bytes)
        put = self.kv.put
        i = 0
        while not self.stop.is_set():
            put(b"load%08d" % (i % 200_000), v)
            i += 1
            self.count = i

    def window(self, fn: Callable[[], Any] | None, seconds: float) -> tuple[float, float, Any]:
        """(puts/s, seconds, fn's result) over ``fn`` (or ``seconds`` of load alone)."""
        c0, t0 = self.count, time.perf_counter()
        out = fn() if fn is not None else self.stop.wait(seconds)
        dt = time.perf_counter() - t0
        return (self.count - c0) / dt, dt, out

    def close(self) -> None:
        self.stop.set()
        self.thread.join()


def under_load(data: Path, work: Path, repeats: int, cp_offline_mbps: float,
               value_bytes: int, throttle_mb: list[float]) -> dict[str, Any]:
    kv = KVStore.open(data / "kv", durability="interval")
    es = EventStore.open(data / "events")
    sources = sources_of({"kv": kv, "events": es})
    load = Load(kv, value_bytes)

    def backup(rate: float | None = None) -> tuple[int, Path]:
        m = take_backup(sources, open_target(work / "bk-load"), data / ".backup-staging",
                        max_bytes_per_s=rate)
        return sum(f.size for s in m.stores.values() for f in s.files), work / "bk-load"

    def cp(durable: bool) -> tuple[int, Path]:
        # (a live directory: files the store deletes meanwhile make cp complain)
        dst = work / "cp-load"
        subprocess.run(["cp", "-r", str(data), str(dst)], check=False,
                       stderr=subprocess.DEVNULL)
        if durable:
            subprocess.run(["sync", "-f", str(dst)], check=True)
        return dir_bytes(dst), dst

    contestants: dict[str, Callable[[], tuple[int, Path]]] = {"backup": backup}
    for mb in throttle_mb:
        contestants[f"backup --max-rate {mb:g}"] = functools.partial(backup, mb * 1e6)
    contestants["cp -r + sync"] = lambda: cp(durable=True)
    rows = []
    try:
        load.window(None, 3.0)  # warm-up
        for rep in range(repeats):
            row: dict[str, Any] = {}
            for name, fn in contestants.items():
                sync()
                rate, secs, (nbytes, dst) = load.window(fn, 0)
                shutil.rmtree(dst)  # (outside the window: only the copy is timed)
                sync()
                alone, _, _ = load.window(None, min(secs, ALONE_S))  # the load alone
                row[name] = {"seconds": secs, "bytes": nbytes, "mb_per_s": nbytes / 1e6 / secs,
                             "puts_per_s_during": rate, "puts_per_s_alone": alone,
                             "puts_ratio": rate / alone}
                print(f"  rep {rep}, {value_bytes} B load: {name} "
                      f"{row[name]['mb_per_s']:.0f} MB/s, puts {rate:.0f}/s during vs "
                      f"{alone:.0f}/s alone", flush=True)
            rows.append(row)
    finally:
        load.close()
        kv.close()
        es.close()
    med = {name: {k: spread([r[name][k] for r in rows]) for k in rows[0][name]}
           for name in contestants}
    return {
        "load": f"1 thread, kv.put of {value_bytes} B values over 200,000 keys, "
                "durability=interval; embedded, shared GIL with the backup",
        "rows": rows, "spread": med,
        "backup_under_load_vs_cp_offline": med["backup"]["mb_per_s"]["median"] / cp_offline_mbps,
        "backup_under_load_vs_cp_sync_under_load": (
            med["backup"]["mb_per_s"]["median"] / med["cp -r + sync"]["mb_per_s"]["median"]),
        "puts_ratio_median": {name: med[name]["puts_ratio"]["median"] for name in contestants},
    }


# --------------------------------------------------------------------------- 2b. server
def kv_puts(admin: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{admin}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("tuffdb_kv_puts_total "):
                return float(line.split()[1])
    raise RuntimeError("no tuffdb_kv_puts_total in /metrics")


def server_under_load(work: Path, gb: float, repeats: int, throttle_mb: list[float],
                      records: int, threads: int) -> dict[str, Any]:
    """A server under YCSB A, durable, while ``POST /backup`` (and ``cp -r`` + sync of
    its live directory) runs: the load's KV writes/s during each against alone."""
    from _ycsb_cgen import build_driver, run_driver
    from _ycsb_work import key, record

    exe = build_driver(work / "gen")
    if exe is None:
        return {"skipped": "no C compiler for bench/ycsb_gen/ycsb_driver.c"}
    import redis

    data = work / "server-data"
    rows = []
    with tuffdb_server(data, None, None) as ports:
        r = redis.Redis(port=ports["resp"])
        rnd = os.urandom(VALUE * 4096)
        n = int(gb * 0.9 * (1 << 30)) // VALUE
        for i in range(0, n, 2000):
            pipe = r.pipeline(transaction=False)
            for j in range(i, min(n, i + 2000)):
                pipe.set(b"key%012d" % j, rnd[(j % 4096) * VALUE:(j % 4096 + 1) * VALUE])
            pipe.execute()
        for i in range(0, records, 1000):
            pipe = r.pipeline(transaction=False)
            for j in range(i, min(records, i + 1000)):
                pipe.hset(key(j), mapping=record(j, 42))
            pipe.execute()
        size = dir_bytes(data)
        print(f"  server data directory: {size / 1e9:.2f} GB", flush=True)
        admin = ports["admin"]

        def backup(rate: float | None = None, pace: bool = True) -> tuple[int, Path]:
            body: dict[str, Any] = {"dest": str(work / "bk-server"), "pace": pace}
            if rate:
                body["max_mb_per_s"] = rate
            req = urllib.request.Request(f"http://127.0.0.1:{admin}/backup",
                                         data=json.dumps(body).encode(), method="POST")
            with urllib.request.urlopen(req, timeout=3600) as resp:
                resp.read()
            return dir_bytes(work / "bk-server"), work / "bk-server"

        def cp() -> tuple[int, Path]:
            dst = work / "cp-server"
            subprocess.run(["cp", "-r", str(data), str(dst)], check=False,
                           stderr=subprocess.DEVNULL)
            subprocess.run(["sync", "-f", str(dst)], check=True)
            return dir_bytes(dst), dst

        def window(fn: Callable[[], Any] | None, seconds: float) -> tuple[float, float, Any]:
            c0, t0 = kv_puts(admin), time.perf_counter()
            out = fn() if fn is not None else time.sleep(seconds)
            dt = time.perf_counter() - t0
            return (kv_puts(admin) - c0) / dt, dt, out

        contestants: dict[str, Callable[[], tuple[int, Path]]] = {
            "POST /backup": backup,  # paced (the default)
            "POST /backup pace off": functools.partial(backup, None, pace=False)}
        for mb in throttle_mb:
            contestants[f"POST /backup max_mb_per_s {mb:g} pace off"] = functools.partial(
                backup, mb, pace=False)
        contestants["cp -r + sync"] = cp
        stop = threading.Event()
        result: dict[str, Any] = {}

        def load() -> None:
            with contextlib.suppress(RuntimeError):  # (ended by pkill below)
                result.update(run_driver(exe, "resp", ports["resp"], "A", threads, records,
                                         42, 2.0, 24 * 3600, 0, None))
            stop.set()

        driver = threading.Thread(target=load)
        driver.start()
        try:
            time.sleep(5.0)  # the driver's warm-up and the server's first rounds
            for rep in range(repeats):
                row: dict[str, Any] = {}
                for name, fn in contestants.items():
                    sync()
                    rate, secs, (nbytes, dst) = window(fn, 0)
                    shutil.rmtree(dst)  # (outside the window: only the copy is timed)
                    sync()
                    alone, _, _ = window(None, min(secs, ALONE_S))
                    row[name] = {"seconds": secs, "bytes": nbytes,
                                 "mb_per_s": nbytes / 1e6 / secs,
                                 "kv_writes_per_s_during": rate, "kv_writes_per_s_alone": alone,
                                 "writes_ratio": rate / alone}
                    print(f"  rep {rep}, server: {name} {row[name]['mb_per_s']:.0f} MB/s, "
                          f"KV writes {rate:.0f}/s during vs {alone:.0f}/s alone", flush=True)
                rows.append(row)
        finally:
            subprocess.run(["pkill", "-f", str(exe)], check=False)
            driver.join()
    med = {name: {k: spread([r[name][k] for r in rows]) for k in rows[0][name]}
           for name in contestants}
    cp_rate = med["cp -r + sync"]["mb_per_s"]["median"]
    return {
        "load": f"tuffdb serve --durability always (not pinned), {size / 1e9:.2f} GB of "
                f"1 KiB values plus {records:,} YCSB records; YCSB A (50% HGETALL, 50% HSET, "
                f"Zipfian) from bench/ycsb_gen/ycsb_driver.c, {threads} connections, "
                "closed loop, not pinned; the rate of KV writes from /metrics "
                "(tuffdb_kv_puts_total) during each copy and in a window of the load "
                "alone after it",
        "data_bytes": size, "rows": rows, "spread": med,
        "writes_ratio_median": {name: med[name]["writes_ratio"]["median"]
                                for name in contestants},
        "writes_ratio_adjacent_median": adjacent_ratios(rows),
        "mb_per_s_vs_cp_sync_under_load": {name: med[name]["mb_per_s"]["median"] / cp_rate
                                           for name in contestants},
    }


def adjacent_ratios(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Each contestant's writes during it against the mean of the load-alone windows
    just before it (the previous contestant's) and just after it; the first one of
    the run against the one after. The load alone moved by up to a fifth between two
    consecutive windows on a shared host: two windows halve what one window's luck
    decides. Medians over the repetitions."""
    seq = [(row, name) for row in rows for name in row]
    out: dict[str, list[float]] = {}
    for i, (row, name) in enumerate(seq):
        after = row[name]["kv_writes_per_s_alone"]
        ref = (seq[i - 1][0][seq[i - 1][1]]["kv_writes_per_s_alone"] + after) / 2 if i \
            else after
        out.setdefault(name, []).append(row[name]["kv_writes_per_s_during"] / ref)
    return {name: sorted(v)[len(v) // 2] for name, v in out.items()}


def restore_check(data: Path, work: Path) -> dict[str, Any]:
    offline_backup(data, work / "bk-check")
    sync()
    quick = timed(lambda: restore(str(work / "bk-check"), work / "rq", keys=Keys()))
    shutil.rmtree(work / "rq")
    sync()
    full = timed(lambda: restore(str(work / "bk-check"), work / "rc", keys=Keys(), check=True))
    shutil.rmtree(work / "rc")
    shutil.rmtree(work / "bk-check")
    return {"restore_s": quick, "restore_check_s": full, "data_bytes": dir_bytes(data)}


# --------------------------------------------------------------------------- 4. YCSB A lag
@contextlib.contextmanager
def tuffdb_server(d: Path, archive: str | None, cpu: int | None) -> Iterator[dict[str, int]]:
    ports = {"resp": free_port(), "admin": free_port()}
    cmd = [*pin(cpu), sys.executable, "-m", "tuffdb", "serve", "--data-dir", str(d),
           "--durability", "always", "--resp-port", str(ports["resp"]), "--admin-port",
           str(ports["admin"]), "--grpc-port", "0", "--http-port", "0"]
    if archive is not None:
        cmd += ["--archive", archive, "--archive-interval", "1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ports['admin']}/health",
                                            timeout=5) as r:
                    if json.loads(r.read()).get("status") == "ok":
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("tuffdb serve did not become healthy")
            time.sleep(0.1)
        yield ports
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)


def scrape_lag(admin: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{admin}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("tuffdb_archive_lag_seconds "):
                return float(line.split()[1])
    raise RuntimeError("no tuffdb_archive_lag_seconds in /metrics")


def ycsb_lag(work: Path, records: int, threads: int, seconds: float) -> dict[str, Any]:
    from _ycsb_cgen import build_driver, run_driver
    from _ycsb_work import key, record

    exe = build_driver(work / "gen")
    if exe is None:
        return {"skipped": "no C compiler for bench/ycsb_gen/ycsb_driver.c"}
    import redis

    out: dict[str, Any] = {"records": records, "threads": threads, "seconds": seconds,
                           "workload": "YCSB A: 50% HGETALL / 50% HSET of one field, "
                                       "ScrambledZipfian 0.99, closed loop; server CPU 0, "
                                       "generator (and moto_server) CPU 1"}
    with moto(1, "ycsb") as s3_url:
        targets: dict[str, str | None] = {"no archive": None,
                                          "archive: directory (same disk)": "dir",
                                          "archive: s3 (moto_server)": s3_url}
        for label, target in targets.items():
            d = work / f"ycsb-{len(out)}"
            archive = str(d.with_name(d.name + "-arch")) if target == "dir" else target
            with tuffdb_server(d, archive, 0) as ports:
                r = redis.Redis(port=ports["resp"])
                for i in range(0, records, 1000):
                    pipe = r.pipeline(transaction=False)
                    for n in range(i, min(records, i + 1000)):
                        pipe.hset(key(n), mapping=record(n, 42))
                    pipe.execute()
                samples: list[float] = []
                stop = threading.Event()

                def sample(admin: int = ports["admin"]) -> None:
                    while not stop.wait(0.05):
                        samples.append(scrape_lag(admin))

                sampler = threading.Thread(target=sample)
                if archive:
                    sampler.start()
                try:
                    res = run_driver(exe, "resp", ports["resp"], "A", threads, records, 42,
                                     2.0, seconds, 0, 1)
                finally:
                    stop.set()
                    if archive:
                        sampler.join()
            row = {"ops_per_s": res["ops_per_s"], "errors": res["errors"],
                   "latency": latency_summary(res.pop("latencies_ns")),
                   "command": res["command"]}
            if archive:
                s = sorted(samples)
                row["lag_s"] = {"n": len(s), "p50": s[len(s) // 2],
                                "p99": s[min(len(s) - 1, int(len(s) * 0.99))], "max": s[-1],
                                "samples": [round(x, 4) for x in samples]}
                row["ops_ratio_vs_no_archive"] = res["ops_per_s"] / out["no archive"]["ops_per_s"]
            out[label] = row
            print(f"  YCSB A, {label}: {res['ops_per_s']:.0f} ops/s", flush=True)
    return out


# --------------------------------------------------------------------------- 5. PITR
def pitr(work: Path, keys: int) -> dict[str, Any]:
    data = work / "pitr-data"
    kv = KVStore.open(data / "kv", durability="interval")
    es = EventStore.open(data / "events")
    arch = work / "pitr-archive"
    a = Archiver(open_target(arch), sources_of({"kv": kv, "events": es}), data / ".archive",
                 interval_s=1.0)
    a.start()
    assert a.wait_until(lambda a: a.bases_taken >= 1, 120)
    marks: dict[str, int] = {}
    v = os.urandom(100)

    def put_keys() -> None:
        for i in range(0, keys, PITR_BATCH):
            kv.put_many([(b"k%09d" % j, v) for j in range(i, min(keys, i + PITR_BATCH))])
            if i == keys // 2:
                marks["kv_half_ns"] = time.time_ns()

    def append_events() -> None:
        for i in range(0, keys, PITR_BATCH):
            es.append([Event("E", v, [f"t{(i + j) % 97}"])
                       for j in range(min(PITR_BATCH, keys - i))])

    t0 = time.perf_counter()
    threads = [threading.Thread(target=put_keys), threading.Thread(target=append_events)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    write_s = time.perf_counter() - t0
    kv.sync()
    end_ns = time.time_ns()
    assert a.wait_until(lambda a: a.lag_s == 0, 300)
    a.stop()
    kv.close()
    es.close()
    out: dict[str, Any] = {"keys": keys, "events": keys, "batch": PITR_BATCH,
                           "write_s": write_s, "archive_bytes": dir_bytes(arch),
                           "bases": a.bases_taken}
    for label, t in (("to the end", end_ns), ("to the middle", marks["kv_half_ns"])):
        dest = work / "pitr-restored"
        sync()
        s = timed(lambda t=t, dest=dest: restore(str(arch), dest, keys=Keys(), to_time_ns=t))
        with KVStore.open(dest / "kv") as rkv, EventStore.open(dest / "events") as res:
            got_keys, got_events = len(rkv), res.head() or 0
        if label == "to the end":
            assert (got_keys, got_events) == (keys, keys), (got_keys, got_events)
        out[label] = {"seconds": s, "keys": got_keys, "events": got_events}
        shutil.rmtree(dest)
        print(f"  PITR {label}: {s:.1f} s ({got_keys} keys, {got_events} events)", flush=True)
    return out


# --------------------------------------------------------------------------- 6. tiering
@contextlib.contextmanager
def moto(cpu: int | None, prefix: str) -> Iterator[str]:
    exe = shutil.which("moto_server") or str(Path(sys.executable).parent / "moto_server")
    port = free_port()
    proc = subprocess.Popen([*pin(cpu), exe, "-p", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    env = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "bench",
           "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        import boto3

        deadline = time.monotonic() + 60
        while True:
            try:
                boto3.client("s3").create_bucket(Bucket="bench")
                break
            except Exception:  # noqa: BLE001 - not up yet
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        yield f"s3://bench/{prefix}"
    finally:
        proc.terminate()
        proc.wait(30)
        for k, old in saved.items():
            if old is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = old


def read_keys(kv: KVStore, keys: list[bytes]) -> dict[str, Any]:
    lat = []
    t0 = time.perf_counter()
    for k in keys:
        s = time.perf_counter_ns()
        if kv.get(k) is None:
            raise AssertionError(f"{k!r} missing")
        lat.append(time.perf_counter_ns() - s)
    dt = time.perf_counter() - t0
    return {"reads_per_s": len(keys) / dt, "latency": latency_summary(lat)}


def tiering(work: Path, mb: int) -> dict[str, Any]:
    from tuffdb.kv.tier import PART_SIZE

    out: dict[str, Any] = {"store_mb": mb, "part_bytes": PART_SIZE}
    with contextlib.ExitStack() as stack:
        targets = {"directory": str(work / "tier-archive")}
        try:
            targets["s3 (moto_server)"] = stack.enter_context(moto(1, "tier"))
        except (OSError, ImportError) as exc:
            out["s3_skipped"] = repr(exc)
        for n, (label, url) in enumerate(targets.items()):
            d = work / f"tier-{n}"
            kv = KVStore.open(d / "kv", hot_bytes=16 << 20, cache_bytes=0,
                              tier_cache_bytes=4 << 30, background_compaction=False)
            n = (mb << 20) // VALUE
            rnd = os.urandom(VALUE * 1024)
            for i in range(0, n, 1000):
                for j in range(i, min(n, i + 1000)):
                    kv.put(b"t%09d" % j, rnd[(j % 1024) * VALUE:(j % 1024 + 1) * VALUE])
            kv.sync()
            with kv._space_cv:  # noqa: SLF001 - every hot segment spilled
                kv._space_cv.wait_for(lambda kv=kv: not kv._sealed, 600)  # noqa: SLF001
            # One key per part of every segment, in random order: each tiered read a miss.
            per_part: dict[tuple[int, int], bytes] = {}
            for i in range(n):
                k = b"t%09d" % i
                loc = kv._keydir.get(k)  # noqa: SLF001
                if loc is None:
                    continue
                seg = kv._open_segs[loc >> 80]  # noqa: SLF001
                off, _size = seg.block_span((loc >> 48) & 0xFFFFFFFF)
                per_part.setdefault((seg.id, off // PART_SIZE), k)
            keys = list(per_part.values())
            random.Random(42).shuffle(keys)
            row: dict[str, Any] = {"reads": len(keys)}
            row["local"] = read_keys(kv, keys)
            a = Archiver(open_target(url), sources_of({"kv": kv}), d / ".archive",
                         interval_s=0.2, local_bytes=0)
            t0 = time.perf_counter()
            a.start()
            assert a.wait_until(lambda a, kv=kv: a.tiered and all(
                s.tiered for s in kv._cold_order), 1800), a.status()  # noqa: SLF001
            row["archive_and_tier_s"] = time.perf_counter() - t0
            a.stop()
            row["tiered miss"] = read_keys(kv, keys)
            row["tiered hit"] = read_keys(kv, keys)
            cache = kv._tier.cache  # noqa: SLF001
            row["cache"] = {"misses": cache.misses, "hits": cache.hits, "bytes": cache.bytes}
            kv.close()
            out[label] = row
            print(f"  tiered reads ({label}): " + ", ".join(
                f"{ph} {row[ph]['reads_per_s']:.0f}/s" for ph in ("local", "tiered miss",
                                                                    "tiered hit")), flush=True)
    return out


# --------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["plot"]:
        from _plot_backup import main as plot

        return plot(argv[1:])
    ensure_native_build()
    ap = argparse.ArgumentParser()
    ap.add_argument("--gb", type=float, default=4.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--throttle-mb", default="260,300,350",
                    help="comma-separated max_mb_per_s values, one throttled contestant each")
    ap.add_argument("--ycsb-records", type=int, default=100_000)
    ap.add_argument("--ycsb-threads", type=int, default=8)
    ap.add_argument("--ycsb-seconds", type=float, default=60.0)
    ap.add_argument("--pitr-keys", type=int, default=1_000_000)
    ap.add_argument("--tier-mb", type=int, default=1200)
    ap.add_argument("--only", default="copies,load,server,check,ycsb,pitr,tier")
    ap.add_argument("--switch-interval", type=float, default=None,
                    help="sys.setswitchinterval for this process (Python's default: 0.005)")
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks" / "backup")
    args = ap.parse_args(argv)
    only = set(args.only.split(","))
    throttle = [float(v) for v in args.throttle_mb.split(",") if v]
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    check_real_disk(args.dir)
    run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    result: dict[str, Any] = {"run_id": run_id, "args": vars(args) | {"out": str(args.out)}}
    with bench_dir(args.dir, "tuffdb-bench-backup") as work:
        result["environment"] = environment(work, ["boto3", "moto"])
        result["fsync_start"] = fsync_probe(work)
        data = work / "data"
        if only & {"copies", "load", "check"}:
            t = timed(lambda: result.__setitem__("built", build(data, args.gb)))
            result["built"]["seconds"] = t
            print(f"built {dir_bytes(data) / 1e9:.2f} GB in {t:.0f} s", flush=True)
        if "copies" in only:
            result["copies"] = copies(data, work, args.repeats)
        if "load" in only:
            cp_mbps = (result["copies"]["mb_per_s"]["cp -r"]["median"] if "copies" in result
                       else float("nan"))
            result["under_load"] = {
                f"{v} B values": under_load(data, work, args.repeats, cp_mbps, v,
                                            throttle)
                for v in (VALUE, 100)}
        if "check" in only:
            result["restore_check"] = restore_check(data, work)
        shutil.rmtree(data, ignore_errors=True)
        sync()
        if "server" in only:
            result["server_under_load"] = server_under_load(
                work, args.gb, args.repeats, throttle, args.ycsb_records,
                args.ycsb_threads)
            shutil.rmtree(work / "server-data")
            sync()
        if "ycsb" in only:
            result["ycsb_a_archive_lag"] = ycsb_lag(work, args.ycsb_records, args.ycsb_threads,
                                                    args.ycsb_seconds)
        if "pitr" in only:
            result["pitr"] = pitr(work, args.pitr_keys)
        if "tier" in only:
            result["tiered_reads"] = tiering(work, args.tier_mb)
        result["fsync_end"] = fsync_probe(work)
        result["finished"] = utc_now()
        path = args.out / f"backup-{run_id}.json"
        write_json(path, result, [(work, "<dir>")])
        write_json(args.out / "latest.json", result, [(work, "<dir>")])
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
