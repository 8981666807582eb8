"""Spare log files: zero-filled ahead of need, turned into logs that commit with fdatasync."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import pytest

from tuffdb._format.record import Flag, Kind, encode_frame
from tuffdb._format.segment import SEGMENT_HEADER_SIZE, FileKind
from tuffdb.errors import RecoveredTailWarning
from tuffdb.storage import files
from tuffdb.storage.log_file import LogFile
from tuffdb.storage.poison import Poison
from tuffdb.storage.spare import Spares


def _frames(n: int) -> list[bytes]:
    return [encode_frame(Kind.META, f"frame {i}".encode() * 10, Flag.COMMIT) for i in range(n)]


def _log_from_spare(tmp_path: Path, size: int = 64 << 10) -> tuple[LogFile, Path]:
    spares = Spares(tmp_path, size)
    spares.prepare()
    spare = spares.take()
    assert spare is not None
    assert spare.name.endswith(".tmp")  # a crash leaves it to recovery's .tmp sweep
    assert spare.stat().st_size == size
    assert spare.read_bytes().count(0) == size
    log = LogFile.create(tmp_path / "a.log", file_kind=FileKind.EVENT_LOG, base_address=0,
                         key_id=0, poison=Poison(), spare=spare)
    assert not spare.exists()
    return log, tmp_path / "a.log"


def _crash(log: LogFile) -> None:
    """The process dies here: data synced, the file never closed (a clean close would cut
    the reserved zeros off first)."""
    log.sync()
    os.close(log.fileno())


def test_a_clean_close_cuts_the_reserved_zeros_off(tmp_path: Path) -> None:
    log, path = _log_from_spare(tmp_path)
    frames = _frames(3)
    for f in frames:
        log.append(f)
    log.close()
    assert path.stat().st_size == SEGMENT_HEADER_SIZE + sum(map(len, frames))


def test_a_log_made_from_a_spare_reopens_with_its_frames_and_no_warning(tmp_path: Path) -> None:
    log, path = _log_from_spare(tmp_path)
    frames = _frames(5)
    for f in frames:
        log.append(f)
        log.sync()
    _crash(log)
    assert path.stat().st_size == 64 << 10  # the zeros are still there
    with warnings.catch_warnings():
        warnings.simplefilter("error", RecoveredTailWarning)
        again, got = LogFile.open_existing(path, file_kind=FileKind.EVENT_LOG, key_id=0,
                                           poison=Poison())
    assert [encode_frame(f.kind, f.payload, f.flags) for f in got] == frames
    assert again.bytes_dropped == 0
    end = SEGMENT_HEADER_SIZE + sum(map(len, frames))
    assert path.stat().st_size == end  # unwritten space cut off at open
    again.append(frames[0])  # and the next write lands right after the last frame
    again.close()
    _, got = LogFile.open_existing(path, file_kind=FileKind.EVENT_LOG, key_id=0, poison=Poison())
    assert len(got) == 6


def test_commits_inside_the_reserved_space_use_fdatasync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    real_fsync, real_fdatasync = os.fsync, os.fdatasync
    monkeypatch.setattr(files.os, "fsync", lambda fd: (calls.append("fsync"), real_fsync(fd)))
    monkeypatch.setattr(files.os, "fdatasync",
                        lambda fd: (calls.append("fdatasync"), real_fdatasync(fd)))
    log, _ = _log_from_spare(tmp_path, size=SEGMENT_HEADER_SIZE + 1000)
    calls.clear()
    log.append(b"x" * 600)
    log.sync()
    log.append(b"x" * 600)  # past the reserved space: the size changes, so a full fsync
    log.sync()
    log.close()
    assert calls == ["fdatasync", "fsync"]


def test_a_torn_frame_in_the_reserved_space_is_reported_without_the_zeros(
    tmp_path: Path,
) -> None:
    log, path = _log_from_spare(tmp_path)
    good, torn = _frames(2)
    log.append(good)
    log.append(torn[:-5])  # a frame whose last bytes never reached the disk
    _crash(log)
    # The torn frame counts as lost whole (its header says how long it was); the zeros
    # after it are unwritten space.
    with pytest.warns(RecoveredTailWarning, match=f"dropped {len(torn)} bytes"):
        again, got = LogFile.open_existing(path, file_kind=FileKind.EVENT_LOG, key_id=0,
                                           poison=Poison())
    assert len(got) == 1
    assert again.bytes_dropped == len(torn)
    assert path.stat().st_size == SEGMENT_HEADER_SIZE + len(good)
    again.close()


def test_prepare_keeps_one_spare_and_discard_removes_it(tmp_path: Path) -> None:
    spares = Spares(tmp_path, 4096)
    spares.prepare()
    spares.prepare()
    assert len(list(tmp_path.glob("*.tmp"))) == 1
    assert not spares.wanted
    spares.discard()
    assert list(tmp_path.iterdir()) == []
    assert not spares.wanted  # discarded for good: a late prepare makes nothing
    spares.prepare()
    assert list(tmp_path.iterdir()) == []


def test_always_mode_store_logs_come_from_spares_and_survive_reopen(kv_store: Any) -> None:
    store = kv_store(durability="always", hot_bytes=1 << 20, compression=None)
    assert store._spares is not None
    store._spares.prepare()  # what the background thread does at open
    store.put(b"k", b"v")
    (log,) = kv_store.default_path.glob("*.log")
    assert log.stat().st_size == store._spares.size  # the spare became the log
    path = kv_store.default_path
    store.close()
    assert list(path.glob("*.tmp")) == []  # an unused spare is removed at close
    again = kv_store(path, durability="always")
    assert again.get(b"k") == b"v"
    assert again.recovery.bytes_dropped == 0


def test_spares_follow_durability_changes(kv_store: Any) -> None:
    store = kv_store(durability="interval")
    assert store._spares is None
    store.set_durability("always")
    assert store._spares is not None
    store._spares.prepare()
    store.set_durability("none")
    assert store._spares is None
    assert list(kv_store.default_path.glob("*.tmp")) == []
