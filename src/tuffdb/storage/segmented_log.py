"""An append-only log split into segment files (spec: docs/format/segment.md).

Segments are named by their base address (``{base:020d}{suffix}``); the address of a
byte is ``base + (file offset - header size)``, so addresses run on across segments
and another process can tail the log by reading files in name order. Sealed segments
are never modified again.

Recovery (on open) validates every segment header, then scans only the **last**
segment: everything after the last valid frame that carries the COMMIT flag is a torn
or uncommitted tail and is truncated (``recovery.bytes_dropped`` says how much). Earlier
segments were fsynced before the next one was created, so they are trusted as far as
their headers; their frames are still checksummed whenever they are read.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tuffdb import metrics
from tuffdb._failpoints import failpoint
from tuffdb._format.record import Frame, scan_frames
from tuffdb._format.segment import SEGMENT_HEADER_SIZE, SegmentHeader, unpack_header
from tuffdb.errors import ClosedError, CorruptionError, RecoveredTailWarning
from tuffdb.storage.files import fsync_dir, fsync_fd, list_ids, remove_durably, segment_name, write_all
from tuffdb.storage.poison import Poison

DEFAULT_SEGMENT_BYTES = 64 << 20


@dataclass
class RecoveryReport:
    path: str | None = None
    bytes_dropped: int = 0
    reason: str | None = None


@dataclass
class SegmentInfo:
    base_address: int
    path: Path
    size: int  # bytes after the header

    @property
    def end_address(self) -> int:
        return self.base_address + self.size


class SegmentedLog:
    """Append-only segmented log. Not thread-safe: one writer thread drives it."""

    def __init__(
        self,
        directory: Path,
        *,
        file_kind: int,
        suffix: str = ".log",
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        key_id: int = 0,
        poison: Poison | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.file_kind = file_kind
        self.suffix = suffix
        self.segment_bytes = segment_bytes
        self.key_id = key_id
        self.poison = poison if poison is not None else Poison()
        self.recovery = RecoveryReport()
        self.segments: list[SegmentInfo] = []
        self._fd: int | None = None
        self._dirty = False
        self.directory.mkdir(parents=True, exist_ok=True)
        self._open()

    # -- open and recovery -------------------------------------------------------------
    def _open(self) -> None:
        for base in list_ids(self.directory, self.suffix):
            path = self.directory / segment_name(base, self.suffix)
            with path.open("rb") as f:
                head = f.read(SEGMENT_HEADER_SIZE)
                size = os.fstat(f.fileno()).st_size - SEGMENT_HEADER_SIZE
            if len(head) < SEGMENT_HEADER_SIZE and base == self._last_id():
                # A crash while creating the newest segment: it holds nothing acknowledged.
                remove_durably([path])
                continue
            hdr = unpack_header(head, str(path))
            if hdr.file_kind != self.file_kind or hdr.base_address != base:
                raise CorruptionError("segment header does not match its name", path=str(path))
            if hdr.key_id != self.key_id:
                from tuffdb.errors import WrongKeyError

                raise WrongKeyError(f"{path} was written with a different encryption key")
            self.segments.append(SegmentInfo(base, path, max(size, 0)))
        if not self.segments:
            self._create(0)
            return
        self._recover_tail(self.segments[-1])
        last = self.segments[-1]
        self._fd = os.open(last.path, os.O_RDWR)
        os.lseek(self._fd, 0, os.SEEK_END)

    def _last_id(self) -> int:
        ids = list_ids(self.directory, self.suffix)
        return ids[-1] if ids else -1

    def _recover_tail(self, seg: SegmentInfo) -> None:
        data = seg.path.read_bytes()
        res = scan_frames(data, SEGMENT_HEADER_SIZE)
        keep = res.committed_end
        dropped = len(data) - keep
        if dropped:
            reason = res.error or "uncommitted frames after the last COMMIT"
            with seg.path.open("r+b") as f:
                f.truncate(keep)
                fsync_fd(f.fileno())
            self.recovery = RecoveryReport(str(seg.path), dropped, reason)
            warnings.warn(
                f"{seg.path}: dropped {dropped} bytes of torn tail ({reason})",
                RecoveredTailWarning,
                stacklevel=4,
            )
        seg.size = keep - SEGMENT_HEADER_SIZE

    def _create(self, base: int) -> None:
        path = self.directory / segment_name(base, self.suffix)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            head = SegmentHeader(self.file_kind, 0, base, int(time.time() * 1000), self.key_id)
            write_all(fd, head.pack())
            fsync_fd(fd)
            fsync_dir(self.directory)
        except OSError as exc:
            os.close(fd)
            self.poison.set(exc)
            raise
        self.segments.append(SegmentInfo(base, path, 0))
        self._fd = fd

    # -- writing -----------------------------------------------------------------------
    @property
    def tail_address(self) -> int:
        return self.segments[-1].end_address

    @property
    def active(self) -> SegmentInfo:
        return self.segments[-1]

    def append(self, data: bytes | memoryview) -> int:
        """Write whole frames at the tail; return the address of their first byte."""
        self.poison.check()
        if self._fd is None:
            raise ClosedError("log is closed")
        seg = self.segments[-1]
        if seg.size and seg.size + len(data) > self.segment_bytes:
            self.roll()
            seg = self.segments[-1]
        addr = seg.end_address
        try:
            failpoint("before_log_write")
            write_all(self._fd, data)
        except OSError as exc:
            self.poison.set(exc)
            raise
        seg.size += len(data)
        self._dirty = True
        metrics.LOG_WRITES.inc()
        metrics.LOG_BYTES.inc(len(data))
        return addr

    def sync(self) -> None:
        """Make everything appended so far durable (fdatasync of the active segment)."""
        if not self._dirty or self._fd is None:
            return
        self.poison.check()
        t0 = time.perf_counter()
        try:
            failpoint("before_sync_segment")
            os.fdatasync(self._fd)
        except OSError as exc:
            self.poison.set(exc)
            raise
        metrics.FSYNCS.inc()
        metrics.FSYNC_SECONDS.observe(time.perf_counter() - t0)
        self._dirty = False

    def roll(self) -> int:
        """Seal the active segment (fsynced) and start a new one; return its base address."""
        self.sync()
        base = self.tail_address
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._create(base)
        return base

    def drop_before(self, address: int) -> int:
        """Delete sealed segments that end at or before ``address``; return how many."""
        doomed = [s for s in self.segments[:-1] if s.end_address <= address]
        if doomed:
            self.segments = [s for s in self.segments if s not in doomed]
            remove_durably([s.path for s in doomed])
        return len(doomed)

    def close(self) -> None:
        if self._fd is None:
            return
        try:
            if not self.poison:
                self.sync()
        finally:
            os.close(self._fd)
            self._fd = None

    # -- reading -----------------------------------------------------------------------
    def read_segment(self, seg: SegmentInfo) -> tuple[bytes, list[Frame]]:
        """All committed frames of one segment; CorruptionError if a frame fails validation."""
        data = seg.path.read_bytes()[: SEGMENT_HEADER_SIZE + seg.size]
        res = scan_frames(data, SEGMENT_HEADER_SIZE)
        if res.error is not None:
            raise CorruptionError(res.error, path=str(seg.path), offset=res.end)
        return data, [f for f in res.frames if f.offset < res.committed_end]

    def iter_frames(self) -> Iterator[tuple[SegmentInfo, Frame]]:
        for seg in list(self.segments):
            _, frames = self.read_segment(seg)
            for f in frames:
                yield seg, f
