"""The gRPC face's thread scheduling (server/umadb_grpc_tuning.py)."""

from __future__ import annotations

import os
import threading

from tuffdb.server import umadb_grpc_tuning as tuning


def _policy_of_thread_started_inside() -> tuple[int, int]:
    seen: list[int] = []
    with tuning.batch_scheduling():
        inside = os.sched_getscheduler(0)
        t = threading.Thread(target=lambda: seen.append(os.sched_getscheduler(0)))
        t.start()
        t.join()
    return inside, seen[0]


def test_threads_started_inside_run_batch_and_the_caller_is_restored() -> None:
    before = os.sched_getscheduler(0)
    inside, child = _policy_of_thread_started_inside()
    assert inside == os.SCHED_BATCH
    assert child == os.SCHED_BATCH
    assert os.sched_getscheduler(0) == before


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
