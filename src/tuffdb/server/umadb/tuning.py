"""Thread scheduling for the ``umadb.v1.DCB`` face: ``SCHED_BATCH`` for the store's writer.

The face's loop thread and the event store's writer thread share one core in the
benchmark (and often in production). A thread woken by a lock release would preempt the
waker while the waker still holds the GIL, only to block on the GIL at once (a convoy of
context switches per hand-off); a ``SCHED_BATCH`` thread does not preempt on wake-up.
Measured with the earlier grpcio front end (docs/benchmarks/events.md, "What limits the
gRPC face"), where it was one of two cuts kept. The face now commits on its loop, so the
writer wakes only for embedded callers sharing the process.
"""

from __future__ import annotations

import os


def _set_batch(tid: int) -> int | None:
    """Put thread ``tid`` (0: the caller) under SCHED_BATCH; return its old policy."""
    if not hasattr(os, "SCHED_BATCH"):
        return None
    try:
        old = os.sched_getscheduler(tid)
        if old == os.SCHED_OTHER:
            os.sched_setscheduler(tid, os.SCHED_BATCH, os.sched_param(0))
            return old
    except OSError:
        pass
    return None


def batch_thread(native_id: int) -> None:
    """Run an already started thread (``Thread.native_id``) under SCHED_BATCH."""
    _set_batch(native_id)


__all__ = ["batch_thread"]
