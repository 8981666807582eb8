"""storage.files.writev_all writes every part in order, past one writev's IOV_MAX."""

from __future__ import annotations

import os
from pathlib import Path

from tuffdb.storage.files import IOV_MAX, writev_all


def test_writev_all_writes_more_parts_than_one_writev_takes(tmp_path: Path) -> None:
    parts = [i.to_bytes(4, "little") * (i % 7) for i in range(IOV_MAX * 2 + 5)]
    path = tmp_path / "f"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        assert writev_all(fd, parts) == sum(map(len, parts))
    finally:
        os.close(fd)
    assert path.read_bytes() == b"".join(parts)


def test_writev_all_of_nothing_writes_nothing(tmp_path: Path) -> None:
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        assert writev_all(fd, []) == 0
    finally:
        os.close(fd)
    assert (tmp_path / "f").read_bytes() == b""
