"""Fixtures of the crash tests: ``disk``, a powerfs mount (tests/crash/powerfs.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

import powerfs

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[powerfs.Mount]:
    """A disk that loses its unsynced writes on ``disk.crash()``: a powerfs mount at
    ``disk.mountpoint`` over ``disk.backing`` (what the disk holds after the cut)."""
    reason = powerfs.unavailable()
    if reason is not None:
        pytest.skip(reason)
    with powerfs.Mount(tmp_path / "disk", tmp_path / "mnt") as mount:
        yield mount
