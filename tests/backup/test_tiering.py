"""Tiering ("bottomless"): with an archive, cold KV segments past ``local_bytes`` are
dropped locally and read back from the archive through a bounded cache.

Real stores, a real archiver thread, a directory and moto's S3 as the archive. The tests
drop every archived segment (``local_bytes=0``), then read every key back and compare
it with what was written: through the cache (misses and hits), after a reopen (from the
stubs alone), after a merge that reads tiered inputs, and from a backup that had to
fetch them. A damaged or missing archived object must be an error naming it, never a
wrong value or a "no such key".
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from tests.backup.conftest import all_objects, put_raw
from tuffdb import KVStore
from tuffdb.backup.archive import Archiver
from tuffdb.backup.datadir import Keys, sources_of
from tuffdb.backup.restore import restore
from tuffdb.backup.take import take_backup
from tuffdb.errors import CorruptionError
from tuffdb.kv.tier import stub_path
from tuffdb.server.config import ConfigError, load
from tuffdb.storage.objstore import open_target

WAIT_S = 60
KEYS = 3000


def value(i: int) -> bytes:
    # Incompressible enough that blocks stay distinct, and checkable: it names its key.
    return hashlib.sha256(str(i).encode()).digest() * 3 + f"value-{i}".encode()


def open_kv(path: Path) -> KVStore:
    # Small hot segments (many cold segments), no block cache (every read reaches the
    # segment), a cache of two 1 MiB parts (misses and evictions).
    return KVStore.open(path, hot_bytes=32 << 10, cache_bytes=0, tier_cache_bytes=2 << 20,
                        background_compaction=False)


def tiered_store(root: Path, url: str) -> tuple[KVStore, Archiver]:
    kv = open_kv(root / "kv")
    for i in range(KEYS):
        kv.put(f"k{i}".encode(), value(i))
    kv.sync()
    with kv._space_cv:  # every sealed hot segment spilled: the cold tier is complete
        assert kv._space_cv.wait_for(lambda: not kv._sealed, WAIT_S)
    assert len(kv._cold_order) > 3
    a = Archiver(open_target(url), sources_of({"kv": kv}), root / ".archive", interval_s=0.05,
                 local_bytes=0)
    a.start()
    # (a segment still being spilled is archived, then tiered: each tiering notifies)
    assert a.wait_until(lambda a: a.tiered and all(s.tiered for s in kv._cold_order),
                        WAIT_S), a.status()
    return kv, a


def assert_all_values(kv: KVStore) -> None:
    got = [kv.get(f"k{i}".encode()) for i in range(KEYS)]
    assert got == [value(i) for i in range(KEYS)]


def test_tiered_reads_return_exact_values(target_url: str, tmp_path: Path) -> None:
    kv, a = tiered_store(tmp_path, target_url)
    try:
        assert not list((tmp_path / "kv").glob("*.dat")), "every archived segment is dropped"
        assert kv.stats()["tiered_segments"] == len(kv._cold_order) > 3
        assert_all_values(kv)  # misses, then evictions: the cache holds two parts
        cache = kv._tier.cache
        assert cache.misses > 0 and cache.hits > 0 and cache.bytes <= 2 << 20
        kv.put(b"k7", b"new")  # a write on top of a tiered value
        assert kv.get(b"k7") == b"new"
        assert kv.check() == []
    finally:
        a.stop()
        kv.close()
    kv = open_kv(tmp_path / "kv")  # from the stubs alone
    try:
        assert kv.get(b"k7") == b"new"
        kv.put(b"k7", value(7))
        assert_all_values(kv)
        kv.compact()  # a merge reads every tiered input through the cache
        assert kv.stats()["tiered_segments"] == 0
        assert not list((tmp_path / "kv").glob("*.tier"))
        assert_all_values(kv)
        assert kv.check() == []
    finally:
        kv.close()


def test_a_backup_of_a_tiered_store_holds_the_segments_themselves(tmp_path: Path) -> None:
    archive = str(tmp_path / "archive")
    kv, a = tiered_store(tmp_path, archive)
    try:
        take_backup(sources_of({"kv": kv}), open_target(tmp_path / "bk"), tmp_path / "stage")
    finally:
        a.stop()
        kv.close()
    shutil.rmtree(archive)  # the backup must not need the archive
    restore(str(tmp_path / "bk"), tmp_path / "r", keys=Keys())
    assert list((tmp_path / "r" / "kv").glob("*.dat"))
    assert not list((tmp_path / "r" / "kv").glob("*.tier"))
    with open_kv(tmp_path / "r" / "kv") as restored:
        assert_all_values(restored)


def test_a_damaged_or_missing_tiered_object_is_an_error_naming_it(target_url: str,
                                                                  tmp_path: Path) -> None:
    kv, a = tiered_store(tmp_path, target_url)
    a.stop()
    try:
        victim = kv._cold_order[0]
        obj = victim.ref.object
        blob = all_objects(target_url)[obj]
        off, size = victim.block_span(0)
        put_raw(target_url, obj, blob[: off + size // 2] + b"\xff" + blob[off + size // 2 + 1:])
        key = next(f"k{i}".encode() for i in range(KEYS)
                   if kv._keydir.get(f"k{i}".encode(), 0) >> 80 == victim.id
                   and (kv._keydir[f"k{i}".encode()] >> 48) & 0xFFFFFFFF == 0)
        with pytest.raises(CorruptionError, match=obj):
            kv.get(key)
        put_raw(target_url, obj, None)
        kv._tier.cache.evict(victim.ref, 0, victim.file_size)  # the next read must fetch
        with pytest.raises(CorruptionError, match=f"{obj} is missing"):
            kv.get(key)
        put_raw(target_url, obj, blob)  # repaired: the same read succeeds
        assert kv.get(key) == value(int(key[1:]))
    finally:
        kv.close()


def test_a_stub_beside_its_segment_is_an_unfinished_tiering(tmp_path: Path) -> None:
    kv, a = tiered_store(tmp_path, str(tmp_path / "archive"))
    a.stop()
    seg = kv._cold_order[0]
    obj = tmp_path / "archive" / seg.ref.object
    kv.close()
    shutil.copyfile(obj, tmp_path / "kv" / seg.path.name)  # as before the unlink
    with open_kv(tmp_path / "kv") as again:
        assert not stub_path(tmp_path / "kv", seg.id).exists()
        assert not again._cold[seg.id].tiered
        assert_all_values(again)
        assert again.check() == []


def test_local_bytes_needs_an_archive_and_no_cluster(tmp_path: Path) -> None:
    base = {"data_dir": str(tmp_path), "local_bytes": "1.5G"}
    with pytest.raises(ConfigError, match="needs archive"):
        load(base, env={})
    with pytest.raises(ConfigError, match="cluster"):
        load({**base, "archive": str(tmp_path / "a"), "cluster": "c", "etcd": "http://x:1",
              "node_id": "n"}, env={})
    assert load({**base, "archive": str(tmp_path / "a")}, env={}).local_bytes == 3 << 29
