"""Reference models for property tests: the simplest thing that means the same as a store.

:class:`KVModel` is a ``dict`` plus a deadline per key. It is what ``tuffdb.KVStore``
must be indistinguishable from through its public API (``tests/properties/``,
``tests/crash/``). It is deliberately naive: O(n) scans, no I/O, no threads, so
that a disagreement between it and the store is a bug in the store (or in this
file, which is short enough to read in one sitting).

TTL semantics modelled (Redis-like, as the KV contract in
``docs/design/contracts.md`` states them):

* ``put(key, value, ttl=None)`` replaces the value *and* the TTL (``None`` clears it);
* ``expire(key, s)`` sets a TTL on an existing key (``False`` when absent);
* ``persist(key)`` drops a TTL (``False`` when absent or without a TTL);
* ``ttl(key)`` is the remaining seconds, ``None`` for no TTL, ``NotFoundError`` when absent;
* an expired key is absent for every operation (get, exists, scan, len, delete).

The clock is injectable so a test can move time without sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping

from tuffdb.errors import NotFoundError

__all__ = ["KVModel"]


class KVModel:
    """A dict with per-key deadlines; the reference for ``KVStore``.

    :param clock: returns "now" in seconds; ``time.time`` by default (the store's
        TTLs survive a reopen, so they are wall-clock deadlines).
    """

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.data: dict[bytes, bytes] = {}
        self.deadlines: dict[bytes, float] = {}

    # -- housekeeping --------------------------------------------------------
    def _expire_due(self) -> None:
        now = self.clock()
        for key in [k for k, d in self.deadlines.items() if d <= now]:
            del self.deadlines[key]
            del self.data[key]

    def live(self) -> dict[bytes, bytes]:
        """Every live key and value (a copy), for whole-store comparisons."""
        self._expire_due()
        return dict(self.data)

    # -- the KV API ----------------------------------------------------------
    def put(self, key: bytes, value: bytes, ttl: float | None = None) -> None:
        self._expire_due()
        self.data[key] = bytes(value)
        if ttl is None:
            self.deadlines.pop(key, None)
        else:
            self.deadlines[key] = self.clock() + ttl

    def get(self, key: bytes) -> bytes | None:
        self._expire_due()
        return self.data.get(key)

    def delete(self, key: bytes) -> bool:
        self._expire_due()
        self.deadlines.pop(key, None)
        return self.data.pop(key, None) is not None

    def put_many(
        self, items: Iterable[tuple[bytes, bytes]] | Mapping[bytes, bytes], ttl: float | None = None
    ) -> None:
        pairs = items.items() if isinstance(items, Mapping) else items
        for key, value in pairs:
            self.put(key, value, ttl)

    def get_many(self, keys: Iterable[bytes]) -> list[bytes | None]:
        return [self.get(k) for k in keys]

    def delete_many(self, keys: Iterable[bytes]) -> int:
        return sum(self.delete(k) for k in keys)

    def exists(self, key: bytes) -> bool:
        self._expire_due()
        return key in self.data

    def expire(self, key: bytes, seconds: float) -> bool:
        self._expire_due()
        if key not in self.data:
            return False
        self.deadlines[key] = self.clock() + seconds
        return True

    def persist(self, key: bytes) -> bool:
        self._expire_due()
        return key in self.data and self.deadlines.pop(key, None) is not None

    def ttl(self, key: bytes) -> float | None:
        self._expire_due()
        if key not in self.data:
            raise NotFoundError(key)
        deadline = self.deadlines.get(key)
        return None if deadline is None else deadline - self.clock()

    def scan(
        self, prefix: bytes = b"", start: bytes | None = None, end: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        self._expire_due()
        for key in sorted(self.data):
            if not key.startswith(prefix):
                continue
            if start is not None and key < start:
                continue
            if end is not None and key >= end:
                continue
            yield key, self.data[key]

    def __len__(self) -> int:
        self._expire_due()
        return len(self.data)

    def __iter__(self) -> Iterator[bytes]:
        self._expire_due()
        return iter(sorted(self.data))
