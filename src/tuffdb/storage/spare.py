"""Spare log files: zero-filled and fsynced ahead of need, by a background thread.

Appending to a file and fsyncing it makes the file system journal the new size and
block allocation on every sync; overwriting blocks that already exist (allocated,
written, size durable) needs only ``fdatasync`` of the data. On this class of disk that
halves both the latency and the kernel CPU of a small durable commit (measured: 25 KiB
append + fsync ~320 us wall / ~115 us system CPU; the same over zero-filled blocks
+ fdatasync ~150 us / ~50 us).

A spare is ``spare-<n>.tmp`` in the log's directory: ``size`` bytes of zeros, fsynced,
then the directory fsynced. :meth:`LogFile.create` turns one into a log file by writing
the header over its first bytes and renaming it. Being ``.tmp``, a spare left by a crash
is removed by recovery like any unfinished file. Readers need nothing new: a zero byte
where a frame header should be is frame kind 0, which ends a scan (docs/format/record.md).
"""

from __future__ import annotations

import itertools
import os
import threading
from pathlib import Path

from tuffdb.storage.files import fsync_dir, fsync_fd, remove_quietly, write_all

_ZEROS = bytes(1 << 20)
_PREFIX, _SUFFIX = "spare-", ".tmp"


def is_spare(path: Path) -> bool:
    """Whether ``path`` names a spare (made here; not yet a log file)."""
    return path.name.startswith(_PREFIX) and path.suffix == _SUFFIX


class Spares:
    """At most one spare ready at a time. ``take`` from the writer, ``prepare`` from a
    background thread (writing zeros releases the GIL)."""

    def __init__(self, directory: Path, size: int) -> None:
        self.directory = directory
        self.size = size
        self._lock = threading.Lock()
        self._making = threading.Lock()  # one prepare at a time
        self._ready: Path | None = None
        self._closed = False
        self._counter = itertools.count()

    @property
    def wanted(self) -> bool:
        return self._ready is None and not self._closed

    def take(self) -> Path | None:
        """A ready spare (now the caller's), or None."""
        with self._lock:
            path, self._ready = self._ready, None
        return path

    def prepare(self) -> None:
        """Make a spare if none is ready. OSError propagates (the caller decides)."""
        with self._making:
            if self._ready is None and not self._closed:
                self._make()

    def _make(self) -> None:
        path = self.directory / f"{_PREFIX}{os.getpid()}-{next(self._counter)}{_SUFFIX}"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            left = self.size
            while left > 0:
                chunk = _ZEROS[: min(left, len(_ZEROS))]
                write_all(fd, chunk)
                left -= len(chunk)
            fsync_fd(fd)
        except BaseException:
            os.close(fd)
            remove_quietly([path])
            raise
        os.close(fd)
        fsync_dir(self.directory)
        with self._lock:
            self._ready = path

    def discard(self) -> None:
        """Delete a spare not taken and make no more (on close, or when not wanted)."""
        with self._making:
            self._closed = True
            path = self.take()
        if path is not None:
            remove_quietly([path])
