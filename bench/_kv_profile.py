"""A bare KV ingest loop to run under a profiler (not a benchmark: see bench/kv.py).

    py-spy record --gil -r 400 -f raw -o ingest.raw -- python bench/kv.py profile-ingest interval 8

300,000 fresh random 16-byte keys x 1 KiB kvbench-style values, split over N threads.
"""

from __future__ import annotations

import os
import random
import shutil
import struct
import sys
import threading
import time
from pathlib import Path

from tuffdb import KVStore

N = 300_000


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "interval"
    threads = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    d = Path(os.environ.get("TUFFDB_BENCH_DIR", "bench/results/tmp")) / "profile-ingest"
    shutil.rmtree(d, ignore_errors=True)
    rnd = random.Random(1)
    keys = [struct.pack(">Q", rnd.getrandbits(64)) + b"0" * 8 for _ in range(N)]
    tmpl = (b"abcdefghijklmnopqrstuvwxyz" * 40)[:1024]
    vals = [os.urandom(8) + k[:8] + tmpl[16:] for k in keys]
    store = KVStore.open(d, durability=mode)
    per = N // threads

    def writer(i: int) -> None:
        put = store.put
        for j in range(i * per, (i + 1) * per):
            put(keys[j], vals[j])

    t = time.perf_counter()
    ts = [threading.Thread(target=writer, args=(i,)) for i in range(threads)]
    for x in ts:
        x.start()
    for x in ts:
        x.join()
    dt = time.perf_counter() - t
    print(f"{mode} put x{threads}: {per * threads / dt:,.0f}/s")
    store.close()
    shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
