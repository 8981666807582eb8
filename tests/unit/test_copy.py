"""storage/copy.py: kernel copies with checksums, frame digests, and the throttle that
bounds an online backup's rate (on an injected clock: no timing in tests)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tuffdb import KVStore
from tuffdb._format.checksum import crc32c
from tuffdb.errors import CorruptionError, ProgrammingError
from tuffdb.storage.copy import Throttle, copy_file, copy_to_path, file_crc, frames_digest


def test_copy_file_copies_exactly_and_checksums_what_it_copied(tmp_path: Path) -> None:
    data = os.urandom(3 << 20) + b"tail"
    (tmp_path / "src").write_bytes(data)
    fd = os.open(tmp_path / "dst", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        assert copy_file(tmp_path / "src", fd, 1 << 20) == (crc32c(data[: 1 << 20]), 1 << 20)
    finally:
        os.close(fd)
    assert (tmp_path / "dst").read_bytes() == data[: 1 << 20]
    copy_to_path(tmp_path / "src", tmp_path / "whole")
    assert file_crc(tmp_path / "whole") == (crc32c(data), len(data))
    with pytest.raises(CorruptionError, match="shorter"):
        copy_to_path(tmp_path / "src", tmp_path / "more", len(data) + 1)


def test_frames_digest_needs_whole_frames_and_covers_headers_and_trailer(tmp_path: Path) -> None:
    with KVStore.open(tmp_path / "kv", hot_bytes=8 << 10) as kv:
        for i in range(300):
            kv.put(f"k{i}".encode(), os.urandom(100))
    seg = sorted((tmp_path / "kv").glob("*.dat"))[0]
    digest, size = frames_digest(seg, 16)
    assert size == seg.stat().st_size
    raw = bytearray(seg.read_bytes())
    raw[-1] ^= 1  # the trailer is in the digest
    (tmp_path / "t.dat").write_bytes(raw)
    assert frames_digest(tmp_path / "t.dat", 16)[0] != digest
    with pytest.raises(CorruptionError, match="frames end"):
        frames_digest(seg, 0)  # without its trailer the file does not end in whole frames


def test_throttle_spaces_takes_at_its_rate() -> None:
    now = [100.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    t = Throttle(1000, clock=lambda: now[0], sleep=sleep)
    t.take(500)  # within the first second's allowance: no wait
    t.take(1000)
    t.take(1000)
    assert slept == pytest.approx([0.5, 1.0])
    now[0] += 60  # idle for a minute: at most a second of unused rate carries over
    slept.clear()
    for _ in range(4):
        t.take(1000)  # the carried second and the current one go at once, then the rate
    assert slept == pytest.approx([1.0, 1.0])
    with pytest.raises(ProgrammingError):
        Throttle(0)
