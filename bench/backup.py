"""Backup, restore and archiving rates against a plain copy (not part of the test run).

    python bench/backup.py [--mb 1024] [--repeats 3] [--out docs/benchmarks/backup/]

Measures, in one run on one host (ratios from one run; medians of ``--repeats``):

1. ``cp -r`` and ``tar cf`` of a KV data directory of ``--mb`` MB (the physical anchor),
   then ``tuffdb backup`` of the same directory (copy mode, offline) -> MB/s and ratio;
2. the same backup while a writer thread loads the store (``durability="interval"``):
   the backup's MB/s, and the writer's puts/s during the backup vs. without;
3. ``tuffdb restore`` of that backup -> MB/s;
4. continuous archiving to a directory under a durable load (``durability="always"``,
   4 writer threads): the archive lag sampled every 50 ms -> p50/p99/max;
5. point-in-time restore from that archive of ``--keys`` keys and as many events.

Raw results go to ``<out>/backup-<UTC time>.json``. Page cache is warm for every
contestant alike (this host cannot drop caches for one process); the ratio is the result.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from tuffdb import KVStore
from tuffdb.backup.archive import Archiver
from tuffdb.backup.datadir import Keys, sources_of
from tuffdb.storage.objstore import open_target
from tuffdb.backup.restore import restore
from tuffdb.backup.take import take_backup
from tuffdb.events.api import Event
from tuffdb.events.store import EventStore

VALUE = 1000


def dir_bytes(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def build(d: Path, mb: int) -> None:
    with KVStore.open(d / "kv", durability="none", hot_bytes=64 << 20) as kv:
        n = (mb << 20) // VALUE
        rnd = os.urandom(VALUE * 1024)
        for i in range(0, n, 1024):
            kv.put_many((f"key{j:012d}".encode(), rnd[(j % 1024) * VALUE:(j % 1024 + 1) * VALUE])
                        for j in range(i, min(n, i + 1024)))


def timed(fn) -> float:  # noqa: ANN001
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def backup_once(data: Path, dest: Path) -> None:
    kv = KVStore.open(data / "kv")
    try:
        take_backup(sources_of({"kv": kv}), open_target(dest), data / ".backup-staging")
    finally:
        kv.close()


def load(kv: KVStore, stop: threading.Event, counter: list[int]) -> None:
    v = os.urandom(VALUE)
    i = 0
    while not stop.is_set():
        kv.put(f"load{i % 200000:08d}".encode(), v)
        i += 1
        counter[0] = i


def under_load(data: Path, work: Path, seconds: float) -> dict[str, float]:
    kv = KVStore.open(data / "kv", durability="interval")
    try:
        out = {}
        for phase in ("without", "with"):
            stop, counter = threading.Event(), [0]
            t = threading.Thread(target=load, args=(kv, stop, counter))
            t.start()
            t0 = time.perf_counter()
            if phase == "with":
                dest = work / "bk-load"
                shutil.rmtree(dest, ignore_errors=True)
                take_backup(sources_of({"kv": kv}), open_target(dest), data / ".backup-staging")
                out["backup_s"] = time.perf_counter() - t0
                out["backup_bytes"] = dir_bytes(dest)
            else:
                stop.wait(seconds)
            elapsed = time.perf_counter() - t0
            stop.set()
            t.join()
            out[f"puts_per_s_{phase}"] = counter[0] / elapsed
        return out
    finally:
        kv.close()


def archive_lag(work: Path, keys: int, seconds: float) -> dict[str, object]:
    data = work / "arch-data"
    kv = KVStore.open(data / "kv", durability="always")
    es = EventStore.open(data / "events")
    a = Archiver(open_target(work / "archive"), sources_of({"kv": kv, "events": es}),
                 data / ".archive", interval_s=1.0)
    a.start()
    assert a.wait_until(lambda a: a.bases_taken >= 1, 120)
    samples: list[float] = []
    stop = threading.Event()

    def writer(w: int) -> None:
        i = w
        v = os.urandom(100)
        while not stop.is_set() and i < keys:
            kv.put_many([(f"k{j:09d}".encode(), v) for j in range(i, min(keys, i + 100 * 4), 4)])
            es.append([Event("E", v, [f"t{i % 97}"]) for _ in range(100)])
            i += 400

    threads = [threading.Thread(target=writer, args=(w * 100,)) for w in range(4)]
    for t in threads:
        t.start()
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds and any(t.is_alive() for t in threads):
        samples.append(a.lag_s)
        stop.wait(0.05)
    stop.set()
    for t in threads:
        t.join()
    mid = time.time_ns()
    assert a.wait_until(lambda a: a.lag_s == 0, 120)
    a.stop()
    n_events = es.head() or 0
    kv.close()
    es.close()
    samples.sort()
    dest = work / "pitr"
    t_restore = timed(lambda: restore(str(work / "archive"), dest, keys=Keys(), to_time_ns=mid))
    return {"lag_p50_s": samples[len(samples) // 2], "lag_p99_s": samples[int(len(samples) * .99)],
            "lag_max_s": samples[-1], "lag_samples": len(samples), "events": n_events,
            "keys_target": keys, "pitr_restore_s": t_restore}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--load-seconds", type=float, default=5.0)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--archive-seconds", type=float, default=60.0)
    ap.add_argument("--out", type=Path, default=Path("docs/benchmarks/backup"))
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tuffdb-bench-backup-", dir="/var/tmp"))
    try:
        data = work / "data"
        build(data, args.mb)
        size = dir_bytes(data)
        runs: dict[str, list[float]] = {"cp": [], "tar": [], "backup": [], "restore": []}
        for _ in range(args.repeats):
            for name, fn in (
                ("cp", lambda: subprocess.run(["cp", "-r", str(data), str(work / "cp")], check=True)),
                ("tar", lambda: subprocess.run(["tar", "cf", str(work / "t.tar"), "-C", str(work), "data"], check=True)),
                ("backup", lambda: backup_once(data, work / "bk")),
            ):
                runs[name].append(timed(fn))
                shutil.rmtree(work / "cp", ignore_errors=True)
                (work / "t.tar").unlink(missing_ok=True)
            runs["restore"].append(timed(lambda: restore(str(work / "bk"), work / "rs", keys=Keys())))
            shutil.rmtree(work / "rs")
            shutil.rmtree(work / "bk")
        shutil.rmtree(work / "bk", ignore_errors=True)
        med = {k: statistics.median(v) for k, v in runs.items()}
        mbps = {k: size / 1e6 / v for k, v in med.items()}
        loaded = under_load(data, work, args.load_seconds)
        lag = archive_lag(work, args.keys, args.archive_seconds)
        result = {
            "host": os.uname().nodename, "cpus": os.cpu_count(), "python": sys.version.split()[0],
            "data_bytes": size, "repeats": args.repeats, "seconds": runs,
            "mb_per_s_median": mbps,
            "backup_vs_cp": mbps["backup"] / mbps["cp"], "backup_vs_tar": mbps["backup"] / mbps["tar"],
            "restore_vs_cp": mbps["restore"] / mbps["cp"],
            "under_load": {**loaded, "backup_mb_per_s": loaded["backup_bytes"] / 1e6 / loaded["backup_s"],
                           "backup_vs_cp": loaded["backup_bytes"] / 1e6 / loaded["backup_s"] / mbps["cp"],
                           "puts_ratio": loaded["puts_per_s_with"] / loaded["puts_per_s_without"]},
            "archive": lag,
        }
        args.out.mkdir(parents=True, exist_ok=True)
        path = args.out / f"backup-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
        path.write_text(json.dumps(result, indent=1) + "\n")
        print(json.dumps(result, indent=1))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
