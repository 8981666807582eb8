"""powerfs, the power-cut disk of the crash tests, keeps exactly what was fsynced.

The power-loss tests are only as strict as this tool: if it made unsynced writes durable
they would pass with every fsync deleted. So its model is tested here on its own, through
a real mount: reads merge unsynced pages over the disk, and after the cut the backing
directory holds exactly what fsync, fdatasync or a Linux AIO fsync made durable.
"""

from __future__ import annotations

import errno
import os
import select
from typing import TYPE_CHECKING

import pytest

from tuffdb.storage.aio_sync import open_aio

if TYPE_CHECKING:
    from pathlib import Path

    from powerfs import Mount

pytestmark = pytest.mark.once  # a test tool: the compiled build changes nothing here


def write_at(path: Path, data: bytes, offset: int = 0, *, sync: bool = False,
             truncate: int | None = None) -> None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, data, offset)
        if truncate is not None:
            os.ftruncate(fd, truncate)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def test_only_what_was_fsynced_survives_the_cut(disk: Mount) -> None:
    mnt, backing = disk.mountpoint, disk.backing
    first = os.urandom(10_000)
    write_at(mnt / "a", first, sync=True)
    write_at(mnt / "a", b"X" * 100, 50)  # over synced bytes, not synced
    write_at(mnt / "a", b"tail", 10_000)  # growth, not synced
    assert (mnt / "a").read_bytes() == first[:50] + b"X" * 100 + first[150:] + b"tail"
    assert (mnt / "a").stat().st_size == 10_004

    write_at(mnt / "b", b"never synced")
    write_at(mnt / "c", first, sync=True)
    write_at(mnt / "c", b"", truncate=5_000)  # a shrink, not synced
    assert (mnt / "c").stat().st_size == 5_000

    write_at(mnt / "d", first, sync=True)
    write_at(mnt / "d", b"", truncate=100)
    write_at(mnt / "d", b"x", 6_000, sync=True)  # bytes 100..6000 of the old file: zeros now
    expected_d = first[:100] + bytes(5_900) + b"x"
    assert (mnt / "d").read_bytes() == expected_d

    assert disk.stats()["dirty_pages"] > 0
    assert disk.crash() > 0
    assert (backing / "a").read_bytes() == first
    assert (backing / "b").read_bytes() == b""  # the name is durable at once, the data not
    assert (backing / "c").read_bytes() == first
    assert (backing / "d").read_bytes() == expected_d


def test_fdatasync_and_aio_fdsync_are_durable_and_an_injected_error_fails_both(
    disk: Mount,
) -> None:
    """The ekoDB face syncs through Linux AIO (storage/aio_sync.py): the kernel runs an
    ``IOCB_CMD_FDSYNC`` as the same fsync request to powerfs, error included."""
    aio = open_aio()
    assert aio is not None, "Linux AIO fsync is not available on this kernel"
    fd = os.open(disk.mountpoint / "log", os.O_RDWR | os.O_CREAT, 0o644)

    def aio_fdsync() -> int:
        (submitted,) = aio.submit([(fd, True)])
        assert select.select([aio.fileno()], [], [], 60)[0], "the AIO fsync never completed"
        ((done, err),) = aio.reap(block=True)
        assert done == submitted
        return err

    try:
        os.write(fd, b"1" * 5000)
        os.fdatasync(fd)
        os.write(fd, b"2" * 5000)
        assert aio_fdsync() == 0
        assert (disk.backing / "log").read_bytes() == b"1" * 5000 + b"2" * 5000
        os.write(fd, b"3" * 5000)
        disk.fsync_error(True)
        assert aio_fdsync() == errno.EIO
        with pytest.raises(OSError, match="Input/output error"):
            os.fsync(fd)
        assert disk.stats()["failed"] == 2
    finally:
        os.close(fd)
        aio.close()
    disk.crash()
    assert (disk.backing / "log").read_bytes() == b"1" * 5000 + b"2" * 5000
