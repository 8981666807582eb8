"""Crash-test child: writes the shared workload to a KVStore and reports every acknowledged op.

    python kv_child.py PATH ROUND --threads N --options JSON [--count N] [--then sync|sleep]
                      [--failpoint NAME --failpoint-after N]

Protocol on stdout, one line per ``os.write`` (atomic on a pipe): ``ready``, then
``ack T I`` after op I of thread T *returned*, then ``done`` when every thread has
finished ``--count`` ops, then ``synced`` (after ``store.sync()``) or ``slept`` (after
sleeping ``interval_ms + 100`` ms: that sleep is the store's own durability deadline,
the system under test, not synchronisation). Then it blocks until killed.
Without ``--count`` the threads write until the parent kills the process.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kv_workload import op

from tuffdb import KVStore, _failpoints


def say(line: str) -> None:
    os.write(1, (line + "\n").encode())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("round", type=int)
    ap.add_argument("--threads", type=int, default=3)
    ap.add_argument("--options", default="{}")
    ap.add_argument("--max-value", type=int, default=8192)
    ap.add_argument("--count", type=int, default=None)
    ap.add_argument("--then", choices=("sync", "sleep"), default=None)
    ap.add_argument("--failpoint", default=None)
    ap.add_argument("--failpoint-after", type=int, default=0)
    ap.add_argument("--compact-every", type=int, default=0)
    ap.add_argument("--sync-writes", action="store_true", help="pass sync=True to every write")
    args = ap.parse_args()
    options = json.loads(args.options)
    if "encryption_key_hex" in options:
        options["encryption_key"] = bytes.fromhex(options.pop("encryption_key_hex"))
    store = KVStore.open(args.path, **options)
    say("ready")
    acks = 0
    lock = threading.Lock()

    def writer(t: int) -> None:
        nonlocal acks
        i = 0
        while args.count is None or i < args.count:
            effect, ttl = op(args.round, t, i, args.max_value)
            sync = True if args.sync_writes else None
            if len(effect) > 1:
                store.put_many([(k, v) for k, v in effect], ttl=ttl, sync=sync)
            elif effect[0][1] is None:
                store.delete(effect[0][0], sync=sync)
            else:
                store.put(effect[0][0], effect[0][1], ttl=ttl, sync=sync)
            say(f"ack {t} {i}")
            with lock:
                acks += 1
                if args.failpoint and acks == args.failpoint_after:
                    _failpoints.enable(args.failpoint, "exit")
                if args.compact_every and acks % args.compact_every == 0:
                    store.compact()
            i += 1

    threads = [threading.Thread(target=writer, args=(t,), daemon=True) for t in range(args.threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    say("done")
    if args.then == "sync":
        store.sync()
        say("synced")
    elif args.then == "sleep":
        time.sleep(options.get("interval_ms", 200) / 1000 + 0.1)
        say("slept")
    sys.stdin.read()  # wait to be killed


if __name__ == "__main__":
    main()
