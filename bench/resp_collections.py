"""Big collections on tuffdb's RESP face vs redis-server: 10^3 vs 10^6 elements (issue 31).

    python bench/resp.py --suite collections                      # sizes 1e3,1e6, 3 reps
    python bench/resp.py --suite collections --sizes 1000,20000 --ops 2000 --reps 1  # smoke

Per repetition, per size N, per server (tuffdb ``everysec`` / Redis ``appendonly yes
appendfsync everysec``; cells interleaved, fresh data directory each, server on CPU 0 and
the load generator on CPU 1):

1. fill four collections of N elements each, one element per command, through redis-py
   pipelines of 1000: ``biglist`` (RPUSH), ``bigzset`` (ZADD, member ``element:%012d`` at
   score i), ``bigset`` (SADD, same members), ``bigstream`` (XADD, ids ``i+1-0``); the
   server's RSS is sampled before and after each fill (memory per element = RSS growth /
   N, reported at the largest N; it includes what the allocator keeps after the fill's
   transient objects, and for tuffdb the growth of its block cache and hot tier, which
   INFO reports and the table also shows subtracted);
2. one warm-up read of each (tuffdb builds its ordered key view on the first range read);
3. ``redis-benchmark -c 50 -P <pipeline> -n <ops> -r N`` runs each measured command, each
   after the server's CPU use settled, low for 2.5 s in a row (the spills and merges the
   previous command's writes left would otherwise be charged to the next one; how long
   each settle took is in the raw results, ``settle_seconds_before``):
   ``LPUSH biglist x``, ``ZADD bigzset __rand_int__ element:__rand_int__`` (updates of
   existing members), ``XADD bigstream * f v``, ``SISMEMBER bigset element:__rand_int__``,
   ``ZRANGEBYSCORE bigzset __rand_int__ +inf LIMIT 0 10``.

Per-operation cost is 1/throughput of a saturated server; the target is cost at 10^6 within
1.5x of the cost at 10^3, per command and server. LPUSH and XADD grow their collection by
``ops`` during the measurement (the 10^3 cell ends near ``ops`` elements, still far below
10^6). Output in ``docs/benchmarks/resp-collections/``: ``<run>.json`` + ``latest.json``,
and ``results.md`` and ``resp-collections.png`` drawn from ``latest.json``.
"""

# Benchmark script, not library code.
# ruff: noqa: INP001, CPY001, S603, S607, T201
from __future__ import annotations

import argparse
import csv
import io
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import redis
from _common import (
    REPO,
    bench_dir,
    check_real_disk,
    ensure_native_build,
    environment,
    fsync_probe,
    spread,
    utc_now,
    write_json,
)
from resp import pin

from tuffdb.kv.background import IDLE_TICK_S
from tuffdb.server.resp._process import ServerProcess, start_redis, start_tuffdb

OUT_DIR = REPO / "docs" / "benchmarks" / "resp-collections"
FILL_BATCH = 1000
TARGET_COST_RATIO = 1.5
COMMANDS = {  # name -> redis-benchmark command
    "LPUSH": ["lpush", "biglist", "x"],
    "ZADD": ["zadd", "bigzset", "__rand_int__", "element:__rand_int__"],
    "XADD": ["xadd", "bigstream", "*", "f", "v"],
    "SISMEMBER": ["sismember", "bigset", "element:__rand_int__"],
    "ZRANGEBYSCORE": ["zrangebyscore", "bigzset", "__rand_int__", "+inf", "LIMIT", "0", "10"],
}
FILLS = ("list", "zset", "set", "stream")
SAMPLE_S = 0.5
QUIET_SAMPLES = 2 + int(3 * IDLE_TICK_S / SAMPLE_S)  # past the ticks a merge waits for


def rss(proc: ServerProcess) -> int:
    return int(psutil.Process(proc.proc.pid).memory_info().rss)


def engine_buffers(r: redis.Redis) -> int:
    """tuffdb's block cache + hot tier bytes (INFO persistence); 0 for Redis."""
    info = r.info("persistence")
    return int(info.get("tuffdb_cache_bytes", 0)) + int(info.get("tuffdb_hot_bytes", 0))


def fill(r: redis.Redis, kind: str, n: int) -> None:
    """N elements, one per command (as applications write), pipelines of FILL_BATCH."""
    for start in range(0, n, FILL_BATCH):
        pipe = r.pipeline(transaction=False)
        for i in range(start, min(start + FILL_BATCH, n)):
            member = b"element:%012d" % i
            if kind == "list":
                pipe.rpush("biglist", b"v%d" % i)
            elif kind == "zset":
                pipe.zadd("bigzset", {member: i})
            elif kind == "set":
                pipe.sadd("bigset", member)
            else:
                pipe.xadd("bigstream", {"f": "v"}, id=f"{i + 1}-0")
        pipe.execute()


def settle(proc: ServerProcess, limit_s: float = 120.0) -> None:
    """Wait until the server's CPU use stays low (background spills and merges done), bounded.

    Low for ``QUIET_SAMPLES`` samples in a row, not one: the engine starts a merge only
    after a whole background tick (``IDLE_TICK_S``) without requests, so the first quiet
    sample after a load comes before its merges; a settle that stopped there left them to
    run in the next command's window (seen: 2 s of merging after LPUSH's settle)."""
    p = psutil.Process(proc.proc.pid)
    deadline = time.monotonic() + limit_s
    p.cpu_percent(None)
    quiet = 0
    while time.monotonic() < deadline and quiet < QUIET_SAMPLES:
        time.sleep(SAMPLE_S)  # a sampling interval for cpu_percent, not synchronisation
        quiet = quiet + 1 if p.cpu_percent(None) < 5.0 else 0  # noqa: PLR2004


def benchmark(port: int, name: str, n: int, ops: int, pipeline: int,
              clients: int) -> dict[str, Any]:
    cmd = [*pin(1), "redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-n", str(ops),
           "-c", str(clients), "-P", str(pipeline), "-r", str(n), "--csv", "-q",
           *COMMANDS[name]]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=3600)
    row = next(iter(csv.DictReader(io.StringIO(out.stdout))))
    return {"command": cmd, **{k: float(v) for k, v in row.items() if k != "test"}}


def run_cell(kind: str, n: int, args: argparse.Namespace, parent: str) -> dict[str, Any]:
    with bench_dir(parent, f"coll-{kind}") as d:
        if kind == "tuffdb":
            proc = start_tuffdb(d, appendfsync="everysec", wrap=pin(0))
        else:
            proc = start_redis("--dir", str(d), "--appendonly", "yes", "--appendfsync",
                               "everysec", wrap=pin(0))
        try:
            r = redis.Redis(port=proc.port)
            memory: dict[str, int] = {}
            caches: dict[str, int] = {}
            fill_s: dict[str, float] = {}
            for what in FILLS:
                settle(proc)
                before, cache_before = rss(proc), engine_buffers(r)
                t0 = time.perf_counter()
                fill(r, what, n)
                fill_s[what] = time.perf_counter() - t0
                settle(proc)
                memory[what] = rss(proc) - before
                caches[what] = engine_buffers(r) - cache_before
            r.zrangebyscore("bigzset", 0, "+inf", start=0, num=10)  # warm-up reads
            r.sismember("bigset", "element:000000000000")
            results = {}
            settled: dict[str, float] = {}
            for name in COMMANDS:
                # The background work (spills, merges) a command's writes left is not the
                # next command's cost at this size: let it finish, and record how long it
                # ran (the seconds before each command; Redis has none).
                t0 = time.perf_counter()
                settle(proc)
                settled[name] = round(time.perf_counter() - t0, 2)
                results[name] = benchmark(proc.port, name, n, args.ops, args.pipeline,
                                          args.clients)
            sizes = {"list": r.llen("biglist"), "zset": r.zcard("bigzset"),
                     "set": r.scard("bigset"), "stream": r.xlen("bigstream")}
        finally:
            proc.stop()
    memory["all"] = sum(memory.values()) // len(FILLS)  # per element of the four fills
    caches["all"] = sum(caches.values()) // len(FILLS)
    return {"server": kind, "n": n, "fill_seconds": fill_s, "rss_growth_bytes": memory,
            "bytes_per_element": {k: round(v / n, 1) for k, v in memory.items()},
            # tuffdb: what of the growth is its bounded buffers (block cache + hot tier)
            "buffer_growth_bytes": caches,
            "bytes_per_element_without_buffers": {
                k: round((memory[k] - caches[k]) / n, 1) for k in memory},
            "sizes_after": sizes, "settle_seconds_before": settled, "tests": results}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench/resp.py --suite collections")
    ap.add_argument("--sizes", default="1000,1000000")
    ap.add_argument("--ops", type=int, default=100_000)
    ap.add_argument("--pipeline", type=int, default=16)
    ap.add_argument("-c", "--clients", type=int, default=50)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dir", default=str(REPO / "bench" / "results" / "tmp"))
    ap.add_argument("--out", default=str(OUT_DIR))
    ap.add_argument("--plot-only", action="store_true")
    args = ap.parse_args(argv)
    out = Path(args.out)
    if args.plot_only:
        print(render(json.loads((out / "latest.json").read_text()), out))
        return 0
    ensure_native_build()
    if shutil.which("redis-benchmark") is None or shutil.which("redis-server") is None:
        print("redis-benchmark and redis-server are needed", file=sys.stderr)
        return 2
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    check_real_disk(args.dir)
    sizes = [int(x) for x in args.sizes.split(",")]
    run_id = utc_now().replace(":", "").replace("-", "")
    result: dict[str, Any] = {
        "run_id": run_id, "suite": "collections",
        "environment": environment(args.dir, ["redis", "psutil"]),
        "redis_server_version": subprocess.run(["redis-server", "--version"], check=True,
                                               capture_output=True, text=True).stdout.strip(),
        "settings": {"sizes": sizes, "ops": args.ops, "pipeline": args.pipeline,
                     "clients": args.clients, "reps": args.reps, "appendfsync": "everysec",
                     "server_cpu": pin(0), "client_cpu": pin(1)},
        "fsync_probe_start": fsync_probe(args.dir),
        "cells": [],
    }
    for rep in range(args.reps):
        for n in sizes:
            for kind in ("tuffdb", "redis"):
                cell = run_cell(kind, n, args, args.dir)
                cell["rep"] = rep
                result["cells"].append(cell)
                rates = {k: round(v["rps"]) for k, v in cell["tests"].items()}
                print(f"rep {rep} n={n:<8} {kind:6} {rates} B/elem "
                      f"{cell['bytes_per_element']}", flush=True)
    result["fsync_probe_end"] = fsync_probe(args.dir)
    result["summary"] = summarize(result)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / f"{run_id}.json", result)
    write_json(out / "latest.json", result)
    print(render(result, out))
    return 0


def summarize(result: dict[str, Any]) -> dict[str, Any]:
    cells = result["cells"]
    sizes = result["settings"]["sizes"]
    small, big = min(sizes), max(sizes)
    rows = []
    for name in COMMANDS:
        for kind in ("tuffdb", "redis"):
            rate = {n: spread([c["tests"][name]["rps"] for c in cells
                               if c["server"] == kind and c["n"] == n]) for n in sizes}
            ratio = round(rate[small]["median"] / rate[big]["median"], 3) \
                if rate[big]["median"] else None
            rows.append({"command": name, "server": kind, "rps": {str(n): rate[n] for n in sizes},
                         "cost_ratio_big_over_small": ratio,
                         "meets_target": None if ratio is None else ratio <= TARGET_COST_RATIO})
    memory = {}
    for kind in ("tuffdb", "redis"):
        for field in ("bytes_per_element", "bytes_per_element_without_buffers"):
            memory[f"{kind}:{field}"] = {
                what: spread([c[field][what] for c in cells
                              if c["server"] == kind and c["n"] == big])
                for what in (*FILLS, "all")}
    return {"small": small, "big": big, "rows": rows, "bytes_per_element_at_big": memory}


def render(result: dict[str, Any], docs: Path) -> str:
    s = result["summary"]
    small, big = s["small"], s["big"]
    lines = [
        f"Run {result['run_id']}; {result['settings']['ops']} ops per command, "
        f"-P {result['settings']['pipeline']}, {result['settings']['clients']} clients, "
        f"appendfsync everysec, {result['settings']['reps']} reps (median, min-max); "
        f"{result['redis_server_version']}.",
        "",
        f"| command | server | ops/s at {small:,} | ops/s at {big:,} | cost at {big:,} / "
        f"cost at {small:,} | target <= {TARGET_COST_RATIO} |",
        "|---|---|---|---|---|---|",
    ]
    for row in s["rows"]:
        a, b = row["rps"][str(small)], row["rps"][str(big)]
        ok = {True: "met", False: "MISSED", None: ""}[row["meets_target"]]
        lines.append(f"| {row['command']} | {row['server']} | {a['median']:,.0f} "
                     f"({a['min']:,.0f}-{a['max']:,.0f}) | {b['median']:,.0f} "
                     f"({b['min']:,.0f}-{b['max']:,.0f}) | {row['cost_ratio_big_over_small']} "
                     f"| {ok} |")
    lines += ["", f"Memory per element at {big:,} elements (server RSS growth / elements, "
                  "median, min-max; tuffdb also without the growth of its bounded buffers, "
                  "block cache and hot tier, as INFO reports them):", "",
              "| collection | tuffdb B/element | tuffdb without buffers | Redis B/element |",
              "|---|---|---|---|"]
    mem = s["bytes_per_element_at_big"]
    for what in (*FILLS, "all"):
        t = mem["tuffdb:bytes_per_element"][what]
        u = mem["tuffdb:bytes_per_element_without_buffers"][what]
        r = mem["redis:bytes_per_element"][what]
        lines.append(f"| {what} | {t['median']:,.0f} ({t['min']:,.0f}-{t['max']:,.0f}) | "
                     f"{u['median']:,.0f} ({u['min']:,.0f}-{u['max']:,.0f}) | "
                     f"{r['median']:,.0f} ({r['min']:,.0f}-{r['max']:,.0f}) |")
    text = "\n".join(lines) + "\n"
    (docs / "results.md").write_text(text)
    try:
        import matplotlib as mpl  # noqa: PLC0415

        mpl.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        return text
    rows = s["rows"]
    fig, ax = plt.subplots(figsize=(10, 4.5))
    xs = range(len(rows))
    for offset, n, label in ((-0.2, small, f"{small:,}"), (0.2, big, f"{big:,}")):
        ax.bar([x + offset for x in xs], [r["rps"][str(n)]["median"] for r in rows], 0.4,
               label=f"{label} elements")
    ax.set_xticks(list(xs), [f"{r['command']}\n{r['server']}" for r in rows], fontsize=7)
    ax.set_ylabel("ops/s (median)")
    ax.set_yscale("log")
    ax.set_title("Collection size: 10^3 vs 10^6 elements (redis-benchmark -P "
                 f"{result['settings']['pipeline']})")
    ax.legend()
    fig.tight_layout()
    fig.savefig(docs / "resp-collections.png", dpi=120)
    plt.close(fig)
    return text
