"""storage/copy.py: kernel copies with checksums, frame digests, and the throttle that
bounds an online backup's rate (on an injected clock: no timing in tests)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tuffdb import KVStore
from tuffdb._format.checksum import crc32c
from tuffdb.errors import CorruptionError, ProgrammingError
from tuffdb.storage.copy import (
    DIRECT_ALIGN,
    DIRECT_MIN_BYTES,
    DIRECT_SLICE,
    Throttle,
    _copy_direct,
    copy_file,
    copy_to_path,
    file_crc,
    frames_digest,
)


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


class _Counting:
    """A throttle that only counts what it is charged."""

    def __init__(self) -> None:
        self.taken: list[int] = []

    def take(self, nbytes: int) -> None:
        self.taken.append(nbytes)


def _direct_io_works(d: Path) -> bool:
    try:
        os.close(os.open(d / "probe", os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o600))
    except OSError:
        return False
    return True


def test_direct_copy_of_unaligned_sizes_and_slices_is_exact(tmp_path: Path) -> None:
    """Files of DIRECT_MIN_BYTES or more go through direct writes in DIRECT_SLICE pieces
    (where the file system allows them), the unaligned tail through the page cache:
    either way the copy is the source's bytes, and a throttle is charged for every one."""
    for size in (DIRECT_SLICE * 2 + 4096, DIRECT_SLICE + 1234, DIRECT_MIN_BYTES - 1):
        data = os.urandom(size)
        (tmp_path / "src").write_bytes(data)
        throttle = _Counting()
        fd = os.open(tmp_path / "dst", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            assert copy_file(tmp_path / "src", fd, throttle=throttle) == (  # type: ignore[arg-type]
                crc32c(data), size)
        finally:
            os.close(fd)
        assert (tmp_path / "dst").read_bytes() == data
        assert sum(throttle.taken) == size
        src = os.open(tmp_path / "src", os.O_RDONLY)
        dst = os.open(tmp_path / "direct", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            done = _copy_direct(src, dst, size, None)
        finally:
            os.close(src)
            os.close(dst)
        if size < DIRECT_MIN_BYTES:
            assert done == 0
        elif _direct_io_works(tmp_path):
            assert done == size - size % DIRECT_ALIGN
            assert (tmp_path / "direct").read_bytes() == data[:done]
        else:  # (a file system without O_DIRECT: everything goes through the page cache)
            assert done == 0


def test_direct_copy_refuses_a_short_source_and_a_written_destination(tmp_path: Path) -> None:
    (tmp_path / "src").write_bytes(os.urandom(DIRECT_MIN_BYTES))
    (tmp_path / "dst").write_bytes(b"already")
    src = os.open(tmp_path / "src", os.O_RDONLY)
    dst = os.open(tmp_path / "dst", os.O_WRONLY)
    try:
        assert _copy_direct(src, dst, DIRECT_MIN_BYTES + DIRECT_ALIGN, None) == 0  # short
        assert _copy_direct(src, dst, DIRECT_MIN_BYTES, None) == 0  # dst not empty
    finally:
        os.close(src)
        os.close(dst)
    fd = os.open(tmp_path / "new", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        with pytest.raises(CorruptionError, match="shorter"):
            copy_file(tmp_path / "src", fd, DIRECT_MIN_BYTES + DIRECT_ALIGN)
    finally:
        os.close(fd)
