"""Sealed segment index files: written at seal, used on reopen (only the last segment is
scanned), and rebuilt from the log when deleted or corrupt, with identical reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuffdb.errors import CorruptionError
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


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
def test_index_built_at_seal_from_memory_equals_a_scan_of_the_segment(
    tmp_path: Path, encrypted: bool
) -> None:
    """Seal builds the index from the in-memory indexes; it must be byte-identical to the
    one a scan of the sealed segment gives (the recovery path), across rolls that happen
    both between and inside batches, with tracking info, reopen and a restarted writer."""
    from tuffdb.events import sealed_index  # noqa: PLC0415
    from tuffdb.storage.codec import Codec  # noqa: PLC0415

    key = bytes(range(32)) if encrypted else None
    path = tmp_path / "ev"
    sealed_before = 0
    for round_ in range(2):  # the second round starts from a recovered active segment
        with EventStore.open(path, segment_bytes=4096, encryption_key=key) as s:
            for i in range(60):
                n = 1 + (i * 7) % 5
                events = [Event(f"T{(i + k) % 3}", bytes((i + k) % 40),
                                [f"e{(i + k) % 7}", "all"] + ([f"u{i}"] if k == 0 else []))
                          for k in range(n)]
                cond = AppendCondition(Query([QueryItem([], [f"u{i}-{round_}"])]), after=0)
                s.append(events, condition=cond,
                         tracking_info=TrackingInfo(f"src{i % 3}", 100 * round_ + i + 1))
        assert s.sealed_from_memory == len(s._log.segments) - 1 - sealed_before
        sealed_before = len(s._log.segments) - 1
    codec = Codec(compression=None, key=key) if key else None
    with EventStore.open(path, encryption_key=key) as s:
        segs = s._log.segments[:-1]
        assert len(segs) > 3
        first = 1
        for seg in segs:
            scanned = sealed_index.scan_segment(
                s._frames_of(seg), seg.base_address, str(seg.path), first, codec
            )
            scanned.size = seg.size
            on_disk = sealed_index.index_path(path / "index", seg.base_address).read_bytes()
            assert _same(sealed_index.decode(on_disk, seg.base_address, "x", codec), scanned)
            if not encrypted:  # (AES-GCM nonces differ from one encoding to the next)
                assert on_disk == sealed_index.encode(scanned, seg.base_address, codec)
            first += scanned.count
        assert s.indexes_rebuilt == 0


def _same(a: object, b: object) -> bool:
    import numpy as np  # noqa: PLC0415

    da, db = vars(a), vars(b)
    for k in da:
        x, y = da[k], db[k]
        if isinstance(x, np.ndarray):
            if not np.array_equal(x, y):
                return False
        elif isinstance(x, dict) and x and isinstance(next(iter(x.values())), np.ndarray):
            if x.keys() != y.keys() or any(not np.array_equal(x[t], y[t]) for t in x):
                return False
        elif x != y:
            return False
    return True


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
def test_a_damaged_sealed_segment_with_a_good_index_is_never_served(
    tmp_path: Path, encrypted: bool
) -> None:
    """A sealed segment opens from its index file without being scanned; the first read
    that needs one of its frames checks that frame's CRC, so a flipped bit there is a
    CorruptionError naming the segment, every time, and never a wrong event or a protobuf
    error, while the other segments serve as before."""
    key = {"encryption_key": bytes(range(32))} if encrypted else {}
    path = tmp_path / "ev"
    with EventStore.open(path, segment_bytes=2048, **key) as s:
        for i in range(120):
            s.append([Event(f"T{i % 4}", b"payload-%03d" % i, [f"e{i % 9}", "all"])])
        everything = [(e.position, e.event) for e in s.read()]
    victim = sorted((path / "log").glob("*.log"))[1]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0x10
    victim.write_bytes(bytes(data))
    with EventStore.open(path, **key) as s:
        assert s.indexes_rebuilt == 0  # the index files are good: nothing was scanned
        for _ in range(2):
            with pytest.raises(CorruptionError, match="sealed event segment damaged") as info:
                list(s.read())
            assert victim.name in str(info.value)
        first = s._segment_firsts
        # The segments before and after the damaged one still serve exactly.
        before = [(e.position, e.event) for e in s.read(limit=first[1] - 1)]
        after = [(e.position, e.event) for e in s.read(start=first[2])]
        assert before == everything[: first[1] - 1]
        assert after == everything[first[2] - 1 :]
        assert s.check(deep=True) != []
