"""fsync without blocking the caller: Linux AIO ``IOCB_CMD_FDSYNC`` with an eventfd.

An event loop that fsyncs its group-commit round inline stops serving every client for
the whole fsync (~0.1-0.2 ms here); handing the fsync to a Python thread costs a wake-up
and a GIL hand-off back, which on a one-core server wait behind the busy loop. The
kernel's AIO interface (Linux >= 4.18 for fsync) runs the fsync on a kernel worker and
signals an eventfd when it is done: the loop submits, goes on serving, and reaps the
completion when the eventfd turns readable. No Python thread is involved.

Reached through ``ctypes`` and ``syscall(2)`` (no dependency); :func:`open_aio` returns
None where the interface is missing (another OS or architecture, a kernel without AIO
fsync, ``fs.aio-max-nr`` exhausted), and callers then fsync inline as before.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
import threading
from collections.abc import Sequence

# syscall numbers: io_setup, io_destroy, io_getevents, io_submit
_SYSCALLS = {"x86_64": (206, 207, 208, 209), "aarch64": (0, 1, 4, 2)}
_CMD_FSYNC, _CMD_FDSYNC = 2, 3
_FLAG_RESFD = 1
MAX_EVENTS = 64  # outstanding fsyncs (one per log file touched by a round)


class _IOCB(ctypes.Structure):  # struct iocb (little-endian field order)
    _fields_ = [
        ("aio_data", ctypes.c_uint64), ("aio_key", ctypes.c_uint32),
        ("aio_rw_flags", ctypes.c_int32), ("aio_lio_opcode", ctypes.c_uint16),
        ("aio_reqprio", ctypes.c_int16), ("aio_fildes", ctypes.c_uint32),
        ("aio_buf", ctypes.c_uint64), ("aio_nbytes", ctypes.c_uint64),
        ("aio_offset", ctypes.c_int64), ("aio_reserved2", ctypes.c_uint64),
        ("aio_flags", ctypes.c_uint32), ("aio_resfd", ctypes.c_uint32),
    ]


class _Event(ctypes.Structure):  # struct io_event
    _fields_ = [("data", ctypes.c_uint64), ("obj", ctypes.c_uint64),
                ("res", ctypes.c_int64), ("res2", ctypes.c_int64)]


class AioSync:
    """Submit fsyncs, learn of their completion through :meth:`fileno` (an eventfd)."""

    def __init__(self, libc: ctypes.CDLL, numbers: tuple[int, int, int, int]) -> None:
        self._libc = libc
        self._setup, self._destroy, self._getevents, self._submit = numbers
        ctx = ctypes.c_ulong(0)
        if libc.syscall(self._setup, MAX_EVENTS, ctypes.byref(ctx)) != 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        self._ctx = ctx
        self._efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._pending: dict[int, _IOCB] = {}  # aio_data -> its iocb, kept alive until reaped
        self._next = 1
        self._events = (_Event * MAX_EVENTS)()
        self._mu = threading.Lock()  # reaping from the loop and from close() never overlap

    def fileno(self) -> int:
        return self._efd

    @property
    def outstanding(self) -> int:
        return len(self._pending)

    def submit(self, fds: Sequence[tuple[int, bool]]) -> list[int]:
        """Start an fsync of each ``(fd, data_only)``; returns their ids for :meth:`reap`.

        :raises OSError: when the kernel refuses (nothing of this call was submitted
            unless the error says how many were; callers then fsync the rest inline).
        """
        with self._mu:
            if len(self._pending) + len(fds) > MAX_EVENTS:
                raise OSError(11, "too many outstanding fsyncs")
            cbs = []
            ids = []
            for fd, data_only in fds:
                n = self._next
                self._next += 1
                cb = _IOCB(aio_data=n, aio_lio_opcode=_CMD_FDSYNC if data_only else _CMD_FSYNC,
                           aio_fildes=fd, aio_flags=_FLAG_RESFD, aio_resfd=self._efd)
                cbs.append(cb)
                ids.append(n)
            arr = (ctypes.POINTER(_IOCB) * len(cbs))(*(ctypes.pointer(c) for c in cbs))
            done = self._libc.syscall(self._submit, self._ctx, ctypes.c_long(len(cbs)), arr)
            if done != len(cbs):
                err = ctypes.get_errno() if done < 0 else 11
                for cb in cbs[: max(done, 0)]:  # partly submitted: remember those
                    self._pending[cb.aio_data] = cb
                raise OSError(err, f"io_submit took {max(done, 0)} of {len(cbs)} fsyncs: "
                              f"{os.strerror(err)}")
            for cb in cbs:
                self._pending[cb.aio_data] = cb
            return ids

    def reap(self, *, block: bool = False) -> list[tuple[int, int]]:
        """Completed fsyncs as ``(id, errno)`` (0: done). With ``block``, waits until every
        outstanding one is done (close, shutdown)."""
        out: list[tuple[int, int]] = []
        with self._mu:
            try:
                os.eventfd_read(self._efd)
            except BlockingIOError:
                pass
            while self._pending:
                want = len(self._pending) if block else 0
                got = self._libc.syscall(self._getevents, self._ctx, ctypes.c_long(want),
                                         ctypes.c_long(MAX_EVENTS), self._events, None)
                if got < 0:
                    err = ctypes.get_errno()
                    if err == 4:  # EINTR
                        continue
                    raise OSError(err, os.strerror(err))
                for ev in self._events[:got]:
                    self._pending.pop(ev.data, None)
                    out.append((int(ev.data), -int(ev.res) if ev.res < 0 else 0))
                if got == 0 or not block:
                    break
        return out

    def close(self) -> None:
        if self._efd < 0:
            return
        if self._pending:
            self.reap(block=True)
        self._libc.syscall(self._destroy, self._ctx)
        os.close(self._efd)
        self._efd = -1


def open_aio() -> AioSync | None:
    """An :class:`AioSync`, or None where the kernel interface is not there."""
    if sys.platform != "linux" or os.environ.get("TUFFDB_AIO_FSYNC", "1") == "0":
        return None
    numbers = _SYSCALLS.get(platform.machine())
    if numbers is None:
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        return AioSync(libc, numbers)
    except (OSError, AttributeError):
        return None
