"""A conformance suite for the KV API: what every ``KVStore`` must do, as pytest tests.

Subclass :class:`KVStoreConformance`, name the subclass ``Test...`` and implement
:meth:`~KVStoreConformance.create_store`; pytest then runs every test below against
your store. ``create_store(path)`` is called again on the same path to reopen, so it
must open with the same options each time::

    class TestMyStore(KVStoreConformance):
        def create_store(self, path):
            return tuffdb.KVStore.open(path, durability="always")

The contract under test is ``docs/design/contracts.md`` (KVStore). Every store the
suite opens is checked at teardown: ``store.check()`` must return ``[]`` [bbolt].

Needs pytest (the ``test`` extra).
"""

from __future__ import annotations

import abc
import random
import threading
import time
from collections.abc import Callable, Iterator, MutableMapping
from pathlib import Path
from typing import Any, cast

try:
    import pytest
except ImportError as exc:  # pragma: no cover (the message is checked by the packaging test)
    raise ImportError("tuffdb.testing.conformance needs pytest: pip install 'tuffdb[testing]'",
                      name=exc.name) from exc

from tuffdb.errors import ClosedError, LimitExceeded, NotFoundError
from tuffdb.kv.store import KEEP_TTL, Deadline
from tuffdb.storage.spare import is_spare
from tuffdb.testing.models import KVModel

__all__ = ["KVStoreConformance", "dir_bytes", "sleep_past"]

HOUR = 3600.0


def dir_bytes(path: Path) -> int:
    """Total size of every regular file under ``path`` (a store's footprint on disk),
    without spare log files: zeros a background thread preallocates at its own pace
    (storage/spare.py), so a spare still being written would make two measurements
    differ with no write in between."""
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file() and not is_spare(p))


def sleep_past(deadline: float) -> None:
    """Wait until the wall clock is past ``deadline`` (a TTL deadline of the store under test).

    This waits for the *system's* deadline to pass; it never synchronises with a thread.
    """
    while (left := deadline - time.time()) > 0:
        time.sleep(left + 0.005)


def _is_open(store: Any) -> bool:
    try:
        store.exists(b"probe")
    except ClosedError:
        return False
    return True


# Every public method, called the way a user would; each must raise ClosedError after close().
_CALLS_AFTER_CLOSE: dict[str, Callable[[Any], object]] = {
    "put": lambda s: s.put(b"k", b"v"),
    "get": lambda s: s.get(b"k"),
    "delete": lambda s: s.delete(b"k"),
    "put_many": lambda s: s.put_many([(b"k", b"v")]),
    "get_many": lambda s: s.get_many([b"k"]),
    "delete_many": lambda s: s.delete_many([b"k"]),
    "exists": lambda s: s.exists(b"k"),
    "expire": lambda s: s.expire(b"k", 10),
    "persist": lambda s: s.persist(b"k"),
    "ttl": lambda s: s.ttl(b"k"),
    "scan": lambda s: list(s.scan()),
    "scan_reverse": lambda s: list(s.scan(reverse=True)),
    "count": lambda s: s.count(),
    "write_batch": lambda s: s.write_batch([(b"k", b"v"), (b"j", None)]),
    "len": len,
    "iter": list,
    "getitem": lambda s: s[b"k"],
    "setitem": lambda s: s.__setitem__(b"k", b"v"),
    "delitem": lambda s: s.__delitem__(b"k"),
    "contains": lambda s: b"k" in s,
    "sync": lambda s: s.sync(),
    "compact": lambda s: s.compact(),
    "check": lambda s: s.check(),
    "stats": lambda s: s.stats(),
}


class KVStoreConformance(abc.ABC):
    """The KV contract as tests. Subclass, implement :meth:`create_store`, name it ``Test*``.

    Covers every method of the contract (put/get/delete, the batch calls, TTL calls, scan
    bounds, the MutableMapping sugar, sync/compact/check/stats/close, the server hooks
    ``write_ticket``/``when_durable``/``set_durability``), the limits (LimitExceeded before
    anything is written), ClosedError after close, reopen after every kind of write, big
    and empty values, binary keys, and threads racing spills, compaction and close.
    The class attributes below may be tuned to a store's configuration.
    """

    #: Values bigger than one cold block (and than a typical I/O buffer).
    block_value_sizes: tuple[int, ...] = (70_000, 1_100_000)
    #: A value bigger than one hot segment (the default ``hot_bytes`` is 8 MiB).
    hot_value_size: int = 9 * 2**20
    #: Limits from the contract (largest accepted sizes).
    max_key_size: int = 65_535
    max_value_size: int = 268_435_455

    @abc.abstractmethod
    def create_store(self, path: Path) -> Any:
        """Open (or reopen) a store at ``path``; same options every time."""

    # -- fixtures and helpers --------------------------------------------------
    @pytest.fixture(autouse=True)
    def _kv_conformance_paths(self, tmp_path: Path) -> Iterator[None]:
        self.path = tmp_path / "kv"
        self._opened: list[Any] = []
        yield
        errors = []
        for store in self._opened:
            if _is_open(store):
                errors.extend(store.check())
                store.close()
        assert errors == [], f"store.check() at teardown: {errors}"

    def open_store(self) -> Any:
        store = self.create_store(self.path)
        self._opened.append(store)
        return store

    def reopen(self, store: Any) -> Any:
        """Close ``store`` (flushing it) and open the same path again."""
        store.close()
        return self.open_store()

    @pytest.fixture
    def store(self) -> Any:
        return self.open_store()

    @staticmethod
    def assert_matches(store: Any, model: KVModel) -> None:
        """The store's whole visible content equals the model's."""
        live = model.live()
        assert list(store.scan()) == sorted(live.items())
        assert list(store.scan(reverse=True)) == sorted(live.items(), reverse=True)
        assert len(store) == len(live)
        assert list(store) == sorted(live)
        keys = sorted(live)
        assert store.get_many(keys) == [live[k] for k in keys]

    # -- put / get / delete -----------------------------------------------------
    def test_get_of_missing_key_returns_none(self, store: Any) -> None:
        assert store.get(b"missing") is None
        assert store.exists(b"missing") is False

    def test_put_then_get_returns_the_exact_value(self, store: Any) -> None:
        store.put(b"k", b"value")
        assert store.get(b"k") == b"value"
        assert store.exists(b"k") is True

    def test_get_returns_bytes(self, store: Any) -> None:
        store.put(b"k", bytearray(b"from a bytearray"))
        value = store.get(b"k")
        assert type(value) is bytes
        assert value == b"from a bytearray"

    def test_put_overwrites_the_previous_value(self, store: Any) -> None:
        store.put(b"k", b"one")
        store.put(b"k", b"two")
        assert store.get(b"k") == b"two"
        assert len(store) == 1

    def test_empty_value_is_stored_and_is_not_missing(self, store: Any) -> None:
        store.put(b"empty", b"")
        assert store.get(b"empty") == b""
        assert store.exists(b"empty") is True
        assert list(store.scan()) == [(b"empty", b"")]
        store = self.reopen(store)
        assert store.get(b"empty") == b""
        assert store.exists(b"empty") is True

    def test_delete_returns_true_only_when_the_key_existed(self, store: Any) -> None:
        store.put(b"k", b"v")
        assert store.delete(b"k") is True
        assert store.delete(b"k") is False
        assert store.delete(b"never") is False
        assert store.get(b"k") is None
        assert store.exists(b"k") is False

    def test_put_after_delete_resurrects_the_key(self, store: Any) -> None:
        store.put(b"k", b"old")
        store.delete(b"k")
        store.put(b"k", b"new")
        assert store.get(b"k") == b"new"
        store = self.reopen(store)
        assert store.get(b"k") == b"new"

    def test_binary_keys_round_trip_and_sort_bytewise(self, store: Any) -> None:
        keys = [bytes([i]) for i in range(256)] + [b"\x00\x00", b"\xff\xff", b"a\x00b", b"\x80"]
        for i, key in enumerate(keys):
            store.put(key, i.to_bytes(4, "big"))
        expected = sorted((k, i.to_bytes(4, "big")) for i, k in enumerate(keys))
        # b"\x80" was put twice (once as bytes([128])); the later value wins.
        expected_map = dict(expected)
        expected_map[b"\x80"] = (len(keys) - 1).to_bytes(4, "big")
        assert list(store.scan()) == sorted(expected_map.items())
        store = self.reopen(store)
        assert list(store.scan()) == sorted(expected_map.items())

    def test_empty_key_is_a_key_like_any_other(self, store: Any) -> None:
        store.put(b"", b"empty key")
        store.put(b"\x00", b"nul")
        assert store.get(b"") == b"empty key"
        assert list(store.scan()) == [(b"", b"empty key"), (b"\x00", b"nul")]
        store = self.reopen(store)
        assert store.get(b"") == b"empty key"
        assert store.delete(b"") is True
        assert list(store.scan()) == [(b"\x00", b"nul")]

    def test_deleted_key_stays_deleted_after_reopen(self, store: Any) -> None:
        store.put(b"gone", b"v")
        store.put(b"kept", b"v")
        store.sync()
        store.delete(b"gone")
        store = self.reopen(store)
        assert store.get(b"gone") is None
        assert store.get(b"kept") == b"v"

    # -- batches ------------------------------------------------------------------
    def test_put_many_accepts_pairs_and_mappings(self, store: Any) -> None:
        store.put_many([(b"a", b"1"), (b"b", b"2")])
        store.put_many({b"c": b"3", b"d": b"4"})
        store.put_many(iter([(b"e", b"5")]))
        assert dict(store.scan()) == {b"a": b"1", b"b": b"2", b"c": b"3", b"d": b"4", b"e": b"5"}

    def test_put_many_later_duplicate_wins(self, store: Any) -> None:
        store.put_many([(b"k", b"first"), (b"k", b"second")])
        assert store.get(b"k") == b"second"
        store = self.reopen(store)
        assert store.get(b"k") == b"second"

    def test_put_many_with_ttl_sets_it_on_every_key(self, store: Any) -> None:
        store.put_many([(b"a", b"1"), (b"b", b"2")], ttl=HOUR)
        for key in (b"a", b"b"):
            remaining = store.ttl(key)
            assert remaining is not None
            assert HOUR - 60 < remaining <= HOUR

    def test_get_many_keeps_order_and_reports_missing_as_none(self, store: Any) -> None:
        store.put_many([(b"a", b"1"), (b"c", b"3")])
        assert store.get_many([b"c", b"missing", b"a", b"c"]) == [b"3", None, b"1", b"3"]
        assert store.get_many([]) == []

    def test_delete_many_counts_only_existing_keys(self, store: Any) -> None:
        store.put_many([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")])
        assert store.delete_many([b"a", b"missing", b"c"]) == 2
        assert list(store.scan()) == [(b"b", b"2")]
        assert store.delete_many([]) == 0

    # -- TTL ----------------------------------------------------------------------
    def test_key_without_ttl_reports_none(self, store: Any) -> None:
        store.put(b"k", b"v")
        assert store.ttl(b"k") is None

    def test_ttl_of_missing_key_raises_not_found(self, store: Any) -> None:
        with pytest.raises(NotFoundError):
            store.ttl(b"missing")
        with pytest.raises(KeyError):
            store.ttl(b"missing")

    def test_put_with_ttl_reports_the_remaining_seconds(self, store: Any) -> None:
        store.put(b"k", b"v", ttl=HOUR)
        remaining = store.ttl(b"k")
        assert remaining is not None
        assert HOUR - 60 < remaining <= HOUR
        assert store.get(b"k") == b"v"

    def test_expire_sets_a_ttl_on_an_existing_key(self, store: Any) -> None:
        store.put(b"k", b"v")
        assert store.expire(b"k", 2 * HOUR) is True
        remaining = store.ttl(b"k")
        assert remaining is not None
        assert 2 * HOUR - 60 < remaining <= 2 * HOUR

    def test_expire_of_missing_key_returns_false_and_creates_nothing(self, store: Any) -> None:
        assert store.expire(b"missing", HOUR) is False
        assert store.exists(b"missing") is False
        assert list(store.scan()) == []

    def test_persist_drops_the_ttl(self, store: Any) -> None:
        store.put(b"k", b"v", ttl=HOUR)
        assert store.persist(b"k") is True
        assert store.ttl(b"k") is None
        assert store.persist(b"k") is False
        assert store.get(b"k") == b"v"

    def test_persist_of_missing_key_returns_false(self, store: Any) -> None:
        assert store.persist(b"missing") is False

    def test_put_without_ttl_clears_an_earlier_ttl(self, store: Any) -> None:
        store.put(b"k", b"v1", ttl=HOUR)
        store.put(b"k", b"v2")
        assert store.ttl(b"k") is None

    def test_ttl_and_persist_survive_reopen(self, store: Any) -> None:
        store.put(b"ttl", b"v", ttl=HOUR)
        store.put(b"expired-later", b"v")
        store.expire(b"expired-later", 2 * HOUR)
        store.put(b"persisted", b"v", ttl=HOUR)
        store.persist(b"persisted")
        store = self.reopen(store)
        remaining = store.ttl(b"ttl")
        assert remaining is not None
        assert HOUR - 60 < remaining <= HOUR
        remaining = store.ttl(b"expired-later")
        assert remaining is not None
        assert 2 * HOUR - 60 < remaining <= 2 * HOUR
        assert store.ttl(b"persisted") is None
        assert store.get(b"persisted") == b"v"

    def test_expired_key_is_absent_from_every_read(self, store: Any) -> None:
        store.put(b"short", b"v", ttl=0.05)
        store.put(b"expired", b"v")
        store.expire(b"expired", 0.05)
        store.put(b"long", b"v", ttl=HOUR)
        # Every short TTL was set before this line ran, so its deadline is earlier.
        deadline = time.time() + 0.05
        sleep_past(deadline + 0.01)
        for key in (b"short", b"expired"):
            assert store.get(key) is None
            assert store.exists(key) is False
            assert key not in store
            with pytest.raises(NotFoundError):
                store.ttl(key)
            assert store.persist(key) is False
            assert store.expire(key, HOUR) is False
        assert store.get_many([b"short", b"long"]) == [None, b"v"]
        assert list(store.scan()) == [(b"long", b"v")]
        assert list(store) == [b"long"]
        assert len(store) == 1
        assert store.delete(b"short") is False

    def test_expired_key_stays_absent_after_reopen_and_compact(self, store: Any) -> None:
        store.put(b"short", b"v", ttl=0.05)
        store.put(b"long", b"v", ttl=HOUR)
        store.sync()
        # Every short TTL was set before this line ran, so its deadline is earlier.
        deadline = time.time() + 0.05
        sleep_past(deadline + 0.01)
        store = self.reopen(store)
        assert store.get(b"short") is None
        store.compact()
        assert list(store.scan()) == [(b"long", b"v")]
        store = self.reopen(store)
        assert list(store.scan()) == [(b"long", b"v")]

    def test_put_over_an_expired_key_has_no_ttl(self, store: Any) -> None:
        store.put(b"k", b"old", ttl=0.05)
        # Every short TTL was set before this line ran, so its deadline is earlier.
        deadline = time.time() + 0.05
        sleep_past(deadline + 0.01)
        store.put(b"k", b"new")
        assert store.get(b"k") == b"new"
        assert store.ttl(b"k") is None

    def test_check_is_clean_after_an_expired_cold_key_is_overwritten(self, store: Any) -> None:
        """Found by property testing: a TTL key expires on disk, a new put without TTL
        replaces it, and check() reported a keydir/cold-tier mismatch on a healthy store."""
        store.put_many([(b"a", b"old")], ttl=0.05)
        store = self.reopen(store)  # the TTL version now lives in the cold tier
        # Every short TTL was set before this line ran, so its deadline is earlier.
        deadline = time.time() + 0.05
        sleep_past(deadline + 0.01)
        store.put(b"a", b"new")
        assert store.check() == []
        assert store.get(b"a") == b"new"
        assert store.ttl(b"a") is None

    # -- scan ------------------------------------------------------------------
    def _fill_letters(self, store: Any) -> dict[bytes, bytes]:
        items = {k.encode(): k.upper().encode() for k in
                 ["a", "ab", "abc", "abd", "ac", "b", "ba", "bb", "c"]}
        # Deliberately out of order.
        for key in sorted(items, reverse=True):
            store.put(key, items[key])
        return items

    def test_scan_yields_every_pair_in_key_order(self, store: Any) -> None:
        items = self._fill_letters(store)
        assert list(store.scan()) == sorted(items.items())

    def test_scan_prefix_selects_exactly_the_matching_keys(self, store: Any) -> None:
        self._fill_letters(store)
        assert [k for k, _ in store.scan(prefix=b"ab")] == [b"ab", b"abc", b"abd"]
        assert [k for k, _ in store.scan(prefix=b"b")] == [b"b", b"ba", b"bb"]
        assert list(store.scan(prefix=b"zz")) == []

    def test_scan_start_is_inclusive_and_end_is_exclusive(self, store: Any) -> None:
        self._fill_letters(store)
        assert [k for k, _ in store.scan(start=b"abd", end=b"ba")] == [b"abd", b"ac", b"b"]
        assert [k for k, _ in store.scan(start=b"b")] == [b"b", b"ba", b"bb", b"c"]
        assert [k for k, _ in store.scan(end=b"ab")] == [b"a"]
        assert [k for k, _ in store.scan(start=b"aa", end=b"ab")] == []
        assert list(store.scan(start=b"c", end=b"a")) == []

    def test_scan_combines_prefix_with_bounds(self, store: Any) -> None:
        self._fill_letters(store)
        assert [k for k, _ in store.scan(prefix=b"a", start=b"abc", end=b"ac")] == [
            b"abc", b"abd"]

    def test_scan_prefix_of_ff_bytes_has_no_upper_bound_overflow(self, store: Any) -> None:
        keys = [b"\xfe", b"\xff", b"\xff\x00", b"\xff\xff", b"\xff\xff\x00", b"\xff\xff\xff"]
        for key in keys:
            store.put(key, key)
        assert [k for k, _ in store.scan(prefix=b"\xff\xff")] == [
            b"\xff\xff", b"\xff\xff\x00", b"\xff\xff\xff"]
        assert [k for k, _ in store.scan(prefix=b"\xff")] == keys[1:]

    def test_scan_pages_through_keys_that_extend_each_other(self, store: Any) -> None:
        """Each key is the previous one plus b"\\x00" (the successor a paging scan resumes
        from), over more keys than any page, in every tier."""
        keys = [b"k" + b"\x00" * i for i in range(1300)] + [b"k\x00\x01", b"k\xff", b"k\xff\xff"]
        store.put_many((k, b"%d" % len(k)) for k in keys)
        assert [k for k, _ in store.scan(prefix=b"k")] == sorted(keys)
        assert [k for k, _ in store.scan(prefix=b"k\xff")] == [b"k\xff", b"k\xff\xff"]
        store = self.reopen(store)
        assert [k for k, _ in store.scan(prefix=b"k")] == sorted(keys)
        assert len(list(store.scan(start=b"k" + b"\x00" * 700, end=b"k\x00\x01"))) == 600

    def test_reverse_scan_walks_the_same_range_backwards(self, store: Any) -> None:
        items = self._fill_letters(store)
        assert list(store.scan(reverse=True)) == sorted(items.items(), reverse=True)
        assert [k for k, _ in store.scan(prefix=b"ab", reverse=True)] == [b"abd", b"abc", b"ab"]
        assert [k for k, _ in store.scan(start=b"abd", end=b"ba", reverse=True)] == [
            b"b", b"ac", b"abd"]
        assert list(store.scan_keys(prefix=b"a", start=b"abc", end=b"ac", reverse=True)) == [
            b"abd", b"abc"]
        assert list(store.scan(start=b"c", end=b"a", reverse=True)) == []

    def test_reverse_scan_pages_through_every_tier(self, store: Any) -> None:
        keys = [b"r-%05d" % i for i in range(1500)]  # more than one chunk of the ordered view
        store.put_many((k, k) for k in keys[::2])
        store.sync()
        store.put_many((k, k) for k in keys[1::2])
        store.delete(b"r-00700")
        expected = [k for k in reversed(keys) if k != b"r-00700"]
        assert list(store.scan_keys(prefix=b"r-", reverse=True)) == expected
        store = self.reopen(store)
        assert list(store.scan_keys(prefix=b"r-", reverse=True)) == expected

    def test_count_is_what_a_scan_of_the_same_range_yields(self, store: Any) -> None:
        items = self._fill_letters(store)
        assert store.count() == len(items) == len(store)
        assert store.count(prefix=b"ab") == 3
        assert store.count(start=b"abd", end=b"ba") == 3
        assert store.count(prefix=b"a", start=b"abc", end=b"ac") == 2
        assert store.count(start=b"c", end=b"a") == 0
        assert store.count(prefix=b"zz") == 0
        store.delete(b"abc")
        store.put(b"abe", b"new")
        assert store.count(prefix=b"ab") == 3
        store.put(b"abf", b"short-lived", ttl=0.05)
        assert store.count(prefix=b"ab") == 4
        sleep_past(time.time() + 0.06)
        assert store.count(prefix=b"ab") == len(list(store.scan(prefix=b"ab"))) == 3

    def test_skip_seeks_by_position_in_either_direction(self, store: Any) -> None:
        keys = [b"p-%04d" % i for i in range(700)]
        store.put_many((k, b"v") for k in keys)
        assert next(store.scan_keys(prefix=b"p-", skip=500)) == b"p-0500"
        assert list(store.scan_keys(prefix=b"p-", skip=698)) == keys[698:]
        assert list(store.scan_keys(prefix=b"p-", skip=700)) == []
        assert next(store.scan_keys(prefix=b"p-", reverse=True, skip=10)) == b"p-0689"
        assert list(store.scan_keys(prefix=b"p-", reverse=True, skip=698)) == [
            b"p-0001", b"p-0000"]
        assert next(store.scan(start=b"p-0100", end=b"p-0200", skip=5)) == (b"p-0105", b"v")
        # Deleted and expired keys are not counted as positions.
        store.delete(b"p-0001")
        store.put(b"p-0002", b"v", ttl=0.05)
        sleep_past(time.time() + 0.06)
        assert next(store.scan_keys(prefix=b"p-", skip=1)) == b"p-0003"
        assert list(store.scan_keys(prefix=b"p-", reverse=True, skip=697)) == [b"p-0000"]

    def test_write_batch_applies_puts_and_deletes_as_one(self, store: Any) -> None:
        store.put_many([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")])
        store.write_batch([(b"a", None), (b"d", b"4"), (b"b", b"20"), (b"d", b"40"),
                           (b"zz", None)])
        expected = [(b"b", b"20"), (b"c", b"3"), (b"d", b"40")]
        assert list(store.scan()) == expected
        store.write_batch([])
        store = self.reopen(store)
        assert list(store.scan()) == expected

    def test_write_batch_sets_drops_or_keeps_each_ttl(self, store: Any) -> None:
        store.put(b"kept", b"1", ttl=HOUR)
        store.put(b"dropped", b"1", ttl=HOUR)
        store.write_batch([(b"kept", b"2", KEEP_TTL), (b"dropped", b"2"),
                           (b"fresh", b"3", KEEP_TTL), (b"timed", b"4", HOUR),
                           (b"gone", b"5", 0)])
        assert store.get(b"kept") == b"2"
        assert HOUR - 60 < store.ttl(b"kept") <= HOUR
        assert store.ttl(b"dropped") is None
        assert store.ttl(b"fresh") is None
        assert HOUR - 60 < store.ttl(b"timed") <= HOUR
        assert store.get(b"gone") is None
        store = self.reopen(store)
        assert HOUR - 60 < store.ttl(b"kept") <= HOUR
        assert store.ttl(b"dropped") is None

    def test_write_batch_keeps_a_deadline_to_the_millisecond(self, store: Any) -> None:
        at = int((time.time() + HOUR) * 1000) + 7
        store.put(b"old", b"1")
        store.write_batch([(b"at", b"1", Deadline(at)), (b"old", b"2", Deadline(at - 1)),
                           (b"past", b"3", Deadline(at - int(2 * HOUR * 1000)))])
        assert store.expires_at(b"at") == at and store.expires_at(b"old") == at - 1
        assert store.get(b"past") is None  # a deadline already passed: deleted
        store = self.reopen(store)
        assert store.expires_at(b"at") == at and store.get(b"old") == b"2"

    def test_a_ttl_in_milliseconds_is_kept_exactly(self, store: Any) -> None:
        # 1.001 * 1000 is 1000.9999...: truncated, a PX 1001 lived 1,000 ms
        for ms in (1001, 1003, 4097):
            before = store.now_ms()
            store.put(b"k%d" % ms, b"v", ttl=ms / 1000)
            store.write_batch([(b"b%d" % ms, b"v", ms / 1000)])
            after = store.now_ms()
            for key in (b"k%d" % ms, b"b%d" % ms):
                assert before + ms <= store.expires_at(key) <= after + ms, (key, ms)

    def test_write_batch_with_an_oversized_key_writes_nothing(self, store: Any) -> None:
        with pytest.raises(LimitExceeded):
            store.write_batch([(b"a", b"1"), (b"x" * (self.max_key_size + 1), b"2")])
        assert list(store.scan()) == []

    def test_scan_skips_deleted_keys_and_sees_overwrites(self, store: Any) -> None:
        items = self._fill_letters(store)
        store.delete(b"abc")
        store.put(b"b", b"new")
        del items[b"abc"]
        items[b"b"] = b"new"
        assert list(store.scan()) == sorted(items.items())

    def test_scan_merges_every_tier_before_and_after_reopen(self, store: Any) -> None:
        rng = random.Random(7)
        model = KVModel()
        for round_ in range(4):
            for i in range(150):
                key = f"key-{rng.randrange(300):04d}".encode()
                if rng.random() < 0.2:
                    assert store.delete(key) == model.delete(key)
                else:
                    value = rng.randbytes(rng.randrange(0, 3000)) + bytes([round_, i % 256])
                    store.put(key, value)
                    model.put(key, value)
            store.sync()
        self.assert_matches(store, model)
        store = self.reopen(store)
        self.assert_matches(store, model)

    def test_scan_under_concurrent_churn_is_ordered_and_misses_no_stable_key(
        self, store: Any
    ) -> None:
        """Keys inserted and deleted around a running scan may or may not appear, but the
        scan stays strictly ordered, never repeats a key and never misses one that existed
        throughout (scans are fetched in chunks; a chunk boundary must not lose keys)."""
        stable = [b"s-%05d" % i for i in range(0, 6000, 2)]
        store.put_many((k, b"stable") for k in stable)
        stop = threading.Event()
        errors: list[str] = []

        def churn() -> None:
            rng = random.Random(9)
            try:
                while not stop.is_set():
                    key = b"s-%05d" % (rng.randrange(3000) * 2 + 1)
                    if rng.random() < 0.5:
                        store.put(key, b"churn")
                    else:
                        store.delete(key)
                    time.sleep(0)
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(repr(exc))

        thread = threading.Thread(target=churn)
        thread.start()
        try:
            scans = (
                (lambda: list(store.scan(prefix=b"s-")), stable),
                (lambda: list(store.scan(start=b"s-00100", end=b"s-05000")),
                 [k for k in stable if b"s-00100" <= k < b"s-05000"]),
                (lambda: [(k, b"?") for k in store], stable),
            )
            for scan, expected in scans:
                got = scan()
                keys = [k for k, _ in got]
                assert keys == sorted(set(keys)), "out of order or repeated"
                seen = set(keys)
                assert [k for k in expected if k not in seen] == []
                assert all(v in (b"stable", b"churn", b"?") for _, v in got)
        finally:
            stop.set()
            thread.join()
        assert errors == []

    def test_len_and_iter_count_live_keys_in_order(self, store: Any) -> None:
        store.put_many([(b"b", b"2"), (b"a", b"1"), (b"c", b"3")])
        store.delete(b"b")
        assert len(store) == 2
        assert list(store) == [b"a", b"c"]

    # -- MutableMapping sugar and context manager -------------------------------
    def test_store_is_a_mutable_mapping(self, store: Any) -> None:
        assert isinstance(store, MutableMapping)
        store[b"a"] = b"1"
        assert store[b"a"] == b"1"
        assert b"a" in store
        assert b"b" not in store
        store.update({b"b": b"2", b"c": b"3"})
        assert dict(store.items()) == {b"a": b"1", b"b": b"2", b"c": b"3"}
        assert list(store.keys()) == [b"a", b"b", b"c"]
        assert list(store.values()) == [b"1", b"2", b"3"]
        assert store.pop(b"b") == b"2"
        assert store.setdefault(b"d", b"4") == b"4"
        del store[b"a"]
        assert dict(store.items()) == {b"c": b"3", b"d": b"4"}
        assert store.get(b"missing", b"default") == b"default"
        assert store.pop(b"missing", None) is None
        assert store == {b"c": b"3", b"d": b"4"}
        store.clear()
        assert len(store) == 0
        assert list(cast("Any", store).scan()) == []  # (narrowed to MutableMapping above)

    def test_missing_item_raises_key_error(self, store: Any) -> None:
        with pytest.raises(KeyError):
            store[b"missing"]
        with pytest.raises(KeyError):
            del store[b"missing"]

    def test_context_manager_closes_the_store(self) -> None:
        with self.open_store() as store:
            store.put(b"k", b"v")
        with pytest.raises(ClosedError):
            store.get(b"k")
        store = self.open_store()
        assert store.get(b"k") == b"v"

    def test_close_is_idempotent(self, store: Any) -> None:
        store.close()
        store.close()

    @pytest.mark.parametrize("call", sorted(_CALLS_AFTER_CLOSE))
    def test_every_method_raises_closed_error_after_close(self, store: Any, call: str) -> None:
        store.close()
        with pytest.raises(ClosedError):
            _CALLS_AFTER_CLOSE[call](store)

    # -- limits -------------------------------------------------------------------
    def test_key_at_the_size_limit_is_accepted(self, store: Any) -> None:
        key = b"k" * self.max_key_size
        store.put(key, b"v")
        assert store.get(key) == b"v"
        store = self.reopen(store)
        assert store.get(key) == b"v"

    def test_oversized_key_raises_limit_exceeded_before_any_write(self, store: Any) -> None:
        store.put(b"before", b"v")
        store.sync()
        size = dir_bytes(self.path)
        big = b"k" * (self.max_key_size + 1)
        with pytest.raises(LimitExceeded):
            store.put(big, b"v")
        with pytest.raises(ValueError, match=r".+"):  # LimitExceeded is also a ValueError
            store.put(big, b"v")
        with pytest.raises(LimitExceeded):
            store.put_many([(b"batch-ok", b"v"), (big, b"v")])
        store.sync()
        assert dir_bytes(self.path) == size
        assert store.get(b"batch-ok") is None
        store = self.reopen(store)
        assert list(store.scan()) == [(b"before", b"v")]

    def test_oversized_value_raises_limit_exceeded_before_any_write(self, store: Any) -> None:
        store.sync()
        size = dir_bytes(self.path)
        # bytes(n) is calloc'd: untouched pages cost no memory unless the store reads them.
        huge = bytes(self.max_value_size + 1)
        with pytest.raises(LimitExceeded):
            store.put(b"k", huge)
        with pytest.raises(LimitExceeded):
            store.put_many([(b"batch-ok", b"v"), (b"k", huge)])
        del huge
        store.sync()
        assert dir_bytes(self.path) == size
        assert store.get(b"k") is None
        assert store.get(b"batch-ok") is None

    # -- large values ---------------------------------------------------------
    def test_values_larger_than_a_block_round_trip(self, store: Any) -> None:
        rng = random.Random(1)
        values = {}
        for size in self.block_value_sizes:
            values[f"random-{size}".encode()] = rng.randbytes(size)
            values[f"repetitive-{size}".encode()] = (b"0123456789abcdef" * (size // 16 + 1))[:size]
        for key, value in values.items():
            store.put(key, value)
            assert store.get(key) == value
        store.sync()
        assert dict(store.scan()) == values
        store = self.reopen(store)
        assert store.get_many(sorted(values)) == [values[k] for k in sorted(values)]
        store.put(b"random-%d" % self.block_value_sizes[0], b"overwritten")  # garbage to merge
        values[b"random-%d" % self.block_value_sizes[0]] = b"overwritten"
        store.compact()
        store = self.reopen(store)
        assert dict(store.scan()) == values

    def test_value_larger_than_a_hot_segment_round_trips(self, store: Any) -> None:
        value = random.Random(2).randbytes(self.hot_value_size)
        store.put(b"before", b"small")
        store.put(b"huge", value)
        store.put(b"after", b"small")
        assert store.get(b"huge") == value
        store = self.reopen(store)
        assert store.get(b"huge") == value
        assert store.get_many([b"before", b"after"]) == [b"small", b"small"]

    # -- durability, maintenance ------------------------------------------------
    def test_every_kind_of_write_survives_close_and_reopen(self, store: Any) -> None:
        model = KVModel()
        rng = random.Random(3)
        for i in range(400):
            key = f"k{rng.randrange(120):03d}".encode()
            op = rng.random()
            if op < 0.55:
                value = rng.randbytes(rng.randrange(0, 600))
                store.put(key, value)
                model.put(key, value)
            elif op < 0.7:
                assert store.delete(key) == model.delete(key)
            elif op < 0.8:
                batch = [(f"b{i}-{j}".encode(), rng.randbytes(40)) for j in range(5)]
                store.put_many(batch)
                model.put_many(batch)
            elif op < 0.9:
                assert store.expire(key, HOUR) == model.expire(key, HOUR)
            else:
                doomed = [key, f"b{i - 1}-0".encode()]
                assert store.delete_many(doomed) == model.delete_many(doomed)
        self.assert_matches(store, model)
        store = self.reopen(store)
        self.assert_matches(store, model)
        store = self.reopen(store)
        self.assert_matches(store, model)
        for key in model.live():
            assert (store.ttl(key) is None) == (model.ttl(key) is None)

    def test_every_one_of_many_keys_is_indexed_before_and_after_reopen(self, store: Any) -> None:
        """tamnd/kv v0.4.0 silently unindexed keys past its fixed capacity (2,952 of 5,000
        Gets missing, kv-design.md §4); an index must grow, never drop."""
        n = 20_000
        keys = [b"%08d" % i for i in range(n)]
        for start in range(0, n, 2_000):
            store.put_many((k, k[::-1]) for k in keys[start:start + 2_000])
        assert len(store) == n
        assert store.get_many(keys) == [k[::-1] for k in keys]
        store = self.reopen(store)
        assert len(store) == n
        assert store.get_many(keys) == [k[::-1] for k in keys]
        assert [k for k, _ in store.scan(prefix=b"00001")] == keys[1000:2000]

    def test_sync_returns_and_the_store_stays_usable(self, store: Any) -> None:
        store.sync()
        store.put(b"k", b"v")
        store.sync()
        store.sync()
        assert store.get(b"k") == b"v"

    def test_durability_ticket_completes_after_sync(self, store: Any) -> None:
        assert store.durability in {"always", "interval", "none"}
        store.put(b"k", b"v", sync=False)
        future = store.when_durable(store.write_ticket())
        store.sync()
        assert future.result(timeout=30) is None

    def test_set_durability_changes_the_mode_live(self, store: Any) -> None:
        original = store.durability
        for mode in ("always", "none", "interval", original):
            store.set_durability(mode)
            assert store.durability == mode
            store.put(f"written-in-{mode}".encode(), mode.encode())
        assert store.get(b"written-in-none") == b"none"
        store = self.reopen(store)
        for mode in ("always", "none", "interval"):
            assert store.get(f"written-in-{mode}".encode()) == mode.encode()
        assert store.durability == original

    def test_compact_keeps_every_live_value(self, store: Any) -> None:
        model = KVModel()
        rng = random.Random(4)
        for round_ in range(5):
            for i in range(100):
                key = f"k{i:03d}".encode()
                if (i + round_) % 7 == 0:
                    assert store.delete(key) == model.delete(key)
                else:
                    value = rng.randbytes(200)
                    store.put(key, value)
                    model.put(key, value)
            store.sync()
        store.compact()
        self.assert_matches(store, model)
        assert store.check() == []
        store = self.reopen(store)
        self.assert_matches(store, model)

    def test_compact_reclaims_the_space_of_overwritten_values(self, store: Any) -> None:
        rng = random.Random(5)
        live = {f"k{i:03d}".encode(): b"" for i in range(100)}
        for _ in range(10):
            for key in live:
                live[key] = rng.randbytes(1000)  # incompressible, so compression cannot help
            store.put_many(live)
            # Reopen between rounds, so each version is on disk in its own generation
            # rather than superseded while still in memory.
            store = self.reopen(store)
        before = dir_bytes(self.path)
        live_bytes = sum(len(k) + len(v) for k, v in live.items())
        store.compact()
        store = self.reopen(store)
        after = dir_bytes(self.path)
        assert dict(store.scan()) == live
        assert after <= 3 * live_bytes, (before, after, live_bytes)
        if before > 6 * live_bytes:  # there was garbage to reclaim: at least half of it goes
            assert after < before / 2, (before, after, live_bytes)

    def test_check_and_stats_report_on_a_used_store(self, store: Any) -> None:
        assert store.check() == []
        store.put_many((f"k{i}".encode(), b"v" * i) for i in range(200))
        store.sync()
        assert store.check() == []
        stats = store.stats()
        assert isinstance(stats, dict)
        assert stats

    def test_concurrent_writers_lose_nothing(self, store: Any) -> None:
        errors: list[BaseException] = []

        def writer(t: int) -> None:
            try:
                for i in range(150):
                    store.put(f"t{t}-{i:03d}".encode(), f"{t}:{i}".encode() * 10)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        expected = {f"t{t}-{i:03d}".encode(): f"{t}:{i}".encode() * 10
                    for t in range(4) for i in range(150)}
        assert dict(store.scan()) == expected
        store = self.reopen(store)
        assert dict(store.scan()) == expected

    def test_reads_never_go_back_in_time_while_data_moves_between_tiers(self, store: Any) -> None:
        """Readers racing a writer, spills and compaction see each key's versions in order,
        never a missing key, and a writer always reads its own last write (tamnd/kv's stale
        read-cache race, kv-design.md §4)."""
        keys = [f"key-{i:02d}".encode() for i in range(30)]
        last = 12
        pad = b"." * 300
        store.put_many((k, b"0|" + pad) for k in keys)
        errors: list[str] = []
        done = threading.Event()

        def version(value: bytes | None) -> int:
            assert value is not None
            return int(value.split(b"|", 1)[0])

        def writer() -> None:
            try:
                for v in range(1, last + 1):
                    for k in keys:
                        store.put(k, b"%d|" % v + pad)
                        if version(store.get(k)) != v:
                            errors.append(f"writer did not read its own write of {k!r} v{v}")
                    if v % 4 == 0:
                        store.compact()
            except Exception as exc:
                errors.append(f"writer: {exc!r}")
            finally:
                done.set()

        def reader(seed: int) -> None:
            rng = random.Random(seed)
            seen = dict.fromkeys(keys, 0)
            try:
                while not done.is_set():
                    k = rng.choice(keys)
                    value = store.get(k)
                    if value is None:
                        errors.append(f"{k!r} went missing")
                        return
                    if version(value) < seen[k]:
                        errors.append(f"{k!r} went back from v{seen[k]} to v{version(value)}")
                        return
                    seen[k] = version(value)
                    time.sleep(0)  # let the writer run: a reader must not starve it
            except Exception as exc:
                errors.append(f"reader: {exc!r}")

        def scanner() -> None:
            try:
                while not done.is_set():
                    got = list(store.scan(prefix=b"key-"))
                    if [k for k, _ in got] != keys:
                        errors.append(f"scan saw {len(got)} of {len(keys)} keys")
                        return
                    time.sleep(0)
            except Exception as exc:
                errors.append(f"scan: {exc!r}")

        threads = [threading.Thread(target=writer), threading.Thread(target=scanner),
                   *(threading.Thread(target=reader, args=(s,)) for s in range(2))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert all(version(v) == last for v in store.get_many(keys))

    def test_writes_that_return_while_another_thread_closes_are_kept(self, store: Any) -> None:
        """close() racing writers: a put either raises ClosedError or its write survives."""
        acked: list[bytes] = []
        errors: list[BaseException] = []
        warmed_up = threading.Barrier(5)

        def writer(t: int) -> None:
            i = 0
            while True:
                key = f"t{t}-{i:05d}".encode()
                try:
                    store.put(key, key * 3)
                except ClosedError:
                    return
                except BaseException as exc:
                    errors.append(exc)
                    return
                acked.append(key)
                i += 1
                if i == 50:
                    warmed_up.wait()

        threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
        for thread in threads:
            thread.start()
        warmed_up.wait()
        store.close()
        for thread in threads:
            thread.join()
        assert errors == []
        store = self.open_store()
        missing = [k for k in acked if store.get(k) != k * 3]
        assert missing == [], f"{len(missing)} of {len(acked)} acknowledged writes lost"
