"""YCSB drivers in Python: embedded tuffdb (threads in the benchmark's process), and the
fallback process-per-connection load generators for tuffdb's ekoDB HTTP face (raw
keep-alive sockets) and Redis (redis-py, hashes), used only when the C generators
(_ycsb_cgen.py: wrk, a C compiler) are missing; every cell says which generator it used.

Each remote worker is its own process (a Python client caps near 10,000 ops/s per
process), pinned to the generator CPU when given, builds its op stream before a barrier,
runs ``warmup`` ops untimed, then times every op (one sample per op; F's
read-modify-write is one sample). The trivial workload (GET /api/health, PING) shows what
the generator itself can do. Embedded workers stop at the end of their op stream or
``duration`` seconds after their warm-up, whichever comes first.
"""

# Benchmark support, not library code.
# ruff: noqa: INP001, CPY001, S311, C901
from __future__ import annotations

import json
import multiprocessing as mp
import os
import random
import socket
import threading
import time
from typing import Any

import numpy as np
from _ycsb_work import FIELDS, key, op_stream, record, value

TABLE = "usertable"


# --------------------------------------------------------------------------- clients
class HttpClient:
    """One keep-alive HTTP/1.1 connection speaking the ekoDB REST paths in JSON."""

    def __init__(self, host: str, port: int, token: str) -> None:
        self.sock = socket.create_connection((host, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.auth = f"Authorization: Bearer {token}\r\n"
        self.buf = b""

    def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: bench\r\n{self.auth}"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        self.sock.sendall(head.encode() + body)
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head_bytes, _, rest = self.buf.partition(b"\r\n\r\n")
        lines = head_bytes.split(b"\r\n")
        status = int(lines[0].split()[1])
        length = next(
            int(x.split(b":")[1]) for x in lines[1:] if x.lower().startswith(b"content-length")
        )
        while len(rest) < length:
            rest += self.sock.recv(1 << 16) or self._eof()
        self.buf = rest[length:]
        return status, rest[:length]

    def _fill(self) -> None:
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            self._eof()
        self.buf += chunk

    def _eof(self) -> bytes:
        raise ConnectionError("server closed the connection")

    def do(self, op: str, n: int, f: int, v: str, seed: int) -> None:
        k = key(n)
        if op in ("read", "rmw"):
            status, _ = self.request("GET", f"/api/find/{TABLE}/{k}")
            if status != 200:
                raise RuntimeError(f"read {k}: {status}")
        if op in ("update", "rmw"):
            body = json.dumps({FIELDS[f]: v}).encode()
            status, _ = self.request("PUT", f"/api/update/{TABLE}/{k}", body)
            if status != 200:
                raise RuntimeError(f"update {k}: {status}")
        elif op == "insert":
            body = json.dumps({"id": k, **record(n, seed)}).encode()
            status, _ = self.request("POST", f"/api/insert/{TABLE}", body)
            if status != 200:
                raise RuntimeError(f"insert {k}: {status}")

    def trivial(self) -> None:
        self.request("GET", "/api/health")


class RedisClient:
    def __init__(self, host: str, port: int) -> None:
        import redis  # noqa: PLC0415 - optional peer

        self.r = redis.Redis(host=host, port=port)

    def do(self, op: str, n: int, f: int, v: str, seed: int) -> None:
        k = key(n)
        if op in ("read", "rmw") and not self.r.hgetall(k):
            raise RuntimeError(f"read {k}: missing")
        if op in ("update", "rmw"):
            self.r.hset(k, FIELDS[f], v)
        elif op == "insert":
            self.r.hset(k, mapping=record(n, seed))

    def trivial(self) -> None:
        self.r.ping()


def make_client(spec: dict[str, Any]) -> Any:
    if spec["kind"] == "http":
        return HttpClient(spec["host"], spec["port"], spec["token"])
    return RedisClient(spec["host"], spec["port"])


# --------------------------------------------------------------------------- workers
def _worker(
    spec: dict[str, Any], job: dict[str, Any], worker: int, barrier: Any, conn: Any
) -> None:
    if job.get("cpu") is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {job["cpu"]})
    try:
        client = make_client(spec)
        if job["workload"] == "trivial":
            ops = [("trivial", 0, 0)] * (job["warmup"] + job["ops"])
        else:
            ops = op_stream(
                job["workload"],
                job["warmup"] + job["ops"],
                job["recordcount"],
                worker,
                job["workers"],
                job["seed"],
            )
        v = value(random.Random(worker))
        barrier.wait()
        do = client.trivial if job["workload"] == "trivial" else None
        lat = np.zeros(job["ops"], dtype=np.int64)
        errors = 0
        warm = job["warmup"]
        t0 = 0.0
        for i, (op, n, f) in enumerate(ops):
            if i == warm:
                t0 = time.perf_counter()
            s = time.perf_counter_ns()
            try:
                if do is not None:
                    do()
                else:
                    client.do(op, n, f, v, job["seed"])
            except Exception:  # noqa: BLE001 - errors are results (counted)
                errors += 1
            if i >= warm:
                lat[i - warm] = time.perf_counter_ns() - s
        conn.send({"lat": lat.tobytes(), "errors": errors, "t0": t0, "t1": time.perf_counter()})
    except Exception as exc:  # noqa: BLE001 - report, never hang the parent
        conn.send({"failed": f"{exc.__class__.__name__}: {exc}"})


def run_processes(spec: dict[str, Any], job: dict[str, Any]) -> dict[str, Any]:
    """Run ``job["workers"]`` worker processes; returns ops/s, latencies (ns), errors."""
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(job["workers"])
    pipes, procs = [], []
    for w in range(job["workers"]):
        parent, child = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_worker, args=(spec, job, w, barrier, child), daemon=True)
        p.start()
        pipes.append(parent)
        procs.append(p)
    results = [c.recv() for c in pipes]
    for p in procs:
        p.join(60)
    failed = [r["failed"] for r in results if "failed" in r]
    if failed:
        raise RuntimeError("; ".join(failed))
    lat = np.concatenate([np.frombuffer(r["lat"], dtype=np.int64) for r in results])
    span = max(r["t1"] for r in results) - min(r["t0"] for r in results)
    return {
        "ops": int(lat.size),
        "ops_per_s": lat.size / span,
        "seconds": span,
        "errors": sum(r["errors"] for r in results),
        "latencies_ns": lat,
        "generator": "Python processes (fallback: the C generators are missing)",
    }


# --------------------------------------------------------------------------- embedded
def run_embedded(coll: Any, job: dict[str, Any]) -> dict[str, Any]:
    """The same op streams against an embedded Collection, one thread per worker."""
    workers = job["workers"]
    streams = [
        op_stream(
            job["workload"], job["warmup"] + job["ops"], job["recordcount"], w, workers, job["seed"]
        )
        for w in range(workers)
    ]
    barrier = threading.Barrier(workers)
    out: list[Any] = [None] * workers
    v = "u" * 100

    def work(w: int) -> None:
        lat = np.zeros(job["ops"], dtype=np.int64)
        errors, warm, t0, done, inserted = 0, job["warmup"], 0.0, 0, []
        end = float("inf")
        barrier.wait()
        for i, (op, n, f) in enumerate(streams[w]):
            if i == warm:
                t0 = time.perf_counter()
                end = t0 + job.get("duration", float("inf"))
            elif i > warm and time.perf_counter() >= end:
                break
            s = time.perf_counter_ns()
            try:
                k = key(n)
                if op in ("read", "rmw"):
                    coll.get(k)
                if op in ("update", "rmw"):
                    coll.update(k, {FIELDS[f]: v})
                elif op == "insert":
                    coll.insert({"id": k, **record(n, job["seed"])})
                    inserted.append(n)
            except Exception:  # noqa: BLE001 - errors are results (counted)
                errors += 1
            if i >= warm:
                lat[i - warm] = time.perf_counter_ns() - s
                done += 1
        out[w] = (lat[:done], errors, t0, time.perf_counter(), inserted)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lat = np.concatenate([o[0] for o in out])
    span = max(o[3] for o in out) - min(o[2] for o in out)
    return {
        "ops": int(lat.size),
        "ops_per_s": lat.size / span,
        "seconds": span,
        "errors": sum(o[1] for o in out),
        "latencies_ns": lat,
        "inserted": [n for o in out for n in o[4]],
        "generator": "Python threads in the store's process (embedded, shared GIL)",
    }
