"""Sealed segment index files: written at seal, used on reopen (only the last segment is
scanned), and rebuilt from the log when deleted or corrupt, with identical reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuffdb.events import AppendCondition, Event, EventStore, Query, QueryItem, TrackingInfo


def fill(path: Path) -> None:
    with EventStore.open(path, segment_bytes=2048) as s:
        for i in range(120):
            s.append([Event(f"T{i % 4}", bytes(i % 50), [f"e{i % 9}", "all", f"u{i}"])],
                     tracking_info=TrackingInfo(f"src{i % 2}", i + 1))


def snapshot(s: EventStore) -> list[object]:
    out: list[object] = []
    for query in (None, Query([QueryItem([], ["e4"])]), Query([QueryItem(["T2"], ["all"])]),
                  Query([QueryItem(["T1"], [])]), Query([QueryItem([], ["u77"])])):
        r = s.read(query)
        out.append((r.head, [(e.position, e.event) for e in r]))
    out.append((s.get_tracking_info("src0"), s.get_tracking_info("src1")))
    return out


def index_files(path: Path) -> list[Path]:
    return sorted((path / "index").glob("*.idx"))


def test_reopen_uses_sealed_index_files(tmp_path: Path) -> None:
    path = tmp_path / "ev"
    fill(path)
    n_segments = len(list((path / "log").glob("*.log")))
    assert n_segments > 3
    assert len(index_files(path)) == n_segments - 1  # every sealed segment, not the active one
    with EventStore.open(path) as s:
        assert s.indexes_rebuilt == 0
        assert s.head() == 120
        assert s.check() == []


@pytest.mark.parametrize("damage", ["delete", "corrupt", "truncate"])
def test_damaged_index_file_is_rebuilt_and_reads_are_identical(
    tmp_path: Path, damage: str
) -> None:
    path = tmp_path / "ev"
    fill(path)
    with EventStore.open(path) as s:
        before = snapshot(s)
    victim = index_files(path)[1]
    if damage == "delete":
        victim.unlink()
    elif damage == "corrupt":
        data = bytearray(victim.read_bytes())
        data[len(data) // 2] ^= 0xFF
        victim.write_bytes(bytes(data))
    else:
        victim.write_bytes(victim.read_bytes()[:50])
    with EventStore.open(path) as s:
        assert s.indexes_rebuilt == 1
        assert snapshot(s) == before
        assert s.append([Event("x", b"")], AppendCondition(Query([QueryItem([], ["u77"])]), 78)) == 121
    with EventStore.open(path) as s:
        assert s.indexes_rebuilt == 0
        assert s.head() == 121
