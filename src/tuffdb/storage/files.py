"""File-system helpers: durable create/rename/delete and segment naming.

Assumptions (docs/design/assumptions.md): a file's new directory entry is durable only
after the directory itself is fsynced, so every create, rename and delete that matters
is followed by :func:`fsync_dir`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Callable
from pathlib import Path

from tuffdb import metrics
from tuffdb._failpoints import failpoint
from tuffdb.errors import CorruptionError

ID_DIGITS = 20


def check_inside(name: object, where: str, *, single: bool = False) -> str:
    """``name`` if it names a file (or, ``single``, a directory entry) inside a directory:
    a relative POSIX path of plain parts, none of them empty, ``.`` or ``..``. Names come
    from backups and archives, which may be stored where someone else can change them: a
    name that leaves the directory would have a restore write or delete files anywhere.

    :raises CorruptionError: naming ``where``.
    """
    parts = name.split("/") if isinstance(name, str) else []
    if (not parts or any(p in ("", ".", "..") or "\0" in p for p in parts)
            or (single and len(parts) > 1)):
        raise CorruptionError(f"{where} names {name!r}, outside the directory it belongs in",
                              path=where)
    return str(name)


def segment_name(seg_id: int, suffix: str) -> str:
    return f"{seg_id:0{ID_DIGITS}d}{suffix}"


def list_ids(directory: Path, suffix: str) -> list[int]:
    """Ids of ``<digits><suffix>`` files in ``directory``, ascending."""
    out = []
    for name in os.listdir(directory):
        if name.endswith(suffix):
            stem = name[: -len(suffix)]
            if len(stem) == ID_DIGITS and stem.isdigit():
                out.append(int(stem))
    out.sort()
    return out


def fsync_fd(fd: int, *, data_only: bool = False) -> None:
    """fsync, or fdatasync with ``data_only`` (only when the file's size and blocks are
    already durable, e.g. writes over a zero-filled spare: see ``storage/spare.py``)."""
    failpoint("before_fsync")
    if data_only:
        os.fdatasync(fd)
    else:
        os.fsync(fd)
    metrics.FSYNCS.inc()


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _load_syncfs() -> Callable[[int], int] | None:
    """libc's ``syncfs`` through ctypes (the call releases the GIL), or None where
    there is none (not Linux)."""
    try:
        fn = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True).syncfs
    except (OSError, AttributeError, TypeError):
        return None
    fn.argtypes = [ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


_syncfs = _load_syncfs()


def sync_filesystem(path: Path) -> None:
    """Make every file and directory entry on ``path``'s file system durable:
    ``syncfs(2)`` (one journal commit for everything written), else ``sync(2)``.

    :raises OSError: the file system reported a write error.
    """
    failpoint("before_fsync")
    fd = os.open(path, os.O_RDONLY)
    try:
        if _syncfs is None:
            os.sync()
        elif _syncfs(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"syncfs {path}: {os.strerror(err)}")
    finally:
        os.close(fd)
    metrics.FSYNCS.inc()


def write_file_durably(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: temp file, fsync, rename, fsync directory."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        fsync_fd(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def remove_durably(paths: list[Path]) -> None:
    """Unlink ``paths`` (missing ones are fine), then fsync their directories once."""
    dirs = set()
    for p in paths:
        try:
            p.unlink()
        except FileNotFoundError:
            continue
        dirs.add(p.parent)
    for d in dirs:
        fsync_dir(d)


def remove_quietly(paths: list[Path]) -> None:
    """Unlink ``paths`` without fsyncing the directory: for files whose reappearance after
    a crash recovery already handles (spilled logs, merged-away segments)."""
    for p in paths:
        try:
            p.unlink()
        except FileNotFoundError:
            pass


#: Buffers one ``writev`` takes (Linux: 1024).
IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024


def writev_all(fd: int, parts: list[bytes]) -> int:
    """Write ``parts`` in order with as few syscalls as possible; return bytes written.

    Never joins more than one ``writev``'s worth (``IOV_MAX`` parts): a segment written
    from its blocks is not first copied into one buffer the size of the file (fresh
    memory, a page fault per 4 KiB, given back once written)."""
    total = 0
    for i in range(0, len(parts), IOV_MAX):
        chunk = parts[i : i + IOV_MAX]
        size = sum(map(len, chunk))
        done = os.writev(fd, chunk)
        if done < size:
            write_all(fd, b"".join(chunk)[done:])
        total += size
    return total


def pwrite_all(fd: int, data: bytes | memoryview, offset: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view = view[n:]
        offset += n


def write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def pread_exact(fd: int, size: int, offset: int) -> bytes:
    data = os.pread(fd, size, offset)
    if len(data) == size:
        return data
    parts = [data]
    got = len(data)
    while got < size:
        more = os.pread(fd, size - got, offset + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)
