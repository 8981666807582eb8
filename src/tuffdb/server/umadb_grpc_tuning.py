"""Per-call cost cuts for the ``umadb.v1.DCB`` face on grpcio's synchronous server.

Measured on the 2-core box (server pinned to one core, the ``umadb`` client on the other;
``docs/benchmarks/events.md``, "What limits the gRPC face"): grpcio's Python layer costs
about 200 us of CPU per call, three completion-queue events handled by one poller thread
plus two thread hand-offs to the pool, and that, not the store, bounds small calls. Two
cuts, each measured on its own (a third, a frozen heap and a 20,000 young-generation GC
threshold, helped batch-1 calls but looked to cost batch-512 appends, so it is not used):

* :func:`batch_scheduling` / :func:`batch_thread`: the face's threads run under
  ``SCHED_BATCH``. With every thread on one core, a thread woken by a lock release would
  preempt the waker while the waker still holds the GIL, only to block on the GIL at once
  (a convoy of context switches per hand-off); batch threads do not preempt on wake-up.
* :func:`last_with_status`: grpcio sends a unary reply's headers, message and status in
  one batch (one completion event, no wait for the send), but a stream's last message and
  its status in two, the handler thread waiting for the first. Read (a stream, nearly
  always of one message) sends its last message together with the status, through
  grpcio's non-blocking stream handler and its private ``_status`` helper; when that helper
  is missing (another grpcio), Read stays a plain streaming handler.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Any

import grpc

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

try:  # private grpcio helpers (grpc/_server.py), present from 1.x through at least 1.85
    from grpc._server import _status
except ImportError:  # pragma: no cover (another grpcio)
    _status = None


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


@contextlib.contextmanager
def batch_scheduling() -> Iterator[None]:
    """Threads started by the caller inside this block (and theirs) run under SCHED_BATCH.

    The caller's own policy is restored on exit, so the host's event loop is unaffected.
    """
    old = _set_batch(0)
    try:
        yield
    finally:
        if old is not None:
            with contextlib.suppress(OSError):
                os.sched_setscheduler(0, old, os.sched_param(0))


def last_with_status(
    read: Callable[[bytes, grpc.ServicerContext], Iterator[bytes]],
) -> grpc.RpcMethodHandler:
    """The handler for a server-streaming ``read``; see the module docstring."""
    if _status is None:  # pragma: no cover (another grpcio)
        return grpc.unary_stream_rpc_method_handler(read)

    def handler(raw: bytes, context: Any, send: Callable[[bytes | None], None]) -> None:
        last = None
        for msg in read(raw, context):
            if last is not None:
                send(last)  # grpcio's own stream send: waits until the message is out
                if not context.is_active():
                    return  # the client went away
            last = msg
        if last is None:
            send(None)  # no message at all: just the OK status
        else:
            _status(context._rpc_event, context._state, last)  # noqa: SLF001

    handler.experimental_non_blocking = True  # type: ignore[attr-defined]
    return grpc.unary_stream_rpc_method_handler(handler)


__all__ = ["batch_scheduling", "batch_thread", "last_with_status"]
