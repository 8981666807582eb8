"""Micro-benchmark of the documents durable write path (issue 6).

Loads ``--records`` records (10 fields x 100 bytes, ids ``user<fnv64(n)>`` like the YCSB
keys) into a fresh store, then runs a closed-loop YCSB-A-like mix (``--read-fraction``
reads of a whole record, the rest updates of one field; keys uniform) for ``--seconds``
per cell with each of ``--clients``:

* ``embedded``: ``Database.open(dir, durability="always")``, one thread per client,
  ``coll.get`` / ``coll.update``;
* ``http``: ``tuffdb serve`` started here with ``[http] durable_operations = true`` (so
  every acknowledged write is fsynced), driven by an asyncio raw HTTP/1.1 client with one
  keep-alive connection per client (``--client-procs`` processes share them). The
  client's ceiling on ``GET /api/health`` is measured first with the most clients: a cell
  close to it is limited by the client, not the server.

Per cell it prints ops/s, p50/p99 latency (us) and fsyncs per write (from the
``tuffdb_fsyncs_total`` counter: in-process for embedded, ``GET /metrics`` of the admin
port for http). Closed loop: latency is not corrected for coordinated omission.

    python bench/docs_durable.py                      # both modes, 1/8/32 clients, 5 s
    python bench/docs_durable.py --modes http --clients 8 --seconds 3 --records 20000
"""

# Benchmark support, not library code.
# ruff: noqa: INP001, CPY001, S311, S603, T201, PLR0913, PLR0917, PLC0415
from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing as mp
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

TABLE = "usertable"
FIELDS = [f"field{i}" for i in range(10)]
DEFAULT_DIR = Path(__file__).resolve().parent / "results" / "tmp" / "docs_durable"


def fnv64(n: int) -> int:
    """YCSB's FNV-1a-64 over the 8 little-endian bytes of n, made non-negative."""
    h = 0xCBF29CE484222325
    for _ in range(8):
        h ^= n & 0xFF
        h = (h * 1099511628211) & ((1 << 64) - 1)
        n >>= 8
    return (1 << 64) - h if h >= 1 << 63 else h


def key(n: int) -> str:
    return f"user{fnv64(n)}"


def record(n: int) -> dict[str, str]:
    rnd = random.Random(n)
    return {f: "".join(rnd.choices("abcdefghijklmnopqrstuvwxyz0123456789", k=100)) for f in FIELDS}


def summary(
    lat_ns: list[int],
    seconds: float,
    writes: int,
    fsyncs: float | None,
    fsync_s: float | None = None,
) -> dict[str, Any]:
    lat = sorted(lat_ns)
    n = len(lat)
    pct = (lambda q: round(lat[min(n - 1, int(q * n))] / 1000, 1)) if n else (lambda _q: None)
    return {
        "ops": n,
        "ops_per_s": round(n / seconds) if seconds else 0,
        "p50_us": pct(0.5),
        "p99_us": pct(0.99),
        "writes": writes,
        "fsyncs_per_write": None if fsyncs is None or not writes else round(fsyncs / writes, 3),
        "fsync_avg_us": None if not fsyncs or fsync_s is None else round(fsync_s / fsyncs * 1e6),
    }


def show(mode: str, clients: int | str, row: dict[str, Any]) -> None:
    f = row.get("fsyncs_per_write")
    print(
        f"{mode:9} clients={clients!s:>3}  {row['ops_per_s']:>7,} ops/s  p50 {row['p50_us']} us"
        f"  p99 {row['p99_us']} us  writes {row['writes']:,}  fsyncs/write {f}"
        f"  (avg fsync {row.get('fsync_avg_us')} us)",
        flush=True,
    )


# ------------------------------------------------------------------------- embedded
def run_embedded(args: argparse.Namespace) -> list[dict[str, Any]]:
    from tuffdb import metrics
    from tuffdb.documents.database import Database

    d = args.dir / "embedded"
    shutil.rmtree(d, ignore_errors=True)
    db = Database.open(d, durability="always")
    coll = db.collection(TABLE)
    t0 = time.perf_counter()
    for lo in range(0, args.records, 1000):
        coll.insert_many(
            [{"id": key(n), **record(n)} for n in range(lo, min(lo + 1000, args.records))]
        )
    print(
        f"embedded: loaded {args.records:,} records in {time.perf_counter() - t0:.1f} s", flush=True
    )
    keys = [key(n) for n in range(args.records)]
    value = "u" * 100
    rows = []
    for clients in args.clients:
        lats: list[list[int]] = [[] for _ in range(clients)]
        writes = [0] * clients
        errors = [0] * clients
        barrier = threading.Barrier(clients + 1)
        stop = threading.Event()

        def work(
            w: int,
            lats: list[list[int]] = lats,
            writes: list[int] = writes,
            errors: list[int] = errors,
            barrier: threading.Barrier = barrier,
            stop: threading.Event = stop,
        ) -> None:
            rnd = random.Random(w)
            out = lats[w]
            ns = time.perf_counter_ns
            barrier.wait()
            while not stop.is_set():
                k = keys[rnd.randrange(len(keys))]
                s = ns()
                try:
                    if rnd.random() < args.read_fraction:
                        coll.get(k)
                    else:
                        coll.update(k, {FIELDS[rnd.randrange(10)]: value})
                        writes[w] += 1
                except Exception:  # noqa: BLE001 - counted
                    errors[w] += 1
                out.append(ns() - s)

        threads = [threading.Thread(target=work, args=(w,)) for w in range(clients)]
        for t in threads:
            t.start()
        f0, s0 = metrics.FSYNCS.value, metrics.FSYNC_SECONDS.sum
        barrier.wait()
        t0 = time.perf_counter()
        time.sleep(args.seconds)
        stop.set()
        for t in threads:
            t.join()
        span = time.perf_counter() - t0
        row = summary(
            [x for lt in lats for x in lt],
            span,
            sum(writes),
            metrics.FSYNCS.value - f0,
            metrics.FSYNC_SECONDS.sum - s0,
        )
        row.update(mode="embedded", clients=clients, errors=sum(errors))
        show("embedded", clients, row)
        rows.append(row)
    db.close()
    return rows


# ------------------------------------------------------------------------- http client
async def _http_conn(
    host: str, port: int, token: str, stream: Any, until: float, lat: list[int], counts: list[int]
) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    auth = f"Authorization: Bearer {token}\r\nHost: b\r\n"
    ns = time.perf_counter_ns
    loop = asyncio.get_running_loop()
    while loop.time() < until:
        method, path, body, is_write = stream()
        head = f"{method} {path} HTTP/1.1\r\n{auth}Content-Length: {len(body)}\r\n\r\n"
        s = ns()
        writer.write(head.encode() + body)
        raw = await reader.readuntil(b"\r\n\r\n")
        i = raw.find(b"Content-Length: ") + 16
        length = int(raw[i : raw.index(b"\r", i)])
        await reader.readexactly(length)
        lat.append(ns() - s)
        if raw[9:12] != b"200":
            counts[1] += 1
        elif is_write:
            counts[0] += 1
    writer.close()


def _client_proc(
    host: str,
    port: int,
    token: str,
    conns: int,
    seconds: float,
    kind: str,
    nkeys: int,
    read_fraction: float,
    seed: int,
    start_at: float,
    q: Any,
) -> None:
    with contextlib.suppress(ImportError):
        import uvloop

        uvloop.install()
    value = "u" * 100
    rnd = random.Random(seed)
    keys = [key(n) for n in range(nkeys)] if kind == "mix" else []
    bodies = [json.dumps({f: value}).encode() for f in FIELDS]

    def stream() -> tuple[str, str, bytes, bool]:
        if kind == "health":
            return "GET", "/api/health", b"", False
        k = keys[rnd.randrange(nkeys)]
        if rnd.random() < read_fraction:
            return "GET", f"/api/find/{TABLE}/{k}", b"", False
        return "PUT", f"/api/update/{TABLE}/{k}", bodies[rnd.randrange(10)], True

    async def main() -> tuple[list[int], list[int], float]:
        lat: list[int] = []
        counts = [0, 0]
        await asyncio.sleep(max(0.0, start_at - time.time()))
        loop = asyncio.get_running_loop()
        t0 = time.perf_counter()
        until = loop.time() + seconds
        await asyncio.gather(
            *(_http_conn(host, port, token, stream, until, lat, counts) for _ in range(conns))
        )
        return lat, counts, time.perf_counter() - t0

    q.put(asyncio.run(main()))


def drive_http(
    args: argparse.Namespace, port: int, token: str, clients: int, kind: str
) -> tuple[list[int], int, int, float]:
    procs = min(args.client_procs, clients)
    q: Any = mp.get_context("fork").Queue()
    start_at = time.time() + 0.5 + 0.1 * procs
    ps = []
    for p in range(procs):
        conns = clients // procs + (1 if p < clients % procs else 0)
        ps.append(
            mp.get_context("fork").Process(
                target=_client_proc,
                args=(
                    "127.0.0.1",
                    port,
                    token,
                    conns,
                    args.seconds,
                    kind,
                    args.records,
                    args.read_fraction,
                    p * 7919 + clients,
                    start_at,
                    q,
                ),
            )
        )
    for pr in ps:
        pr.start()
        if args.pin:
            os.sched_setaffinity(pr.pid, {args.client_cpu})
    got = [q.get() for _ in ps]
    for pr in ps:
        pr.join()
    lat = [x for g in got for x in g[0]]
    return lat, sum(g[1][0] for g in got), sum(g[1][1] for g in got), max(g[2] for g in got)


# ------------------------------------------------------------------------- http server
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _call(port: int, method: str, path: str, body: Any = None, token: str | None = None) -> bytes:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        method=method,
        data=None if body is None else json.dumps(body).encode(),
    )
    req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(req, timeout=120) as r:  # noqa: S310 - loopback only
        return r.read()


def _fsyncs(admin: int) -> tuple[float, float]:
    """(fsync calls, seconds spent in log fsyncs) from the server's /metrics."""
    lines = _call(admin, "GET", "/metrics").decode().splitlines()

    def value(name: str) -> float:
        return next(float(line.split()[1]) for line in lines if line.startswith(name + " "))

    return value("tuffdb_fsyncs_total"), value("tuffdb_fsync_seconds_sum")


def run_http(args: argparse.Namespace) -> list[dict[str, Any]]:
    d = args.dir / "http"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    (d / "serve.toml").write_text("[http]\ndurable_operations = true\n")
    port, admin = _free_port(), _free_port()
    cmd = [
        sys.executable,
        "-m",
        "tuffdb",
        "serve",
        "--config",
        str(d / "serve.toml"),
        "--data-dir",
        str(d / "data"),
        "--http-port",
        str(port),
        "--admin-port",
        str(admin),
        "--resp-port",
        "0",
        "--grpc-port",
        "0",
        "--log-level",
        "warning",
    ]
    log = (d / "serve.log").open("wb")
    server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    rows: list[dict[str, Any]] = []
    try:
        if args.pin:
            os.sched_setaffinity(server.pid, {args.server_cpu})
        deadline = time.monotonic() + 60
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"tuffdb serve exited: see {d / 'serve.log'}")
            with contextlib.suppress(OSError):
                _call(port, "GET", "/api/health")
                break
            if time.monotonic() > deadline:
                raise RuntimeError("tuffdb serve did not answer within 60 s")
            time.sleep(0.1)
        api_key = (d / "data" / "ekodb_admin_key").read_text().strip()
        token = json.loads(_call(port, "POST", "/api/auth/token", {"api_key": api_key}))["token"]
        t0 = time.perf_counter()
        for lo in range(0, args.records, 1000):
            rows_ = [{"id": key(n), **record(n)} for n in range(lo, min(lo + 1000, args.records))]
            _call(port, "POST", f"/api/batch/insert/{TABLE}", {"inserts": rows_}, token)
        print(
            f"http:     loaded {args.records:,} records in {time.perf_counter() - t0:.1f} s",
            flush=True,
        )
        lat, _, _, span = drive_http(args, port, token, max(args.clients), "health")
        row = summary(lat, span, 0, None)
        row.update(mode="http-health-ceiling", clients=max(args.clients), errors=0)
        show("health", max(args.clients), row)
        rows.append(row)
        for clients in args.clients:
            f0, s0 = _fsyncs(admin)
            lat, writes, errors, span = drive_http(args, port, token, clients, "mix")
            f1, s1 = _fsyncs(admin)
            row = summary(lat, span, writes, f1 - f0, s1 - s0)
            row.update(mode="http", clients=clients, errors=errors)
            show("http", clients, row)
            rows.append(row)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=100_000)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--clients", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8, 32])
    p.add_argument("--modes", default="embedded,http")
    p.add_argument("--read-fraction", type=float, default=0.5)
    p.add_argument("--client-procs", type=int, default=1, help="http client processes")
    p.add_argument(
        "--no-pin",
        dest="pin",
        action="store_false",
        help="do not pin the server and the http client to separate CPUs",
    )
    p.add_argument("--server-cpu", type=int, default=0)
    p.add_argument("--client-cpu", type=int, default=1)
    p.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="scratch directory (wiped)")
    p.add_argument("--json", type=Path, help="also write the rows here")
    args = p.parse_args()
    if args.pin and (not hasattr(os, "sched_setaffinity") or (os.cpu_count() or 1) < 2):
        args.pin = False
    args.dir.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    modes = args.modes.split(",")
    if "embedded" in modes:
        rows += run_embedded(args)
    if "http" in modes:
        rows += run_http(args)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
