"""YCSB A/B/C/D/F for the document face (issue 6; PROTOCOL.md section 3).

    bash bench/setup.sh                        # wrk, postgresql, redis-server, redis-tools (apt)
    python bench/ycsb.py                       # full: 100,000 records, 3 reps, 1/8/32 threads
    python bench/ycsb.py --records 2000 --duration 2 --warmup 0.5 --reps 1     # smoke

Stores, each started by the benchmark on a fresh directory on loopback, server pinned to
``--server-cpu`` and load generators to ``--client-cpu`` (``taskset``):

=================  ==========================================  ====================================
store              durable tier                                cache tier
=================  ==========================================  ====================================
tuffdb-http        ekoDB REST, ``durable_operations=true``     ``durable_operations=false``,
                   (fsync + group commit before each reply)    engine durability ``none``
tuffdb-embedded    ``Database.open(durability="always")``      ``durability="none"``
postgres           PostgreSQL 15, JSONB, ``synchronous_commit=on``   (not run: no cache-tier peer)
redis              hashes, ``appendfsync always``              hashes, ``appendonly no``
=================  ==========================================  ====================================

Load generators (C wherever one fits, so the generator is not the bottleneck; each is
closed loop, one request in flight per connection, one connection per YCSB thread):

* tuffdb-http: bench/ycsb_gen/ycsb_driver.c over HTTP/1.1, the same C driver as Redis's
  cells (one epoll thread for all connections), so a store and its peer are measured by
  one generator design that differs only in the protocol it speaks. ``--http-generator
  wrk`` drives the same ops with ``wrk -t N -c N`` and bench/ycsb_gen/ycsb.lua instead (the
  YCSB mixes, keys, ScrambledZipfian and SkewedLatest in LuaJIT, F's read-modify-write as a
  request/response state machine; one wrk thread per connection, because a wrk thread's
  Lua state cannot tell its connections apart). On a 2-vCPU guest a thread per connection
  costs the server a wake-up of a sleeping generator thread per reply; docs/benchmarks/
  ycsb.md has both generators' numbers.
* redis: bench/ycsb_gen/ycsb_driver.c over RESP, compiled here with ``cc -O2``: the same
  mixes, keys and distributions (HGETALL / HSET of one field / HSET of ten fields), one
  epoll thread. redis-benchmark cannot play them (one command per process, uniform keys,
  a request count instead of a window: no 95/5 mix at 8 clients, no mix at 1); it runs
  only as a second opinion on the ceiling (PING, ``-P 1``).
* postgres: pgbench custom scripts (_ycsb_pg.py; Zipfian skew 1.001, pgbench's minimum).
* tuffdb-embedded: Python threads in the benchmark's own process (labelled; compared only
  with itself).
Without a C compiler (or without wrk, for ``--http-generator wrk``), tuffdb-http and redis
fall back to Python driver processes (_ycsb_drivers.py); every cell records its
``generator``.

Per store and repetition: load (timed: ingest, by the fastest path: batch insert, pipeline,
COPY), the generator's ceiling on a trivial request (GET /api/health through the same Lua
script, PING, SELECT 1) at the largest thread count, then A, B, C, F, D, each at every
``--threads`` count (servers; ``--embedded-threads`` for the embedded store, whose Python
threads share one interpreter): ``--warmup`` seconds untimed, then a ``--duration`` second window
(ops completing in it count; ``--ops`` caps a cell's measured ops instead). D's inserts
are followed by an untimed gap fill so the next run starts from a dense table. Closed
loop: latency is not corrected for coordinated omission. Because GET /api/health is
served by tuffdb's own Python server, the HTTP generator's ceiling is also measured per
repetition on a null C HTTP server (bench/ycsb_gen/http_ok.c on the server core), and
every remote cell records the generator's and the server's CPU use (fraction of one
core): a generator near its core's capacity would be the bottleneck.

With ``--interleave`` the remote stores of a tier (tuffdb-http, redis) are loaded side by
side and each cell runs on one, then at once on the other (the order alternating; after
each cell the benchmark waits for that server to go idle and charges the CPU it used
meanwhile to the cell): on a host whose speed drifts over minutes, a ratio from cells
seconds apart rather than minutes.

Output: ``docs/benchmarks/ycsb/<tier>/<run-id>.json`` (``ycsb/all/`` when both tiers run)
and ``latest.json`` (every cell, the
environment, the commands; machine paths replaced by ``<repo>``, ``<dir>``, ``<out>``, ``~``);
``--out`` changes the directory. ``python bench/ycsb.py plot RESULT.json`` draws the tables.
"""

# Benchmark script, not library code.
# ruff: noqa: INP001, CPY001, S603, T201, PLR0913, PLR0915, PLR0917
from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _common import (
    REPO,
    run_tool,
    bench_dir,
    ensure_native_build,
    environment,
    fsync_probe,
    latency_summary,
    spread,
    utc_now,
    write_json,
)
from _ycsb_cgen import (
    DRIVER_LABEL,
    build_driver,
    have_wrk,
    http_null_ceiling,
    redis_benchmark_ping,
    run_driver,
    run_wrk,
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
        cmd = [
            *_pin(cpu),
            sys.executable,
            "-m",
            "tuffdb.server.ekodb",
            "--port",
            "0",
            "--data-dir",
            str(d),
            "--durability",
            "always" if durable else "none",
            "--http-setting",
            f"durable_operations={json.dumps(durable)}",
        ]
        self.proc = subprocess.Popen(
            cmd, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}
        )
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
        self.pid = self.proc.pid

    def _post(self, path: str, body: Any, token: str | None) -> bytes:
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", data=json.dumps(body).encode(), headers=headers
        )
        with urllib.request.urlopen(req, timeout=600) as resp:  # noqa: S310 - loopback
            return bytes(resp.read())

    def insert(self, numbers: list[int], seed: int) -> None:
        for i in range(0, len(numbers), 1000):
            rows = [{"data": {"id": key(n), **record(n, seed)}} for n in numbers[i : i + 1000]]
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
        self.pid = self.server.proc.pid  # sh and taskset exec redis-server: same pid

    def insert(self, numbers: list[int], seed: int) -> None:
        import redis  # noqa: PLC0415 - optional peer

        r = redis.Redis(port=self.port)
        for i in range(0, len(numbers), 1000):
            pipe = r.pipeline(transaction=False)
            for n in numbers[i : i + 1000]:
                pipe.hset(key(n), mapping=record(n, seed))
            pipe.execute()

    def spec(self) -> dict[str, Any]:
        return {"kind": "redis", "host": "127.0.0.1", "port": self.port}

    def stop(self) -> None:
        self.server.stop()


def _tree_cpu(pid: int | None) -> float:
    """CPU seconds of a process tree, reaped children included (psutil; 0 without it)."""
    if pid is None:
        return 0.0
    try:
        import psutil  # noqa: PLC0415 - optional
    except ImportError:
        return 0.0
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0.0
    total = 0.0
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            t = proc.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
    return total


def metered(server_pid: int | None, run: Any, *run_args: Any) -> dict[str, Any]:
    """``run(*run_args)`` with the CPU it cost: the generator (waited-for children of this process:
    wrk, the C driver, pgbench) and the server, each as a fraction of one core over the
    wall time. A generator near 1.0 on its pinned core would be the bottleneck."""
    r0, s0, t0 = (
        resource.getrusage(resource.RUSAGE_CHILDREN),
        _tree_cpu(server_pid),
        time.perf_counter(),
    )
    res = run(*run_args)
    r1, s1, wall = (
        resource.getrusage(resource.RUSAGE_CHILDREN),
        _tree_cpu(server_pid),
        time.perf_counter() - t0,
    )
    gen = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    res["cpu"] = {
        "wall_s": round(wall, 3),
        "generator_core_util": round(gen / wall, 3),
        "server_core_util": round((s1 - s0) / wall, 3) if server_pid else None,
    }
    return res


def summarize(res: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in res.items() if k not in ("latencies_ns", "inserted")}
    out["latency"] = latency_summary(res["latencies_ns"].tolist())
    return out


def gap_fill(store: Any, count: int, inserted: set[int], seed: int) -> int:
    """Insert (untimed) the record numbers between ``count`` and the highest inserted one
    that D's per-thread ranges left out; returns the new record count."""
    if not inserted:
        return count
    top = max(inserted)
    store.insert([n for n in range(count, top + 1) if n not in inserted], seed)
    return top + 1


def c_inserted(count: int, per_thread: list[int]) -> set[int]:
    """Record numbers D inserted: thread w takes count + w + i * threads, i < its count."""
    threads = len(per_thread)
    return {count + w + i * threads for w, k in enumerate(per_thread) for i in range(k)}


class _Embedded:
    def __init__(self, coll: Any) -> None:
        self.coll = coll

    def insert(self, numbers: list[int], seed: int) -> None:
        for i in range(0, len(numbers), 1000):
            self.coll.insert_many(
                [{"id": key(n), **record(n, seed)} for n in numbers[i : i + 1000]]
            )


def run_embedded_store(
    tier: str, args: argparse.Namespace, d: Path, seed: int, cell: dict[str, Any]
) -> None:
    from tuffdb.documents import Database  # noqa: PLC0415

    count = args.records
    db = Database.open(d / "db", durability="always" if tier == "durable" else "none")
    try:
        store = _Embedded(db.collection(TABLE))
        t = time.perf_counter()
        store.insert(list(range(count)), seed)
        cell["ingest_s"] = time.perf_counter() - t
        ops = args.ops or args.embedded_ops
        for wl in ORDER:
            for threads in args.embedded_threads:
                job = {
                    "workload": wl,
                    "ops": max(1, ops // threads),
                    "warmup": max(1, ops // threads // 10),
                    "recordcount": count,
                    "workers": threads,
                    "seed": seed,
                    "duration": args.duration,
                }
                res = run_embedded(store.coll, job)
                cell["workloads"][f"{wl}/{threads}"] = summarize(res)
                if wl == "D":
                    count = gap_fill(store, count, set(res["inserted"]), seed)
    finally:
        db.close()


def run_postgres(args: argparse.Namespace, d: Path, seed: int, cell: dict[str, Any]) -> None:
    count = args.records
    pg = Postgres(d, free_port(), args.server_cpu)
    try:
        cell["server_command"] = " ".join(pg.command)
        t = time.perf_counter()
        pg.load(count, seed)
        cell["ingest_s"] = time.perf_counter() - t
        top = max(args.threads)
        cell["generator_ceiling"] = summarize(
            metered(
                pg.proc.pid,
                pg.pgbench,
                d / "pgb",
                "trivial",
                top,
                args.warmup,
                args.ceiling_duration,
                0,
                count,
                args.client_cpu,
            )
        )
        for wl in ORDER:
            for threads in args.threads:
                res = metered(
                    pg.proc.pid,
                    pg.pgbench,
                    d / "pgb",
                    wl,
                    threads,
                    args.warmup,
                    args.duration,
                    args.ops,
                    count,
                    args.client_cpu,
                )
                cell["workloads"][f"{wl}/{threads}"] = summarize(res)
                if wl == "D":
                    count = int(pg.psql("SELECT max(n) + 1 FROM usertable").strip())
    finally:
        pg.stop()


def _remote(
    store: Any,
    name: str,
    wl: str,
    threads: int,
    count: int,
    seed: int,
    args: argparse.Namespace,
    duration: float,
) -> dict[str, Any]:
    """One cell of tuffdb-http or redis through its C generator (or the Python fallback)."""
    if args.c_generator[name] is None:
        ops = args.ops or args.fallback_ops
        job = {
            "ops": max(1, ops // threads),
            "warmup": max(1, ops // threads // 10),
            "cpu": args.client_cpu,
            "seed": seed,
            "workload": wl,
            "workers": threads,
            "recordcount": count,
        }
        res = run_processes(store.spec(), job)
        if wl == "D":
            res["inserted"] = inserted_keys(count, threads, job["warmup"] + job["ops"], seed)
        return res
    cap = args.ops if wl != "trivial" else 0
    window = (wl, threads, count, seed, args.warmup, duration, cap, args.client_cpu)
    if args.c_generator[name] == "wrk":
        res = run_wrk(store.port, store.token, *window, TABLE)
    elif name == "tuffdb-http":
        res = run_driver(args.driver_exe, "http", store.port, *window, token=store.token)
    else:
        res = run_driver(args.driver_exe, "resp", store.port, *window)
    res["inserted"] = c_inserted(count, res["inserted_per_thread"])
    return res


def run_remote_store(
    name: str, tier: str, args: argparse.Namespace, d: Path, seed: int, cell: dict[str, Any]
) -> None:
    for _ in remote_steps(name, tier, args, d, seed, cell):
        pass


def remote_steps(
    name: str, tier: str, args: argparse.Namespace, d: Path, seed: int, cell: dict[str, Any]
) -> Iterator[int | None]:
    """A remote store's run, one step at a time: yields its server's pid once it is
    loaded and its ceiling measured, then None after each workload cell (``--interleave``
    runs the stores' cells alternately); stops the server when closed or exhausted."""
    count = args.records
    top = max(args.threads)
    store = (
        TuffdbHttp(d, tier, args.server_cpu)
        if name == "tuffdb-http"
        else Redis(d, tier, args.server_cpu)
    )
    try:
        cell["server_command"] = store.command
        t = time.perf_counter()
        store.insert(list(range(count)), seed)
        cell["ingest_s"] = time.perf_counter() - t
        cell["generator_ceiling"] = summarize(
            metered(
                store.pid,
                _remote,
                store,
                name,
                "trivial",
                top,
                count,
                seed,
                args,
                args.ceiling_duration,
            )
        )
        if name == "redis":
            bench = redis_benchmark_ping(store.port, top, 100_000, args.client_cpu)
            if bench:
                cell["generator_ceiling_redis_benchmark"] = bench
        yield store.pid
        for wl in ORDER:
            for threads in args.threads:
                res = metered(
                    store.pid,
                    _remote,
                    store,
                    name,
                    wl,
                    threads,
                    count,
                    seed,
                    args,
                    args.duration,
                )
                cell["workloads"][f"{wl}/{threads}"] = summarize(res)
                if wl == "D":
                    count = gap_fill(store, count, set(res["inserted"]), seed)
                yield None
    finally:
        store.stop()


REMOTE = ("tuffdb-http", "redis")
IDLE_TICKS = 2  # a server using at most this many 10 ms ticks in 0.5 s counts as idle
IDLE_WAIT_MAX_S = 60


def _process_ticks(pid: int) -> int:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().split(") ")[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])


def wait_idle(pid: int) -> int:
    """Wait until server ``pid`` is idle (the background work a cell left, e.g. spills
    and a merge after a write-heavy cell, done); returns the CPU ticks it used meanwhile."""
    t0 = time.perf_counter()
    start = last = _process_ticks(pid)
    while time.perf_counter() - t0 < IDLE_WAIT_MAX_S:
        time.sleep(0.5)
        now = _process_ticks(pid)
        if now - last <= IDLE_TICKS:
            break
        last = now
    return _process_ticks(pid) - start


def run_interleaved(
    names: list[str], tier: str, args: argparse.Namespace, rep: int
) -> list[dict[str, Any]]:
    """``--interleave``: the remote stores loaded side by side (their servers share the
    server core, one busy at a time), then each workload cell run on every store back to
    back, the order alternating from cell to cell. The machine's speed drifts over
    minutes here; a store and its peer measured seconds apart give a ratio that drift
    cannot make.

    After each cell the benchmark waits for that server to go idle, so its leftover
    background work does not run inside the next store's cell, and charges the CPU it
    used meanwhile to the cell: ``ops_per_s`` is ops / (window + that CPU time), as if the
    work had displaced requests on the busy core (the uncharged rate is kept as
    ``ops_per_s_uncharged``)."""
    seed = args.seed + rep
    tick = os.sysconf("SC_CLK_TCK")
    cells = [{"store": n, "tier": tier, "rep": rep, "workloads": {}, "interleaved": names}
             for n in names]
    with contextlib.ExitStack() as stack:
        steps, pids = [], []
        for name, cell in zip(names, cells, strict=True):
            d = stack.enter_context(bench_dir(args.dir, f"ycsb-{name}"))
            it = remote_steps(name, tier, args, d, seed, cell)
            stack.callback(it.close)  # stops its server
            pid = next(it)
            assert pid is not None
            steps.append(it)
            pids.append(pid)
            wait_idle(pid)  # its load's spills and merges, before any cell
        for k in range(len(ORDER) * len(args.threads)):
            order = range(len(names)) if k % 2 == 0 else range(len(names) - 1, -1, -1)
            for i in order:
                next(steps[i])
                res = cells[i]["workloads"][next(reversed(cells[i]["workloads"]))]
                after = wait_idle(pids[i]) / tick
                res["after_cell_cpu_s"] = after
                res["ops_per_s_uncharged"] = res["ops_per_s"]
                if res.get("seconds"):
                    res["ops_per_s"] = res["ops"] / (res["seconds"] + after)
    return cells


def run_store(name: str, tier: str, args: argparse.Namespace, d: Path, rep: int) -> dict[str, Any]:
    seed = args.seed + rep
    cell: dict[str, Any] = {"store": name, "tier": tier, "rep": rep, "workloads": {}}
    if name == "tuffdb-embedded":
        run_embedded_store(tier, args, d, seed, cell)
    elif name == "postgres":
        run_postgres(args, d, seed, cell)
    else:
        run_remote_store(name, tier, args, d, seed, cell)
    return cell


def null_ceiling(args: argparse.Namespace, rep: int) -> dict[str, Any] | None:
    """The HTTP generator on GET /api/health against a null C server: its own ceiling."""
    if args.c_generator["tuffdb-http"] is None or "tuffdb-http" not in args.stores:
        return None
    null = metered(
        None,
        http_null_ceiling,
        Path(args.dir),
        args.c_generator["tuffdb-http"],
        max(args.threads),
        args.warmup,
        args.ceiling_duration,
        args.server_cpu,
        args.client_cpu,
    )
    print(f"rep {rep} HTTP generator on a null C server: {null['ops_per_s']:.0f} ops/s", flush=True)
    return {"rep": rep, **summarize(null)}


def setup_generators(args: argparse.Namespace) -> dict[str, str]:
    """Find wrk, build the C driver; says which generator drives each store
    (``args.c_generator``: wrk, c, or None for the Python fallback)."""
    wrk = have_wrk()
    args.driver_exe = build_driver(Path(args.dir)) if args.generators != "python" else None
    http = args.http_generator if args.driver_exe and (wrk or args.http_generator == "c") else None
    args.c_generator = {"tuffdb-http": http, "redis": "c" if args.driver_exe else None}
    missing = [s for s, g in args.c_generator.items() if g is None]
    if missing and args.generators == "c":
        raise SystemExit("--generators c: wrk or a C compiler is missing (bash bench/setup.sh)")
    if missing and args.generators == "auto":
        print(
            "warning: wrk or cc missing (bash bench/setup.sh): Python fallback generators for "
            f"{', '.join(missing)}, capped near 10,000 ops/s per process",
            file=sys.stderr,
        )
    labels = {"wrk": "wrk -t N -c N + bench/ycsb_gen/ycsb.lua", "c": DRIVER_LABEL}
    return {
        **{
            s: labels[g] if g else "Python processes (fallback)"
            for s, g in args.c_generator.items()
        },
        "postgres": "pgbench custom scripts",
        "tuffdb-embedded": "Python threads, in process",
    }


# python bench/ycsb.py TOOL ...: the tools that serve this benchmark (see the docstring).
TOOLS = {
    "plot": "_plot_ycsb",
    "cells": "_ycsb_cells",
    "profile": "_ycsb_profile",
    "stages": "_ycsb_stages",
    "round-cost": "_ycsb_round_cost",
}


def main(argv: list[str] | None = None) -> int:
    if run_tool("ycsb.py", sys.argv[1:] if argv is None else argv, TOOLS):
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--records", type=int, default=100_000)
    p.add_argument("--duration", type=float, default=5.0, help="measured window per cell, s")
    p.add_argument("--warmup", type=float, default=1.0, help="untimed warm-up per cell, s")
    p.add_argument(
        "--ceiling-duration",
        type=float,
        default=3.0,
        help="window of the generator-ceiling cells, s",
    )
    p.add_argument(
        "--ops",
        type=int,
        default=0,
        help="cap on measured ops per cell (0: time-bounded by --duration only)",
    )
    p.add_argument(
        "--embedded-ops",
        type=int,
        default=100_000,
        help="embedded op stream per cell (pre-generated) when --ops is 0",
    )
    p.add_argument(
        "--fallback-ops",
        type=int,
        default=30_000,
        help="ops per cell of the Python fallback generators when --ops is 0",
    )
    p.add_argument(
        "--generators",
        choices=("auto", "c", "python"),
        default="auto",
        help="auto: C generators when cc (and, for --http-generator wrk, wrk) exist, else Python",
    )
    p.add_argument(
        "--http-generator",
        choices=("wrk", "c"),
        default="c",
        help="tuffdb-http's generator: ycsb_driver.c (as Redis's), or wrk + ycsb.lua",
    )
    # 32 connections is PROTOCOL.md's optional count "for server faces to show group
    # commit", and the one the issue quotes PostgreSQL's figures at
    p.add_argument("--threads", default="1,8,32", help="connections per server cell")
    p.add_argument("--embedded-threads", default="1,8", help="threads per embedded cell")
    p.add_argument("--stores", default=",".join(STORES))
    p.add_argument("--tiers", default="durable,cache")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument(
        "--interleave",
        action="store_true",
        help="run tuffdb-http's and redis's cells alternately, servers side by side",
    )
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--server-cpu", type=int, default=0)
    p.add_argument("--client-cpu", type=int, default=1)
    p.add_argument("--dir", default=str(REPO / "bench" / "results" / "tmp"))
    p.add_argument("--out", help="default: docs/benchmarks/ycsb/<tier> (ycsb/all for both tiers)")
    args = p.parse_args(argv)
    if args.out is None:
        tiers = args.tiers.split(",")
        args.out = str(REPO / "docs" / "benchmarks" / "ycsb" / (tiers[0] if len(tiers) == 1 else "all"))
    ensure_native_build()
    args.threads = [int(t) for t in args.threads.split(",")]
    args.embedded_threads = [int(t) for t in args.embedded_threads.split(",")]
    if (os.cpu_count() or 1) < 2:
        args.server_cpu = args.client_cpu = None
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    generators = setup_generators(args)
    env = environment(args.dir, ["redis", "hnswlib"])
    env["mode"] = "servers pinned to --server-cpu, generators to --client-cpu"
    env["generators"] = generators
    env["tool_versions"] = tool_versions()
    env["fsync_start"] = fsync_probe(args.dir)
    cells = []
    t_run = time.perf_counter()
    null_ceilings = []
    for rep in range(args.reps):
        null = null_ceiling(args, rep)
        if null:
            null_ceilings.append(null)
        for tier in args.tiers.split(","):
            names = [n for n in args.stores.split(",") if n != "postgres" or tier == "durable"]
            paired = [n for n in names if n in REMOTE] if args.interleave else []
            if len(paired) > 1:
                done = run_interleaved(paired, tier, args, rep)
            else:
                done = []
            for name in names:
                if name not in paired:
                    with bench_dir(args.dir, f"ycsb-{name}") as d:
                        done.append(run_store(name, tier, args, d, rep))
            for cell in done:
                cells.append(cell)
                rates = " ".join(
                    f"{k} {v['ops_per_s']:.0f}" + (f" ({v['errors']} err)" if v["errors"] else "")
                    for k, v in cell["workloads"].items()
                )
                ceil = cell.get("generator_ceiling", {}).get("ops_per_s")
                print(
                    f"rep {rep} {tier:7} {cell['store']:15} ingest {cell['ingest_s']:.1f}s"
                    + (f" ceiling {ceil:.0f}" if ceil else "")
                    + f" | {rates}"
                    + f"  [{time.perf_counter() - t_run:.0f}s]",
                    flush=True,
                )
    env["fsync_end"] = fsync_probe(args.dir)
    env["run_seconds"] = time.perf_counter() - t_run
    summary: dict[str, Any] = {}
    for c in cells:
        for wl, res in c["workloads"].items():
            summary.setdefault(f"{c['tier']}/{c['store']}/{wl}", []).append(res["ops_per_s"])
    result = {
        "run_id": utc_now().replace(":", "").replace("-", ""),
        "environment": env,
        "workload": describe(),
        "records": args.records,
        "duration_s": args.duration,
        "warmup_s": args.warmup,
        "ops_cap": args.ops,
        "threads": args.threads,
        "embedded_threads": args.embedded_threads,
        "summary_ops_per_s": {k: spread(v) for k, v in summary.items()},
        "wrk_null_server_ceiling": null_ceilings,
        "cells": cells,
    }
    out = Path(args.out)
    paths = [(args.dir, "<dir>"), (args.out, "<out>")]
    write_json(out / f"{result['run_id']}.json", result, paths)
    write_json(out / "latest.json", result, paths)
    print(f"wrote {out / 'latest.json'}")
    return 0


def tool_versions() -> dict[str, str]:
    def first_line(cmd: list[str]) -> str:
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=False)
        except OSError:
            return "missing"
        return (
            (done.stdout or done.stderr).strip().splitlines()[0]
            if (done.stdout or done.stderr).strip()
            else "?"
        )

    return {
        "wrk": first_line(["wrk", "-v"]),
        "pgbench": first_line(["pgbench", "--version"]),
        "redis-server": first_line(["redis-server", "--version"]),
        "redis-benchmark": first_line(["redis-benchmark", "--version"]),
        "cc": first_line(["cc", "--version"]),
    }


if __name__ == "__main__":
    sys.exit(main())
