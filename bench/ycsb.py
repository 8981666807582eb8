"""YCSB A/B/C/D/F for the document face (issue 6; PROTOCOL.md section 3).

    python bench/ycsb.py                       # full: 100,000 records, 100,000 ops, 3 reps (the lead runs it)
    python bench/ycsb.py --records 1000 --ops 2000 --threads 1,2 --reps 1     # smoke (tens of seconds)

Stores, each started by the benchmark on a fresh directory on loopback, server pinned to
``--server-cpu`` and load generators to ``--client-cpu`` (``taskset``):

=================  ==========================================  ====================================
store              durable tier                                cache tier
=================  ==========================================  ====================================
tuffdb-http        ekoDB REST, ``durable_operations=true``     ``durable_operations=false``,
                   (fsync + group commit before each reply)    engine durability ``none``
tuffdb-embedded    ``Database.open(durability="always")``      ``durability="none"``
postgres           PostgreSQL 15, ``synchronous_commit=on``    (not run: no cache-tier peer)
redis              hashes, ``appendfsync always``              hashes, ``appendonly no``
=================  ==========================================  ====================================

Per store and repetition: load (timed: ingest), then A, B, C, F, D, each at every
``--threads`` count (D's inserts are followed by an untimed gap fill so the next run
starts dense). Load generators: one Python process per connection for tuffdb-http and
redis (_ycsb_drivers.py; wrk is not installed here, redis-benchmark cannot play YCSB
mixes), pgbench for PostgreSQL (_ycsb_pg.py), threads in-process for embedded. Each
generator's ceiling on a trivial request (GET /api/health, PING, SELECT 1) is measured
first at the largest thread count. Closed loop: latency is not corrected for
coordinated omission.

Output: ``docs/benchmarks/ycsb-raw/<run-id>.json`` and ``latest.json`` (every cell, the
environment, the commands); ``--out`` changes the directory.
"""

# Benchmark script, not library code.
# ruff: noqa: INP001, CPY001, S603, T201, C901, PLR0912, PLR0915, E501
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from _common import (
    REPO,
    bench_dir,
    environment,
    fsync_probe,
    latency_summary,
    spread,
    utc_now,
    write_json,
)
from _ycsb_drivers import TABLE, run_embedded, run_processes
from _ycsb_pg import Postgres
from _ycsb_work import ORDER, describe, inserted_keys, key, record

sys.path.insert(0, str(REPO / "src"))
from tuffdb.server.resp._process import free_port, start_redis

STORES = ("tuffdb-http", "tuffdb-embedded", "postgres", "redis")


def _pin(cpu: int | None) -> list[str]:
    return ["taskset", "-c", str(cpu)] if cpu is not None and shutil.which("taskset") else []


class TuffdbHttp:
    def __init__(self, d: Path, tier: str, cpu: int | None) -> None:
        durable = tier == "durable"
        cmd = [*_pin(cpu), sys.executable, "-m", "tuffdb.server.ekodb_http", "--port", "0",
               "--data-dir", str(d), "--durability", "always" if durable else "none",
               "--http-setting", f"durable_operations={json.dumps(durable)}"]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            if line.startswith("ekodb_http ready on "):
                self.port = int(line.rsplit(":", 1)[1])
                break
        else:
            raise RuntimeError("tuffdb http server exited before it was ready")
        api_key = (d / "ekodb_admin_key").read_text().strip()
        self.token = json.loads(self._post("/api/auth/token", {"api_key": api_key}, None))["token"]
        self.command = " ".join(cmd)

    def _post(self, path: str, body: Any, token: str | None) -> bytes:
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}",
                                     data=json.dumps(body).encode(), headers=headers)
        with urllib.request.urlopen(req, timeout=600) as resp:  # noqa: S310 - loopback
            return bytes(resp.read())

    def insert(self, numbers: list[int], seed: int) -> None:
        for i in range(0, len(numbers), 1000):
            rows = [{"data": {"id": key(n), **record(n, seed)}} for n in numbers[i:i + 1000]]
            self._post(f"/api/batch/insert/{TABLE}", {"inserts": rows}, self.token)

    def spec(self) -> dict[str, Any]:
        return {"kind": "http", "host": "127.0.0.1", "port": self.port, "token": self.token}

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)


class Redis:
    def __init__(self, d: Path, tier: str, cpu: int | None) -> None:
        aof = ["--appendonly", "yes", "--appendfsync", "always"] if tier == "durable" else []
        self.server = start_redis("--dir", str(d), *aof, wrap=_pin(cpu))
        self.port = self.server.port
        self.command = " ".join(self.server.cmd)

    def insert(self, numbers: list[int], seed: int) -> None:
        import redis  # noqa: PLC0415 - optional peer

        r = redis.Redis(port=self.port)
        for i in range(0, len(numbers), 1000):
            pipe = r.pipeline(transaction=False)
            for n in numbers[i:i + 1000]:
                pipe.hset(key(n), mapping=record(n, seed))
            pipe.execute()

    def spec(self) -> dict[str, Any]:
        return {"kind": "redis", "host": "127.0.0.1", "port": self.port}

    def stop(self) -> None:
        self.server.stop()


def summarize(res: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in res.items() if k != "latencies_ns"}
    out["latency"] = latency_summary(res["latencies_ns"].tolist())
    return out


def run_store(name: str, tier: str, args: argparse.Namespace, d: Path, rep: int) -> dict[str, Any]:
    seed = args.seed + rep
    cell: dict[str, Any] = {"store": name, "tier": tier, "rep": rep, "workloads": {}}
    top = max(args.threads)
    count = args.records
    warm = int(args.ops * args.warmup)
    if name == "tuffdb-embedded":
        from tuffdb.documents import Database  # noqa: PLC0415

        db = Database.open(d / "db", durability="always" if tier == "durable" else "none")
        coll = db.collection(TABLE)
        t = time.perf_counter()
        for i in range(0, count, 1000):
            coll.insert_many([{"id": key(n), **record(n, seed)} for n in range(i, min(i + 1000, count))])
        cell["ingest_s"] = time.perf_counter() - t
        for wl in ORDER:
            for threads in args.threads:
                job = {"workload": wl, "ops": args.ops, "warmup": warm, "recordcount": count,
                       "workers": threads, "seed": seed}
                cell["workloads"][f"{wl}/{threads}"] = summarize(run_embedded(coll, job))
                if wl == "D":
                    new = inserted_keys(count, threads, warm + args.ops, seed)
                    have = set(new)
                    coll.insert_many([{"id": key(n), **record(n, seed)}
                                      for n in range(count, max(new, default=count - 1) + 1)
                                      if n not in have])
                    count = max(new, default=count - 1) + 1
        db.close()
        return cell
    if name == "postgres":
        pg = Postgres(d, free_port(), args.server_cpu)
        try:
            t = time.perf_counter()
            pg.load(count, seed)
            cell["ingest_s"] = time.perf_counter() - t
            ceiling = pg.pgbench(d / "pgb", "trivial", top, args.ops, warm, count, args.client_cpu)
            cell["generator_ceiling"] = summarize(ceiling)
            for wl in ORDER:
                for threads in args.threads:
                    res = pg.pgbench(d / "pgb", wl, threads, args.ops, warm, count, args.client_cpu)
                    cell["workloads"][f"{wl}/{threads}"] = summarize(res)
                    if wl == "D":
                        count = int(pg.psql("SELECT max(n) + 1 FROM usertable").strip())
        finally:
            pg.stop()
        return cell
    store = TuffdbHttp(d, tier, args.server_cpu) if name == "tuffdb-http" else Redis(d, tier, args.server_cpu)
    try:
        cell["server_command"] = store.command
        t = time.perf_counter()
        store.insert(list(range(count)), seed)
        cell["ingest_s"] = time.perf_counter() - t
        base = {"ops": args.ops // top, "warmup": warm // top, "cpu": args.client_cpu, "seed": seed}
        cell["generator_ceiling"] = summarize(run_processes(
            store.spec(), {**base, "workload": "trivial", "workers": top, "recordcount": count}))
        for wl in ORDER:
            for threads in args.threads:
                job = {**base, "ops": args.ops // threads, "warmup": warm // threads,
                       "workload": wl, "workers": threads, "recordcount": count}
                cell["workloads"][f"{wl}/{threads}"] = summarize(run_processes(store.spec(), job))
                if wl == "D":
                    new = inserted_keys(count, threads, job["warmup"] + job["ops"], seed)
                    have = set(new)
                    store.insert([n for n in range(count, max(new, default=count - 1) + 1)
                                  if n not in have], seed)
                    count = max(new, default=count - 1) + 1
    finally:
        store.stop()
    return cell


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--records", type=int, default=100_000)
    p.add_argument("--ops", type=int, default=100_000, help="measured ops per workload cell")
    p.add_argument("--warmup", type=float, default=0.1, help="untimed ops, as a fraction of --ops")
    p.add_argument("--threads", default="1,8")
    p.add_argument("--stores", default=",".join(STORES))
    p.add_argument("--tiers", default="durable,cache")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--server-cpu", type=int, default=0)
    p.add_argument("--client-cpu", type=int, default=1)
    p.add_argument("--dir", default=str(REPO / "bench" / "results" / "tmp"))
    p.add_argument("--out", default=str(REPO / "docs" / "benchmarks" / "ycsb-raw"))
    args = p.parse_args(argv)
    args.threads = [int(t) for t in args.threads.split(",")]
    if (os.cpu_count() or 1) < 2:
        args.server_cpu = args.client_cpu = None
    env = environment(args.dir, ["redis", "hnswlib"])
    env["mode"] = "servers pinned to --server-cpu, generators to --client-cpu"
    env["fsync_start"] = fsync_probe(args.dir)
    cells = []
    for rep in range(args.reps):
        for tier in args.tiers.split(","):
            for name in args.stores.split(","):
                if name == "postgres" and tier != "durable":
                    continue
                with bench_dir(args.dir, f"ycsb-{name}") as d:
                    cell = run_store(name, tier, args, d, rep)
                cells.append(cell)
                rates = " ".join(f"{k} {v['ops_per_s']:.0f}" for k, v in cell["workloads"].items())
                print(f"rep {rep} {tier:7} {name:15} ingest {cell['ingest_s']:.1f}s | {rates}",
                      flush=True)
    env["fsync_end"] = fsync_probe(args.dir)
    summary: dict[str, Any] = {}
    for c in cells:
        for wl, res in c["workloads"].items():
            summary.setdefault(f"{c['tier']}/{c['store']}/{wl}", []).append(res["ops_per_s"])
    result = {"run_id": utc_now().replace(":", "").replace("-", ""), "environment": env,
              "workload": describe(), "records": args.records, "ops": args.ops,
              "summary_ops_per_s": {k: spread(v) for k, v in summary.items()}, "cells": cells}
    out = Path(args.out)
    write_json(out / f"{result['run_id']}.json", result)
    write_json(out / "latest.json", result)
    print(f"wrote {out / 'latest.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
