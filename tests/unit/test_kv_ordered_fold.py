"""The background thread keeps the ordered view current while nobody reads in order.

Story (issue 31): the RESP face's sweeper scans in key order every 30 s; with the view
folded only by ordered reads, that scan had to fold every key written in the last 30 s
at once: at 10^5 writes/s, seconds on the event loop, long enough for redis-py 8's 5 s
default socket timeout to fire and its retry to re-send a pipeline of XADDs. Now the
background thread folds written keys in chunks after each spill and on each tick.
"""

from __future__ import annotations

import time
from pathlib import Path

from tuffdb import KVStore

WAIT_S = 30.0


def test_written_keys_are_folded_without_an_ordered_read(tmp_path: Path) -> None:
    with KVStore.open(tmp_path / "kv", durability="none", hot_bytes=64 * 1024,
                      expiry_interval_s=0.05) as kv:
        kv.put(b"first", b"v")
        assert kv.count() == 1  # builds the ordered view
        kv.put_many((b"k%06d" % i, b"v") for i in range(20_000))
        kv.delete(b"first")
        deadline = time.monotonic() + WAIT_S
        while True:
            with kv._lock:  # noqa: SLF001  (the fold folds a chunk under the lock)
                if not (kv._touched or kv._folding):  # noqa: SLF001  (the condition under test)
                    folded = len(kv._ordered)  # noqa: SLF001
                    break
            assert time.monotonic() < deadline, "written keys never folded"
            time.sleep(0.01)  # polling a condition the background thread changes
        assert folded == 20_000
        assert kv.count(prefix=b"k") == 20_000
        assert next(kv.scan_keys(reverse=True)) == b"k019999"
