"""The log-shipping seam (storage/shipping.py) over real KV and event stores.

Backup, continuous archiving and replication all read a store through its Shipper, so
what they get must be exactly the store: a snapshot taken while writers run opens as a
store holding every write made before it and none made after; a snapshot plus the feed
rebuilds the directory byte for byte; a consumer that falls behind is told, never
silently skips.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tuffdb import KVStore
from tuffdb.events.api import Event
from tuffdb.errors import CorruptionError
from tuffdb.events.store import EventStore
from tuffdb.storage.shipping import Change, Feed, FeedLost, Mirror, new_bytes


def _drain(feed: Feed) -> list[Change]:
    out: list[Change] = []
    while True:
        got = feed.get(timeout=0)
        if not got:
            return out
        out += got


def _state_bytes(directory: Path, names: list[str]) -> dict[str, bytes]:
    return {n: (directory / n).read_bytes() for n in names}


def test_kv_rounds_carry_the_exact_log_bytes(tmp_path: Path) -> None:
    with KVStore.open(tmp_path / "kv", durability="always") as kv:
        feed = kv.shipper.subscribe()
        for i in range(20):
            kv.put(f"k{i}".encode(), b"v" * i)
        changes = _drain(feed)
        assert changes and all(c.kind == "round" for c in changes)
        versions = [c.version for c in changes]
        assert versions == sorted(set(versions))
        rebuilt: dict[str, bytearray] = {}
        for c in changes:
            for name, start, end, data in c.parts:
                buf = rebuilt.setdefault(name, bytearray())
                assert start == len(buf), "parts of one log are contiguous from offset 0"
                buf += data
                assert end == len(buf)
        positions = kv.shipper.positions()
        for name, buf in rebuilt.items():
            assert positions[name] == len(buf)
            assert (tmp_path / "kv" / name).read_bytes()[: len(buf)] == bytes(buf)
        feed.close()


def test_nobody_listening_means_no_round_is_dispatched(tmp_path: Path) -> None:
    with KVStore.open(tmp_path / "kv", durability="always") as kv:
        feed = kv.shipper.subscribe()
        kv.put(b"a", b"1")
        assert kv.shipper.version > 0
        feed.close()
        before = kv.shipper.version
        kv.put(b"b", b"2")
        assert kv.shipper.feeds == []
        assert kv.shipper.version == before


def test_kv_snapshot_under_concurrent_writers_opens_with_exactly_the_writes_before_it(
    tmp_path: Path,
) -> None:
    stop = threading.Event()
    acked: list[list[int]] = [[], []]
    progress = threading.Condition()

    with KVStore.open(tmp_path / "kv", durability="interval", interval_ms=20,
                      hot_bytes=64 << 10) as kv:
        def writer(w: int) -> None:
            i = 0
            while not stop.is_set():
                kv.put(f"w{w}-{i:06d}".encode(), f"{i}".encode() * 20)
                acked[w].append(i)
                i += 1
                if i % 100 == 0:
                    with progress:
                        progress.notify_all()

        def wait_total(n: int) -> None:
            with progress:
                assert progress.wait_for(lambda: sum(map(len, acked)) >= n, timeout=60)

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(2)]
        for t in threads:
            t.start()
        try:
            wait_total(3000)
            before = [len(a) for a in acked]
            snap = kv.shipper.snapshot(tmp_path / "staging")
            after = [len(a) for a in acked]
            wait_total(sum(after) + 2000)
        finally:
            stop.set()
            for t in threads:
                t.join()
    assert any(kind == "file" for _, _, kind in snap.files), "spills happened: cold files"
    mirror = Mirror(tmp_path / "copy")
    mirror.load(snap)
    snap.release()
    assert not (tmp_path / "staging").exists()
    with KVStore.open(tmp_path / "copy") as copy:
        for w in range(2):
            for i in range(before[w]):
                assert copy.get(f"w{w}-{i:06d}".encode()) == f"{i}".encode() * 20
            # Writes that began after the snapshot returned are not in it.
            assert copy.get(f"w{w}-{after[w] + 1:06d}".encode()) is None
        assert copy.check() == []


def test_kv_snapshot_plus_feed_rebuilds_the_directory_through_spills_and_merges(
    tmp_path: Path,
) -> None:
    d = tmp_path / "kv"
    with KVStore.open(d, durability="always", hot_bytes=16 << 10,
                      background_compaction=False) as kv:
        for i in range(200):
            kv.put(f"k{i % 50}".encode(), bytes([i % 256]) * 200)
        feed = kv.shipper.subscribe(pin_dir=tmp_path / "pins")
        snap = kv.shipper.snapshot(tmp_path / "staging")
        mirror = Mirror(tmp_path / "mirror")
        mirror.load(snap)
        snap.release()
        for i in range(200, 600):
            kv.put(f"k{i % 50}".encode(), bytes([i % 256]) * 200)
        kv.compact()  # merges: the inputs are deleted, the pinned links keep them
        kv.put(b"last", b"x")
        changes = _drain(feed)
        kinds = {c.kind for c in changes}
        assert kinds == {"round", "added", "removed"}
        added = [c for c in changes if c.kind == "added"]
        assert all(c.pinned is not None and c.pinned.exists() for c in added)
        for c in changes:
            mirror.apply(c)
        feed.close()
        assert not (tmp_path / "pins").exists()
        with kv.shipper.paused() as (files, logs):
            live = _state_bytes(d, files)
            live_logs = {n: (d / n).read_bytes()[:size] for n, size in logs.items()}
    assert _state_bytes(tmp_path / "mirror", files) == live
    assert {n: (tmp_path / "mirror" / n).read_bytes() for n in logs} == live_logs
    with KVStore.open(tmp_path / "mirror") as copy:
        assert copy.get(b"last") == b"x"
        for k in range(50):
            i = max(j for j in range(600) if j % 50 == k)
            assert copy.get(f"k{k}".encode()) == bytes([i % 256]) * 200


def test_read_of_a_spilled_log_says_it_is_gone(tmp_path: Path) -> None:
    with KVStore.open(tmp_path / "kv", durability="always", hot_bytes=4 << 10) as kv:
        kv.put(b"a", b"1" * 100)
        name, end = next(iter(kv.shipper.positions().items()))
        assert kv.shipper.read(name, 0, end)[:8] == (tmp_path / "kv" / name).read_bytes()[:8]
        for i in range(200):
            kv.put(f"k{i}".encode(), b"2" * 100)
        kv.sync()
        kv.compact()
        with pytest.raises(FileNotFoundError):
            kv.shipper.read(name, 0, end)


def test_a_feed_that_falls_behind_is_cut_off(tmp_path: Path) -> None:
    with KVStore.open(tmp_path / "kv", durability="always") as kv:
        feed = kv.shipper.subscribe(maxsize=3)
        for i in range(10):
            kv.put(f"k{i}".encode(), b"v")
        assert feed.lost
        assert kv.shipper.feeds == []
        with pytest.raises(FeedLost):
            feed.get(timeout=0)


def test_new_bytes_refuses_a_gap_and_trims_an_overlap() -> None:
    assert new_bytes(10, 5, 15, b"0123456789") == b"56789"
    assert new_bytes(15, 5, 15, b"0123456789") == b""
    with pytest.raises(FeedLost):
        new_bytes(4, 5, 15, b"0123456789")


def test_event_store_feed_reports_rolls_and_rebuilds_the_store(tmp_path: Path) -> None:
    d = tmp_path / "events"
    with EventStore.open(d, segment_bytes=4096) as es:
        es.append([Event("Seeded", b"x" * 50, ["s"])])
        feed = es.shipper.subscribe(pin_dir=tmp_path / "pins")
        snap = es.shipper.snapshot(tmp_path / "staging")
        mirror = Mirror(tmp_path / "mirror")
        mirror.load(snap)
        snap.release()
        for i in range(200):
            es.append([Event("Happened", f"{i}".encode() * 10, [f"t{i % 7}"])])
        for t in es._sealers:
            t.join()
        changes = _drain(feed)
        sealed = [c.name for c in changes if c.kind == "added" and c.name.startswith("log/")]
        indexes = [c.name for c in changes if c.kind == "added" and c.name.startswith("index/")]
        assert sealed and indexes
        first_rounds = [p for c in changes if c.kind == "round" for p in c.parts if p[1] == 0]
        assert first_rounds, "a new segment's first round carries its header from offset 0"
        for c in changes:
            mirror.apply(c)
        feed.close()
        positions = es.shipper.positions()
        head = es.head()
    (name, end), = positions.items()
    assert (tmp_path / "mirror" / name).read_bytes() == (d / name).read_bytes()[:end]
    with EventStore.open(tmp_path / "mirror") as copy:
        assert copy.head() == head
        assert copy.check(deep=True) == []
        got = [e.event.data for e in copy.read()]
        assert got[0] == b"x" * 50
        assert got[1:] == [f"{i}".encode() * 10 for i in range(200)]


def test_event_snapshot_is_between_drains_under_concurrent_appends(tmp_path: Path) -> None:
    stop = threading.Event()
    acked: list[int] = []
    with EventStore.open(tmp_path / "events", segment_bytes=8192) as es:
        def appender() -> None:
            i = 0
            while not stop.is_set():
                acked.append(es.append([Event("E", f"{i}".encode(), ["t"])]))
                i += 1

        t = threading.Thread(target=appender)
        t.start()
        try:
            while len(acked) < 300:
                es.wait_for(len(acked), timeout=0.05)
            before = len(acked)
            snap = es.shipper.snapshot(tmp_path / "staging")
            after = len(acked)
        finally:
            stop.set()
            t.join()
    mirror = Mirror(tmp_path / "copy")
    mirror.load(snap)
    snap.release()
    with EventStore.open(tmp_path / "copy") as copy:
        head = copy.head() or 0
        assert before <= head <= after + 1
        assert [e.event.data for e in copy.read()] == [f"{i}".encode() for i in range(head)]


@pytest.mark.parametrize("kind", ["round", "added", "removed"])
@pytest.mark.parametrize("name", ["../victim", "a/../../victim", "/abs/victim", "", "./x"])
def test_a_change_naming_a_file_outside_the_mirror_is_refused(
        tmp_path: Path, kind: str, name: str) -> None:
    """An archive's changes are replayed through a Mirror at restore, and an archive may
    be stored where someone else can change it: a change that names a file outside the
    directory (to append to, put in place or delete) is refused as damaged, and nothing
    outside is touched. Before, a "removed" change for ``../victim`` deleted it."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me")
    pinned = tmp_path / "pinned"
    pinned.write_bytes(b"new")
    mirror = Mirror(tmp_path / "mirror")
    parts = ((name, 0, 3, b"abc"),) if kind == "round" else ()
    change = Change(1, 0, kind, parts, name if kind != "round" else "",
                    pinned if kind == "added" else None)
    with pytest.raises(CorruptionError, match="outside"):
        mirror.apply(change)
    assert victim.read_bytes() == b"keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mirror", "pinned", "victim"]
