"""Golden fixtures: directories written by format version 1 must open forever after.

Story: a format change that silently misreads old files is the worst kind of bug, because
nothing fails until a user upgrades [redb, fjall test_fixture/]. Each fixture under
fixtures/v1/ was written once by the v1 code and is committed; these tests open copies.
A version byte we do not know must be refused with VersionMismatchError, never guessed at.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tuffdb import KVStore
from tuffdb._format import MAGIC_PREFIX
from tuffdb._format.checksum import crc32c
from tuffdb._format.segment import HEADER_CRC_OFFSET
from tuffdb.errors import VersionMismatchError

FIXTURES = Path(__file__).parent / "fixtures"
FIXTURE_NOW = 1_700_000_000.0  # the clock the kv-cold fixture was written with


def _copy(name: str, tmp_path: Path) -> Path:
    dst = tmp_path / name
    shutil.copytree(FIXTURES / "v1" / name, dst)
    return dst


def test_v1_cold_segments_and_hints_open_with_every_value(tmp_path: Path) -> None:
    path = _copy("kv-cold", tmp_path)
    with KVStore.open(path, clock=lambda: FIXTURE_NOW) as store:
        assert store.recovery.hints_rebuilt == 0
        expected = {b"key-%03d" % i: b"value-%03d-" % i * 8 for i in range(40) if i != 7}
        expected[b"ttl-key"] = b"expires in 2100"
        assert dict(store.scan()) == expected
        assert store.get(b"key-007") is None  # the tombstone still shadows the old value
        assert store.ttl(b"ttl-key") == pytest.approx(4_000_000_000 - FIXTURE_NOW)
        assert store.check() == []


def test_v1_hot_log_replays_on_open(tmp_path: Path) -> None:
    path = _copy("kv-log", tmp_path)
    with KVStore.open(path, durability="always") as store:
        assert store.recovery.wal_segments_replayed == 1
        assert dict(store.scan()) == {b"log-%d" % i: b"v%d" % i for i in range(5)}
        assert store.check() == []


def _set_version(path: Path, version: int) -> None:
    data = bytearray(path.read_bytes())
    assert data[:7] == MAGIC_PREFIX
    data[7] = version
    data[HEADER_CRC_OFFSET : HEADER_CRC_OFFSET + 4] = crc32c(bytes(data[:HEADER_CRC_OFFSET])).to_bytes(
        4, "little"
    )
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("suffix", [".dat", ".log"])
def test_an_unknown_format_version_is_refused(tmp_path: Path, suffix: str) -> None:
    path = _copy("kv-cold" if suffix == ".dat" else "kv-log", tmp_path)
    target = sorted(path.glob(f"*{suffix}"))[0]
    _set_version(target, 2)
    with pytest.raises(VersionMismatchError, match="version 2"):
        KVStore.open(path)
