"""Corruption table for the KV engine's files: hot-tier logs, cold segments, hint files.

Story: tamnd/kv v0.4.0 had no record checksums, so damage inside the durable prefix was
served as data [kv-design.md §4]. tuffdb's rule: a damaged byte is either provably
harmless (a torn log tail, truncated and reported; a hint file, rebuilt from the data)
or it is a ``CorruptionError`` on read or in ``check()``. Never wrong data, never a
silent loss of data that was durable. Each row asserts the exact outcome.

Crash images: a store opened with ``durability="always"`` has every acknowledged byte in
its files, so copying the directory while it is open gives exactly what a crash at that
moment leaves behind (LOCK excluded); the damage is then applied to the copy.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tuffdb import KVStore
from tuffdb._format.kv import RECORD_SIZE
from tuffdb._format.record import FRAME_SIZE, LENGTH_OFFSET
from tuffdb._format.segment import SEGMENT_HEADER_SIZE
from tuffdb.errors import CorruptionError, RecoveredTailWarning
from tuffdb.kv.cold import ColdSegment
from tuffdb.storage.codec import Codec
from tuffdb.storage.lock import LOCK_NAME
from tuffdb.testing.faults import flip_byte, truncate_by, zero_fill_tail

HOT_BYTES = 16 * 1024
KEY = bytes(range(32))


def _value(i: int) -> bytes:
    return f"value-{i:05d}-".encode() * 20  # 240 bytes, compressible


def _key(i: int) -> bytes:
    return f"key-{i:05d}".encode()


def _crash_image(src: Path, dst: Path) -> Path:
    dst.mkdir()
    for p in src.iterdir():
        if p.name != LOCK_NAME:
            shutil.copy2(p, dst / p.name)
    return dst


# -- hot-tier log (.log) ------------------------------------------------------------------
LOG_KEYS = 10
LOG_VALUE = b"v" * 100
LOG_FRAME = FRAME_SIZE + RECORD_SIZE + len(_key(0)) + len(LOG_VALUE)


@pytest.fixture
def log_image(kv_store: Any, tmp_path: Path) -> Path:
    """A crash image holding one hot-tier log with LOG_KEYS committed one-put frames."""
    store = kv_store(durability="always", hot_bytes=1 << 20, compression=None)
    for i in range(LOG_KEYS):
        store.put(_key(i), LOG_VALUE)
    image = _crash_image(kv_store.default_path, tmp_path / "image")
    logs = sorted(image.glob("*.log"))
    assert len(logs) == 1
    end = SEGMENT_HEADER_SIZE + LOG_KEYS * LOG_FRAME
    data = logs[0].read_bytes()
    # A log made from a spare has zero-filled reserved space after its frames: cut it,
    # so the damage below is measured from the last frame.
    assert len(data) >= end
    assert data.count(0, end) == len(data) - end
    os.truncate(logs[0], end)
    return logs[0]


# (name, damage, bytes dropped, keys that survive)
LOG_TABLE: list[tuple[str, Callable[[Path], object], int, int]] = [
    ("torn tail", lambda p: truncate_by(p, 3), LOG_FRAME - 3, LOG_KEYS - 1),
    ("torn frame header", lambda p: truncate_by(p, LOG_FRAME - 6), 6, LOG_KEYS - 1),
    ("bad checksum", lambda p: flip_byte(p, -1), LOG_FRAME, LOG_KEYS - 1),
    ("bad length", lambda p: flip_byte(p, -LOG_FRAME + LENGTH_OFFSET, 0x01), LOG_FRAME,
     LOG_KEYS - 1),
    ("damage in the third frame drops it and everything after",
     lambda p: flip_byte(p, SEGMENT_HEADER_SIZE + 2 * LOG_FRAME + FRAME_SIZE + 1),
     (LOG_KEYS - 2) * LOG_FRAME, 2),
]


@pytest.mark.parametrize(("damage", "dropped", "kept"), [r[1:] for r in LOG_TABLE],
                         ids=[r[0] for r in LOG_TABLE])
def test_hot_log_damage_drops_exactly_the_damaged_tail(
    kv_store: Any, log_image: Path, damage: Callable[[Path], object], dropped: int, kept: int
) -> None:
    damage(log_image)
    with pytest.warns(RecoveredTailWarning, match=f"dropped {dropped} bytes"):
        store = kv_store(log_image.parent, durability="always", compression=None)
    assert store.recovery.bytes_dropped == dropped
    assert dict(store.scan()) == {_key(i): LOG_VALUE for i in range(kept)}
    assert store.check() == []


@pytest.mark.parametrize(("damage", "kept"), [
    (lambda p: zero_fill_tail(p, 8192, extend=True), LOG_KEYS),  # a spare's reserved space
    (lambda p: zero_fill_tail(p, LOG_FRAME), LOG_KEYS - 1),  # a write that never reached disk
], ids=["zeros after the last frame", "last frame zero-filled"])
def test_zeros_after_the_last_frame_are_unwritten_space_not_damage(
    kv_store: Any, log_image: Path, damage: Callable[[Path], object], kept: int
) -> None:
    """Zeros where a frame would start end the log quietly: a log made from a spare is
    zero-filled ahead of its writes, so they are unwritten space, not a torn tail. They
    are cut off at open and never served."""
    damage(log_image)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RecoveredTailWarning)
        store = kv_store(log_image.parent, durability="always", compression=None)
    assert store.recovery.bytes_dropped == 0
    assert dict(store.scan()) == {_key(i): LOG_VALUE for i in range(kept)}
    assert store.check() == []


def test_hot_log_with_a_damaged_header_refuses_to_open(kv_store: Any, log_image: Path) -> None:
    flip_byte(log_image, 3)
    kv_store.skip_final_check(log_image.parent)
    with pytest.raises(CorruptionError, match="bad magic") as info:
        KVStore.open(log_image.parent, durability="always")
    assert info.value.path == str(log_image)


# -- cold segments (.dat) and hint files (.hint) ------------------------------------------
COLD_KEYS = 400


@pytest.fixture(params=[None, KEY], ids=["plain", "encrypted"])
def cold_dir(request: pytest.FixtureRequest, kv_store: Any) -> tuple[Path, dict[str, Any]]:
    """A closed store whose data is all in cold segments, each key written once."""
    options = {"durability": "none", "hot_bytes": HOT_BYTES, "encryption_key": request.param}
    store = kv_store(**options)
    for i in range(COLD_KEYS):  # single puts: hot segments seal between them (put_many is atomic)
        store.put(_key(i), _value(i))
    store.close()
    path = kv_store.default_path
    assert len(list(path.glob("*.dat"))) >= 2
    assert list(path.glob("*.log")) == []
    return path, options


def _expected() -> dict[bytes, bytes]:
    return {_key(i): _value(i) for i in range(COLD_KEYS)}


def _segment(path: Path, options: dict[str, Any], which: int = 0) -> ColdSegment:
    dat = sorted(path.glob("*.dat"))[which]
    return ColdSegment.open(dat, Codec(key=options["encryption_key"]))


HINT_DAMAGE: list[tuple[str, Callable[[Path, Path], object]]] = [
    ("flipped body byte",
     lambda hint, other: flip_byte(hint, SEGMENT_HEADER_SIZE + FRAME_SIZE + 3)),
    ("flipped header byte", lambda hint, other: flip_byte(hint, 1)),
    ("torn tail", lambda hint, other: truncate_by(hint, 10)),
    ("zero-filled", lambda hint, other: zero_fill_tail(hint, hint.stat().st_size)),
    ("empty", lambda hint, other: truncate_by(hint, hint.stat().st_size)),
    ("missing", lambda hint, other: hint.unlink()),
    ("another segment's hint", lambda hint, other: shutil.copy(other, hint)),
]


@pytest.mark.parametrize("damage", [d[1] for d in HINT_DAMAGE], ids=[d[0] for d in HINT_DAMAGE])
def test_damaged_hint_is_rebuilt_from_the_data_and_reads_are_identical(
    kv_store: Any, cold_dir: tuple[Path, dict[str, Any]], damage: Callable[[Path, Path], object]
) -> None:
    path, options = cold_dir
    hints = sorted(path.glob("*.hint"))
    damage(hints[0], hints[1])
    store = kv_store(path, **options)
    assert store.recovery.hints_rebuilt == 1
    assert dict(store.scan()) == _expected()
    assert store.get_many([_key(0), _key(COLD_KEYS - 1)]) == [_value(0), _value(COLD_KEYS - 1)]
    assert store.check() == []
    store.close()
    store = kv_store(path, **options)
    assert store.recovery.hints_rebuilt == 0  # the rebuilt hint was written back


def test_damaged_cold_block_raises_corruption_and_never_serves_wrong_data(
    kv_store: Any, cold_dir: tuple[Path, dict[str, Any]]
) -> None:
    path, options = cold_dir
    seg = _segment(path, options)
    entries = seg.entries()
    in_block0 = [k for k, b in zip(entries.keys, entries.blocks.tolist(), strict=True) if b == 0]
    elsewhere = sorted(set(_expected()) - set(in_block0))  # other blocks and segments
    block0_offset = seg._offsets[0]
    seg.close()
    assert in_block0
    assert elsewhere
    flip_byte(seg.path, block0_offset + FRAME_SIZE + 20)
    kv_store.skip_final_check(path)
    store = kv_store(path, **options)
    for key in in_block0[:5]:
        with pytest.raises(CorruptionError) as info:
            store.get(key)
        assert info.value.path == str(seg.path)
    with pytest.raises(CorruptionError):
        list(store.scan())
    for key in elsewhere[:5]:
        assert store.get(key) == _expected()[key]
    problems = store.check()
    assert problems
    assert any(seg.path.name.split(".")[0].lstrip("0") in p or "segment" in p for p in problems)
    store.close()
    # The operator's view: `tuffdb check PATH` exits 1 on the same damage.
    env_key = options["encryption_key"]
    cli = subprocess.run(
        [sys.executable, "-m", "tuffdb", "check", str(path)], capture_output=True, text=True,
        env={"TUFFDB_ENCRYPTION_KEY": env_key.hex()} if env_key else {}, check=False, timeout=60,
    )
    assert cli.returncode == 1, cli.stdout + cli.stderr


def test_cli_check_of_a_clean_store_exits_0(kv_store: Any) -> None:
    store = kv_store(durability="none", hot_bytes=HOT_BYTES)
    store.put_many((_key(i), _value(i)) for i in range(COLD_KEYS))
    store.close()
    cli = subprocess.run(
        [sys.executable, "-m", "tuffdb", "check", str(kv_store.default_path)],
        capture_output=True, text=True, check=False, timeout=60,
    )
    assert cli.returncode == 0, cli.stdout + cli.stderr


# Damage to a sealed cold segment whose inputs (hot log, merge inputs) are long gone:
# the data was durable, so the only acceptable outcomes are a CorruptionError at open or
# at read/check time. Deleting the file as "an unfinished write" loses acknowledged data.
COLD_DAMAGE: list[tuple[str, Callable[[Path], object]]] = [
    ("trailer crc", lambda dat: flip_byte(dat, -1)),
    ("trailer magic", lambda dat: flip_byte(dat, -8)),
    ("torn tail", lambda dat: truncate_by(dat, 1)),
    ("segment header magic", lambda dat: flip_byte(dat, 2)),
    ("segment header crc", lambda dat: flip_byte(dat, SEGMENT_HEADER_SIZE - 1)),
    ("footer frame", lambda dat: flip_byte(dat, -20)),
]


@pytest.mark.parametrize("damage", [d[1] for d in COLD_DAMAGE], ids=[d[0] for d in COLD_DAMAGE])
def test_damaged_durable_cold_segment_is_corruption_not_silent_loss(
    kv_store: Any, cold_dir: tuple[Path, dict[str, Any]], damage: Callable[[Path], object]
) -> None:
    path, options = cold_dir
    dat = sorted(path.glob("*.dat"))[0]
    damage(dat)
    kv_store.skip_final_check(path)
    try:
        store = KVStore.open(path, **options)
    except CorruptionError as exc:
        assert exc.path == str(dat)
        assert dat.exists(), "the damaged file is kept for the operator"
        return
    try:
        problems = store.check()
        data = dict(store.scan())
    except CorruptionError:
        return
    finally:
        store.close()
    lost = len(set(_expected()) - set(data))
    assert lost == 0, f"{lost} durable keys vanished without a CorruptionError"
    assert data == _expected(), "wrong data served"
    assert problems, "damage went unnoticed by check()"


def test_leftover_tmp_files_are_removed_on_open(kv_store: Any) -> None:
    """An atomic write that never reached its rename is invisible and is cleaned up."""
    store = kv_store(durability="none", hot_bytes=HOT_BYTES)
    store.put_many((_key(i), _value(i)) for i in range(COLD_KEYS))
    store.close()
    path = kv_store.default_path
    for name in ("00000000000000009999.dat.tmp", "00000000000000009999.hint.tmp"):
        (path / name).write_bytes(b"half-written garbage")
    store = kv_store(path, durability="none", hot_bytes=HOT_BYTES)
    assert sorted(path.glob("*.tmp")) == []
    assert dict(store.scan()) == _expected()
    assert store.check() == []


def test_check_reports_a_file_tuffdb_did_not_write(kv_store: Any) -> None:
    store = kv_store(durability="none", hot_bytes=HOT_BYTES)
    store.put(b"k", b"v")
    store.sync()
    (kv_store.default_path / "notes.txt").write_text("not ours")
    problems = store.check()
    assert len(problems) == 1
    assert "notes.txt" in problems[0]
    (kv_store.default_path / "notes.txt").unlink()
    assert store.check() == []
