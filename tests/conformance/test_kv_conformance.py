"""The shipped KV conformance suite (tuffdb.testing.conformance) against tuffdb.KVStore.

Every durability mode, with and without encryption, with a tiny ``hot_bytes`` so hot
segments seal and spill to cold segments inside most tests, and once with the default
``hot_bytes`` so the 8 MiB-plus value path is exercised as a user would hit it, and
with a block cache of about one block so cold reads evict constantly.
Store-specific promises the generic suite cannot state (encryption at rest, a wrong key)
are at the end.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tuffdb import KVStore
from tuffdb.errors import Error, LockTimeout, WrongKeyError
from tuffdb.testing.conformance import KVStoreConformance

KEY = bytes(range(32))
OTHER_KEY = bytes(range(1, 33))
TINY_HOT_BYTES = 16 * 1024


class _Tuffdb(KVStoreConformance):
    options: dict[str, Any] = {}
    # Bigger than a tiny hot segment, and than a cold block.
    block_value_sizes = (70_000, 1_100_000)
    hot_value_size = 5 * TINY_HOT_BYTES

    def create_store(self, path: Path) -> Any:
        return KVStore.open(path, **self.options)


class TestAlways(_Tuffdb):
    options = {"durability": "always", "hot_bytes": TINY_HOT_BYTES}


class TestInterval(_Tuffdb):
    options = {"durability": "interval", "interval_ms": 20, "hot_bytes": TINY_HOT_BYTES}


class TestNone(_Tuffdb):
    options = {"durability": "none", "hot_bytes": TINY_HOT_BYTES}


class TestAlwaysEncrypted(_Tuffdb):
    options = {"durability": "always", "hot_bytes": TINY_HOT_BYTES, "encryption_key": KEY}


class TestIntervalEncrypted(_Tuffdb):
    options = {"durability": "interval", "interval_ms": 20, "hot_bytes": TINY_HOT_BYTES,
               "encryption_key": KEY}


class TestNoneEncryptedUncompressed(_Tuffdb):
    options = {"durability": "none", "hot_bytes": TINY_HOT_BYTES, "encryption_key": KEY,
               "compression": None}


class TestNoneTinyCache(_Tuffdb):
    """A block cache of about one block: every cold read evicts, or bypasses the cache."""

    options = {"durability": "none", "hot_bytes": TINY_HOT_BYTES, "cache_bytes": 20_000}


class TestIntervalDefaultHotBytes(_Tuffdb):
    """Defaults as a user gets them; the big-value test crosses the real 8 MiB segment."""

    options = {"durability": "interval"}
    hot_value_size = 9 * 2**20


# -- encryption at rest --------------------------------------------------------------------
def _files_contain(path: Path, needle: bytes) -> list[str]:
    return [str(p) for p in path.rglob("*") if p.is_file() and needle in p.read_bytes()]


@pytest.mark.parametrize("durability", ["always", "none"])
def test_encrypted_store_never_writes_plaintext(kv_store: Any, data_dir: Path,
                                                durability: str) -> None:
    secret_value = os.urandom(48)  # random, so compression cannot hide it either
    secret_key = b"key-" + os.urandom(24).hex().encode()
    store = kv_store(durability=durability, hot_bytes=TINY_HOT_BYTES, encryption_key=KEY)
    store.put(secret_key, secret_value)
    for i in range(300):  # enough to seal and spill hot segments to cold ones
        store.put(f"filler-{i}".encode(), secret_value + os.urandom(64))
    store.compact()
    store.close()
    assert _files_contain(data_dir, secret_value) == []
    assert _files_contain(data_dir, secret_key) == []
    store = kv_store(durability=durability, hot_bytes=TINY_HOT_BYTES, encryption_key=KEY)
    assert store.get(secret_key) == secret_value


def test_plaintext_store_control_shows_the_search_would_find_values(kv_store: Any,
                                                                      data_dir: Path) -> None:
    """Control for the test above: without a key the same search does find the value."""
    secret_value = os.urandom(48)
    store = kv_store(durability="always", compression=None)
    store.put(b"k", secret_value)
    store.close()
    assert _files_contain(data_dir, secret_value) != []


def test_wrong_key_is_a_clear_error_not_garbage(kv_store: Any, data_dir: Path) -> None:
    store = kv_store(durability="always", hot_bytes=TINY_HOT_BYTES, encryption_key=KEY)
    store.put_many((f"k{i}".encode(), os.urandom(100)) for i in range(300))
    store.close()
    for key in (OTHER_KEY, None):
        with pytest.raises(WrongKeyError):
            other = KVStore.open(data_dir, durability="always", encryption_key=key)
            try:
                other.get(b"k1")
                list(other.scan())
            finally:
                other.close()


def test_plaintext_store_refuses_a_key(kv_store: Any, data_dir: Path) -> None:
    kv_store(durability="always").put(b"k", b"v")
    kv_store.opened[-1][2].close()
    with pytest.raises(Error):
        KVStore.open(data_dir, encryption_key=KEY).close()


def test_second_open_of_a_directory_raises_lock_timeout(kv_store: Any, data_dir: Path) -> None:
    store = kv_store(durability="always")
    store.put(b"k", b"v")
    with pytest.raises(LockTimeout):
        KVStore.open(data_dir)
    assert store.get(b"k") == b"v"  # the failed open did not disturb the owner
    store.close()
    with KVStore.open(data_dir) as again:  # closing released the lock
        assert again.get(b"k") == b"v"
