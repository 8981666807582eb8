"""C load generators for YCSB: wrk with bench/ycsb_gen/ycsb.lua (tuffdb's HTTP face; one
wrk thread per connection) and bench/ycsb_gen/ycsb_driver.c (Redis hashes over RESP, or
tuffdb's HTTP face as a cross-check; one epoll thread for all connections), all closed
loop, one request in flight per connection, time-bounded windows (see the sources).
``http_null_ceiling`` measures the HTTP generator itself against bench/ycsb_gen/http_ok.c,
a null C HTTP server.

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
import os
import queue
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Any

import numpy as np

GEN_DIR = Path(__file__).resolve().parent / "ycsb_gen"
LUA = GEN_DIR / "ycsb.lua"
DRIVER_C = GEN_DIR / "ycsb_driver.c"
DRIVER_LABEL = "bench/ycsb_gen/ycsb_driver.c (C, one epoll thread)"
HTTP_OK_C = GEN_DIR / "http_ok.c"
MARK = "YCSB_JSON "


def _pin(cpu: int | None) -> list[str]:
    return ["taskset", "-c", str(cpu)] if cpu is not None and shutil.which("taskset") else []


def have_wrk() -> bool:
    return shutil.which("wrk") is not None


def build(source: Path, build_dir: Path) -> Path | None:
    """Compile one of bench/ycsb_gen/*.c (cached by source hash); None without a C compiler."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:12]
    exe = Path(build_dir) / f"{source.stem}-{digest}"
    if not exe.exists():
        exe.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [cc, "-O2", "-o", str(exe), str(source), "-lm"],
            check=True,
            capture_output=True,
            text=True,
        )
    return exe


def build_driver(build_dir: Path) -> Path | None:
    return build(DRIVER_C, build_dir)


def http_null_ceiling(
    build_dir: Path,
    generator: str,
    threads: int,
    warmup: float,
    duration: float,
    server_cpu: int | None,
    cpu: int | None,
) -> dict[str, Any] | None:
    """The HTTP generator's own ceiling (``generator`` wrk or c; the same machinery and
    connection count as the tuffdb-http cells) on GET /api/health against
    bench/ycsb_gen/http_ok.c, a null C server on the server core."""
    exe = build(HTTP_OK_C, build_dir)
    driver = build(DRIVER_C, build_dir)
    if exe is None or driver is None or (generator == "wrk" and not have_wrk()):
        return None
    proc = subprocess.Popen([*_pin(server_cpu), str(exe)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().rsplit(" ", 1)[1])
        if generator == "wrk":
            res = run_wrk(port, "none", "trivial", threads, 1, 0, warmup, duration, 0, cpu)
        else:
            res = run_driver(
                driver, "http", port, "trivial", threads, 1, 0, warmup, duration, 0, cpu
            )
    finally:
        proc.kill()
        proc.wait()
    res["server"] = "bench/ycsb_gen/http_ok.c (null server)"
    return res


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
    # a thread drains wrk's output while _interrupt signals it: done() writes one long
    # line (~70 KB at 32 connections), and a signal that lands while that write waits on
    # a full pipe cuts it short (EINTR)
    lines: queue.Queue[str | None] = queue.Queue()

    def pump(out: IO[str]) -> None:
        for line in out:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, args=(proc.stdout,), daemon=True).start()
    stopped, doc = 0, None
    while (line := lines.get()) is not None:
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


def run_driver(
    exe: Path,
    proto: str,
    port: int,
    workload: str,
    threads: int,
    recordcount: int,
    seed: int,
    warmup: float,
    duration: float,
    ops_cap: int,
    cpu: int | None,
    token: str = "",
) -> dict[str, Any]:
    """One run of bench/ycsb_gen/ycsb_driver.c (``proto`` resp or http)."""
    cap = math.ceil(ops_cap / threads) if ops_cap else 0
    args = [proto, "127.0.0.1", str(port), workload, str(threads), str(recordcount), str(seed)]
    args += [f"{warmup:g}", f"{duration:g}", str(cap)]
    cmd = [*_pin(cpu), str(exe), *args]
    env = {**os.environ, "YCSB_TOKEN": token}
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    line = next((x for x in done.stdout.splitlines() if x.startswith(MARK)), None)
    if line is None:
        raise RuntimeError(
            f"ycsb_driver {workload}: no result (exit {done.returncode}): {done.stderr[-500:]}"
        )
    doc = json.loads(line[len(MARK) :])
    if doc["failed_threads"]:
        raise RuntimeError(f"ycsb_driver {workload}: {doc['failed_threads']} connections failed")
    shown = [*_pin(cpu), "bench/ycsb_gen/ycsb_driver.c (cc -O2)", *args]
    return _result(doc, threads, duration, shown, DRIVER_LABEL)


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
