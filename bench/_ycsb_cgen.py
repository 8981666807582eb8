"""C load generators for YCSB: wrk with bench/ycsb_gen/ycsb.lua (tuffdb's HTTP face) and
bench/ycsb_gen/redis_ycsb.c (Redis hashes), both closed loop, one client per thread and
connection, one request in flight each, time-bounded windows (see the two sources).

``run_wrk`` and ``run_redis`` return the same shape as the other drivers: ``ops``,
``ops_per_s`` (ops completing in the window / window seconds), ``seconds``, ``errors``
(non-2xx or Redis error/miss replies in the window, plus wrk's socket errors), ``errors_all``
(including warm-up), ``inserted_per_thread`` (workload D's acknowledged inserts, for the gap
fill), ``latencies_ns`` (from the generators' 1 us histograms), ``command`` and ``generator``.
"""

# Benchmark support, not library code.
# ruff: noqa: INP001, CPY001, S603, PLR0913, PLR0917
from __future__ import annotations

import hashlib
import json
import math
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np

GEN_DIR = Path(__file__).resolve().parent / "ycsb_gen"
LUA = GEN_DIR / "ycsb.lua"
REDIS_C = GEN_DIR / "redis_ycsb.c"
MARK = "YCSB_JSON "


def _pin(cpu: int | None) -> list[str]:
    return ["taskset", "-c", str(cpu)] if cpu is not None and shutil.which("taskset") else []


def have_wrk() -> bool:
    return shutil.which("wrk") is not None


def build_redis_driver(build_dir: Path) -> Path | None:
    """Compile redis_ycsb.c (cached by source hash); None without a C compiler."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    digest = hashlib.sha256(REDIS_C.read_bytes()).hexdigest()[:12]
    exe = Path(build_dir) / f"redis_ycsb-{digest}"
    if not exe.exists():
        exe.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [cc, "-O2", "-pthread", "-o", str(exe), str(REDIS_C), "-lm"],
            check=True,
            capture_output=True,
            text=True,
        )
    return exe


def _result(
    doc: dict[str, Any], threads: int, duration: float, command: list[str], generator: str
) -> dict[str, Any]:
    per = doc["threads"]
    if len(per) != threads:
        raise RuntimeError(f"{generator}: {len(per)} of {threads} threads reported")
    stops = [t["stop_us"] for t in per]
    if min(stops) < 0:
        raise RuntimeError(f"{generator}: a thread never reached the end of its window")
    window = min(duration, max(stops) / 1e6)
    hist = doc["hist_us"]
    us = np.fromiter((int(k) for k in hist), dtype=np.int64, count=len(hist))
    counts = np.fromiter(hist.values(), dtype=np.int64, count=len(hist))
    lat = np.repeat(us * 1000, counts)
    socket_errors = sum(
        doc.get("wrk", {}).get(k, 0) for k in ("connect", "read", "write", "timeout")
    )
    return {
        "ops": int(doc["ops"]),
        "ops_per_s": doc["ops"] / window if window > 0 else 0.0,
        "seconds": window,
        "errors": int(doc["errors"]) + socket_errors,
        "errors_all": int(doc["errors_all"]) + socket_errors,
        "socket_errors": socket_errors,
        "inserted_per_thread": [int(t["inserted"]) for t in per],
        "latencies_ns": lat,
        "command": " ".join(command),
        "generator": generator,
    }


def run_wrk(
    port: int,
    token: str,
    workload: str,
    threads: int,
    recordcount: int,
    seed: int,
    warmup: float,
    duration: float,
    ops_cap: int,
    cpu: int | None,
    table: str = "usertable",
) -> dict[str, Any]:
    """One wrk run: ``threads`` threads x 1 connection; ends it once every thread stopped."""
    cap = math.ceil(ops_cap / threads) if ops_cap else 0
    safety = math.ceil(warmup + duration) + 5
    shown = [
        *_pin(cpu),
        "wrk",
        "-t",
        str(threads),
        "-c",
        str(threads),
        "-d",
        f"{safety}s",
        "--timeout",
        "30s",
        "-s",
        "bench/ycsb_gen/ycsb.lua",
        f"http://127.0.0.1:{port}",
        "--",
        workload,
        str(recordcount),
        str(seed),
        f"{warmup:g}",
        f"{duration:g}",
        "<token>",
        str(threads),
        table,
        str(cap),
    ]
    cmd = [
        str(LUA) if a == "bench/ycsb_gen/ycsb.lua" else token if a == "<token>" else a
        for a in shown
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    stopped, doc = 0, None
    for line in proc.stdout:
        if line.startswith("YCSB_STOPPED"):
            stopped += 1
            if stopped == threads:  # wrk's main thread sleeps for -d: wake it
                _interrupt(proc)
        elif line.startswith(MARK):
            doc = json.loads(line[len(MARK) :])
    err = proc.stderr.read() if proc.stderr else ""
    proc.wait()
    if doc is None:
        raise RuntimeError(
            f"wrk {workload}: no result (exit {proc.returncode}): {err.strip()[-500:]}"
        )
    res = _result(doc, threads, duration, shown, "wrk 4 + bench/ycsb_gen/ycsb.lua (LuaJIT)")
    res["wrk_requests"] = doc["wrk"]["requests"]
    return res


def _interrupt(proc: subprocess.Popen[str]) -> None:
    """SIGINT until wrk leaves its sleep (a signal may land on a thread still exiting)."""
    for _ in range(100):
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(0.05)
        except subprocess.TimeoutExpired:
            continue
        return


def run_redis(
    exe: Path,
    port: int,
    workload: str,
    threads: int,
    recordcount: int,
    seed: int,
    warmup: float,
    duration: float,
    ops_cap: int,
    cpu: int | None,
) -> dict[str, Any]:
    cap = math.ceil(ops_cap / threads) if ops_cap else 0
    cmd = [
        *_pin(cpu),
        str(exe),
        "127.0.0.1",
        str(port),
        workload,
        str(threads),
        str(recordcount),
        str(seed),
        f"{warmup:g}",
        f"{duration:g}",
        str(cap),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    line = next((x for x in done.stdout.splitlines() if x.startswith(MARK)), None)
    if line is None:
        raise RuntimeError(
            f"redis_ycsb {workload}: no result (exit {done.returncode}): {done.stderr[-500:]}"
        )
    doc = json.loads(line[len(MARK) :])
    if doc["failed_threads"]:
        raise RuntimeError(
            f"redis_ycsb {workload}: {doc['failed_threads']} threads lost their connection"
        )
    shown = [*cmd[: len(cmd) - 10], "bench/ycsb_gen/redis_ycsb.c (cc -O2)", *cmd[len(cmd) - 9 :]]
    return _result(doc, threads, duration, shown, "bench/ycsb_gen/redis_ycsb.c (C, POSIX threads)")


def redis_benchmark_ping(
    port: int, clients: int, requests: int, cpu: int | None
) -> dict[str, Any] | None:
    """redis-benchmark PING (-P 1, closed loop) at ``clients``: a second opinion on the ceiling."""
    if shutil.which("redis-benchmark") is None:
        return None
    cmd = [
        *_pin(cpu),
        "redis-benchmark",
        "-h",
        "127.0.0.1",
        "-p",
        str(port),
        "-c",
        str(clients),
        "-n",
        str(requests),
        "-P",
        "1",
        "-t",
        "ping_mbulk",
        "--csv",
    ]
    t = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    elapsed = time.perf_counter() - t
    rows = [r for r in done.stdout.splitlines() if r.startswith('"PING')]
    if not rows:
        return None
    cols = [c.strip('"') for c in rows[-1].split(",")]
    out: dict[str, Any] = {
        "ops_per_s": float(cols[1]),
        "requests": requests,
        "clients": clients,
        "wall_s": elapsed,
        "command": " ".join(cmd),
    }
    if len(cols) >= 7:
        out.update({"p50_ms": float(cols[4]), "p99_ms": float(cols[6])})
    return out
