"""A follower's apply path: a leader's committed log bytes, applied to another store, give
the same contents (KV records with their expiry; events at the same positions and
addresses, across segment rolls), and bytes that do not continue the store are refused.

The leader here is a real store writing real files; its log bytes are read from disk,
commit by commit, as the replication stream ships them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tuffdb import Event, EventStore, KVStore, Query, QueryItem
from tuffdb._format.record import COMMIT, scan_frames
from tuffdb._format.segment import SEGMENT_HEADER_SIZE
from tuffdb.errors import CorruptionError, NotFoundError
from tuffdb.events import sealed_index

KEY = os.urandom(32)


def committed_runs(path: Path) -> list[tuple[int, bytes]]:
    """(file offset, bytes) of each committed run of frames in a log file, in order."""
    data = path.read_bytes()
    res = scan_frames(data, SEGMENT_HEADER_SIZE)
    runs, start = [], SEGMENT_HEADER_SIZE
    for f in res.frames:
        end = f.offset + 10 + len(f.payload)
        if f.flags & COMMIT:
            runs.append((start, data[start:end]))
            start = end
    return runs


@pytest.mark.parametrize("key", [None, KEY], ids=["plain", "encrypted"])
def test_kv_frames_applied_to_a_follower_give_the_leaders_contents(tmp_path: Path,
                                                                   key: bytes | None) -> None:
    leader = KVStore.open(tmp_path / "leader", durability="always", encryption_key=key,
                          hot_bytes=64 << 20, background_compaction=False)
    follower = KVStore.open(tmp_path / "follower", durability="always", encryption_key=key,
                            background_compaction=False)
    try:
        leader.put(b"a", b"1")
        leader.put_many([(b"b", b"2"), (b"c", b"3")])
        leader.put(b"ttl", b"soon", ttl=3600)
        leader.delete(b"b")
        leader.put(b"a", b"1bis")
        logs = sorted((tmp_path / "leader").glob("*.log"))
        assert logs, "the leader keeps its log while its hot segment is not spilled"
        tickets = [follower.replica_apply(run) for log in logs for _, run in committed_runs(log)]
        follower.wait_durable(max(tickets))
        assert dict(follower.scan()) == dict(leader.scan()) == {
            b"a": b"1bis", b"c": b"3", b"ttl": b"soon"}
        assert follower.ttl(b"ttl") == pytest.approx(leader.ttl(b"ttl"), abs=1.0)
        # Applying the same bytes again changes nothing (a follower may replay after a crash).
        for log in logs:
            for _, run in committed_runs(log):
                follower.replica_apply(run)
        assert dict(follower.scan()) == dict(leader.scan())
    finally:
        leader.close()
        follower.close()
    reopened = KVStore.open(tmp_path / "follower", encryption_key=key)
    try:
        assert dict(reopened.scan()) == {b"a": b"1bis", b"c": b"3", b"ttl": b"soon"}
        assert reopened.check() == []
    finally:
        reopened.close()


def test_kv_replica_apply_refuses_torn_or_foreign_frames(tmp_path: Path) -> None:
    leader = KVStore.open(tmp_path / "leader", durability="always")
    follower = KVStore.open(tmp_path / "follower")
    try:
        leader.put(b"k", b"v" * 100)
        (log,) = (tmp_path / "leader").glob("*.log")
        ((_, run),) = committed_runs(log)
        with pytest.raises(CorruptionError):
            follower.replica_apply(run[:-1])
        with pytest.raises(CorruptionError):
            follower.replica_apply(b"\x00" * len(run))
        assert follower.get(b"k") is None
    finally:
        leader.close()
        follower.close()


@pytest.mark.parametrize("key", [None, KEY], ids=["plain", "encrypted"])
def test_event_frames_applied_to_a_follower_give_the_same_log(tmp_path: Path,
                                                              key: bytes | None) -> None:
    leader = EventStore.open(tmp_path / "leader", segment_bytes=4096, encryption_key=key)
    follower = EventStore.open(tmp_path / "follower", segment_bytes=1 << 30, encryption_key=key)
    heads: list[int] = []
    try:
        for i in range(60):
            leader.append([Event("Made", b"x" * 40, [f"s:{i % 7}"]) for _ in range(1 + i % 3)])
        segments = sorted((tmp_path / "leader" / "log").glob("*.log"))
        assert len(segments) >= 3, "small segments make the leader roll"
        for seg in segments:
            base = int(seg.stem)
            for offset, run in committed_runs(seg):
                heads.append(follower.replica_apply(base, base + offset - SEGMENT_HEADER_SIZE, run))
        assert heads == sorted(heads)
        assert heads[-1] == leader.head()
        q = Query([QueryItem(tags=["s:3"])])
        assert [(e.position, e.event.data, e.event.tags) for e in follower.read(q)] == [
            (e.position, e.event.data, e.event.tags) for e in leader.read(q)]
        assert [e.position for e in follower.read()] == list(range(1, leader.head() + 1))
    finally:
        leader.close()
        follower.close()
    names = sorted(p.name for p in (tmp_path / "follower" / "log").glob("*.log"))
    assert names == sorted(p.name for p in (tmp_path / "leader" / "log").glob("*.log"))
    for name in names:  # the frames alike byte for byte (headers differ: creation time)
        ours = (tmp_path / "follower" / "log" / name).read_bytes()[SEGMENT_HEADER_SIZE:]
        theirs = (tmp_path / "leader" / "log" / name).read_bytes()[SEGMENT_HEADER_SIZE:]
        assert ours.rstrip(b"\0") == theirs.rstrip(b"\0")
    reopened = EventStore.open(tmp_path / "follower", encryption_key=key)
    try:
        assert reopened.head() == heads[-1]
        assert sealed_index.index_path(tmp_path / "follower" / "index", 0).exists()
    finally:
        reopened.close()


def test_event_replica_apply_refuses_bytes_that_do_not_continue_the_log(tmp_path: Path) -> None:
    leader = EventStore.open(tmp_path / "leader")
    follower = EventStore.open(tmp_path / "follower")
    try:
        leader.append([Event("A", b"1", ["t"])])
        leader.append([Event("B", b"2", ["t"])])
        (seg,) = (tmp_path / "leader" / "log").glob("*.log")
        (o1, r1), (o2, r2) = committed_runs(seg)
        with pytest.raises(CorruptionError):  # the second commit before the first
            follower.replica_apply(0, o2 - SEGMENT_HEADER_SIZE, r2)
        assert follower.head() is None or follower.head() == 0
        follower.replica_apply(0, o1 - SEGMENT_HEADER_SIZE, r1)
        with pytest.raises(CorruptionError):  # the first again: its positions are taken
            follower.replica_apply(0, o1 - SEGMENT_HEADER_SIZE, r1)
        assert follower.head() == 1
    finally:
        leader.close()
        follower.close()


def test_documents_follower_keeps_indexes_and_search_current(tmp_path: Path) -> None:
    from tuffdb import Database

    leader = Database.open(tmp_path / "leader", durability="always", hot_bytes=64 << 20,
                           background_compaction=False)
    follower = Database.open(tmp_path / "follower", durability="always",
                             background_compaction=False)
    try:
        users = leader.collection("users")
        users.create_index("age", "ordered")
        ids = [users.insert({"name": f"u{i}", "age": 20 + i % 5}) for i in range(20)]
        users.update(ids[0], {"age": 99})
        users.delete(ids[1])
        assert follower.collection("users").find({}) == [], "the follower starts empty"
        shipped = 0
        for log in sorted((tmp_path / "leader").glob("*.log")):
            for _, run in committed_runs(log):
                follower.replica_apply(run)
                shipped += 1
        assert shipped
        adults = {"type": "Condition", "content": {"field": "age", "operator": "Gte", "value": 24}}
        def view(db: Database) -> list[tuple[str, int]]:
            return sorted((r["id"], r["age"]) for r in db.collection("users").find(adults))
        assert view(follower) == view(leader)
        assert (ids[0], 99) in view(follower)
        with pytest.raises(NotFoundError):
            follower.collection("users").get(ids[1])
        assert len(follower.collection("users").find({})) == 19
        # The follower's index is built now; later rounds must update it in place.
        done = {log: len(committed_runs(log)) for log in (tmp_path / "leader").glob("*.log")}
        users.update(ids[2], {"age": 50})
        users.update(ids[3], {"age": 1})
        users.delete(ids[4])
        for log in sorted((tmp_path / "leader").glob("*.log")):
            for _, run in committed_runs(log)[done.get(log, 0):]:
                follower.replica_apply(run)
        assert view(follower) == view(leader)
        assert (ids[2], 50) in view(follower)
        assert all(rid != ids[3] and rid != ids[4] for rid, _ in view(follower))
    finally:
        leader.close()
        follower.close()


def test_a_follower_store_refuses_writes_and_still_applies_the_leaders(tmp_path: Path) -> None:
    """A cluster node that joins as a follower refuses its stores' own writes (a face that
    forgot its role fails instead of diverging from the leader); the leader's frames
    still apply, and installing a leader's hooks lifts the refusal."""
    from tuffdb.errors import NotLeaderError  # noqa: PLC0415

    leader = KVStore.open(tmp_path / "kv-leader", durability="always", hot_bytes=64 << 20,
                          background_compaction=False)
    follower = KVStore.open(tmp_path / "kv-follower", durability="always",
                            background_compaction=False)
    eleader = EventStore.open(tmp_path / "ev-leader")
    efollower = EventStore.open(tmp_path / "ev-follower")
    try:
        follower.refuse_writes(NotLeaderError("a follower"))
        efollower.refuse_writes(NotLeaderError("a follower"))
        for write in (lambda: follower.put(b"x", b"1"),
                      lambda: follower.put_many([(b"x", b"1")]),
                      lambda: follower.write_batch([(b"x", b"1")]),
                      lambda: follower.delete(b"a"),
                      lambda: efollower.append([Event("Made", b"x", ["s"])])):
            with pytest.raises(NotLeaderError):
                write()
        leader.put(b"a", b"1")
        for log in sorted((tmp_path / "kv-leader").glob("*.log")):
            for _, run in committed_runs(log):
                follower.wait_durable(follower.replica_apply(run))
        assert dict(follower.scan()) == {b"a": b"1"}
        eleader.append([Event("Made", b"y", ["s"])])
        for seg in sorted((tmp_path / "ev-leader" / "log").glob("*.log")):
            base = int(seg.stem)
            for offset, run in committed_runs(seg):
                efollower.replica_apply(base, base + offset - SEGMENT_HEADER_SIZE, run)
        assert [e.event.data for e in efollower.read()] == [b"y"]
        follower.set_replication_hooks(lambda frames: None, lambda done: done(None))
        follower.put(b"x", b"2")  # leading now
        assert follower.get(b"x") == b"2"
    finally:
        for s in (leader, follower, eleader, efollower):
            s.close()
