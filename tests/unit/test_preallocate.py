"""Zero-filled space ahead of the event log's writer (storage/preallocate.py)."""

from __future__ import annotations

import errno
import os
import threading
import warnings
from pathlib import Path
from typing import Any

import pytest

from tuffdb import AppendCondition, Event, EventStore, Query, QueryItem
from tuffdb._format.record import scan_frames
from tuffdb._format.segment import SEGMENT_HEADER_SIZE
from tuffdb.errors import RecoveredTailWarning
from tuffdb.storage import files


def _segments(path: Path) -> list[Path]:
    return sorted((path / "log").glob("*.log"))


def _events(n: int, tag: str) -> list[Event]:
    return [Event("t", bytes([i % 256]) * 300, [tag]) for i in range(n)]


def test_active_segment_is_filled_ahead_and_reopen_cuts_the_zeros_silently(
    tmp_path: Path,
) -> None:
    with EventStore.open(tmp_path, preallocate_bytes=256 << 10) as store:
        last = store.append(_events(50, "a"))
        seg = _segments(tmp_path)[-1]
        frames_end = SEGMENT_HEADER_SIZE + store._log.segments[-1].size
        store._log._pre.fill()  # what the background thread does, done here and now
        assert seg.stat().st_size > frames_end
        assert seg.read_bytes()[frames_end:].count(0) == seg.stat().st_size - frames_end
    # close cut the zeros off: the closed file is exactly header + frames
    assert seg.stat().st_size == frames_end
    with warnings.catch_warnings():
        warnings.simplefilter("error", RecoveredTailWarning)
        with EventStore.open(tmp_path) as store:
            assert store.head() == last
            assert store.recovery.bytes_dropped == 0
            assert [e.event.data for e in store.read()] == [ev.data for ev in _events(50, "a")]


def test_commits_inside_the_filled_space_use_fdatasync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[bool] = []
    real = files.fsync_fd

    def spy(fd: int, *, data_only: bool = False) -> None:
        if threading.current_thread().name == "tuffdb-events-writer":
            calls.append(data_only)
        real(fd, data_only=data_only)

    monkeypatch.setattr(files, "fsync_fd", spy)
    monkeypatch.setattr("tuffdb.storage.log_file.fsync_fd", spy)
    with EventStore.open(tmp_path, preallocate_bytes=1 << 20) as store:
        store._log._pre.fill()
        assert store._log._active.reserved >= 512 << 10
        calls.clear()
        for i in range(20):
            store.append(_events(1, f"x{i}"))
    assert calls
    assert all(calls), calls


def test_filler_never_lands_on_frames_under_concurrent_writers_and_rolls(
    tmp_path: Path,
) -> None:
    # Tiny segments and a tiny window force many rolls and appends that cross the
    # filled space while the filler works.
    opts: dict[str, Any] = {"segment_bytes": 64 << 10, "preallocate_bytes": 16 << 10}
    errors: list[BaseException] = []
    with EventStore.open(tmp_path, **opts) as store:

        def writer(k: int) -> None:
            try:
                for j in range(40):
                    tag = f"w{k}-{j}"
                    cond = AppendCondition(Query([QueryItem(["t"], [tag])]), after=0)
                    store.append(_events(1 + j % 5, tag), condition=cond)
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(k,)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        expected = [(e.position, e.event.tags, e.event.data) for e in store.read()]
        assert len(expected) == store.head() == sum(1 + j % 5 for j in range(40)) * 6
        assert store.check(deep=True) == []
        assert len(_segments(tmp_path)) > 3
    for seg in _segments(tmp_path)[:-1]:  # sealed segments are exactly their frames
        data = seg.read_bytes()
        res = scan_frames(data, SEGMENT_HEADER_SIZE)
        assert res.error is None
        assert res.committed_end == res.end == len(data)
    with EventStore.open(tmp_path, **opts) as store:
        assert store.recovery.bytes_dropped == 0
        assert [(e.position, e.event.tags, e.event.data) for e in store.read()] == expected
        assert store.check(deep=True) == []


def test_a_failing_filler_stops_quietly_and_the_writer_grows_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = os.pwrite

    def full_disk(fd: int, data: Any, offset: int) -> int:
        if threading.current_thread().name == "tuffdb-prealloc":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data, offset)

    died: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: died.append(args.exc_value))
    monkeypatch.setattr(os, "pwrite", full_disk)
    with EventStore.open(tmp_path, preallocate_bytes=256 << 10) as store:
        pre = store._log._pre
        first = store.append(_events(10, "a"))
        pre.wake()
        pre._thread.join(timeout=30)
        assert not pre._thread.is_alive()
        assert isinstance(pre.failed, OSError)
        assert died == []  # it stopped on the error (and logged it) instead of crashing
        last = store.append(_events(400, "b"), AppendCondition(Query([QueryItem([], ["b"])]), 0))
        assert last == first + 400
    with EventStore.open(tmp_path) as store:
        assert store.head() == last
        assert [e.event.data for e in store.read()] == [
            ev.data for ev in _events(10, "a") + _events(400, "b")]
