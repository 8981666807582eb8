"""A bounded pool of read-only descriptors for immutable files (LevelDB's table cache,
PostgreSQL's virtual file descriptors).

A store holds one file per sealed segment, and there is no upper bound on how many a big
store has (a KV store spills one cold segment per 8 MiB hot segment). Holding a
descriptor open for each one ran the process into its ``RLIMIT_NOFILE`` (1,024 by
default on many systems): writes failed, and the store could not even be opened again.
Here every such file is an :class:`ImmutableFile`; at most :data:`LIMIT` of them (for
the whole process) keep a descriptor open, the least recently read are closed first,
and a closed one is opened again by its path on its next read.

A descriptor is never closed while a read uses it (:meth:`ImmutableFile.acquire` /
:meth:`~ImmutableFile.release` count the readers), so a read never sees ``EBADF`` or a
descriptor number reused for another file. :meth:`ImmutableFile.close` (the file is
retired: merged away, tiered, its store closed) takes effect when its last reader is done.
"""

from __future__ import annotations

import os
import resource
import threading
from collections import OrderedDict
from pathlib import Path

from tuffdb.errors import CorruptionError
from tuffdb.storage.files import pread_exact

_FLOOR, _CEILING = 64, 4096


def default_limit() -> int:
    """A quarter of the soft ``RLIMIT_NOFILE`` (the rest for sockets, logs and the other
    stores' files), between 64 and 4,096."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return _CEILING
    return max(_FLOOR, min(_CEILING, soft // 4))


#: Descriptors the pool keeps open at once (more only while that many reads are running).
LIMIT = default_limit()


def raise_open_file_limit() -> int:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard one (a server's sockets and files;
    what Go programs do at start) and size the pool from it; return the soft limit.
    Where the limit cannot be raised, it stays, and so does the pool's size."""
    global LIMIT  # noqa: PLW0603 - sized once, at a server's start
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    LIMIT = default_limit()
    return soft


_LOCK = threading.Lock()
_OPEN: OrderedDict[ImmutableFile, None] = OrderedDict()  # least recently read first


class ImmutableFile:
    """One immutable file, read through the pool by positional reads."""

    __slots__ = ("__weakref__", "closed", "fd", "path", "users")

    def __init__(self, path: Path, fd: int | None = None) -> None:
        """``fd``: a descriptor of ``path`` already open (it joins the pool)."""
        self.path = path
        self.fd: int | None = None
        self.users = 0
        self.closed = False
        if fd is not None:
            with _LOCK:
                self.fd = fd
                _OPEN[self] = None
                _trim()

    def acquire(self) -> int:
        """An open descriptor of the file, held until :meth:`release`.

        :raises CorruptionError: the file was closed (retired).
        :raises OSError: it could not be opened again (e.g. deleted by a merge).
        """
        with _LOCK:
            if self.closed:
                raise CorruptionError("segment closed", path=str(self.path))
            self.users += 1  # before a trim, which must not close this one
            fd = self.fd
            if fd is None:
                try:
                    fd = self.fd = os.open(self.path, os.O_RDONLY)
                except OSError:
                    self.users -= 1
                    raise
                _OPEN[self] = None
                _trim()
            else:
                _OPEN.move_to_end(self)
            return fd

    def pread(self, size: int, offset: int) -> bytes:
        """Exactly ``size`` bytes at ``offset`` (:meth:`acquire`, read, :meth:`release`).

        :raises CorruptionError: the file is closed, or shorter than that.
        :raises OSError: it could not be opened again, or the read failed.
        """
        fd = self.acquire()
        try:
            return pread_exact(fd, size, offset)
        finally:
            self.release()

    def release(self) -> None:
        with _LOCK:
            self.users -= 1
            if self.users == 0:
                if self.closed:
                    self._close_locked()
                elif len(_OPEN) > LIMIT:  # opened past the limit while reads held the rest
                    _trim()

    def close(self) -> None:
        """Retire the file: no new reads; its descriptor closes when the last one ends."""
        with _LOCK:
            self.closed = True
            if self.users == 0:
                self._close_locked()

    def _close_locked(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            _OPEN.pop(self, None)
            os.close(fd)


def _trim() -> None:
    """Close the least recently read idle descriptors past :data:`LIMIT` (under _LOCK)."""
    excess = len(_OPEN) - LIMIT
    if excess <= 0:
        return
    idle = []  # from the least recently read end; stops as soon as there are enough
    for f in _OPEN:
        if f.users == 0:
            idle.append(f)
            if len(idle) == excess:
                break
    for f in idle:
        f._close_locked()  # noqa: SLF001 - the pool's own bookkeeping


def open_count() -> int:
    """Descriptors the pool holds open now."""
    with _LOCK:
        return len(_OPEN)
