"""One append-only log file: segment header, then frames (spec: docs/format/segment.md).

The unit both :class:`~tuffdb.storage.segmented_log.SegmentedLog` and the KV hot-tier
log are made of. Writes go through one fd at the end of the file; ``sync`` goes through
``files.fsync_fd``, the one fsync seam of the storage core (fault injection patches it).
"""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path

from tuffdb import metrics
from tuffdb._failpoints import failpoint
from tuffdb._format.record import Frame, scan_frames, unwritten_tail
from tuffdb._format.segment import SEGMENT_HEADER_SIZE, SegmentHeader, unpack_header
from tuffdb.errors import ClosedError, CorruptionError, RecoveredTailWarning, WrongKeyError
from tuffdb.storage.files import fsync_dir, fsync_fd, write_all, writev_all
from tuffdb.storage.pacing import SYNCS
from tuffdb.storage.poison import Poison


class LogFile:
    """An open log file positioned at its end. One writer thread at a time."""

    def __init__(self, path: Path, fd: int, header: SegmentHeader, size: int, poison: Poison,
                 reserved: int = 0):
        self.path = path
        self.header = header
        self.size = size  # bytes after the header
        # Bytes after the header that are zero-filled and durable (a spare's): writes
        # inside them change no metadata, so they are made durable with fdatasync.
        self.reserved = reserved
        self.poison = poison
        self.bytes_dropped = 0
        self.drop_reason: str | None = None
        self._fd: int | None = fd
        self._dirty = False

    @classmethod
    def create(
        cls, path: Path, *, file_kind: int, base_address: int, key_id: int, poison: Poison,
        spare: Path | None = None,
    ) -> LogFile:
        """Create the file with its header, fsync it and its directory.

        With ``spare`` (a zero-filled file from :class:`~tuffdb.storage.spare.Spares`),
        the header is written over its first bytes and the spare renamed to ``path``;
        the zeros after it are the log's reserved space (a scan stops at them).
        """
        head = SegmentHeader(file_kind, 0, base_address, int(time.time() * 1000), key_id)
        if spare is not None:
            fd = os.open(spare, os.O_RDWR)
            try:
                reserved = os.fstat(fd).st_size - SEGMENT_HEADER_SIZE
                write_all(fd, head.pack())
                fsync_fd(fd, data_only=True)
                if path.exists():
                    raise FileExistsError(f"{path} exists")
                os.rename(spare, path)
                fsync_dir(path.parent)
            except OSError as exc:
                os.close(fd)
                poison.set(exc)
                raise
            return cls(path, fd, head, 0, poison, reserved=max(reserved, 0))
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            write_all(fd, head.pack())
            fsync_fd(fd)
            fsync_dir(path.parent)
        except OSError as exc:
            os.close(fd)
            poison.set(exc)
            raise
        return cls(path, fd, head, 0, poison)

    @classmethod
    def open_existing(
        cls, path: Path, *, file_kind: int, key_id: int, poison: Poison, recover: bool = True
    ) -> tuple[LogFile, list[Frame]]:
        """Open, validate the header, scan all frames; truncate a torn tail if ``recover``.

        Returns the file and its committed frames. Without ``recover`` any invalid byte
        raises CorruptionError.
        """
        data = path.read_bytes()
        hdr = unpack_header(data[:SEGMENT_HEADER_SIZE], str(path))
        if hdr.file_kind != file_kind:
            raise CorruptionError(f"file kind {hdr.file_kind}, expected {file_kind}", path=str(path))
        if hdr.key_id != key_id:
            raise WrongKeyError(f"{path} was written with a different encryption key (or none)")
        res = scan_frames(data, SEGMENT_HEADER_SIZE)
        keep = res.committed_end
        # Zeros at the end are reserved space (a spare's), not lost bytes: cut off like a
        # torn tail, but not counted or reported (a torn frame before them still is).
        zeros = unwritten_tail(data, res.end)
        dropped = len(data) - keep - zeros
        fd = os.open(path, os.O_RDWR)
        log = cls(path, fd, hdr, keep - SEGMENT_HEADER_SIZE, poison)
        if dropped:
            reason = res.error or "uncommitted frames after the last COMMIT"
            if not recover:
                os.close(fd)
                raise CorruptionError(reason, path=str(path), offset=keep)
            log.bytes_dropped, log.drop_reason = dropped, reason
            warnings.warn(
                f"{path}: dropped {dropped} bytes of torn tail ({reason})",
                RecoveredTailWarning,
                stacklevel=3,
            )
        if dropped or (zeros and recover):
            os.ftruncate(fd, keep)
            fsync_fd(fd)
        os.lseek(fd, keep, os.SEEK_SET)
        return log, [f for f in res.frames if f.offset < keep]

    @property
    def closed(self) -> bool:
        return self._fd is None

    def append(self, data: bytes | list[bytes]) -> int:
        """Write whole frames (bytes, or a list of buffers written with one writev) at the
        end; return their offset after the header."""
        self.poison.check()
        if self._fd is None:
            raise ClosedError(f"{self.path} is closed")
        at = self.size
        try:
            failpoint("before_log_write")
            n = writev_all(self._fd, data) if isinstance(data, list) else len(data)
            if not isinstance(data, list):
                write_all(self._fd, data)
        except OSError as exc:
            self.poison.set(exc)
            raise
        self.size += n
        self._dirty = True
        metrics.LOG_WRITES.inc()
        metrics.LOG_BYTES.inc(n)
        return at

    def shipped(self, at: int, data: bytes | list[bytes]) -> tuple[str, int, int, bytes]:
        """The shipping seam's part (storage/shipping.py) for an :meth:`append` of ``data``
        that returned ``at``: file offsets, and the header's bytes too when these are the
        log's first frames, so a consumer rebuilds the file from its parts alone."""
        body = data if isinstance(data, bytes) else b"".join(data)
        start = SEGMENT_HEADER_SIZE + at
        end = start + len(body)
        if at == 0:
            return self.path.name, 0, end, self.header.pack() + body
        return self.path.name, start, end, body

    def sync(self) -> None:
        t0 = time.perf_counter()
        try:
            req = self.sync_request()
            if req is None:
                return
            fsync_fd(req[0], data_only=req[1])
        except OSError as exc:
            self.poison.set(exc)
            raise
        took = time.perf_counter() - t0
        metrics.FSYNC_SECONDS.observe(took)
        SYNCS.observe(took)
        self._dirty = False

    def sync_request(self) -> tuple[int, bool] | None:
        """What to fsync, as ``(fd, data_only)`` (fdatasync suffices while the frames lie
        within the reserved zeros), or None when nothing is unsynced. :meth:`sync` passes
        it to ``fsync_fd``; a caller that fsyncs by other means (storage/aio_sync.py)
        calls :meth:`mark_synced` after."""
        if not self._dirty or self._fd is None:
            return None
        self.poison.check()
        failpoint("before_sync_segment")
        return self._fd, self.size <= self.reserved

    def mark_synced(self) -> None:
        """After an fsync done outside ``fsync_fd``, counted as that counts its own."""
        self._dirty = False
        metrics.FSYNCS.inc()

    def fileno(self) -> int:
        if self._fd is None:
            raise ClosedError(f"{self.path} is closed")
        return self._fd

    def close(self) -> None:
        """Sync and close; reserved zeros past the frames are cut off first, so a closed
        (sealed) file is exactly its header and frames."""
        if self._fd is None:
            return
        try:
            if not self.poison:
                # (zeros may lie past ``reserved`` too: a preallocation cut short by ENOSPC)
                end = SEGMENT_HEADER_SIZE + self.size
                if self.reserved > self.size or os.fstat(self._fd).st_size > end:
                    os.ftruncate(self._fd, end)
                    self.reserved = 0  # the size changed: the sync below is a full fsync
                    self._dirty = True
                self.sync()
        finally:
            os.close(self._fd)
            self._fd = None
