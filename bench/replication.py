#!/usr/bin/env python3
"""Replication benchmark: what synchronous followers cost, how far asynchronous ones lag,
and how long a failover takes (issue 29; design: docs/design/replication.md).

    python bench/replication.py                          # the full run (a quiet machine)
    python bench/replication.py --smoke                  # seconds: every cell, tiny
    python bench/replication.py plot RESULT.json         # table and chart again

Configurations, each started fresh (every node ``tuffdb serve --durability always`` on
loopback, a private etcd for the clusters; all on this machine, so a cluster's three nodes
and etcd share its cores with the load generator: ratios, not absolute rates):

- ``single``: one node, no ``--cluster`` (the baseline);
- ``sync0`` / ``sync1``: a leader and one follower, ``--sync-replicas 0 | 1``;
- ``sync1-3n``: three nodes, ``--sync-replicas 1`` (the default deployment: its second
  follower also applies everything, on the same two cores);
- ``sync2``: three nodes, ``--sync-replicas 2``.

Per configuration and repetition, against the leader, in one run (cells interleaved):

- ``resp``: ``redis-benchmark -t set -d 1024 -c 50 -n N`` (``appendfsync always``:
  every SET durable), requests/s and p50/p99 from redis-benchmark's CSV;
- ``events``: 16 writer threads of the ``umadb`` client, each appending batches of 64
  events for ``--duration`` s: events/s, p50/p99 per append;
- ``docs``: YCSB-A-like (50 % reads of a record, 50 % updates of one field) over 1,000
  records through the ekoDB HTTP face with ``durable_operations``, 8 threads of httpx for
  ``--duration`` s: ops/s, p50/p99. (A Python client: both sides of every ratio pay it.)

Also: **follower lag** under the resp load of ``sync0`` (a probe writes a timestamped key to
the leader every 20 ms and waits for it on a follower: p50/p99), and **failover time** over
``--failovers`` leader SIGKILLs on ``sync1`` (from the kill to the first write a new leader
acknowledges; every acknowledged write is then checked on the new leader: ``lost`` must be 0).

Output: ``docs/benchmarks/replication/<run-id>.json`` and ``latest.json`` (raw), ``results.md``
and ``replication.png`` drawn from the raw file only.
"""

# Benchmark script, not library code.
# ruff: noqa: INP001, CPY001, S603, S607, T201, PLR0913, PLR0915, C901, E501
from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _common import REPO, environment, fsync_probe, latency_summary, spread, utc_now, write_json

sys.path.insert(0, str(REPO / "src"))

import httpx  # noqa: E402
import redis  # noqa: E402
import umadb  # noqa: E402

from tuffdb.testing.cluster import ServerCluster, ServerNode, until  # noqa: E402
from tuffdb.testing.etcd import EtcdCluster  # noqa: E402

OUT = REPO / "docs" / "benchmarks" / "replication"
CONFIGS = ("single", "sync0", "sync1", "sync1-3n", "sync2")
# config -> (nodes, --sync-replicas)
SHAPES = {"single": (1, 0), "sync0": (2, 0), "sync1": (2, 1), "sync1-3n": (3, 1),
          "sync2": (3, 2), "failover": (3, 1)}
FACES = ("resp", "events", "docs")


# -- one configuration -------------------------------------------------------------------
class Deployment:
    """A single node or a three-node cluster (with its etcd), started fresh."""

    def __init__(self, config: str, root: Path) -> None:
        self.config = config
        self.root = root
        self.etcd: EtcdCluster | None = None
        extra = ["--config", str(_toml(root))]
        if config == "single":
            self.nodes = [ServerNode(root, "single", None, extra=extra)]
        else:
            self.etcd = EtcdCluster.start(root / "etcd")
            size, n = SHAPES[config]
            self.cluster = ServerCluster(root / "nodes", self.etcd.endpoint_list, size=size,
                                         cluster=config,
                                         extra=[*extra, "--sync-replicas", str(n)])
            self.nodes = self.cluster.nodes
        for node in self.nodes:
            node.start()
        self.leader = self.wait_leader()

    def wait_leader(self, exclude: ServerNode | None = None) -> ServerNode:
        if self.config == "single":
            node = self.nodes[0]
            until("the single node", lambda: node.role() is None and node.health())
            return node
        leader = self.cluster.leader(exclude=exclude)
        size, n = SHAPES[self.config]
        if n:
            self.cluster.in_sync(leader, n)
        alive = sum(1 for node in self.nodes if node.alive) - 1
        until(f"{alive} followers connected", lambda: sum(
            1 for f in leader.health()["cluster"].get("followers", {}).values()
            if f["connected"]) >= alive)
        return leader

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
        if self.etcd is not None:
            self.etcd.stop()


def _toml(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    path = root / "serve.toml"
    path.write_text("[http]\ndurable_operations = true\n")
    return path


# -- where the CPU goes ----------------------------------------------------------------------
_TICK = os.sysconf("SC_CLK_TCK")


def _proc_cpu_s(pid: int | None) -> float:
    """User + system CPU seconds of a live process (0 if it is gone)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime


class CpuMeter:
    """CPU seconds per role over one load: the leader, the followers, etcd, and the load
    generator (this process's threads plus waited children: redis-benchmark). Divided by
    the wall time it is cores in use; divided by the operations, CPU per operation."""

    def __init__(self, dep: Deployment) -> None:
        self.dep = dep

    def _roles(self) -> dict[str, float]:
        leader = self.dep.leader
        followers = [n for n in self.dep.nodes if n is not leader]
        etcd = self.dep.etcd.members if self.dep.etcd is not None else []
        t = os.times()
        return {"leader": _proc_cpu_s(leader.proc.pid if leader.proc else None),
                "followers": sum(_proc_cpu_s(n.proc.pid if n.proc else None) for n in followers),
                "etcd": sum(_proc_cpu_s(m.proc.pid if m.proc else None) for m in etcd),
                "client": t.user + t.system + t.children_user + t.children_system}

    def __enter__(self) -> CpuMeter:
        self.t0, self.before = time.monotonic(), self._roles()
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.monotonic() - self.t0
        after = self._roles()
        self.cores = {k: round((after[k] - self.before[k]) / wall, 3) for k in after}
        self.cores["total"] = round(sum(self.cores.values()), 3)

    def attach(self, cell: dict[str, Any]) -> dict[str, Any]:
        """Add ``cpu_cores`` (per role) and ``cpu_us_per_op`` (per role, over the cell's
        throughput) to ``cell``."""
        cell["cpu_cores"] = self.cores
        rate = cell["ops_per_s"]
        cell["cpu_us_per_op"] = {k: round(1e6 * v / rate, 2) if rate else None
                                 for k, v in self.cores.items()}
        return cell


# -- the loads ----------------------------------------------------------------------------
def resp_load(node: ServerNode, requests: int) -> dict[str, Any]:
    cmd = ["redis-benchmark", "-h", node.host, "-p", str(node.ports["resp"]), "-t", "set",
           "-n", str(requests), "-d", "1024", "-c", "50", "-r", "100000", "--csv", "-q"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=3600).stdout
    row = next(r for r in csv.DictReader(io.StringIO(out)) if r["test"] == "SET")
    return {"ops_per_s": float(row["rps"]), "p50_ms": float(row["p50_latency_ms"]),
            "p99_ms": float(row["p99_latency_ms"]), "n": requests, "command": cmd}


def events_load(node: ServerNode, duration: float, writers: int = 16, batch: int = 64) -> dict[str, Any]:
    stop = time.monotonic() + duration
    lat: list[int] = []
    counts = [0] * writers
    errors = [0] * writers
    data = b"\0" * 64

    def writer(i: int) -> None:
        client = umadb.Client(url=node.grpc_url)
        tag = f"w{i}-{random.getrandbits(32)}"
        events = [umadb.Event(event_type=f"test-{i % 10}", data=data, tags=[tag])
                  for _ in range(batch)]
        while time.monotonic() < stop:
            t = time.perf_counter_ns()
            try:
                client.append(events)
            except Exception:  # noqa: BLE001 - counted; the harness goes on
                errors[i] += 1
                continue
            lat.append(time.perf_counter_ns() - t)
            counts[i] += batch

    t0 = time.monotonic()
    threads = [threading.Thread(target=writer, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    summary = latency_summary(lat)
    pct = summary.get("percentiles") or {}
    return {"ops_per_s": sum(counts) / elapsed, "unit": "events/s", "errors": sum(errors),
            "p50_ms": (pct.get("p50") or 0) / 1000, "p99_ms": (pct.get("p99") or 0) / 1000,
            "n": len(lat), "writers": writers, "batch": batch}


def docs_records(node: ServerNode, leader_key: str, records: int = 1000) -> dict[str, Any]:
    """Insert the records the docs load reads and updates (not measured)."""
    base = node.http_url
    token = httpx.post(f"{base}/api/auth/token", json={"api_key": leader_key},
                       timeout=60).json()["token"]
    hdr = {"Authorization": f"Bearer {token}"}
    record = {f"field{j}": "x" * 100 for j in range(10)}
    with httpx.Client(headers=hdr, timeout=60) as c:
        ids = [c.post(f"{base}/api/insert/usertable", json=record).json()["id"]
               for _ in range(records)]
    return {"base": base, "headers": hdr, "ids": ids}


def docs_load(setup: dict[str, Any], duration: float,
              threads: int = 8) -> dict[str, Any]:
    base, hdr, ids = setup["base"], setup["headers"], setup["ids"]
    records = len(ids)
    stop = time.monotonic() + duration
    lat: list[int] = []
    counts = [0] * threads
    errors = [0] * threads

    def worker(i: int) -> None:
        rnd = random.Random(i)
        with httpx.Client(headers=hdr, timeout=60) as c:
            while time.monotonic() < stop:
                rid = rnd.choice(ids)
                t = time.perf_counter_ns()
                if rnd.random() < 0.5:
                    r = c.get(f"{base}/api/find/usertable/{rid}")
                else:
                    r = c.put(f"{base}/api/update/usertable/{rid}",
                              json={f"field{rnd.randrange(10)}": "y" * 100})
                if r.status_code != 200:
                    errors[i] += 1
                    continue
                lat.append(time.perf_counter_ns() - t)
                counts[i] += 1

    t0 = time.monotonic()
    ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    elapsed = time.monotonic() - t0
    pct = latency_summary(lat).get("percentiles") or {}
    return {"ops_per_s": sum(counts) / elapsed, "errors": sum(errors), "n": len(lat),
            "p50_ms": (pct.get("p50") or 0) / 1000, "p99_ms": (pct.get("p99") or 0) / 1000,
            "threads": threads, "records": records}


def lag_probe(leader: ServerNode, follower: ServerNode, stop: threading.Event) -> list[float]:
    """Seconds from a write acknowledged by the leader to its value on the follower."""
    lr, fr = redis.Redis(*leader.resp), redis.Redis(*follower.resp)
    samples: list[float] = []
    i = 0
    while not stop.is_set():
        key = f"lag-probe-{i}"
        lr.set(key, b"1")
        t0 = time.perf_counter()
        while fr.get(key) is None:
            if time.perf_counter() - t0 > 30:
                break
        samples.append(time.perf_counter() - t0)
        i += 1
        stop.wait(0.02)
    return samples


def _probe_into(samples: list[float], leader: ServerNode, follower: ServerNode,
                stop: threading.Event) -> None:
    samples.extend(lag_probe(leader, follower, stop))


def _try(fn: Any, default: Any = None) -> Any:
    try:
        return fn()
    except (redis.exceptions.RedisError, OSError):
        return default


def failovers(root: Path, count: int) -> dict[str, Any]:
    """``count`` leader SIGKILLs on a three-node ``--sync-replicas 1`` cluster. Each round
    writes 20 keys to the current leader (found through the cluster each time), kills it,
    and times the first write another node acknowledges; every write ever acknowledged is
    then read back from the leader of the moment. A round that goes wrong is recorded
    (``errors``) and the next one starts from a cluster that settled again."""
    dep = Deployment("failover", root)
    times: list[float] = []
    errors: list[str] = []
    lost_total = 0
    acked: dict[str, bytes] = {}
    try:
        for k in range(count):
            try:
                leader = dep.wait_leader()
                r = redis.Redis(*leader.resp, socket_timeout=5)
                for i in range(20):
                    key = f"f{k}:{i}"
                    if _try(lambda key=key: r.set(key, key)):
                        acked[key] = key.encode()
                t0 = time.perf_counter()
                leader.kill()
                first = None
                while first is None and time.perf_counter() - t0 < 120:
                    for node in dep.nodes:
                        if node is leader or not node.alive:
                            continue
                        c = redis.Redis(*node.resp, socket_timeout=2)
                        if _try(lambda c=c: c.set(f"after{k}", "1")):
                            first = time.perf_counter() - t0
                            acked[f"after{k}"] = b"1"
                            break
                times.append(first if first is not None else float("nan"))
                now = dep.wait_leader(exclude=leader)
                nr = redis.Redis(*now.resp, socket_timeout=10)
                got = nr.mget(list(acked))
                lost = [key for key, v in zip(acked, got, strict=True) if v != acked[key]]
                lost_total = len(lost)  # every acknowledged write so far, read again
                leader.start()
                dep.wait_leader()
            except Exception as exc:  # noqa: BLE001 - recorded; the next round starts over
                errors.append(f"round {k + 1}: {exc!r}")
                with contextlib.suppress(Exception):
                    for node in dep.nodes:
                        if not node.alive:
                            node.start()
                    dep.wait_leader()
            print(f"failover {k + 1}/{count}: {times[-1] if times else float('nan'):.2f} s, "
                  f"lost {lost_total}, errors {len(errors)}", flush=True)
    finally:
        dep.stop()
    ok = sorted(t for t in times if t == t)
    return {"count": count, "measured": len(ok), "seconds": times, "errors": errors,
            "lost_acknowledged_writes": lost_total, "acknowledged_writes": len(acked),
            "p50_s": statistics.median(ok) if ok else None,
            "p99_s": ok[min(len(ok) - 1, int(round(0.99 * (len(ok) - 1))))] if ok else None,
            "max_s": max(ok) if ok else None}


# -- the run ----------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> dict[str, Any]:
    base = Path(args.dir)
    base.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {
        "run_id": utc_now().replace(":", "").replace("-", ""),
        "environment": environment(base, ["umadb", "redis", "httpx"]),
        "fsync_probe": fsync_probe(base),
        "settings": {"reps": args.reps, "duration_s": args.duration,
                     "resp_requests": args.requests, "failovers": args.failovers,
                     "lease_ttl_s": 2, "smoke": args.smoke},
        "cells": [], "lag": {}, "failover": None,
    }
    for rep in range(args.reps):
        for config in CONFIGS:
            with tempfile.TemporaryDirectory(dir=base, prefix=f"repl-{config}-") as d:
                dep = Deployment(config, Path(d))
                try:
                    leader = dep.leader
                    admin = leader.admin_key()
                    stop = threading.Event()
                    samples: list[float] = []
                    probe = None
                    if config == "sync0":  # lag of an asynchronous follower
                        follower = next(n for n in dep.nodes if n is not leader)
                        probe = threading.Thread(target=_probe_into,
                                                 args=(samples, leader, follower, stop))
                        probe.start()
                    with CpuMeter(dep) as cpu:
                        cell = resp_load(leader, args.requests)
                    cells = {"resp": cpu.attach(cell)}
                    if probe is not None:
                        stop.set()
                        probe.join()
                        result["lag"].setdefault("samples_s", []).extend(samples)
                    with CpuMeter(dep) as cpu:
                        cell = events_load(leader, args.duration)
                    cells["events"] = cpu.attach(cell)
                    docs_setup = docs_records(leader, admin)
                    with CpuMeter(dep) as cpu:
                        cell = docs_load(docs_setup, args.duration)
                    cells["docs"] = cpu.attach(cell)
                finally:
                    dep.stop()
            for face, cell in cells.items():
                cell.update(rep=rep, config=config, face=face)
                result["cells"].append(cell)
                print(f"rep {rep} {config:8} {face:6} {cell['ops_per_s']:>10,.0f}/s "
                      f"p50 {cell['p50_ms']:.2f} ms p99 {cell['p99_ms']:.2f} ms", flush=True)
            write_json(base / "replication-partial.json", result)  # a crash keeps what ran
    lag = sorted(result["lag"].get("samples_s", []))
    if lag:
        result["lag"].update(n=len(lag), p50_ms=1000 * lag[len(lag) // 2],
                             p99_ms=1000 * lag[min(len(lag) - 1, int(0.99 * len(lag)))],
                             max_ms=1000 * lag[-1])
    if args.failovers:
        with tempfile.TemporaryDirectory(dir=base, prefix="repl-failover-") as d:
            result["failover"] = failovers(Path(d), args.failovers)
    result["summary"] = summarize(result)
    return result


def summarize(result: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for face in FACES:
        by = {c: [x for x in result["cells"] if x["face"] == face and x["config"] == c]
              for c in CONFIGS}
        single = spread([x["ops_per_s"] for x in by["single"]])
        for config in CONFIGS:
            cells = by[config]
            rate = spread([x["ops_per_s"] for x in cells])
            ratio = (rate["median"] / single["median"]) if single["median"] and rate["median"] else None
            mid = sorted(cells, key=lambda x: x["ops_per_s"])[len(cells) // 2] if cells else {}
            rows.append({"face": face, "config": config, "ops_per_s": rate,
                         "ratio_to_single": round(ratio, 3) if ratio else None,
                         "p50_ms": mid.get("p50_ms"), "p99_ms": mid.get("p99_ms"),
                         "cpu_cores": mid.get("cpu_cores"), "cpu_us_per_op": mid.get("cpu_us_per_op"),
                         "target": 0.6 if config in ("sync1", "sync1-3n") else None,
                         "meets": (ratio >= 0.6) if config in ("sync1", "sync1-3n") and ratio else None})
    return rows


def markdown(result: dict[str, Any]) -> str:
    s = result["settings"]
    lines = [f"# Replication benchmark ({result['run_id']})", "",
             f"{s['reps']} repetition(s) per cell (median, min-max), durable writes on every "
             "face, all nodes and etcd on one 2-core machine with the load generator "
             f"(lease TTL {s['lease_ttl_s']} s){'; SMOKE sizes' if s['smoke'] else ''}.", "",
             "| face | config | ops/s (median, min-max) | / single | p50 ms | p99 ms | target |",
             "|---|---|---|---|---|---|---|"]
    for r in result["summary"]:
        o = r["ops_per_s"]
        target = "" if r["target"] is None else f">= {r['target']} {'met' if r['meets'] else 'MISSED'}"
        lines.append(f"| {r['face']} | {r['config']} | {o['median']:,.0f} ({o['min']:,.0f}-{o['max']:,.0f}) "
                     f"| {r['ratio_to_single'] or '-'} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {target} |")
    if any(r.get("cpu_us_per_op") for r in result["summary"]):
        lines += ["", "Where the CPU goes (the median cell of each row): CPU per operation in "
                      "microseconds by role, and cores in use in total (of 2). The client is the "
                      "load generator (redis-benchmark, or this script's threads).", "",
                  "| face | config | leader us/op | followers us/op | etcd us/op | client us/op "
                  "| all us/op | cores in use |", "|---|---|---|---|---|---|---|---|"]
        for r in result["summary"]:
            u, c = r.get("cpu_us_per_op"), r.get("cpu_cores")
            if not u or not c:
                continue
            lines.append(f"| {r['face']} | {r['config']} | {u['leader']} | {u['followers']} | "
                         f"{u['etcd']} | {u['client']} | {u['total']} | {c['total']} |")
    lag = result.get("lag") or {}
    if lag.get("n"):
        lines += ["", f"Asynchronous follower lag (sync0, under the resp load): p50 "
                      f"{lag['p50_ms']:.1f} ms, p99 {lag['p99_ms']:.1f} ms, max {lag['max_ms']:.1f} ms "
                      f"over {lag['n']} probes (target p99 < 100 ms: "
                      f"{'met' if lag['p99_ms'] < 100 else 'MISSED'})."]
    fo = result.get("failover")
    if fo and fo.get("p99_s") is not None:
        lines += ["", f"Failover (sync1, leader SIGKILL to the first write a new leader acknowledges) "
                      f"over {fo['count']} failovers: p50 {fo['p50_s']:.2f} s, p99 {fo['p99_s']:.2f} s, "
                      f"max {fo['max_s']:.2f} s; acknowledged writes lost: "
                      f"{fo['lost_acknowledged_writes']} of {fo['acknowledged_writes']} "
                      f"(target p99 < 5 s with 0 lost: "
                      f"{'met' if fo['p99_s'] < 5 and not fo['lost_acknowledged_writes'] else 'MISSED'})"
                      f"; rounds that went wrong: {len(fo.get('errors', []))}."]
    return "\n".join(lines) + "\n"


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, axes = plt.subplots(1, len(FACES), figsize=(12, 3.6))
    for ax, face in zip(axes, FACES, strict=True):
        rows = [r for r in result["summary"] if r["face"] == face]
        ax.bar([r["config"] for r in rows], [r["ratio_to_single"] or 0 for r in rows])
        ax.axhline(0.6, color="red", linestyle="--", linewidth=1)
        ax.set_title(f"{face}: throughput / single node")
        ax.set_ylim(0, max(1.2, *[(r["ratio_to_single"] or 0) for r in rows]))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "plot":
        src = Path(argv[1]) if len(argv) > 1 else OUT / "latest.json"
        result = json.loads(src.read_text())
        (src.parent / "results.md").write_text(markdown(result))
        plot(result, src.parent / "replication.png")
        print(markdown(result))
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--duration", type=float, default=10.0)
    p.add_argument("--requests", type=int, default=50_000, help="redis-benchmark -n per cell")
    p.add_argument("--failovers", type=int, default=20)
    p.add_argument("--dir", default=str(REPO / "bench" / "results" / "tmp"))
    p.add_argument("--out", default=str(OUT))
    p.add_argument("--smoke", action="store_true", help="tiny sizes, one repetition")
    args = p.parse_args(argv)
    if args.smoke:
        args.reps, args.duration, args.requests, args.failovers = 1, 1.0, 2000, 1
    if shutil.which("redis-benchmark") is None:
        print("redis-benchmark is needed: apt-get install redis-tools", file=sys.stderr)
        return 2
    result = run(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / f"{result['run_id']}.json", result)
    write_json(out / "latest.json", result)
    (out / "results.md").write_text(markdown(result))
    plot(result, out / "replication.png")
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
