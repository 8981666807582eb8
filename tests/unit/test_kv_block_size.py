"""The cold block size is a store's choice (``block_bytes``); readers take any size, so a
store reopened with another size reads its old segments and writes new ones with the new
size, and a merge rewrites what it merges with the store's current size."""

from __future__ import annotations

from typing import Any

import pytest

from tuffdb import Database
from tuffdb.documents.database import BLOCK_BYTES
from tuffdb.errors import ProgrammingError

VALUE = bytes(range(256)) * 4  # 1 KiB, little to compress: block sizes stay readable


def _fill(store: Any, lo: int, hi: int) -> None:
    for i in range(lo, hi):
        store.put(f"key-{i:05d}".encode(), VALUE + i.to_bytes(4, "big"))
    store.sync()  # seals and spills every hot segment


def _raw_block_sizes(store: Any) -> dict[int, list[int]]:
    """Per cold segment, the raw (decoded) size of each block."""
    return {seg.id: [len(seg.read_block(b)) for b in range(seg.nblocks)]
            for seg in store._cold.values()}  # noqa: SLF001 - the layout is the subject


def _check_values(store: Any, n: int) -> None:
    for i in range(n):
        assert store.get(f"key-{i:05d}".encode()) == VALUE + i.to_bytes(4, "big")


def test_blocks_close_at_the_stores_size_and_survive_a_reopen_with_another(
        kv_store: Any) -> None:
    store = kv_store(durability="none", hot_bytes=64 << 10, block_bytes=4 << 10,
                     background_compaction=False)
    _fill(store, 0, 400)
    small = _raw_block_sizes(store)
    assert small
    record = len(VALUE) + 4 + 64  # a record's upper bound: value, key and header
    for sizes in small.values():
        # a block holds the records that start in its 4 KiB window of the segment
        assert all((4 << 10) - record < s < (4 << 10) + record for s in sizes[:-1])
    store.close()

    store = kv_store(durability="none", hot_bytes=64 << 10, background_compaction=False)
    assert store.block_bytes == 16 << 10  # the engine's default
    _check_values(store, 400)  # 4 KiB blocks read by a store that writes 16 KiB ones
    _fill(store, 400, 800)
    new = {sid: s for sid, s in _raw_block_sizes(store).items() if sid not in small}
    assert new
    assert any(max(s) > (16 << 10) - 1100 for s in new.values())
    _check_values(store, 800)

    for i in (i for i in range(800) if i % 4):  # 3/4 dead: the merge rewrites, 16 KiB blocks
        store.delete(f"key-{i:05d}".encode())
    store.sync()
    store.compact()
    merged = _raw_block_sizes(store)
    assert not small.keys() & merged.keys()
    assert any(max(s) > (16 << 10) - 1100 for s in merged.values())
    for i in range(800):
        got = store.get(f"key-{i:05d}".encode())
        assert got == (None if i % 4 else VALUE + i.to_bytes(4, "big"))


@pytest.mark.parametrize("size", [0, 1023, (512 << 10) + 1])
def test_a_block_size_out_of_range_is_refused(kv_store: Any, size: int) -> None:
    with pytest.raises(ProgrammingError, match="block_bytes"):
        kv_store(block_bytes=size)


def test_a_document_database_writes_small_blocks_by_default(tmp_path: Any) -> None:
    with Database.open(tmp_path / "db") as db:
        assert db.kv.block_bytes == BLOCK_BYTES == 4 << 10
    with Database.open(tmp_path / "other", block_bytes=16 << 10) as db:
        assert db.kv.block_bytes == 16 << 10
