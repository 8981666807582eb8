"""The pool of read-only descriptors (storage/descriptors.py), and a KV store with more
cold segments than the process may open files."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tuffdb.errors import CorruptionError
from tuffdb.storage import descriptors
from tuffdb.storage.descriptors import ImmutableFile


@pytest.fixture
def small_pool(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(descriptors, "LIMIT", 3)
    yield


def _files(tmp_path: Path, n: int) -> list[ImmutableFile]:
    out = []
    for i in range(n):
        p = tmp_path / f"f{i}"
        p.write_bytes(b"file %d" % i)
        out.append(ImmutableFile(p))
    return out


def _read(f: ImmutableFile) -> bytes:
    fd = f.acquire()
    try:
        return os.pread(fd, 64, 0)
    finally:
        f.release()


def test_at_most_limit_descriptors_stay_open_and_every_file_still_reads(
        tmp_path: Path, small_pool: None) -> None:
    files = _files(tmp_path, 10)
    base = descriptors.open_count()
    for _ in range(3):
        for i, f in enumerate(files):
            assert _read(f) == b"file %d" % i
            assert descriptors.open_count() - base <= 3
    assert sum(f.fd is not None for f in files) == 3
    assert [f.fd is not None for f in files[-3:]] == [True] * 3  # the most recently read
    for f in files:
        f.close()
    assert all(f.fd is None for f in files)


def test_a_descriptor_in_use_is_neither_evicted_nor_closed_under_its_reader(
        tmp_path: Path, small_pool: None) -> None:
    files = _files(tmp_path, 6)
    held = files[0]
    fd = held.acquire()
    for f in files[1:]:
        _read(f)  # pressure on the pool: files[0] is the least recently read
    assert held.fd == fd
    held.close()  # retired while a read runs: the descriptor stays until the read ends
    assert os.pread(fd, 64, 0) == b"file 0"
    held.release()
    assert held.fd is None
    with pytest.raises(OSError):
        os.fstat(fd)
    with pytest.raises(CorruptionError, match="closed"):
        held.acquire()
    for f in files[1:]:
        f.close()


def test_an_evicted_file_deleted_since_fails_to_reopen_with_an_oserror(
        tmp_path: Path, small_pool: None) -> None:
    files = _files(tmp_path, 5)
    for f in files:
        _read(f)
    gone = files[0]
    assert gone.fd is None  # evicted
    gone.path.unlink()
    with pytest.raises(FileNotFoundError):
        gone.acquire()
    assert gone.users == 0
    for f in files:
        f.close()


SCRIPT = textwrap.dedent("""
    import os, resource, sys
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (128, hard))
    from tuffdb import KVStore
    path = sys.argv[1]
    value = lambda i: (b"%06d" % i) * 170
    kv = KVStore.open(path, durability="none", hot_bytes=16 << 10, cache_bytes=0,
                      background_compaction=False)
    for i in range(4000):
        kv.put(b"k%06d" % i, value(i))
    kv.sync()
    segments = kv.stats()["cold_segments"]
    assert segments > 128, segments
    assert all(kv.get(b"k%06d" % i) == value(i) for i in range(0, 4000, 7))
    kv.close()
    kv = KVStore.open(path, cache_bytes=0)
    assert all(kv.get(b"k%06d" % i) == value(i) for i in range(4000))
    assert kv.check() == []
    kv.close()
    print("ok", segments)
""")


def test_a_store_with_more_segments_than_the_file_limit_writes_reads_and_reopens(
        tmp_path: Path) -> None:
    """Before the pool, each cold segment held a descriptor: with RLIMIT_NOFILE at 128 the
    store was poisoned (EMFILE) past ~120 segments and could not be opened again."""
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "kv")],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("ok ")


RAISE = textwrap.dedent("""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
    from tuffdb.storage import descriptors
    assert descriptors.LIMIT == 64  # sized from the 256 it started with
    got = descriptors.raise_open_file_limit()
    assert got == hard == resource.getrlimit(resource.RLIMIT_NOFILE)[0], (got, hard)
    assert descriptors.LIMIT == descriptors.default_limit() >= 64
    print("ok", hard, descriptors.LIMIT)
""")


def test_a_server_raises_its_soft_file_limit_to_the_hard_one_and_sizes_the_pool() -> None:
    done = subprocess.run([sys.executable, "-c", RAISE], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("ok ")


def test_an_event_store_of_more_segments_than_the_pool_reads_every_event(
        tmp_path: Path, small_pool: None) -> None:
    """Event segments are read through the pool too: 3 descriptors for 8+ segments,
    dense reads, sparse (tag) reads across segments, encrypted reads."""
    from tuffdb.events.api import Event, Query, QueryItem  # noqa: PLC0415
    from tuffdb.events.store import EventStore  # noqa: PLC0415

    for key in (None, bytes(range(32))):
        path = tmp_path / ("enc" if key else "plain")
        base = descriptors.open_count()
        with EventStore.open(path, segment_bytes=2048, encryption_key=key) as s:
            for i in range(200):
                s.append([Event(f"T{i % 3}", b"%04d" % i * 50, [f"e{i % 7}"])])
            assert len(list((path / "log").iterdir())) >= 8
            every = [(e.position, e.event.data) for e in s.read()]
            assert every == [(i + 1, b"%04d" % i * 50) for i in range(200)]
            tagged = [e.position for e in s.read(Query([QueryItem(tags=["e3"])]))]
            assert tagged == [i + 1 for i in range(200) if i % 7 == 3]
            back = [e.position for e in s.read(backwards=True, limit=5)]
            assert back == [200, 199, 198, 197, 196]
            assert descriptors.open_count() - base <= 3
            # the process's own view: the pool's 3, plus the writer's active segment (and
            # a preallocated spare); one descriptor per segment before the pool
            assert len(_open_under(path / "log")) <= 5
        assert descriptors.open_count() <= base
        assert _open_under(path / "log") == []


def _open_under(directory: Path) -> list[str]:
    out = []
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target.startswith(str(directory)):
            out.append(target)
    return out
