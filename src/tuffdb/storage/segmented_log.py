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

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tuffdb._format.record import Frame, scan_frames
from tuffdb._format.segment import SEGMENT_HEADER_SIZE, unpack_header
from tuffdb.errors import ClosedError, CorruptionError, WrongKeyError
from tuffdb.storage.files import list_ids, remove_durably, segment_name
from tuffdb.storage.log_file import LogFile
from tuffdb.storage.poison import Poison
from tuffdb.storage.preallocate import Preallocator

if TYPE_CHECKING:
    from tuffdb.storage.shipping import Shipper

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
        preallocate: int = 0,
        shipper: Shipper | None = None,
        ship_prefix: str = "",
    ) -> None:
        self.directory = Path(directory)
        # The log-shipping seam (storage/shipping.py): told when a segment is sealed or
        # deleted; names are ``ship_prefix`` + the segment's file name.
        self.shipper = shipper
        self.ship_prefix = ship_prefix
        self.file_kind = file_kind
        self.suffix = suffix
        self.segment_bytes = segment_bytes
        self.key_id = key_id
        self.poison = poison if poison is not None else Poison()
        self.recovery = RecoveryReport()
        self.segments: list[SegmentInfo] = []
        self._active: LogFile | None = None
        self.directory.mkdir(parents=True, exist_ok=True)
        self._open()
        # Zero-filled space ahead of the writer, so commits are fdatasyncs (preallocate.py).
        self._pre = Preallocator(self, preallocate) if preallocate else None
        if self._pre is not None:
            self._pre.wake()

    def _open(self) -> None:
        ids = list_ids(self.directory, self.suffix)
        for i, base in enumerate(ids):
            path = self.directory / segment_name(base, self.suffix)
            size = path.stat().st_size - SEGMENT_HEADER_SIZE
            if size < 0 and i == len(ids) - 1:
                # A crash while creating the newest segment: it holds nothing acknowledged.
                remove_durably([path])
                continue
            with path.open("rb") as f:
                hdr = unpack_header(f.read(SEGMENT_HEADER_SIZE), str(path))
            if hdr.file_kind != self.file_kind or hdr.base_address != base:
                raise CorruptionError("segment header does not match its name", path=str(path))
            if hdr.key_id != self.key_id:
                raise WrongKeyError(f"{path} was written with a different encryption key")
            self.segments.append(SegmentInfo(base, path, size))
        if not self.segments:
            self._create(0)
            return
        last = self.segments[-1]
        log, _ = LogFile.open_existing(
            last.path, file_kind=self.file_kind, key_id=self.key_id, poison=self.poison
        )
        last.size = log.size
        if log.bytes_dropped:
            self.recovery = RecoveryReport(str(last.path), log.bytes_dropped, log.drop_reason)
        self._active = log

    def _create(self, base: int) -> None:
        path = self.directory / segment_name(base, self.suffix)
        self._active = LogFile.create(
            path, file_kind=self.file_kind, base_address=base, key_id=self.key_id,
            poison=self.poison,
        )
        self.segments.append(SegmentInfo(base, path, 0))

    @property
    def tail_address(self) -> int:
        return self.segments[-1].end_address

    def append(self, data: bytes) -> int:
        """Write whole frames at the tail (rolling first if full); return their address."""
        if self._active is None:
            raise ClosedError("log is closed")
        seg = self.segments[-1]
        if seg.size and seg.size + len(data) > self.segment_bytes:
            self.roll()
            seg = self.segments[-1]
        addr = seg.end_address
        active = self._active
        pre = self._pre
        if pre is None:
            active.append(data)
        else:
            if active.size + len(data) > active.reserved:
                with pre.lock:  # past the zeros: keep the filler off these bytes
                    active.append(data)
            else:
                active.append(data)
            if active.reserved - active.size < pre.low:
                pre.wake()
        seg.size += len(data)
        return addr

    def append_at(self, base: int, address: int, data: bytes) -> None:
        """Append whole frames another log (a cluster leader's) wrote at ``address`` of its
        segment ``base``, so both logs stay byte for byte alike: roll first when ``base``
        starts a segment here, never roll otherwise (the writer's size rule does not apply).

        :raises CorruptionError: ``address`` is not this log's tail, or ``base`` is not
            its active segment's base nor the tail (the logs have diverged).
        """
        if self._active is None:
            raise ClosedError("log is closed")
        tail = self.tail_address
        if address != tail:
            raise CorruptionError(f"frames for address {address}, but this log ends at {tail}",
                                  path=str(self.directory))
        if base != self.segments[-1].base_address:
            if base != tail:
                raise CorruptionError(f"frames for a segment at {base}, but this log's tail is "
                                      f"{tail}", path=str(self.directory))
            self.roll()
        seg = self.segments[-1]
        pre = self._pre
        if pre is not None:
            with pre.lock:
                self._active.append(data)
            pre.wake()
        else:
            self._active.append(data)
        seg.size += len(data)

    def read_at(self, base: int, address: int, length: int) -> bytes:
        """Up to ``length`` bytes at ``address`` of the segment that starts at ``base``
        (fewer where that segment ends first; b"" if this log has no such segment): a
        cluster follower compares a replayed round with what it already holds there."""
        for seg in reversed(self.segments):
            if seg.base_address == base:
                n = min(length, seg.end_address - address)
                if n <= 0 or address < base:
                    return b""
                with seg.path.open("rb") as f:
                    f.seek(SEGMENT_HEADER_SIZE + address - base)
                    return f.read(n)
        return b""

    def sync(self) -> None:
        """Make everything appended so far durable."""
        if self._active is not None:
            self._active.sync()

    def roll(self) -> int:
        """Seal the active segment (fsynced) and start a new one; return its base address."""
        if self._active is None:
            raise ClosedError("log is closed")
        if self._pre is not None:
            with self._pre.lock:
                self._active.close()
                self._create(self.tail_address)
            self._pre.wake()
        else:
            self._active.close()
            self._create(self.tail_address)
        if self.shipper is not None:
            self.shipper.added(self.ship_prefix + self.segments[-2].path.name)
        return self.segments[-1].base_address

    def drop_before(self, address: int) -> int:
        """Delete sealed segments that end at or before ``address``; return how many."""
        doomed = [s for s in self.segments[:-1] if s.end_address <= address]
        if doomed:
            self.segments = [s for s in self.segments if s not in doomed]
            remove_durably([s.path for s in doomed])
            if self.shipper is not None:
                for s in doomed:
                    self.shipper.removed(self.ship_prefix + s.path.name)
        return len(doomed)

    def shipped(self, data: bytes) -> tuple[str, int, int, bytes]:
        """The shipping seam's part for the last :meth:`append` (of ``data``)."""
        active = self._active
        if active is None:
            raise ClosedError("log is closed")
        name, start, end, body = active.shipped(active.size - len(data), data)
        return self.ship_prefix + name, start, end, body

    def close(self) -> None:
        if self._pre is not None:
            self._pre.stop()
            self._pre = None
        if self._active is not None:
            self._active.close()
            self._active = None

    def read_segment(self, seg: SegmentInfo) -> list[Frame]:
        """Committed frames of one segment; CorruptionError if a frame fails validation."""
        with seg.path.open("rb") as f:
            data = f.read(SEGMENT_HEADER_SIZE + seg.size)
        res = scan_frames(data, SEGMENT_HEADER_SIZE)
        if res.error is not None:
            raise CorruptionError(res.error, path=str(seg.path), offset=res.end)
        return [f for f in res.frames if f.offset < res.committed_end]

    def iter_frames(self) -> Iterator[tuple[SegmentInfo, Frame]]:
        for seg in list(self.segments):
            for f in self.read_segment(seg):
                yield seg, f
