"""The database write lock: durable writes wait for their fsync after the lock is released."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import pytest

from tuffdb.documents import Database
from tuffdb.documents.write_lock import WriteLock

if TYPE_CHECKING:
    from pathlib import Path


def _free_elsewhere(lock: WriteLock) -> bool:
    """Whether another thread could take ``lock`` right now."""
    got: list[bool] = []

    def probe() -> None:
        ok = lock.acquire(blocking=False)
        got.append(ok)
        if ok:
            lock.release()

    t = threading.Thread(target=probe)
    t.start()
    t.join()
    return got[0]


def test_settles_once_after_the_outermost_release_with_the_highest_ticket() -> None:
    settled: list[int] = []
    lock = WriteLock(settled.append)
    with lock:
        lock.owe(3)
        with lock:
            lock.owe(7)
            lock.owe(5)
        assert settled == []  # still held by the outer block
    assert settled == [7]
    with lock:
        pass
    assert settled == [7]  # nothing owed: no wait


def test_settles_even_when_the_block_raises() -> None:
    settled: list[int] = []
    lock = WriteLock(settled.append)

    def failing_write() -> None:
        with lock:
            lock.owe(2)
            raise KeyError("boom")

    with pytest.raises(KeyError):
        failing_write()
    assert settled == [2]


def test_durable_update_waits_outside_the_lock_and_is_durable_on_return(tmp_path: Path) -> None:
    db = Database.open(tmp_path / "db", durability="always")
    try:
        coll = db.collection("c")
        coll.insert({"id": "a", "v": 1})
        seen: list[tuple[int, bool]] = []
        settle = db.lock._settle  # noqa: SLF001 - spy on the wait

        def spy(ticket: int) -> None:
            seen.append((ticket, _free_elsewhere(db.lock)))
            settle(ticket)

        db.lock._settle = spy  # noqa: SLF001
        coll.update("a", {"v": 2})
        assert len(seen) == 1
        ticket, lock_was_free = seen[0]
        assert lock_was_free  # no lock is held across the fsync
        assert db.kv.when_durable(ticket).done()  # acknowledged means fsynced
    finally:
        db.close()
    with Database.open(tmp_path / "db") as again:
        assert again.collection("c").get("a")["v"] == 2


def test_non_durable_modes_owe_nothing(tmp_path: Path) -> None:
    db = Database.open(tmp_path / "db", durability="interval")
    try:
        seen: list[int] = []
        db.lock._settle = seen.append  # noqa: SLF001
        db.collection("c").insert({"id": "a"})
        assert seen == []
    finally:
        db.close()
