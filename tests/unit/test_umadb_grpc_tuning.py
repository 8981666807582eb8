"""The gRPC face's thread scheduling (server/umadb/tuning.py)."""

from __future__ import annotations

import os
import threading

from tuffdb.server.umadb import tuning


def test_batch_thread_sets_a_running_thread() -> None:
    go = threading.Event()
    seen: list[int] = []

    def run() -> None:
        go.wait()
        seen.append(os.sched_getscheduler(0))

    t = threading.Thread(target=run)
    t.start()
    assert t.native_id is not None
    tuning.batch_thread(t.native_id)
    go.set()
    t.join()
    assert seen == [os.SCHED_BATCH]
