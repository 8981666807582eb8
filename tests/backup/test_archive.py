"""Continuous archiving and point-in-time restore, against a directory and moto's S3.

The archiver runs in-process over real embedded stores (a KV store and an event store);
restores are real restores into new directories, opened and checked. Restore points
are times and log positions recorded between acknowledged writes: every write
acknowledged before the point must be there exactly, none written after it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.backup.conftest import FaultProxy, all_objects, put_raw
from tuffdb import KVStore
from tuffdb.backup.archive import HEAD_KEY, Archiver
from tuffdb.backup.datadir import Keys, sources_of
from tuffdb.backup.restore import Position, describe, restore
from tuffdb.errors import CorruptionError, NotFoundError, WrongKeyError
from tuffdb.events.api import Event
from tuffdb.events.store import EventStore
from tuffdb.storage.objstore import open_target

WAIT_S = 60


class Stores:
    def __init__(self, root: Path, key: bytes | None = None) -> None:
        self.root = root
        self.kv = KVStore.open(root / "kv", durability="always", hot_bytes=8 << 10,
                               encryption_key=key)
        self.es = EventStore.open(root / "events", segment_bytes=4096, encryption_key=key)
        self.events = 0

    def sources(self) -> list[Any]:
        return sources_of({"kv": self.kv, "events": self.es})

    def write(self, phase: int, n: int = 60, marker: bytes = b"") -> None:
        for i in range(n):
            self.kv.put(f"p{phase}-{i}".encode(), marker + f"{phase}:{i}".encode() * 8)
        for i in range(0, n, 4):
            self.es.append([Event("E", marker + f"{phase}:{j}".encode(), [f"p{phase}"])
                            for j in range(i, i + 4)])
            self.events += 4

    def close(self) -> None:
        self.kv.close()
        self.es.close()


def archiver(url: str, stores: Stores, **kw: Any) -> Archiver:
    a = Archiver(open_target(url), stores.sources(), stores.root / ".archive",
                 interval_s=kw.pop("interval_s", 0.05), **kw)
    a.start()
    assert a.wait_until(lambda a: a.bases_taken >= 1, WAIT_S), a.status()
    return a


def caught_up(a: Archiver, stores: Stores) -> bool:
    want = {"kv": stores.kv.shipper.version, "events": stores.es.shipper.version}
    return all(a.through().get(k, -1) >= v for k, v in want.items())


def phases_present(dest: Path, upto: int, phases: int, key: bytes | None = None) -> int:
    """Assert the restored KV holds phases 1..upto exactly and none after; return the
    restored event head."""
    with KVStore.open(dest / "kv", encryption_key=key) as kv:
        for p in range(1, phases + 1):
            for i in range(60):
                got = kv.get(f"p{p}-{i}".encode())
                if p <= upto:
                    assert got is not None and got.endswith(f"{p}:{i}".encode() * 8), (p, i)
                else:
                    assert got is None, (p, i)
    with EventStore.open(dest / "events", encryption_key=key) as es:
        assert es.check(deep=True) == []
        return es.head() or 0


def test_point_in_time_restore_to_times_and_positions(target_url: str, tmp_path: Path) -> None:
    stores = Stores(tmp_path / "data")
    a = archiver(target_url, stores)
    marks: list[tuple[int, int, dict[str, int]]] = []  # (time_ns, events, event positions)
    try:
        for phase in (1, 2, 3):
            stores.write(phase)
            marks.append((time.time_ns(), stores.events, stores.es.shipper.positions()))
        assert a.wait_until(lambda a: caught_up(a, stores), WAIT_S), a.status()
        assert a.status()["status"] == "ok"
    finally:
        a.stop()
        stores.close()
    for k, (t, events, _pos) in enumerate(marks, 1):
        dest = tmp_path / f"t{k}"
        report = restore(target_url, dest, keys=Keys(), to_time_ns=t)
        assert report.kind == "archive"
        assert phases_present(dest, k, 3) == events
    for k in (1, 2):
        (name, offset), = marks[k - 1][2].items()
        dest = tmp_path / f"pos{k}"
        restore(target_url, dest, keys=Keys(), to_position=Position("events", name, offset))
        with EventStore.open(dest / "events") as es:
            assert es.head() == marks[k - 1][1]
    info = describe(target_url)
    assert info["base_backups"] and info["window"]["to"] != "-"
    with pytest.raises(NotFoundError, match="window"):
        restore(target_url, tmp_path / "before", keys=Keys(), to_time_ns=1)


def test_two_writers_on_one_archive_one_wins_the_other_stops(target_url: str,
                                                              tmp_path: Path) -> None:
    first, second = Stores(tmp_path / "a"), Stores(tmp_path / "b")
    a1 = archiver(target_url, first)
    a2 = archiver(target_url, second)  # e.g. a new leader after a failover: a newer epoch
    try:
        first.write(1)
        assert a1.wait_until(lambda a: a.stopped is not None, WAIT_S)
        assert "taken over" in a1.stopped and str(a2.epoch) in a1.stopped  # type: ignore[operator]
        assert a1.status()["status"] == "stopped"
        second.write(1)
        assert a2.wait_until(lambda a: caught_up(a, second), WAIT_S)
        assert a2.stopped is None
    finally:
        a1.stop()
        a2.stop()
        first.close()
        second.close()
    dest = tmp_path / "r"
    restore(target_url, dest, keys=Keys())
    assert phases_present(dest, 1, 1) == second.events


def test_encrypted_stores_leave_no_plaintext_in_the_archive(target_url: str,
                                                            tmp_path: Path) -> None:
    key = bytes(range(32))
    marker = b"PLAINTEXT-MARKER-"
    stores = Stores(tmp_path / "data", key)
    a = archiver(target_url, stores)
    try:
        stores.write(1, marker=marker)
        stores.write(2, n=400, marker=marker)  # spills and a sealed event segment
        assert a.wait_until(lambda a: caught_up(a, stores), WAIT_S)
    finally:
        a.stop()
        stores.close()
    objects = all_objects(target_url)
    assert any(k.startswith("chunks/") for k in objects)
    assert any(k.startswith("files/kv/") and ".dat." in k for k in objects)
    leaks = [k for k, v in objects.items() if marker in v or b"p1-1" in v]
    assert leaks == []
    with pytest.raises(WrongKeyError):
        restore(target_url, tmp_path / "nokey", keys=Keys())
    assert not (tmp_path / "nokey").exists()
    restore(target_url, tmp_path / "r", keys=Keys(configured=key))
    assert phases_present(tmp_path / "r", 2, 2, key) == stores.events


def test_damaged_or_missing_archive_objects_are_named(target_url: str, tmp_path: Path) -> None:
    stores = Stores(tmp_path / "data")
    a = archiver(target_url, stores)
    try:
        stores.write(1)
        assert a.wait_until(lambda a: caught_up(a, stores), WAIT_S)
    finally:
        a.stop()
        stores.close()
    objects = all_objects(target_url)
    chunk = next(k for k in objects if k.startswith("chunks/kv/"))
    put_raw(target_url, chunk, objects[chunk][:-5] + b"XXXXX")
    with pytest.raises(CorruptionError, match=chunk):
        restore(target_url, tmp_path / "r1", keys=Keys())
    put_raw(target_url, chunk, None)
    with pytest.raises(CorruptionError, match="missing"):
        restore(target_url, tmp_path / "r2", keys=Keys())
    put_raw(target_url, chunk, objects[chunk])
    base_file = next(k for k in objects if k.startswith("files/"))
    put_raw(target_url, base_file, None)
    with pytest.raises(NotFoundError, match=base_file):
        restore(target_url, tmp_path / "r3", keys=Keys())
    assert not any(p.name.startswith((".r", "r")) for p in tmp_path.iterdir() if p.is_dir()
                   and p.name != "data")


@pytest.mark.once
def test_object_store_faults_are_retried_show_as_lag_and_never_count_as_archived(
    proxy: FaultProxy, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TUFFDB_S3_TIMEOUT_S", "1")
    url = f"s3://{bucket}/faults"
    stores = Stores(tmp_path / "data")
    a = archiver(url, stores, degraded_lag_s=0.3)
    try:
        stores.write(1)
        assert a.wait_until(lambda a: caught_up(a, stores), WAIT_S)
        before = dict(a.through())
        proxy.down = True
        t0 = time.monotonic()
        stores.write(2)  # client writes go on while the object store fails
        assert time.monotonic() - t0 < 30
        assert a.wait_until(lambda a: a.errors >= 3 and a.lag_s > 0.3, WAIT_S), a.status()
        assert a.status()["status"] == "degraded"
        assert a.through() == before, "nothing counts as archived while uploads fail"
        proxy.down = False
        proxy.stall.set()  # now a stalled endpoint: requests time out
        assert a.wait_until(lambda a: a.errors >= 5, WAIT_S)
        proxy.stall.clear()
        assert a.wait_until(lambda a: caught_up(a, stores) and a.lag_s == 0, WAIT_S), a.status()
        assert a.status()["status"] == "ok" and a.errors >= 5
    finally:
        a.stop()
        stores.close()
    proxy.down = False
    restore(url, tmp_path / "r", keys=Keys())
    assert phases_present(tmp_path / "r", 2, 2) == stores.events


def test_retention_drops_what_no_restore_point_needs(tmp_path: Path) -> None:
    url = str(tmp_path / "archive")
    stores = Stores(tmp_path / "data")
    a = archiver(url, stores, base_interval_s=0.2, retention_s=0.5)
    try:
        stores.write(1, n=200)
        t1 = time.time_ns()
        assert a.wait_until(lambda a: a.bases_taken >= 6 and caught_up(a, stores), WAIT_S)
        stores.write(2)
        assert a.wait_until(lambda a: a.bases_taken >= 10 and caught_up(a, stores), WAIT_S)
    finally:
        a.stop()
        stores.close()
    head = open_target(url).get(HEAD_KEY)[0]
    assert head
    info = describe(url)
    assert len(info["base_backups"]) < 10
    keys = {k for k, _ in open_target(url).list("")}
    assert sum(k.startswith("bases/") for k in keys) == len(info["base_backups"])
    with pytest.raises(NotFoundError, match="window"):
        restore(url, tmp_path / "old", keys=Keys(), to_time_ns=t1)
    restore(url, tmp_path / "r", keys=Keys())
    assert phases_present(tmp_path / "r", 2, 2) == stores.events
