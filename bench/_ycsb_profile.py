"""The ekoDB HTTP face's request path without sockets, to run under a profiler (not a
benchmark: see bench/ycsb.py).

    python bench/ycsb.py profile durable A --requests 200000 --conns 8
    python bench/ycsb.py profile durable A --perf dur.data      # perf record -g, measured part
    python bench/ycsb.py profile cache A --pyspy a.raw          # py-spy raw, measured part

Opens the real face (``ekodb_http.create``: encrypted store, durable_operations as the
tier says) in a fresh directory, loads 100,000 YCSB records, then feeds the byte-exact
requests bench/ycsb_gen/ycsb.lua sends (GET /api/find, PUT /api/update, the Bearer
token) for an op stream of the workload into ``HttpProtocol`` objects, ``--conns`` of them
closed-loop: a connection sends its next request when its reply has been written, and
the loop (uvloop, as the server runs) is entered only when every connection is waiting,
so durable rounds gather and complete (fsync through AIO) as they do under wrk. The
first half of the requests warms up; the second half is measured and reported as wall
and thread-CPU time per request, with each thread's user/system ticks from /proc.

What it leaves out, against a served cell: the sockets (recv, send, epoll per request,
loopback delivery) and the load generator's core. Both builds run it: with
``TUFFDB_NATIVE_BUILD=<build>`` it measures that build (A/B without servers).
"""

# Profiling support, not library code.
# ruff: noqa: INP001, CPY001, T201, S603, S607, PLR0914, PLR0915, E501
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import thread_ticks  # noqa: E402
from _ycsb_work import FIELDS, key, op_stream, record  # noqa: E402

from tuffdb import metrics  # noqa: E402
from tuffdb.server.ekodb import server as ekodb_http  # noqa: E402
from tuffdb.server.app import tune_gc  # noqa: E402
from tuffdb.server.config import ServeConfig  # noqa: E402
from tuffdb.server.ekodb.proto import HttpProtocol  # noqa: E402

RECORDS = 100_000


class Transport:
    """What HttpProtocol needs of a transport; ``write`` hands the reply to ``sink``."""

    def __init__(self, sink: Any, index: int) -> None:
        self.sink, self.index, self.writes, self.last = sink, index, 0, b""

    def write(self, data: bytes) -> None:
        self.writes += 1
        self.last = data
        self.sink(self.index)

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default

    def close(self) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def request_bytes(op: str, rid: str, token: str, body: bytes = b"") -> bytes:
    """The bytes bench/ycsb_gen/ycsb.lua sends for a read (GET) or an update (PUT ``body``)."""
    head = b"Host: 127.0.0.1\r\nAuthorization: Bearer " + token.encode() + b"\r\n"
    if op == "read":
        return b"GET /api/find/usertable/" + rid.encode() + b" HTTP/1.1\r\n" + head + b"\r\n"
    return (b"PUT /api/update/usertable/" + rid.encode() + b" HTTP/1.1\r\n" + head
            + b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)


def requests_for(workload: str, count: int, token: str) -> list[bytes]:
    value = "u" * 100
    out = []
    for op, n, f in op_stream(workload, count, RECORDS, 0, 1, 7):
        if op in ("read", "rmw"):
            out.append(request_bytes("read", key(n), token))
        if op in ("update", "rmw"):
            out.append(request_bytes("update", key(n), token,
                                     json.dumps({FIELDS[f]: value}).encode()))
    return out


async def open_face(tier: str, prefix: str) -> tuple[Any, Path]:
    """The real face (``ekodb_http.create``) for ``tier``, started in a fresh directory
    under ``prefix``, with the 100,000 YCSB records loaded."""
    durable = tier == "durable"
    d = Path(tempfile.mkdtemp(prefix=prefix))
    config = ServeConfig(data_dir=d, host="127.0.0.1", http_port=0,
                         durability="always" if durable else "none",
                         extra={"http": {"durable_operations": durable}})
    face = ekodb_http.create(config)
    await face.start()
    coll = face.db.collection("usertable")
    for i in range(0, RECORDS, 1000):
        coll.insert_many([{"id": key(n), **record(n, 1)} for n in range(i, i + 1000)])
    return face, d


async def run(args: argparse.Namespace) -> None:
    face, d = await open_face(args.tier, "profile-ycsb-http-")
    if args.read_cache is not None:
        face.app.reads.limit = args.read_cache << 20
    try:
        ready: deque[int] = deque()
        waiter: list[asyncio.Future[None] | None] = [None]

        def sink(index: int) -> None:
            ready.append(index)
            if waiter[0] is not None and not waiter[0].done():
                waiter[0].set_result(None)

        api_key = (d / ekodb_http.ADMIN_KEY_FILE).read_text().strip()
        body = json.dumps({"api_key": api_key}).encode()
        auth = Transport(sink, -1)
        proto = HttpProtocol(face.app.handle)
        proto.connection_made(auth)  # type: ignore[arg-type]
        proto.data_received(b"POST /api/auth/token HTTP/1.1\r\nHost: x\r\nContent-Type: "
                            b"application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        while not auth.writes:
            await asyncio.sleep(0.01)
        ready.clear()
        token = json.loads(auth.last.split(b"\r\n\r\n", 1)[1])["token"]
        reqs = iter(requests_for(args.workload, args.requests, token))
        conns = []
        for i in range(args.conns):
            t = Transport(sink, i)
            p = HttpProtocol(face.app.handle)
            p.connection_made(t)  # type: ignore[arg-type]
            conns.append((t, p))

        async def idle() -> None:
            waiter[0] = asyncio.get_running_loop().create_future()
            await waiter[0]
            waiter[0] = None

        async def drive(count: int) -> None:
            sent = done = 0
            for _, p in conns:
                p.data_received(next(reqs))
                sent += 1
            while done < count:
                if not ready:
                    await idle()
                    continue
                i = ready.popleft()
                done += 1
                if sent < count:
                    conns[i][1].data_received(next(reqs))
                    sent += 1
            while sum(t.writes for t, _ in conns) < sent:
                await idle()

        half = args.requests // 2
        await drive(half - args.conns)
        ready.clear()
        prof = None
        if args.perf:
            prof = subprocess.Popen(["perf", "record", "-g", "-F", "2000", "-p", str(os.getpid()),
                                     "-o", args.perf], stderr=subprocess.DEVNULL)
        elif args.pyspy:
            prof = subprocess.Popen(["py-spy", "record", "-r", "500", "-f", "raw", "-p",
                                     str(os.getpid()), "-o", args.pyspy],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if prof is not None:
            time.sleep(1.5)  # let the profiler attach before the measured part
        measured = args.requests - half - args.conns
        ticks0 = thread_ticks()
        held0 = metrics.EKODB_READS_HELD.value
        reads = face.app.reads
        hits0, misses0 = reads.hits, reads.misses
        t0, c0 = time.perf_counter(), time.thread_time()
        await drive(measured)
        wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
        ticks1 = thread_ticks()
        held = metrics.EKODB_READS_HELD.value - held0
        if prof is not None:
            prof.send_signal(signal.SIGINT)
            prof.wait()
        per = {tid: (u - ticks0.get(tid, (0, 0))[0], s - ticks0.get(tid, (0, 0))[1])
               for tid, (u, s) in ticks1.items()}
        print(f"{args.tier} {args.workload} x{args.conns}: {measured} requests, "
              f"{wall / measured * 1e6:.1f} us wall and {cpu / measured * 1e6:.1f} us of the "
              f"loop thread's CPU per request; {held:.0f} replies held for a write's round")
        print(f"read cache in the measured part: {reads.hits - hits0:,} hits, "
              f"{reads.misses - misses0:,} misses; {len(reads):,} entries, "
              f"{reads.size / 2**20:.0f} MiB at the end")
        print("threads (user, system ticks):",
              {tid: v for tid, v in per.items() if v != (0, 0)})
    finally:
        await face.stop()
        shutil.rmtree(d, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tier", choices=("durable", "cache"))
    ap.add_argument("workload", choices=("A", "B", "C", "F"))
    ap.add_argument("--requests", type=int, default=200_000)
    ap.add_argument("--conns", type=int, default=8)
    ap.add_argument("--perf", help="perf record -g output for the measured part")
    ap.add_argument("--pyspy", help="py-spy raw output for the measured part")
    ap.add_argument("--read-cache", type=int, metavar="MIB",
                    help="the read cache's bound (default: the server's)")
    args = ap.parse_args()
    tune_gc()  # the collector's thresholds as the server sets them
    try:
        import uvloop  # noqa: PLC0415 - as the server runs
    except ImportError:
        asyncio.run(run(args))
    else:
        uvloop.run(run(args))


if __name__ == "__main__":
    main()
