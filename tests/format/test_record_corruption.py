"""Corruption table for the record reader and segment recovery (storage core, no KV).

Every tuffdb log is a segment header followed by CRC-32C frames (docs/format/record.md,
segment.md). A torn write, a zero-filled tail or bit rot must never be served as data:
the reader stops at the first frame that fails validation and says why, and recovery
truncates the last segment to its last committed frame, reporting exactly how many
bytes it dropped [LevelDB log_test.cc; fjall]. Each row states the exact outcome.
"""

from __future__ import annotations

import struct
import warnings
from pathlib import Path

import pytest

from tuffdb._format import MAGIC_PREFIX
from tuffdb._format.checksum import crc32c
from tuffdb._format.record import (
    FRAME_SIZE,
    KIND_OFFSET,
    LENGTH_OFFSET,
    MAX_PAYLOAD_SIZE,
    Flag,
    Kind,
    encode_frame,
    read_frame_at,
    scan_frames,
)
from tuffdb._format.segment import (
    HEADER_CRC_OFFSET,
    MAGIC_OFFSET,
    SEGMENT_HEADER_SIZE,
    FileKind,
)
from tuffdb.errors import CorruptionError, RecoveredTailWarning, VersionMismatchError
from tuffdb.storage.files import segment_name
from tuffdb.storage.segmented_log import SegmentedLog
from tuffdb.testing.faults import flip_byte, truncate_by, zero_fill_tail

C = Flag.COMMIT
F1 = encode_frame(Kind.KV_BATCH, b"a" * 20, C)
F2 = encode_frame(Kind.KV_BATCH, b"b" * 30, C)
F3 = encode_frame(Kind.KV_BATCH, b"c" * 40)  # no COMMIT: an unfinished batch


def _with_length(frame: bytes, length: int) -> bytes:
    return frame[:LENGTH_OFFSET] + struct.pack("<I", length) + frame[LENGTH_OFFSET + 4:]


def _flip(data: bytes, pos: int) -> bytes:
    return data[:pos] + bytes([data[pos] ^ 0xFF]) + data[pos + 1:]


# (name, buffer, frames kept, committed_end, error prefix or None)
READER_TABLE = [
    ("empty buffer is a clean end", b"", 0, 0, None),
    ("two committed frames", F1 + F2, 2, len(F1 + F2), None),
    ("empty payload is a valid frame", encode_frame(Kind.META, b"", C), 1, FRAME_SIZE, None),
    ("torn header", F1 + F2[:5], 1, len(F1), "torn frame header (5 of 10 bytes)"),
    ("torn payload", F1 + F2[:-1], 1, len(F1), "torn frame (needs 30 payload bytes, 29 present)"),
    ("length beyond the maximum", F1 + _with_length(F2, MAX_PAYLOAD_SIZE + 1), 1, len(F1),
     f"bad length {MAX_PAYLOAD_SIZE + 1}"),
    ("length shortened (covered by the crc)", F1 + _with_length(F2, 5) + F2[FRAME_SIZE:], 1,
     len(F1), "checksum mismatch"),
    ("length past the end", F1 + _with_length(F2, 31), 1, len(F1), "torn frame (needs 31"),
    ("payload byte flipped", F1 + _flip(F2, FRAME_SIZE + 3), 1, len(F1), "checksum mismatch"),
    ("crc byte flipped", F1 + _flip(F2, 0), 1, len(F1), "checksum mismatch"),
    ("kind byte changed (covered by the crc)", F1 + _flip(F2, KIND_OFFSET), 1, len(F1),
     "checksum mismatch"),
    ("zero-filled tail", F1 + bytes(64), 1, len(F1), "zero-filled or invalid frame (kind 0)"),
    ("zero-filled tail shorter than a header", F1 + bytes(4), 1, len(F1),
     "torn frame header (4 of 10 bytes)"),
    ("unknown flags with a valid crc", F1 + encode_frame(Kind.KV_BATCH, b"x", 0x80), 1, len(F1),
     "unknown flags 0x80"),
    ("uncommitted batch at the end", F1 + F3, 2, len(F1), None),
    ("nothing after damage is read", F1 + _flip(F2, FRAME_SIZE) + F1, 1, len(F1),
     "checksum mismatch"),
]


@pytest.mark.parametrize(("buf", "kept", "committed", "error"),
                         [row[1:] for row in READER_TABLE], ids=[row[0] for row in READER_TABLE])
def test_reader_stops_at_the_first_invalid_frame_and_says_why(
    buf: bytes, kept: int, committed: int, error: str | None
) -> None:
    res = scan_frames(buf)
    assert len(res.frames) == kept
    assert res.committed_end == committed
    if error is None:
        assert res.error is None
        assert res.end == len(buf)
    else:
        assert res.error is not None
        assert res.error.startswith(error)
    for frame in res.frames:  # whatever was kept is exactly what was written
        assert frame.payload in (b"a" * 20, b"b" * 30, b"c" * 40, b"")


def test_read_frame_at_rejects_a_damaged_frame() -> None:
    assert read_frame_at(F1 + F2, len(F1)).payload == b"b" * 30
    with pytest.raises(ValueError, match="checksum mismatch"):
        read_frame_at(F1 + _flip(F2, FRAME_SIZE), len(F1))


# -- recovery of a segmented log ---------------------------------------------------------
def _log(directory: Path, **kw: int) -> SegmentedLog:
    return SegmentedLog(directory, file_kind=FileKind.KV_LOG, **kw)


def _write(directory: Path, *frames: bytes) -> Path:
    log = _log(directory)
    for frame in frames:
        log.append(frame)
    log.sync()
    log.close()
    return directory / segment_name(0, ".log")


def _payloads(log: SegmentedLog) -> list[bytes]:
    return [f.payload for _, f in log.iter_frames()]


def _reopen_clean(directory: Path) -> SegmentedLog:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return _log(directory)


def test_clean_log_reopens_without_dropping_anything(tmp_path: Path) -> None:
    _write(tmp_path, F1, F2)
    log = _reopen_clean(tmp_path)
    assert log.recovery.bytes_dropped == 0
    assert _payloads(log) == [b"a" * 20, b"b" * 30]
    log.close()


# (name, damage(path), bytes dropped, payloads left)
RECOVERY_TABLE = [
    ("torn tail", lambda p: truncate_by(p, 3), len(F2) - 3, [b"a" * 20]),
    ("torn header of the last frame", lambda p: truncate_by(p, len(F2) - 4), 4, [b"a" * 20]),
    # Zeros where a frame would start are unwritten space (logs made from zero-filled
    # spares have it): cut off, never served, but not reported as lost bytes.
    ("zero-filled extension", lambda p: zero_fill_tail(p, 4096, extend=True), 0,
     [b"a" * 20, b"b" * 30]),
    ("zero-filled last frame", lambda p: zero_fill_tail(p, len(F2)), 0, [b"a" * 20]),
    ("bad checksum in the last frame", lambda p: flip_byte(p, -1), len(F2), [b"a" * 20]),
    ("bad length in the last frame",
     lambda p: flip_byte(p, SEGMENT_HEADER_SIZE + len(F1) + LENGTH_OFFSET, 0x01), len(F2),
     [b"a" * 20]),
    ("damage in the first frame drops everything after it",
     lambda p: flip_byte(p, SEGMENT_HEADER_SIZE + FRAME_SIZE), len(F1) + len(F2), []),
]


@pytest.mark.parametrize(("damage", "dropped", "left"), [r[1:] for r in RECOVERY_TABLE],
                         ids=[r[0] for r in RECOVERY_TABLE])
def test_recovery_truncates_to_the_last_committed_frame_and_reports_bytes_dropped(
    tmp_path: Path, damage: object, dropped: int, left: list[bytes]
) -> None:
    path = _write(tmp_path, F1, F2)
    damage(path)  # type: ignore[operator]
    if dropped:
        with pytest.warns(RecoveredTailWarning, match=f"dropped {dropped} bytes"):
            log = _log(tmp_path)
        assert log.recovery.path == str(path)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("error", RecoveredTailWarning)
            log = _log(tmp_path)
    assert log.recovery.bytes_dropped == dropped
    assert path.stat().st_size == SEGMENT_HEADER_SIZE + sum(len(x) + FRAME_SIZE for x in left)
    assert _payloads(log) == left
    # The log is writable again right after the kept prefix.
    log.append(F2)
    log.sync()
    log.close()
    log = _reopen_clean(tmp_path)
    assert _payloads(log) == [*left, b"b" * 30]
    log.close()


def test_uncommitted_batch_is_dropped_on_recovery(tmp_path: Path) -> None:
    path = _write(tmp_path, F1, F3)
    with pytest.warns(RecoveredTailWarning):
        log = _log(tmp_path)
    assert log.recovery.bytes_dropped == len(F3)
    assert _payloads(log) == [b"a" * 20]
    assert path.stat().st_size == SEGMENT_HEADER_SIZE + len(F1)
    log.close()


@pytest.mark.parametrize(("offset", "reason"), [
    (MAGIC_OFFSET, "bad magic"),
    (MAGIC_OFFSET + len(MAGIC_PREFIX) - 1, "bad magic"),
    (SEGMENT_HEADER_SIZE - 8, "segment header checksum mismatch"),  # inside base address
    (HEADER_CRC_OFFSET, "segment header checksum mismatch"),
])
def test_damaged_segment_header_refuses_to_open(tmp_path: Path, offset: int, reason: str) -> None:
    path = _write(tmp_path, F1, F2)
    flip_byte(path, offset, 0x01)
    with pytest.raises(CorruptionError, match=reason) as info:
        _log(tmp_path)
    assert info.value.path == str(path)
    assert info.value.offset == 0


def test_segment_header_with_a_newer_version_raises_version_mismatch(tmp_path: Path) -> None:
    path = _write(tmp_path, F1)
    data = bytearray(path.read_bytes())
    data[len(MAGIC_PREFIX)] += 1
    crc = crc32c(bytes(data[:HEADER_CRC_OFFSET]))
    data[HEADER_CRC_OFFSET:SEGMENT_HEADER_SIZE] = struct.pack("<I", crc)
    path.write_bytes(bytes(data))
    with pytest.raises(VersionMismatchError):
        _log(tmp_path)


def test_newest_segment_with_a_torn_header_is_discarded(tmp_path: Path) -> None:
    log = _log(tmp_path, segment_bytes=64)
    log.append(F1)
    log.append(F2)  # rolls: segment 0 is sealed, the second holds F2
    log.sync()
    log.close()
    newest = sorted(tmp_path.glob("*.log"))[-1]
    truncate_by(newest, newest.stat().st_size - 10)  # a crash while creating it
    log = _log(tmp_path)
    assert not newest.exists()
    assert _payloads(log) == [b"a" * 20]
    log.close()


def test_damage_in_a_sealed_segment_is_never_served(tmp_path: Path) -> None:
    log = _log(tmp_path, segment_bytes=64)
    log.append(F1)
    log.append(F2)
    log.sync()
    log.close()
    first = tmp_path / segment_name(0, ".log")
    flip_byte(first, SEGMENT_HEADER_SIZE + FRAME_SIZE + 1)
    log = _log(tmp_path)  # sealed segments are trusted as far as their headers on open...
    with pytest.raises(CorruptionError, match="checksum mismatch") as info:
        _payloads(log)  # ...but every frame is checked when it is read
    assert info.value.path == str(first)
    assert info.value.offset == SEGMENT_HEADER_SIZE
    log.close()
