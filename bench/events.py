#!/usr/bin/env python3
"""Events face benchmark: the event-store-benchmark shape at 2-core scale (PROTOCOL.md §1).

Drives tuffdb's umadb.v1.DCB face and the UmaDB server from the ``umadb`` wheel through the
**same** ``umadb`` client, side by side in one run: the store pinned to CPU 0 and this load
generator to CPU 1. Also an embedded run (no network, "embedded, shared GIL").

    python bench/events.py --smoke                      # tiny sizes, a few seconds
    python bench/events.py --duration 15 --warmup 5     # the real run (quiet machine)

Workloads (names from PROTOCOL.md):
  write   b{batch}-w{writers}: conditional appends, one_tag_one_type, after=0; 0 errors required
  read    warm-sel-single (limit 10, 16 readers), warm-full (full scan, 4 readers) on a
          50,000-event / 5,000-stream graded corpus
  embedded-b512: the embedded store at batch 512, 4 writer threads, one process, unpinned
                 (and embedded-b512-1core: the same pinned to the load generator's core)

Results go to ``--out`` (default docs/benchmarks/events/<run-id>.json) with the
environment, fsync probe, per-run counts and latency percentiles (suppressed when N < 1000).
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import umadb  # noqa: E402
from _common import (  # noqa: E402
    ensure_native_build,
    run_tool,
    environment,
    fsync_probe,
    latency_summary,
    write_json,
)

REPO = Path(__file__).resolve().parent.parent
STORE_CPU, LOAD_CPU = 0, 1
EVENT_SIZE = 256
SEED = 42


# -- stores ---------------------------------------------------------------------------------
class Sampler:
    """Store CPU % and RSS at 2 Hz (psutil), per PROTOCOL.md 1.6; a no-op without psutil."""

    def __init__(self, pid: int) -> None:
        self.samples: list[dict[str, float]] = []
        self._stop = threading.Event()
        try:
            import psutil  # noqa: PLC0415

            self._proc: Any = psutil.Process(pid)
        except Exception:  # noqa: BLE001
            self._proc = None
            return
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        t0 = time.perf_counter()
        self._proc.cpu_percent(None)
        while not self._stop.wait(0.5):
            try:
                self.samples.append({
                    "t": time.perf_counter() - t0,
                    "cpu_percent": self._proc.cpu_percent(None),
                    "rss_bytes": self._proc.memory_info().rss,
                })
            except Exception:  # noqa: BLE001 (the process ended)
                return

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        if not self.samples:
            return {}
        cpu = [x["cpu_percent"] for x in self.samples]
        rss = [x["rss_bytes"] for x in self.samples]
        return {"cpu_percent_avg": sum(cpu) / len(cpu), "cpu_percent_max": max(cpu),
                "rss_max_bytes": max(rss), "samples": len(cpu)}


READINESS: list[dict[str, Any]] = []  # filled per server start; attached to each result
STORE_STATS: list[dict[str, Any]] = []


def probe(url: str) -> dict[str, Any]:
    """Readiness probe (PROTOCOL.md 1.1 step 4): one unconditional esb_probe append."""
    t0 = time.perf_counter()
    attempts = 0
    while True:
        attempts += 1
        try:
            umadb.Client(url=url).append(
                [umadb.Event(event_type="esb_probe", data=b"\x00", tags=["esb-readiness-probe"])])
            return {"ready": True, "attempts": attempts,
                    "wait_ms": (time.perf_counter() - t0) * 1000}
        except Exception:  # noqa: BLE001
            if time.perf_counter() - t0 > 30:
                return {"ready": False, "attempts": attempts}
            time.sleep(0.2)


@contextlib.contextmanager
def server(kind: str, data_dir: Path) -> Iterator[str]:
    """Start ``tuffdb`` or ``umadb`` on a free port pinned to STORE_CPU; yield its URL."""
    pin = ["taskset", "-c", str(STORE_CPU)] if shutil.which("taskset") else []
    if kind == "tuffdb":
        cmd = [sys.executable, "-m", "tuffdb.server.umadb", "--port", "0",
               "--data-dir", str(data_dir / "events")]
    else:
        port = _free_port()
        umadb_bin = str(Path(sys.executable).with_name("umadb"))
        cmd = [umadb_bin, "--listen", f"127.0.0.1:{port}", "--db-path", str(data_dir / "uma.db")]
    proc = subprocess.Popen([*pin, *cmd], stderr=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    sampler = Sampler(proc.pid)
    try:
        url = _wait_ready(proc, kind, None if kind == "tuffdb" else port)
        READINESS.append(probe(url))
        yield url
    finally:
        STORE_STATS.append(sampler.stop())
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _free_port() -> int:
    import socket  # noqa: PLC0415

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(proc: subprocess.Popen[str], kind: str, port: int | None) -> str:
    streams = [proc.stderr] if kind == "tuffdb" else [proc.stderr, proc.stdout]
    found: dict[str, int] = {}
    done = threading.Event()

    def watch(stream: Any) -> None:
        for line in stream:
            if "listening on" in line and kind == "tuffdb":
                found["port"] = int(line.rsplit(":", 1)[1])
            if "UmaDB started" in line:
                done.set()
        done.set()

    for s in streams:
        threading.Thread(target=watch, args=(s,), daemon=True).start()
    done.wait(60)
    if proc.poll() is not None:
        raise RuntimeError(f"{kind} server exited with {proc.returncode}")
    return f"http://127.0.0.1:{found.get('port', port)}"


# -- measurement ----------------------------------------------------------------------------
class Window:
    """Counts only operations that complete inside [start, start + duration)."""

    def __init__(self, warmup: float, duration: float) -> None:
        self.start = time.perf_counter() + warmup
        self.end = self.start + duration
        self.duration = duration

    def run(self, workers: int, op_factory: Callable[[int], Callable[[], int]]) -> dict[str, Any]:
        counts = [0] * workers
        errors = [0] * workers
        lats: list[list[int]] = [[] for _ in range(workers)]
        barrier = threading.Barrier(workers)

        def work(i: int) -> None:
            op = op_factory(i)
            barrier.wait()
            pc = time.perf_counter
            while True:
                t0 = pc()
                try:
                    n = op()
                except Exception:  # noqa: BLE001 (counted; PROTOCOL.md: sleep 1 s, continue)
                    if self.start <= pc() < self.end:
                        errors[i] += 1
                    time.sleep(1)
                    continue
                t1 = pc()
                if self.start <= t1 < self.end:
                    counts[i] += n
                    lats[i].append(int((t1 - t0) * 1e9))
                elif t1 >= self.end:
                    return

        threads = [threading.Thread(target=work, args=(i,)) for i in range(workers)]
        wall0, cpu0 = time.perf_counter(), time.process_time()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        busy = (time.process_time() - cpu0) / (time.perf_counter() - wall0)
        total = sum(counts)
        return {
            "events": total,
            "events_per_s": total / self.duration,
            "errors": sum(errors),
            "latency": latency_summary(x for lst in lats for x in lst),
            # This process's CPU (every thread; warm-up included) over the run's wall time:
            # near 100 on the one pinned core means the client, not the store, set the pace.
            "load_cpu_percent": 100 * busy,
        }


def make_events(tag: str, etype: str, n: int) -> list[umadb.Event]:
    payload = bytes(EVENT_SIZE)
    return [umadb.Event(event_type=etype, data=payload, tags=[tag]) for _ in range(n)]


def write_op(url: str, batch: int) -> Callable[[int], Callable[[], int]]:
    def factory(i: int) -> Callable[[], int]:
        client = umadb.Client(url=url)
        state = {"n": 0, "tag": f"stream-{uuid.uuid4()}-"}

        def op() -> int:
            k = state["n"]
            if k and k % 10 == 0:
                state["tag"] = f"stream-{uuid.uuid4()}-"
            etype = f"test-{k % 10}"
            events = make_events(state["tag"], etype, batch)
            cond = umadb.AppendCondition(
                fail_if_events_match=umadb.Query(
                    items=[umadb.QueryItem(types=[etype], tags=[state["tag"]])]),
                after=0,
            )
            pos = client.append(events, condition=cond)
            if not pos:
                raise RuntimeError("conditional append returned no position")
            state["n"] = k + 1
            return batch

        return op

    return factory


def seed_corpus(url: str, events: int, streams: int) -> list[str]:
    client = umadb.Client(url=url)
    per = -(-events // streams)
    tags = []
    payload = bytes(EVENT_SIZE)
    for s in range(streams):
        tag = f"stream-{uuid.UUID(int=random.Random(SEED + s).getrandbits(128))}-{s}"
        tags.append(tag)
        evs = []
        for j in range(per):
            g = s * per + j
            evs.append(umadb.Event(event_type="setup", data=payload,
                                   tags=[tag, f"s1000:{g % 1000}", f"s100:{g % 100}",
                                         f"s10:{g % 10}"]))
        client.append(evs)
    return tags


def read_op(url: str, tags: list[str], shape: str) -> Callable[[int], Callable[[], int]]:
    def factory(i: int) -> Callable[[], int]:
        client = umadb.Client(url=url)
        rng = random.Random(SEED + i)

        def op() -> int:
            if shape == "single":
                q = umadb.Query(items=[umadb.QueryItem(types=["setup"], tags=[rng.choice(tags)])])
                return len(list(client.read(query=q, limit=10)))
            return len(list(client.read()))

        return op

    return factory


# -- runs -----------------------------------------------------------------------------------
def run_server_suite(args: argparse.Namespace, base: Path) -> dict[str, Any]:
    results: dict[str, Any] = {}
    kinds = ["tuffdb", "umadb"] if not args.only else [args.only]
    for name, batch, writers in args.write_matrix:
        if not _selected(args, name):
            continue
        for kind in kinds:
            d = Path(tempfile.mkdtemp(dir=base))
            with server(kind, d) as url:
                w = Window(args.warmup, args.duration)
                results[f"write/{name}/{kind}"] = w.run(writers, write_op(url, batch))
            results[f"write/{name}/{kind}"].update(
                readiness=READINESS[-1], store=STORE_STATS[-1])
            shutil.rmtree(d, ignore_errors=True)
            print(name, kind, _fmt(results[f"write/{name}/{kind}"]), file=sys.stderr)
    shapes = [(shape, readers) for shape, readers, name in (
        ("single", args.single_readers, "sel-single"), ("full", args.scan_readers, "full"))
        if _selected(args, name)]
    for kind in kinds if shapes else []:
        d = Path(tempfile.mkdtemp(dir=base))
        with server(kind, d) as url:
            t0 = time.perf_counter()
            tags = seed_corpus(url, args.read_events, args.read_streams)
            results[f"seed/{kind}"] = {"events_per_s": args.read_events / (time.perf_counter() - t0)}
            for shape, readers in shapes:
                w = Window(args.warmup, args.duration)
                key = f"read/warm-{'sel-single' if shape == 'single' else 'full'}/{kind}"
                results[key] = w.run(readers, read_op(url, tags, shape))
                print(key, _fmt(results[key]), file=sys.stderr)
        for shape, _ in shapes:
            key = f"read/warm-{'sel-single' if shape == 'single' else 'full'}/{kind}"
            results[key].update(readiness=READINESS[-1], store=STORE_STATS[-1])
        shutil.rmtree(d, ignore_errors=True)
    return results


def _selected(args: argparse.Namespace, name: str) -> bool:
    return not args.workloads or name in args.workloads


def run_embedded(args: argparse.Namespace, base: Path) -> dict[str, Any]:
    from tuffdb.events import AppendCondition, Event, EventStore, Query, QueryItem  # noqa: PLC0415

    d = Path(tempfile.mkdtemp(dir=base))
    store = EventStore.open(d / "events")
    batch = 512

    def factory(i: int) -> Callable[[], int]:
        state = {"n": 0, "tag": f"stream-{uuid.uuid4()}-"}
        payload = bytes(EVENT_SIZE)

        def op() -> int:
            k = state["n"]
            if k and k % 10 == 0:
                state["tag"] = f"stream-{uuid.uuid4()}-"
            etype = f"test-{k % 10}"
            tag = state["tag"]
            evs = [Event(etype, payload, [tag]) for _ in range(batch)]
            store.append(evs, AppendCondition(Query([QueryItem([etype], [tag])]), 0))
            state["n"] = k + 1
            return batch

        return op

    try:
        res = Window(args.warmup, args.duration).run(args.embedded_writers, factory)
    finally:
        store.close()
        shutil.rmtree(d, ignore_errors=True)
    return res


def _embedded_cell(args: argparse.Namespace, base: Path, cpus: set[int]) -> dict[str, Any]:
    with contextlib.suppress(AttributeError, OSError):
        os.sched_setaffinity(0, cpus)
    return run_embedded(args, base)


def run_embedded_both(args: argparse.Namespace, base: Path) -> dict[str, Any]:
    """The embedded store is one process (one GIL): unpinned, as an application embedding
    it runs (PROTOCOL.md pins separate processes only), and, for the record, pinned to the
    load generator's one core. Each cell runs in a fresh process (PROTOCOL.md 1.1: a fresh
    store process per run), not in this one after the server suite has filled its heap and
    left its clients' threads behind (that measured ~10-15 % lower)."""
    out = {}
    spawn = multiprocessing.get_context("spawn")
    for name, cpus in (("embedded-b512", set(range(os.cpu_count() or 1))),
                       ("embedded-b512-1core", {LOAD_CPU})):
        with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
            res = pool.submit(_embedded_cell, args, base, cpus).result()
        res["cpus"] = sorted(cpus)
        res["fresh_process"] = True
        print(name, _fmt(res), file=sys.stderr)
        out[f"write/{name}/tuffdb-embedded"] = res
    return out


def _fmt(r: dict[str, Any]) -> str:
    lat = r.get("latency", {}) or {}
    p = lat.get("percentiles") or {}
    return (f"{r['events_per_s']:,.0f} ev/s errors={r['errors']} n={lat.get('n')} "
            f"p50={p.get('p50')} p99={p.get('p99')} load_cpu={r['load_cpu_percent']:.0f}%")


def ratios(results: dict[str, Any]) -> dict[str, float]:
    out = {}
    for key, r in results.items():
        if key.endswith("/tuffdb"):
            other = results.get(key[: -len("tuffdb")] + "umadb")
            if other and other["events_per_s"]:
                out[key[: -len("/tuffdb")]] = r["events_per_s"] / other["events_per_s"]
    return out


# python bench/events.py plot RUN.json ...: redraw a run's chart and table.
TOOLS = {"plot": "_plot_events"}


def main() -> None:
    if run_tool("events.py", sys.argv[1:], TOOLS):
        return
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true", help="tiny sizes (seconds), for CI/dev")
    p.add_argument("--warmup", type=float, default=5.0)
    p.add_argument("--duration", type=float, default=15.0)
    p.add_argument("--dir", default=str(REPO / "bench" / "results" / "tmp"))
    p.add_argument("--out")
    p.add_argument("--only", choices=["tuffdb", "umadb"])
    p.add_argument("--skip-server", action="store_true")
    p.add_argument("--skip-embedded", action="store_true")
    p.add_argument("--workloads", type=lambda v: [x for x in v.split(",") if x],
                   help="comma-separated subset of the server workloads (default: all): "
                        "b512-w16,b64-w16,b1-w64,sel-single,full (smoke: b64-w4,b1-w8,...)")
    args = p.parse_args()
    ensure_native_build()
    args.write_matrix = [("b512-w16", 512, 16), ("b64-w16", 64, 16), ("b1-w64", 1, 64)]
    args.read_events, args.read_streams = 50_000, 5_000
    args.single_readers, args.scan_readers, args.embedded_writers = 16, 4, 4
    if args.smoke:
        args.warmup, args.duration = 0.3, 1.0
        args.write_matrix = [("b64-w4", 64, 4), ("b1-w8", 1, 8)]
        args.read_events, args.read_streams = 500, 50
        args.single_readers, args.scan_readers = 4, 2
    with contextlib.suppress(AttributeError, OSError):
        os.sched_setaffinity(0, {LOAD_CPU})
    base = Path(args.dir)
    base.mkdir(parents=True, exist_ok=True)
    run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out: dict[str, Any] = {
        "run_id": run_id, "smoke": args.smoke, "warmup_s": args.warmup,
        "duration_s": args.duration, "event_size": EVENT_SIZE, "seed": SEED,
        "pinning": {"store_cpu": STORE_CPU, "load_cpu": LOAD_CPU},
        "environment": environment(base, ["umadb", "hpack", "protobuf", "numpy", "pyroaring"]),
        "fsync": fsync_probe(base),
        "results": {},
    }
    if not args.skip_server:
        out["results"].update(run_server_suite(args, base))
    if not args.skip_embedded:
        out["results"].update(run_embedded_both(args, base))
    out["ratios_tuffdb_over_umadb"] = ratios(out["results"])
    dest = Path(args.out) if args.out else (
        REPO / "docs" / "benchmarks" / "events" / f"{run_id}{'-smoke' if args.smoke else ''}.json")
    dest.parent.mkdir(parents=True, exist_ok=True)
    write_json(dest, out)
    print(f"wrote {dest}", file=sys.stderr)
    for k, v in out["ratios_tuffdb_over_umadb"].items():
        print(f"ratio {k}: {v:.2f}x", file=sys.stderr)


if __name__ == "__main__":
    main()
