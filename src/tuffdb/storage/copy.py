"""Copying files fast: the bytes move inside the kernel, the checksum runs in C.

Backups, restores, snapshots and archive uploads copy whole files (or a log's first
bytes). A Python loop of ``read``/``write`` over a buffer costs a copy into user space
and back, and, worse, one GIL hand-off per call: a thread copying beside a busy writer
thread waits up to the interpreter's switch interval (5 ms) at every hand-off, which is
what held a backup under load to a few tens of MB/s. Here:

* :func:`copy_fd` moves the bytes with ``copy_file_range(2)`` (in-kernel, one call per
  gigabyte, no user-space copy; a reflink where the file system has them), falling back
  to ``sendfile(2)`` and then to ``read``/``write`` of large buffers;
* :func:`crc_fd` computes CRC-32C over 64 MiB reads, one call to ``google_crc32c``
  each (which releases the GIL for bytes of 1 MiB or more): two GIL hand-offs per 64 MiB,
  not several per megabyte.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from tuffdb._format.checksum import crc32c_extend
from tuffdb.errors import CorruptionError

#: Bytes per checksum call (each releases the GIL) and per ``copy_file_range`` call.
CRC_SLICE = 64 << 20
COPY_SLICE = 1 << 30
_BUFFER = 8 << 20
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


def copy_fd(src: int, dst: int, size: int) -> None:
    """Copy bytes ``[0, size)`` of ``src`` to ``dst`` at its offset 0 onwards.

    :raises CorruptionError: ``src`` ends before ``size``.
    """
    done = 0
    method = "copy_file_range"
    while done < size:
        want = min(size - done, COPY_SLICE)
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


def copy_file(src: Path, dst_fd: int, size: int | None = None, *,
              crc: bool = True) -> tuple[int, int]:
    """Copy ``src`` (its first ``size`` bytes) into the new, empty file ``dst_fd``;
    return (CRC-32C of the bytes copied, 0 when ``crc`` is false; bytes copied).

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
            copy_fd(fd, dst_fd, size)
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
