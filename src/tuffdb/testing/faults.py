"""Fault injection for crash and corruption tests: failpoints, failing fsync, damaged files.

Nothing here mocks tuffdb's storage. Faults enter at the two seams a real failure
would use: the named failpoints the storage core calls at ordering-critical steps
(:mod:`tuffdb._failpoints`, [bbolt gofail]) and the operating-system calls
``os.fsync`` / ``os.fdatasync`` (what a failing disk makes fail). File damage is done
to closed files on disk, the way a torn write or bit rot would leave them.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

from tuffdb import _failpoints

__all__ = [
    "WRITE_IO_CALLS",
    "DyingDisk",
    "FsyncFault",
    "dying_disk",
    "failing_fsync",
    "failpoint",
    "fd_path",
    "flip_byte",
    "truncate_by",
    "zero_fill_tail",
]


@contextmanager
def failpoint(name: str, action: str = "raise") -> Iterator[None]:
    """Enable the storage core's failpoint ``name`` inside the block (``raise`` or ``exit``)."""
    _failpoints.enable(name, action)
    try:
        yield
    finally:
        _failpoints.disable(name)


@dataclass
class FsyncFault:
    """What :func:`failing_fsync` saw: successful and failed sync calls, in order."""

    ok: int = 0
    failed: int = 0
    failed_threads: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)


@contextmanager
def failing_fsync(
    should_fail: Callable[[int], bool] = lambda fd: True,
    error: int = errno.EIO,
) -> Iterator[FsyncFault]:
    """Make ``os.fsync`` and ``os.fdatasync`` raise ``OSError(error)`` while ``should_fail()``.

    ``should_fail(fd)`` runs in the calling thread, so it can scope the fault to a store's
    writer thread, to one kind of file (see :func:`fd_path`) or to a countdown.
    Calls that do not fail reach the real system call.
    """
    real_fsync, real_fdatasync = os.fsync, os.fdatasync
    seen = FsyncFault()

    def wrap(real: Callable[[int], None]) -> Callable[[int], None]:
        def call(fd: int) -> None:
            if should_fail(fd):
                with seen.lock:
                    seen.failed += 1
                    seen.failed_threads.add(threading.current_thread().name)
                raise OSError(error, os.strerror(error))
            real(fd)
            with seen.lock:
                seen.ok += 1

        return call

    with mock.patch("os.fsync", wrap(real_fsync)), mock.patch("os.fdatasync", wrap(real_fdatasync)):
        yield seen


def fd_path(fd: int) -> str:
    """The path an open descriptor refers to (Linux ``/proc``), or ``""`` if unknown."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return ""


#: The write-side system calls a dying disk makes fail (reads keep working).
WRITE_IO_CALLS = ("write", "writev", "pwrite", "fsync", "fdatasync", "replace", "rename")


@dataclass
class DyingDisk:
    """State of :func:`dying_disk`: calls left before death, and whether it has died."""

    left: int
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def dead(self) -> bool:
        return self.left < 0


@contextmanager
def dying_disk(after: int, calls: tuple[str, ...] = WRITE_IO_CALLS) -> Iterator[DyingDisk]:
    """A FailingBackend at the OS seam [redb]: the first ``after`` write-side calls (in
    any thread) succeed, every later one raises ``OSError(EIO)``, wherever it lands."""
    disk = DyingDisk(after)
    real = {name: getattr(os, name) for name in calls}

    def dying(name: str) -> Callable[..., object]:
        def call(*args: object, **kwargs: object) -> object:
            with disk.lock:
                disk.left -= 1
                dead = disk.left < 0
            if dead:
                raise OSError(errno.EIO, f"EIO (injected into os.{name})")
            return real[name](*args, **kwargs)

        return call

    patches = [mock.patch(f"os.{name}", dying(name)) for name in calls]
    for patch in patches:
        patch.start()
    try:
        yield disk
    finally:
        for patch in patches:
            patch.stop()


# -- damage to closed files ---------------------------------------------------------------
def flip_byte(path: Path, offset: int, mask: int = 0xFF) -> None:
    """XOR one byte of ``path`` at ``offset`` (negative counts from the end) with ``mask``."""
    with Path(path).open("r+b") as f:
        size = f.seek(0, os.SEEK_END)
        pos = offset if offset >= 0 else size + offset
        f.seek(pos)
        old = f.read(1)
        f.seek(pos)
        f.write(bytes([old[0] ^ mask]))


def truncate_by(path: Path, nbytes: int) -> int:
    """Cut the last ``nbytes`` off ``path`` (a torn write); return the new size."""
    size = Path(path).stat().st_size
    new = max(size - nbytes, 0)
    os.truncate(path, new)
    return new


def zero_fill_tail(path: Path, nbytes: int, *, extend: bool = False) -> None:
    """Overwrite the last ``nbytes`` of ``path`` with zeros, or append them (``extend=True``),
    as a file system that extended the file but never wrote the data leaves it."""
    with Path(path).open("r+b") as f:
        if extend:
            f.seek(0, os.SEEK_END)
        else:
            f.seek(-nbytes, os.SEEK_END)
        f.write(bytes(nbytes))
