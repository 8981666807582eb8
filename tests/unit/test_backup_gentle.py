"""What keeps an online backup gentle on the store beside it: the copy threads run at a
low CPU priority, and a directory target makes a backup's files durable together (one
sync of its file system) instead of fsyncing every file and directory."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from tuffdb import metrics
from tuffdb.backup.take import BACKGROUND_NICE, run_parallel
from tuffdb.storage.objstore import DirStore


def _nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def test_background_copy_threads_are_niced_and_a_restore_is_not() -> None:
    items = [(i,) for i in range(8)]
    assert set(run_parallel(lambda _i: _nice(), items)) == {max(BACKGROUND_NICE, _nice())}
    assert set(run_parallel(lambda _i: _nice(), items, background=False)) == {_nice()}
    assert run_parallel(lambda i: i * 2, items, threads=1) == [i * 2 for i, in items]


def test_deferred_sync_syncs_once_at_the_end_and_not_after_a_failure(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.write_bytes(os.urandom(3 << 20))
    target = DirStore(tmp_path / "target")
    before = metrics.FSYNCS.value
    target.put_file("plain", src)
    assert metrics.FSYNCS.value > before  # outside: the file is fsynced as it is written

    before = metrics.FSYNCS.value
    with target.deferred_sync():
        for i in range(5):
            target.put_file(f"d/{i}", src, size=(1 << 20) + i)
        target.put("d/small", b"x")
        assert metrics.FSYNCS.value == before
    assert metrics.FSYNCS.value == before + 1  # one syncfs for all of them
    assert [(tmp_path / "target" / "d" / str(i)).stat().st_size for i in range(5)] == [
        (1 << 20) + i for i in range(5)]
    assert (tmp_path / "target" / "d" / "2").read_bytes() == src.read_bytes()[:(1 << 20) + 2]

    before = metrics.FSYNCS.value
    with pytest.raises(RuntimeError, match="stop"), target.deferred_sync():
        target.put_file("e/0", src)
        raise RuntimeError("stop")
    assert metrics.FSYNCS.value == before  # a failed batch is not reported durable
    target.put_file("after", src)
    assert metrics.FSYNCS.value > before  # and the store fsyncs per file again
