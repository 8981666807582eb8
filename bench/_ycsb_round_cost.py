"""What one durable round costs the thread that runs it, by how the round waits (a probe
for docs/benchmarks/ycsb.md, not a benchmark).

    python bench/ycsb.py round-cost                # every mode, 4,000 rounds each
    taskset -c 0 python bench/ycsb.py round-cost aio sleep --rounds 8000

Each round is what the ekoDB face's loop does for one durable update: a ``KVStore.put``
(1.1 KB, encrypted store, ``durability="always"``), ``begin_round`` (the WAL frame
written), then the wait, then ``end_round``. The wait is, by mode:

- ``none``: no fsync (the round's own Python and the ``writev``);
- ``sleep``: no fsync, but the thread sleeps 200 us in ``select`` (about one fsync here);
- ``spin``: no fsync, the thread spins 200 us instead;
- ``inline``: ``fdatasync`` on the calling thread;
- ``aio``: the fsync through Linux AIO (``storage/aio_sync.py``), then ``select`` on its
  eventfd, as the server's loop does when it has nothing else to run;
- ``aiospin``: the same, polling the eventfd without sleeping;
- ``aioyield``: the same, with ``sched_yield`` between polls.

It prints wall time and the calling thread's CPU time (``time.thread_time``) per round.
Run it pinned to one core (the server's situation). On the 2-core VM of this project's
benchmarks, sleeping 200 us cost the thread ~80-100 us of CPU per round on top of the
round's own ~15-20 us, with or without another task to run on the core: each sleep and
wake-up is a context switch, which this VM makes dear, and the code after it runs with
cold caches. A round fsynced through AIO cost about what a sleep did; polling without
yielding starved the kernel worker that completes the fsync (~4 ms a round). Figures:
docs/benchmarks/ycsb.md, "2026-12-02".
"""

# Probe support, not library code.
# ruff: noqa: INP001, CPY001, T201, E501
from __future__ import annotations

import argparse
import os
import select
import shutil
import tempfile
import time
from pathlib import Path

from tuffdb.kv.store import KVStore
from tuffdb.storage.aio_sync import open_aio

MODES = ("none", "sleep", "spin", "inline", "aio", "aiospin", "aioyield")
WAIT_S = 200e-6


def run(mode: str, rounds: int, where: Path) -> tuple[float, float]:
    d = tempfile.mkdtemp(prefix="round-cost-", dir=where)
    store = KVStore.open(d, durability="always", encryption_key=os.urandom(32))
    aio = open_aio() if mode.startswith("aio") else None
    if mode.startswith("aio") and aio is None:
        raise SystemExit("Linux AIO fsync is not available here")
    value = os.urandom(550).hex().encode()

    def one(i: int) -> None:
        store.put(b"user%08d" % (i % 1000), value, sync=False)
        begun = store.begin_round(lambda: None)
        assert begun is not None
        number, staged = begun
        reqs = staged.sync_requests()
        if mode == "aio":
            assert aio is not None
            aio.submit(reqs)
            select.select([aio.fileno()], [], [])
            aio.reap()
        elif mode == "aiospin":
            assert aio is not None
            aio.submit(reqs)
            while not select.select([aio.fileno()], [], [], 0)[0]:
                pass
            aio.reap()
        elif mode == "aioyield":
            assert aio is not None
            aio.submit(reqs)
            while not select.select([aio.fileno()], [], [], 0)[0]:
                os.sched_yield()
            aio.reap()
        elif mode == "inline":
            for fd, _ in reqs:
                os.fdatasync(fd)
        elif mode == "sleep":
            select.select([], [], [], WAIT_S)
        elif mode == "spin":
            t = time.perf_counter()
            while time.perf_counter() - t < WAIT_S:
                pass
        store.end_round(number, staged, None)

    try:
        for i in range(min(500, rounds)):  # warm-up
            one(i)
        t, c = time.perf_counter(), time.thread_time()
        for i in range(rounds):
            one(i)
        return (time.perf_counter() - t) / rounds * 1e6, (time.thread_time() - c) / rounds * 1e6
    finally:
        if aio is not None:
            aio.close()
        store.close()
        shutil.rmtree(d, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("modes", nargs="*", help=f"any of {', '.join(MODES)} (default: all)")
    ap.add_argument("--rounds", type=int, default=4000)
    ap.add_argument("--dir", type=Path, default=Path.cwd(),
                    help="where the store goes (a real disk: not tmpfs)")
    args = ap.parse_args()
    if unknown := set(args.modes) - set(MODES):
        ap.error(f"unknown modes: {', '.join(sorted(unknown))}")
    for mode in args.modes or MODES:
        wall, cpu = run(mode, args.rounds, args.dir)
        print(f"{mode:7s} wall {wall:7.1f} us, thread CPU {cpu:6.1f} us per round", flush=True)


if __name__ == "__main__":
    main()
