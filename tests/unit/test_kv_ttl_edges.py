"""Non-positive TTLs: a value that is expired on arrival leaves the key absent.

Story: put(ttl=0) and expire(k, 0) used to keep the key readable for a millisecond
(max(1, ttl_ms)); Redis deletes on EXPIRE <= 0, and a zero TTL can only mean "gone".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tuffdb import KVStore
from tuffdb.errors import NotFoundError, ProgrammingError


@pytest.mark.parametrize("ttl", [0, -5, -0.001])
def test_put_with_a_non_positive_ttl_deletes_the_key(tmp_path: Path, ttl: float) -> None:
    with KVStore.open(tmp_path / "kv") as store:
        store.put(b"k", b"old")
        store.put(b"k", b"new", ttl=ttl)
        assert store.get(b"k") is None
        store.put_many([(b"a", b"1"), (b"b", b"2")], ttl=ttl)
        assert store.get_many([b"a", b"b"]) == [None, None]
        assert store.check() == []
    with KVStore.open(tmp_path / "kv") as store:
        assert store.get(b"k") is None


def test_expire_with_a_non_positive_ttl_deletes_and_says_whether_the_key_existed(
    tmp_path: Path,
) -> None:
    with KVStore.open(tmp_path / "kv") as store:
        store.put(b"k", b"v")
        assert store.expire(b"k", 0) is True
        assert store.get(b"k") is None
        assert store.expire(b"missing", -1) is False


def test_expire_at_keeps_the_deadline_to_the_millisecond(tmp_path: Path) -> None:
    """expire_at (PEXPIREAT) stores the deadline it is given, read back by expires_at and
    after a reopen (the log carries it); a deadline already passed deletes the key."""
    import time

    deadline = int(time.time() * 1000) + 3_600_123
    with KVStore.open(tmp_path / "kv", durability="always") as store:
        store.put(b"k", b"v")
        store.put(b"gone", b"v")
        assert store.expires_at(b"k") is None
        for ms in range(deadline, deadline + 7):  # every millisecond, not every other
            assert store.expire_at(b"k", ms) is True
            assert store.expires_at(b"k") == ms
        assert store.expire_at(b"missing", deadline) is False
        assert store.expire_at(b"gone", int(time.time() * 1000) - 1) is True
        assert store.get(b"gone") is None
        with pytest.raises(NotFoundError):
            store.expires_at(b"gone")
        assert store.get(b"k") == b"v"
        assert store.check() == []
    with KVStore.open(tmp_path / "kv") as store:
        assert store.expires_at(b"k") == deadline + 6
        assert store.get(b"k") == b"v"


def test_ttl_changes_take_sync_as_put_does(tmp_path: Path) -> None:
    """Under ``always``, expire/expire_at/persist wait for their own fsync by default and
    not with ``sync=False`` (a server's loop batches them into its round, as it does
    puts); the change is made either way, and a later sync makes it durable."""
    import time

    from tuffdb import metrics

    deadline = int(time.time() * 1000) + 3_600_000
    with KVStore.open(tmp_path / "kv", durability="always") as store:
        store.put(b"k", b"v")
        for change in (lambda s: s.expire(b"k", 100), lambda s: s.expire_at(b"k", deadline),
                       lambda s: s.persist(b"k")):
            before = metrics.FSYNCS.value
            assert change(store) is True
            assert metrics.FSYNCS.value > before  # waited for its own round
        before = metrics.FSYNCS.value
        assert store.expire(b"k", 100, sync=False) is True
        assert store.persist(b"k", sync=False) is True
        assert store.expire_at(b"k", deadline, sync=False) is True
        assert metrics.FSYNCS.value == before  # none waited
        assert store.expire(b"k", 0, sync=False) is True  # (deletes)
        assert store.get(b"k") is None
        store.put(b"k2", b"v", sync=False)
        assert store.expire_at(b"k2", deadline, sync=False) is True
        store.sync()
        assert metrics.FSYNCS.value > before
    with KVStore.open(tmp_path / "kv") as store:
        assert store.get(b"k") is None
        assert store.expires_at(b"k2") == deadline


@pytest.mark.parametrize("ttl", [float("nan"), float("inf"), 1e300])
def test_a_ttl_that_is_not_a_finite_number_is_refused_and_writes_nothing(
        tmp_path: Path, ttl: float) -> None:
    """Before, NaN and infinity escaped as ValueError / OverflowError from int()."""
    with KVStore.open(tmp_path / "kv") as kv:
        kv.put(b"k", b"old")
        with pytest.raises(ProgrammingError, match="finite"):
            kv.put(b"k", b"new", ttl=ttl)
        with pytest.raises(ProgrammingError, match="finite"):
            kv.expire(b"k", ttl)
        assert kv.get(b"k") == b"old" and kv.ttl(b"k") is None


@pytest.mark.parametrize("key", [b"x", b"k" * 31, "k" * 32])
def test_an_encryption_key_of_the_wrong_size_or_type_is_refused(
        tmp_path: Path, key: object) -> None:
    """Before, cryptography's own ValueError or TypeError escaped the error tree. (A str
    key in the compiled build is the TypeError its typed signature raises at the call.)"""
    with pytest.raises((ProgrammingError, TypeError),
                       match="encryption_key must be 32 bytes|bytes or None object expected"):
        KVStore.open(tmp_path / "kv", encryption_key=key)  # type: ignore[arg-type]
