"""A few YCSB cells against one fresh tuffdb HTTP server, for A/B runs between builds (not
the benchmark: bench/ycsb.py runs every store, tier and cell and writes the report).

    python bench/ycsb.py cells durable A/8,F/8 --reps 1 [--stat]
    TUFFDB_NATIVE_BUILD=.venv/tuffdb-native/<key> python bench/ycsb.py cells cache A/8

Starts the server the way bench/ycsb.py does (pinned to --server-cpu, 100,000 records),
then runs each cell with bench/ycsb_gen/ycsb_driver.c, the benchmark's generator (or, with
``--generator wrk``, wrk + bench/ycsb_gen/ycsb.lua) pinned to --client-cpu and prints
one line per cell: tier, cell, rep, ops/s. With ``--stat`` it also reads /proc over six
seconds of each cell's window and prints each busy server thread's user and system CPU
per operation and the server core's split (user, system, idle, softirq, steal ticks).
With ``--perf DIR`` it runs ``perf record -g`` on the server over those six seconds, one
file per cell. With ``--syscalls`` it counts, over the same six seconds, the server's
system calls of the kinds the request path makes (perf tracepoints: read, write,
epoll_pwait, io_submit, io_getevents, writev, pread64, futex), its context switches and
its minor page faults, per operation.
To compare builds, alternate fresh servers of each (``TUFFDB_NATIVE_BUILD`` picks the
build the server runs) in one session: the machine's speed drifts between runs.
"""

# Benchmark support, not library code.
# ruff: noqa: INP001, CPY001, T201, S603, S607, PLR0914, E501
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import thread_ticks  # noqa: E402
from _ycsb_cgen import build_driver, run_driver, run_wrk  # noqa: E402
from ycsb import TuffdbHttp  # noqa: E402

RECORDS = 100_000
SAMPLE_AFTER_S = 3  # into the cell: past the 2 s warm-up, inside the measured window
SAMPLE_S = 6  # what --stat, --perf and --syscalls observe


def _core(cpu: int) -> list[int]:
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith(f"cpu{cpu} "):
            return [int(x) for x in line.split()[1:]]
    return []


def _sample(pid: int, cpu: int, out: list[object]) -> None:
    time.sleep(SAMPLE_AFTER_S)
    t0, c0 = thread_ticks(pid), _core(cpu)
    time.sleep(SAMPLE_S)
    out.extend([thread_ticks(pid), _core(cpu), t0, c0])


SYSCALLS = ("read", "write", "epoll_pwait", "io_submit", "io_getevents", "writev", "pread64",
            "futex")


def _perf(pid: int, args: list[str]) -> str:
    """``perf ARGS`` on the server over the window _sample reads; perf's stderr."""
    time.sleep(SAMPLE_AFTER_S)
    res = subprocess.run(["perf", *args, "-p", str(pid), "sleep", str(SAMPLE_S)],
                         capture_output=True, text=True, check=False)
    return res.stderr


def _perf_stat(pid: int, out: list[str]) -> None:
    events = [*(f"syscalls:sys_enter_{c}" for c in SYSCALLS), "context-switches", "minor-faults"]
    out.append(_perf(pid, ["stat", "-x,", "-e", ",".join(events)]))


def _perf_record(pid: int, path: str) -> None:
    _perf(pid, ["record", "-g", "-F", "2000", "-o", path])


def _per_op(perf_text: str, ops: float) -> str:
    parts = []
    for line in perf_text.splitlines():
        f = line.split(",")
        if len(f) > 2 and f[0].strip().isdigit():
            parts.append(f"{f[2].removeprefix('syscalls:sys_enter_')} {int(f[0]) / ops:.3f}")
    return "; per op: " + ", ".join(parts) if parts else "; perf stat gave nothing"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tier", choices=("durable", "cache"))
    ap.add_argument("cells", help="comma-separated WORKLOAD/THREADS, e.g. A/8,F/8")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--stat", action="store_true")
    ap.add_argument("--syscalls", action="store_true", help="perf stat the server (root)")
    ap.add_argument("--perf", metavar="DIR", help="perf record -g the server (root): DIR/<tier>-<W>-<N>-<rep>-<position in CELLS>.data")
    ap.add_argument("--generator", choices=("wrk", "c"), default="c",
                    help="bench/ycsb_gen/ycsb_driver.c (the benchmark's), or wrk + ycsb.lua")
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    ap.add_argument("--duration", type=float, default=10)
    ap.add_argument("--warmup", type=float, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ycsb-cells-") as tmp:
        if args.perf:
            Path(args.perf).mkdir(parents=True, exist_ok=True)
        driver = build_driver(Path(tmp)) if args.generator == "c" else None
        if args.generator == "c" and driver is None:
            sys.exit("ycsb_cells: no C compiler for bench/ycsb_gen/ycsb_driver.c")
        server = TuffdbHttp(Path(tmp), args.tier, args.server_cpu)
        try:
            server.insert(list(range(RECORDS)), 1)
            for rep in range(args.reps):
                for pos, cell in enumerate(args.cells.split(",")):
                    workload, threads = cell.split("/")
                    got: list[object] = []
                    probe = None
                    if args.stat:
                        probe = threading.Thread(target=_sample,
                                                 args=(server.pid, args.server_cpu, got))
                        probe.start()
                    counted: list[str] = []
                    counter = None
                    if args.syscalls:
                        counter = threading.Thread(target=_perf_stat, args=(server.pid, counted))
                        counter.start()
                    recorder = None
                    if args.perf:
                        out = f"{args.perf}/{args.tier}-{workload}-{threads}-{rep}-{pos}.data"
                        recorder = threading.Thread(target=_perf_record, args=(server.pid, out))
                        recorder.start()
                    window = (workload, int(threads), RECORDS, 1, args.warmup, args.duration, 0,
                              args.client_cpu)
                    if driver is not None:
                        res = run_driver(driver, "http", server.port, *window, token=server.token)
                    else:
                        res = run_wrk(server.port, server.token, *window)
                    line = f"{args.tier} {cell} {rep} {round(res['ops_per_s'])}"
                    lat = res.get("latencies_ns")
                    if lat is not None and len(lat):
                        p50, p99, p999 = np.percentile(lat, [50, 99, 99.9]) / 1e3
                        line += f" p50 {p50:.0f} p99 {p99:.0f} p99.9 {p999:.0f} us"
                    if probe is not None:
                        probe.join()
                        t1, c1, t0, c0 = got  # type: ignore[misc]
                        ops = res["ops_per_s"] * SAMPLE_S / 1e4  # ticks are 10 ms; per op in us
                        for tid, (u, s) in t1.items():  # type: ignore[attr-defined]
                            du, ds = u - t0.get(tid, (0, 0))[0], s - t0.get(tid, (0, 0))[1]  # type: ignore[attr-defined]
                            if du + ds > 3:
                                line += f"; thread {tid} user {du / ops:.1f} us/op, system {ds / ops:.1f} us/op"
                        d = [b - a for a, b in zip(c0, c1, strict=True)]  # type: ignore[call-overload]
                        line += (f"; core user {d[0]} system {d[2]} idle {d[3]} softirq {d[6]} "
                                 f"steal {d[7]} ticks")
                    if recorder is not None:
                        recorder.join()
                    if counter is not None:
                        counter.join()
                        line += _per_op(counted[0], res["ops_per_s"] * SAMPLE_S)
                    print(line, flush=True)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
