"""redis-benchmark against tuffdb's RESP face and redis-server, in one run (issues 4, 31).

    python bench/resp.py                       # full run: -n 200000, 3 reps (the lead runs it)
    python bench/resp.py -n 2000 --reps 1      # smoke test (seconds)
    python bench/resp.py --plot-only           # redraw the plot and table from latest.json
    python bench/resp.py --suite types         # issue 31: list/set/hash/zset commands
    python bench/resp.py --suite collections   # issue 31: 10^3 vs 10^6 elements, memory
                                               # (bench/resp_collections.py)

What runs, per repetition, cells interleaved (PROTOCOL.md section 4, "ratios from one run"):

=========  =================================  ====================================
pairing    tuffdb (``--appendfsync``)          redis-server
=========  =================================  ====================================
no         ``no`` (engine durability none)     ``--appendonly no``
everysec   ``everysec`` (interval, 200 ms)     ``--appendonly yes --appendfsync everysec``
always     ``always`` (group commit)           ``--appendonly yes --appendfsync always``
=========  =================================  ====================================

each with ``redis-benchmark -t set,get -d 1024 -c 50 -r 100000``, once without
pipelining and once with ``-P 16``. Servers run under ``taskset -c 0``, redis-benchmark
under ``taskset -c 1`` (when the machine has two CPUs). Every server starts on a fresh
data directory on a real disk (never tmpfs) which is deleted afterwards. fsync latency
is probed at the start and the end.

Output: ``docs/benchmarks/resp/<run-id>.json`` (every rep, the environment, the exact
commands) and ``latest.json``; ``resp.png`` and ``results.md`` beside them are drawn from
``latest.json`` only. Older runs the docs cite are under ``docs/benchmarks/history/``.
Targets from issue 4 are ratios tuffdb/Redis: SET >= 1x with ``always``; SET and GET
>= 0.6x otherwise; with ``-P 16`` >= 0.3x.

``--suite types`` (issue 31) runs ``-t lpush,rpush,lpop,rpop,sadd,spop,hset,zadd,zpopmin,
lrange_100,lrange_600`` (redis-benchmark's own payloads and keys, 50 clients) under
``everysec`` and ``always``, with and without ``-P 16``; its output goes to
``docs/benchmarks/resp-types/`` (raw JSON, ``results.md``, ``resp-types.png``). Targets: >= 0.6x
Redis at -P 1 and >= 0.3x at -P 16 for every command, >= 1x for every write command
under ``always`` at -P 1 (read as issue 4's SET target was: the pipelined always cells
keep the 0.3x bar).
"""

# Benchmark script, not library code.
# ruff: noqa: INP001, CPY001, S603, S607, T201
from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

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

from tuffdb.server.resp._process import ServerProcess, start_redis, start_tuffdb

PAIRINGS = {
    "no": ("no", ["--appendonly", "no"]),
    "everysec": ("everysec", ["--appendonly", "yes", "--appendfsync", "everysec"]),
    "always": ("always", ["--appendonly", "yes", "--appendfsync", "always"]),
}
TARGETS = {  # (pairing, pipeline) -> minimum tuffdb/redis ratio per test
    ("always", 1): {"SET": 1.0},
    ("no", 1): {"SET": 0.6, "GET": 0.6},
    ("everysec", 1): {"SET": 0.6, "GET": 0.6},
    **{(p, 16): {"SET": 0.3, "GET": 0.3} for p in ("no", "everysec", "always")},
}
OUT_DIR = REPO / "docs" / "benchmarks" / "resp"
TYPE_TESTS = "lpush,rpush,lpop,rpop,sadd,spop,hset,zadd,zpopmin,lrange_100,lrange_600"
# redis-benchmark's CSV names for them (LRANGE_* need a list first: its own LPUSH fill).
TYPE_NAMES = ("LPUSH", "RPUSH", "LPOP", "RPOP", "SADD", "HSET", "SPOP", "ZADD", "ZPOPMIN",
              "LRANGE_100 (first 100 elements)", "LRANGE_600 (first 600 elements)")
TYPE_WRITES = ("LPUSH", "RPUSH", "LPOP", "RPOP", "SADD", "HSET", "SPOP", "ZADD", "ZPOPMIN")
TYPE_TARGETS = {
    ("always", 1): {t: (1.0 if t in TYPE_WRITES else 0.6) for t in TYPE_NAMES},
    ("everysec", 1): dict.fromkeys(TYPE_NAMES, 0.6),
    **{(p, 16): dict.fromkeys(TYPE_NAMES, 0.3) for p in ("everysec", "always")},
}
TYPES_OUT_DIR = REPO / "docs" / "benchmarks" / "resp-types"


def pin(cpu: int) -> list[str]:
    if shutil.which("taskset") and (os.cpu_count() or 1) >= 2:
        return ["taskset", "-c", str(cpu)]
    return []


def run_benchmark(port: int, requests: int, pipeline: int, clients: int,
                  suite: str = "kv") -> dict[str, Any]:
    if suite == "types":  # redis-benchmark's own payload (3 bytes) and keys
        what = ["-t", TYPE_TESTS]
    else:
        what = ["-t", "set,get", "-d", "1024", "-r", "100000"]
    cmd = [*pin(1), "redis-benchmark", "-h", "127.0.0.1", "-p", str(port), *what,
           "-n", str(requests), "-c", str(clients), "-P", str(pipeline), "--csv", "-q"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=3600)
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    return {"command": cmd, "tests": {r["test"]: {k: float(v) for k, v in r.items()
                                                  if k != "test"} for r in rows}}


def start_server(kind: str, pairing: str, data_dir: Path) -> ServerProcess:
    ours, theirs = PAIRINGS[pairing]
    if kind == "tuffdb":
        return start_tuffdb(data_dir, appendfsync=ours, wrap=pin(0))
    return start_redis("--dir", str(data_dir), *theirs, wrap=pin(0))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--requests", type=int, default=200_000)
    ap.add_argument("-c", "--clients", type=int, default=50)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--pairings", default="no,everysec,always")
    ap.add_argument("--pipelines", default="1,16")
    ap.add_argument("--dir", default=str(REPO / "bench" / "results" / "tmp"),
                    help="parent of the per-server data directories (a real disk)")
    ap.add_argument("--out", default=str(OUT_DIR))
    ap.add_argument("--plot-only", action="store_true")
    ap.add_argument("--suite", choices=("kv", "types", "collections"), default="kv")
    argv = sys.argv[1:] if argv is None else argv
    if "collections" in argv and argv[argv.index("collections") - 1] == "--suite":
        import resp_collections  # noqa: PLC0415  (bench/, on sys.path)

        i = argv.index("collections")
        return resp_collections.main(argv[: i - 1] + argv[i + 1 :])
    args = ap.parse_args(argv)
    ensure_native_build()
    if args.suite == "types":
        if args.out == str(OUT_DIR):
            args.out = str(TYPES_OUT_DIR)
        if args.pairings == "no,everysec,always":
            args.pairings = "everysec,always"
    out = Path(args.out)
    if args.plot_only:
        render(json.loads((out / "latest.json").read_text()), out)
        return 0
    if shutil.which("redis-benchmark") is None or shutil.which("redis-server") is None:
        print("redis-benchmark and redis-server are needed: apt-get install redis-server "
              "redis-tools", file=sys.stderr)
        return 2
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    check_real_disk(args.dir)
    pairings = args.pairings.split(",")
    pipelines = [int(p) for p in args.pipelines.split(",")]
    run_id = utc_now().replace(":", "").replace("-", "")
    result: dict[str, Any] = {
        "run_id": run_id,
        "environment": environment(args.dir, ["redis"]),
        "redis_server_version": subprocess.run(["redis-server", "--version"], check=True,
                                               capture_output=True, text=True).stdout.strip(),
        "suite": args.suite,
        "settings": {"requests": args.requests, "clients": args.clients,
                     "value_bytes": 3 if args.suite == "types" else 1024,
                     "keyspace": None if args.suite == "types" else 100_000, "reps": args.reps,
                     "server_cpu": pin(0), "client_cpu": pin(1)},
        "fsync_probe_start": fsync_probe(args.dir),
        "reps": [],
    }
    for rep in range(args.reps):
        for pairing in pairings:
            for pipeline in pipelines:
                for kind in ("tuffdb", "redis"):
                    with bench_dir(args.dir, f"resp-{kind}") as d:
                        server = start_server(kind, pairing, d)
                        try:
                            cell = run_benchmark(server.port, args.requests, pipeline,
                                                 args.clients, args.suite)
                        finally:
                            server.stop()
                    cell.update(rep=rep, pairing=pairing, pipeline=pipeline, server=kind)
                    result["reps"].append(cell)
                    rates = {t: v["rps"] for t, v in cell["tests"].items()}
                    print(f"rep {rep} {pairing:9} -P {pipeline:<2} {kind:6} {rates}",
                          flush=True)
    result["fsync_probe_end"] = fsync_probe(args.dir)
    result["summary"] = summarize(result["reps"], args.suite)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / f"{run_id}.json", result)
    write_json(out / "latest.json", result)
    print(render(result, out))
    return 0


def table(result: dict[str, Any]) -> str:
    value = result["settings"].get("value_bytes", 1024)
    lines = [
        f"Run {result['run_id']}; {result['settings']['requests']} requests per cell, "
        f"{result['settings']['clients']} clients, {value} B values, "
        f"{result['settings']['reps']} reps (median, min-max); {result['redis_server_version']}.",
        f"fsync probe (4 KiB write + fsync) avg {result['fsync_probe_start']['avg_us']} us at "
        f"start, {result['fsync_probe_end']['avg_us']} us at the end.",
        "",
        "| appendfsync | -P | test | tuffdb ops/s | Redis ops/s | ratio | target |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in result["summary"]:
        t, r = row["tuffdb_rps"], row["redis_rps"]
        target = "" if row["target_ratio"] is None else (
            f">= {row['target_ratio']} {'met' if row['meets_target'] else 'MISSED'}")
        lines.append(
            f"| {row['pairing']} | {row['pipeline']} | {row['test']} | "
            f"{t['median']:,.0f} ({t['min']:,.0f}-{t['max']:,.0f}) | "
            f"{r['median']:,.0f} ({r['min']:,.0f}-{r['max']:,.0f}) | {row['ratio']} | {target} |")
    return "\n".join(lines) + "\n"


def render(result: dict[str, Any], docs: Path) -> str:
    """Write results.md and resp.png (if matplotlib is installed) from one result."""
    text = table(result)
    stem = "resp-types" if result.get("suite") == "types" else "resp"
    (docs / "results.md").write_text(text)
    try:
        import matplotlib as mpl

        mpl.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot", file=sys.stderr)
        return text
    rows = result["summary"]
    labels = [f"{r['pairing']}\n-P {r['pipeline']}\n{r['test'].split(' ')[0]}" for r in rows]
    xs = range(len(rows))
    fig, ax = plt.subplots(figsize=(max(8, len(rows) * 0.9), 4.5))
    for offset, kind, key in ((-0.2, "tuffdb", "tuffdb_rps"), (0.2, "Redis", "redis_rps")):
        med = [r[key]["median"] for r in rows]
        err = [[m - r[key]["min"] for m, r in zip(med, rows, strict=True)],
               [r[key]["max"] - m for m, r in zip(med, rows, strict=True)]]
        ax.bar([x + offset for x in xs], med, 0.4, yerr=err, label=kind, capsize=2)
    ax.set_xticks(list(xs), labels, fontsize=7)
    ax.set_ylabel("requests/s (median, min-max)")
    ax.set_title(f"redis-benchmark: tuffdb RESP face vs redis-server "
                 f"({result['settings'].get('value_bytes', 1024)} B, 50 clients)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(docs / f"{stem}.png", dpi=120)
    plt.close(fig)
    return text


def summarize(cells: list[dict[str, Any]], suite: str = "kv") -> list[dict[str, Any]]:
    """Median (min, max) rps per (pairing, pipeline, test, server) and the ratio."""
    rows = []
    keys = sorted({(c["pairing"], c["pipeline"]) for c in cells})
    tests = TYPE_NAMES if suite == "types" else ("SET", "GET")
    targets = TYPE_TARGETS if suite == "types" else TARGETS
    for pairing, pipeline in keys:
        for test in tests:
            stats = {}
            for kind in ("tuffdb", "redis"):
                vals = [c["tests"][test]["rps"] for c in cells if c["pairing"] == pairing
                        and c["pipeline"] == pipeline and c["server"] == kind
                        and test in c["tests"]]
                stats[kind] = spread(vals)
            t, r = stats["tuffdb"]["median"], stats["redis"]["median"]
            ratio = round(t / r, 3) if t and r else None
            target = targets.get((pairing, pipeline), {}).get(test)
            rows.append({"pairing": pairing, "pipeline": pipeline, "test": test,
                         "tuffdb_rps": stats["tuffdb"], "redis_rps": stats["redis"],
                         "ratio": ratio, "target_ratio": target,
                         "meets_target": None if target is None or ratio is None
                         else ratio >= target})
    return rows


if __name__ == "__main__":
    sys.exit(main())
