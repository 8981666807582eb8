"""Copying files fast, and gently beside a store that is serving.

Backups, restores, snapshots and archive uploads copy whole files (or a log's first
bytes). A Python loop of ``read``/``write`` over a buffer costs a copy into user space
and back, and, worse, one GIL hand-off per call: a thread copying beside a busy writer
thread waits up to the interpreter's switch interval (5 ms) at every hand-off, which is
what held a backup under load to a few tens of MB/s. Here:

* :func:`copy_fd` writes files of :data:`DIRECT_MIN_BYTES` or more with direct,
  synchronous writes of :data:`DIRECT_SLICE` from a map of the source
  (:func:`_copy_direct`: no page-cache copy, no dirty pages); the rest, and everything
  where direct I/O is refused, moves with ``copy_file_range(2)`` (in-kernel, no
  user-space copy; a reflink where the file system has them), falling back to
  ``sendfile(2)`` and then to ``read``/``write`` of large buffers;
* :func:`crc_fd` computes CRC-32C over 64 MiB reads, one call to ``google_crc32c``
  each (which releases the GIL for bytes of 1 MiB or more): two GIL hand-offs per 64 MiB,
  not several per megabyte.

Why direct writes (measured, docs/benchmarks/backup.md): a server under a durable load
shares its host's cores and disk with an online backup. Through the page cache, a copy
costs CPU twice (the copy into new pages, their writeback later) and leaves the disk's
write cache full of its bytes, which every log fsync of the store must then flush.
"""

from __future__ import annotations

import errno
import mmap
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tuffdb._format.checksum import crc32c, crc32c_extend
from tuffdb._format.record import header_digest
from tuffdb._format.segment import SEGMENT_HEADER_SIZE
from tuffdb.errors import CorruptionError, ProgrammingError

#: Bytes per checksum call (each releases the GIL) and per ``copy_file_range`` call.
CRC_SLICE = 64 << 20
COPY_SLICE = 1 << 30
#: Bytes per ``copy_file_range`` call under a :class:`Throttle`.
THROTTLED_SLICE = 8 << 20
_BUFFER = 8 << 20
#: Direct I/O: offsets and lengths are multiples of this; files under DIRECT_MIN_BYTES
#: are copied through the page cache.
DIRECT_ALIGN = 4096
DIRECT_MIN_BYTES = 1 << 20
#: Bytes per direct write: the disk's queue holds at most this much of a copy's
#: bytes ahead of the store's log writes (per copying thread).
DIRECT_SLICE = 4 << 20
# copy_file_range refuses some pairs (older kernels across file systems, special files):
# those errors mean "use the next method", never "the copy failed".
_UNSUPPORTED = frozenset({errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP,
                          errno.ENOTSUP, errno.EBADF})


def crc_fd(fd: int, size: int) -> int:
    """CRC-32C of the first ``size`` bytes of open file ``fd``.

    :raises CorruptionError: the file is shorter than ``size``.
    """
    crc = 0
    off = 0
    while off < size:
        # bytes, not a memoryview of an mmap: google_crc32c takes only bytes, and only
        # for bytes of a megabyte or more does it release the GIL.
        buf = os.pread(fd, min(CRC_SLICE, size - off), off)
        if not buf:
            raise CorruptionError(f"file is shorter than {size} bytes")
        crc = crc32c_extend(crc, buf)
        off += len(buf)
    return crc


def file_crc(path: Path, size: int | None = None) -> tuple[int, int]:
    """(CRC-32C, size) of a file, or of its first ``size`` bytes.

    :raises CorruptionError: the file is shorter than ``size``.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        have = os.fstat(fd).st_size if size is None else size
        try:
            return crc_fd(fd, have), have
        except CorruptionError:
            raise CorruptionError(f"{path} is shorter than {size} bytes", path=str(path)) from None
    finally:
        os.close(fd)


def frames_digest(path: Path, trailer: int = 0) -> tuple[int, int]:
    """(digest, size) of a file made of a segment header, whole frames and then
    ``trailer`` raw bytes: CRC-32C of the header, every frame's 10-byte header and the
    trailer (``header_digest``). Reads a few bytes per frame, never a payload: the file's
    own frame checksums stand for them.

    :raises CorruptionError: the frames do not end exactly ``trailer`` bytes before EOF.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        stop = size - trailer
        if stop < SEGMENT_HEADER_SIZE:
            raise CorruptionError("too short for a segment", path=str(path))
        with mmap.mmap(fd, size, access=mmap.ACCESS_READ) as m:
            crc, end = header_digest(m, SEGMENT_HEADER_SIZE, stop,
                                     crc32c(m[:SEGMENT_HEADER_SIZE]))
            if end != stop:
                raise CorruptionError(f"frames end at {end}, not {stop}", path=str(path),
                                      offset=end)
            return crc32c_extend(crc, m[stop:size]), size
    finally:
        os.close(fd)


class Throttle:
    """At most ``bytes_per_s`` on average over every thread that shares it: each copy
    takes its bytes from here (in :data:`THROTTLED_SLICE` pieces) and sleeps when it is
    ahead of the rate. How an online backup bounds what it takes from the writers' disk."""

    def __init__(self, bytes_per_s: float, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if bytes_per_s <= 0:
            raise ProgrammingError("a throttle's rate must be positive")
        self.rate = float(bytes_per_s)
        self._clock = clock
        self._sleep = sleep
        self._mu = threading.Lock()
        self._next = clock()

    def take(self, nbytes: int) -> None:
        """Wait until ``nbytes`` more keep the average at or under the rate."""
        with self._mu:
            now = self._clock()
            start = max(self._next, now - 1.0)  # at most a second of unused rate carries over
            self._next = start + nbytes / self.rate
            wait = start - now
        if wait > 0:
            self._sleep(wait)


def copy_fd(src: int, dst: int, size: int, throttle: Throttle | None = None, *,
            direct: bool = True) -> None:
    """Copy bytes ``[0, size)`` of ``src`` to ``dst`` at its offset 0 onwards; with
    ``direct`` false always through the page cache (work nothing runs beside, such as
    a restore: a copy into the cache and one fsync at the end is faster there).

    :raises CorruptionError: ``src`` ends before ``size``.
    """
    done = _copy_direct(src, dst, size, throttle) if direct else 0
    if done < size:
        _copy_cached(src, dst, size, done, COPY_SLICE if throttle is None else THROTTLED_SLICE,
                     throttle)


def _copy_direct(src: int, dst: int, size: int, throttle: Throttle | None) -> int:
    """Copy what it can of ``[0, size)`` with direct, synchronous writes: ``dst``
    reopened ``O_DIRECT | O_DSYNC`` and written from a read-only map of ``src``. The
    disk reads the source's (cached) pages in place: no copy into new page-cache pages,
    no dirty pages, no writeback afterwards; that is the CPU a ``cp``
    (``copy_file_range``) spends, and on a small host the CPU the store serving
    requests beside it needs. ``O_DSYNC`` makes each piece durable before the next
    (a cache flush per piece where the disk has no FUA), so the store's own log fsyncs
    never have to flush a backlog of the copy's bytes out of the disk's cache. Returns
    the bytes copied (a multiple of :data:`DIRECT_ALIGN`; 0 where the file system or
    the file does not allow it): the caller copies the rest through the page cache."""
    if size < DIRECT_MIN_BYTES or os.fstat(src).st_size < size or os.fstat(dst).st_size:
        return 0
    try:
        wfd = os.open(f"/proc/self/fd/{dst}", os.O_WRONLY | os.O_DIRECT | os.O_DSYNC)
    except (OSError, AttributeError):
        return 0  # (no /proc, or no direct I/O on this file system)
    done = 0
    try:
        with mmap.mmap(src, size, access=mmap.ACCESS_READ) as m:
            view = memoryview(m)
            try:
                aligned = size - size % DIRECT_ALIGN
                while done < aligned:
                    want = min(DIRECT_SLICE, aligned - done)
                    if throttle is not None:
                        throttle.take(want)
                    try:
                        n = os.pwrite(wfd, view[done:done + want], done)
                    except OSError as exc:
                        if exc.errno != errno.EINVAL:
                            raise
                        break  # refused (alignment, file system): the rest goes cached
                    done += n
                    if n != want:
                        break  # a short write leaves an unaligned offset
            finally:
                view.release()
    finally:
        os.close(wfd)
    return done - done % DIRECT_ALIGN


def _copy_cached(src: int, dst: int, size: int, done: int, piece: int,
                 throttle: Throttle | None) -> None:
    """Copy ``[done, size)`` through the page cache, ``piece`` bytes per call."""
    method = "copy_file_range"
    while done < size:
        want = min(size - done, piece)
        if throttle is not None:
            throttle.take(want)
        try:
            if method == "copy_file_range":
                n = os.copy_file_range(src, dst, want, done, done)
            elif method == "sendfile":
                os.lseek(dst, done, os.SEEK_SET)
                n = os.sendfile(dst, src, done, want)
            else:
                buf = os.pread(src, min(want, _BUFFER), done)
                n = os.pwrite(dst, buf, done) if buf else 0
        except OSError as exc:
            if exc.errno not in _UNSUPPORTED or method == "read":
                raise
            method = "sendfile" if method == "copy_file_range" else "read"
            continue
        if n == 0:
            raise CorruptionError(f"source ends at {done} bytes, {size} expected")
        done += n


def copy_file(src: Path, dst_fd: int, size: int | None = None, *, crc: bool = True,
              throttle: Throttle | None = None, direct: bool = True) -> tuple[int, int]:
    """Copy ``src`` (its first ``size`` bytes) into the new, empty file ``dst_fd``;
    return (CRC-32C of the bytes copied, 0 when ``crc`` is false; bytes copied), at most
    as fast as ``throttle`` allows.

    :raises CorruptionError: ``src`` is shorter than ``size``.
    """
    fd = os.open(src, os.O_RDONLY)
    try:
        have = os.fstat(fd).st_size
        size = have if size is None else size
        if have < size:
            raise CorruptionError(f"{src} is shorter than {size} bytes", path=str(src))
        value = crc_fd(fd, size) if crc else 0
        try:
            copy_fd(fd, dst_fd, size, throttle, direct=direct)
        except CorruptionError as exc:
            raise CorruptionError(f"{src}: {exc}", path=str(src)) from None
        return value, size
    finally:
        os.close(fd)


def copy_to_path(src: Path, dst: Path, size: int | None = None) -> None:
    """Copy ``src`` (its first ``size`` bytes) to a new file ``dst`` (never a link)."""
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        copy_file(src, fd, size, crc=False)
    finally:
        os.close(fd)
