"""A write buffer over the store: what a MULTI/EXEC or a Lua script runs against.

Commands inside a transaction or a script see their own writes (reads check the buffer
first, scans and counts merge it with the store's), and nothing reaches the store until
:meth:`Overlay.commit`, which applies every write as one ``write_batch``: after a crash
either the whole transaction or script is there or none of it is.

It offers the subset of the ``KVStore`` API the handlers use, with the same meaning, so
``c.db`` is either the store or an overlay and handlers do not care which.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import TYPE_CHECKING, Any

from tuffdb._format.kv import MAX_KEY_SIZE, MAX_VALUE_SIZE
from tuffdb.errors import LimitExceeded, NotFoundError
from tuffdb.kv.store import KEEP_TTL, Deadline, prefix_range, ttl_ms

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from tuffdb.kv.store import KVStore

# What the buffer holds per key: (value or None for deleted, expiry), expiry being None
# (no TTL), KEEP_TTL (whatever the store has) or a deadline in milliseconds since the
# epoch on the store's clock, committed as it is (``Deadline``): PXAT, EXAT and PEXPIREAT
# keep the millisecond they name, as the store does outside a transaction.
Entry = tuple[bytes | None, Any]


def _check(key: bytes, value: bytes | None) -> None:
    if len(key) > MAX_KEY_SIZE:
        raise LimitExceeded(f"key is {len(key)} bytes; the limit is {MAX_KEY_SIZE}")
    if value is not None and len(value) > MAX_VALUE_SIZE:
        raise LimitExceeded(f"value is {len(value)} bytes; the limit is {MAX_VALUE_SIZE}")


class Overlay:
    """Buffered writes over ``base`` (a KVStore); see the module docstring."""

    __slots__ = ("_sorted", "base", "writes")

    def __init__(self, base: KVStore) -> None:
        self.base = base
        self.writes: dict[bytes, Entry] = {}
        self._sorted: list[bytes] | None = None  # sorted keys of ``writes``, built on demand

    def __bool__(self) -> bool:
        return True

    @property
    def dirty(self) -> bool:
        return bool(self.writes)

    # -- writes ------------------------------------------------------------------------
    def _set(self, key: bytes, value: bytes | None, expiry: Any) -> None:
        _check(key, value)
        if expiry is KEEP_TTL and key in self.writes:
            old_value, old_expiry = self.writes[key]
            expiry = old_expiry if old_value is not None else None
        if key not in self.writes:
            self._sorted = None
        self.writes[key] = (value, expiry)

    def now_ms(self) -> int:
        return self.base.now_ms()

    def _deadline(self, ttl: float) -> int:
        """``ttl`` seconds from now as the store reckons it (``KVStore.write_batch``)."""
        return self.base.now_ms() + ttl_ms(ttl)

    def put(self, key: bytes, value: bytes, ttl: float | None = None, *,
            sync: bool | None = None) -> None:  # noqa: ARG002  (the store's signature)
        if ttl is not None and ttl <= 0:
            self._set(key, None, None)
        else:
            self._set(key, value, None if ttl is None else self._deadline(ttl))

    def put_many(self, items: Any, ttl: float | None = None, *, sync: bool | None = None) -> None:
        pairs = items.items() if isinstance(items, dict) else items
        for k, v in pairs:
            self.put(k, v, ttl, sync=sync)

    def delete(self, key: bytes, *, sync: bool | None = None) -> bool:
        return self.delete_many((key,), sync=sync) == 1

    def delete_many(self, keys: Iterable[bytes], *,
                    sync: bool | None = None) -> int:  # noqa: ARG002
        n = 0
        for k in keys:
            if self.get(k) is not None:
                n += 1
                self._set(k, None, None)
        return n

    def write_batch(self, ops: Iterable[tuple[Any, ...]], *,
                    sync: bool | None = None) -> None:  # noqa: ARG002
        now = self.base.now_ms()
        for op in ops:
            k, v = op[0], op[1]
            ttl = op[2] if len(op) > 2 else None  # noqa: PLR2004
            if v is None or ttl is None:
                self._set(k, v, None)
            elif ttl is KEEP_TTL:
                self._set(k, v, KEEP_TTL)
            elif type(ttl) is Deadline:
                self._set(k, v if ttl.ms > now else None, ttl.ms if ttl.ms > now else None)
            elif ttl <= 0:
                self._set(k, None, None)
            else:
                self._set(k, v, now + ttl_ms(ttl))

    def expire(self, key: bytes, seconds: float, *,
               sync: bool | None = None) -> bool:  # noqa: ARG002  (the store's signature)
        value = self.get(key)
        if value is None:
            return False
        if seconds <= 0:
            self._set(key, None, None)
        else:
            self._set(key, value, self._deadline(seconds))
        return True

    def expire_at(self, key: bytes, deadline_ms: int, *,
                  sync: bool | None = None) -> bool:  # noqa: ARG002  (the store's signature)
        value = self.get(key)
        if value is None:
            return False
        if deadline_ms <= self.base.now_ms():  # already passed: the key is deleted
            self._set(key, None, None)
        else:
            self._set(key, value, int(deadline_ms))
        return True

    def expires_at(self, key: bytes) -> int | None:
        entry = self.writes.get(key)
        if entry is None:
            return self.base.expires_at(key)
        value, expiry = entry
        if value is None:
            raise NotFoundError(key)
        if expiry is KEEP_TTL:
            try:
                return self.base.expires_at(key)
            except NotFoundError:
                return None
        return None if expiry is None else int(expiry)

    def persist(self, key: bytes, *, sync: bool | None = None) -> bool:  # noqa: ARG002
        value = self.get(key)
        if value is None or self.ttl(key) is None:
            return False
        self._set(key, value, None)
        return True

    # -- reads -------------------------------------------------------------------------
    def get(self, key: bytes, default: Any = None) -> Any:
        entry = self.writes.get(key)
        if entry is None:
            return self.base.get(key, default)
        return default if entry[0] is None else entry[0]

    def get_many(self, keys: Iterable[bytes]) -> list[bytes | None]:
        return [self.get(k) for k in keys]

    def exists(self, key: bytes) -> bool:
        entry = self.writes.get(key)
        if entry is None:
            return self.base.exists(key)
        return entry[0] is not None

    def __contains__(self, key: object) -> bool:
        return isinstance(key, bytes) and self.get(key) is not None

    def ttl(self, key: bytes) -> float | None:
        at = self.expires_at(key)
        return None if at is None else max(0.0, (at - self.base.now_ms()) / 1000)

    def _mine(self, prefix: bytes, start: bytes | None, end: bytes | None) -> list[bytes]:
        """The buffered keys in the range, sorted."""
        if not self.writes:
            return []
        if self._sorted is None:
            self._sorted = sorted(self.writes)
        keys = self._sorted
        lo, hi = prefix_range(prefix, start, end)
        i = bisect_left(keys, lo)
        j = len(keys) if hi is None else bisect_left(keys, hi)
        return keys[i:j]

    def scan(self, prefix: bytes = b"", start: bytes | None = None, end: bytes | None = None,
             *, reverse: bool = False, skip: int = 0) -> Iterator[tuple[bytes, bytes]]:
        mine = self._mine(prefix, start, end)
        if not mine:
            yield from self.base.scan(prefix, start, end, reverse=reverse, skip=skip)
            return
        if reverse:
            mine.reverse()
        writes = self.writes
        base = self.base.scan(prefix, start, end, reverse=reverse)
        nxt = next(base, None)
        i = 0
        while nxt is not None or i < len(mine):
            if i < len(mine) and (nxt is None or (mine[i] > nxt[0] if reverse
                                                  else mine[i] < nxt[0])):
                key = mine[i]
                i += 1
                value = writes[key][0]
            else:
                assert nxt is not None
                key, value = nxt
                nxt = next(base, None)
                if key in writes:
                    if i < len(mine) and mine[i] == key:
                        i += 1
                    value = writes[key][0]
            if value is None:
                continue
            if skip:
                skip -= 1
                continue
            yield key, value

    def scan_keys(self, prefix: bytes = b"", start: bytes | None = None,
                  end: bytes | None = None, *, reverse: bool = False,
                  skip: int = 0) -> Iterator[bytes]:
        if not self._mine(prefix, start, end):
            yield from self.base.scan_keys(prefix, start, end, reverse=reverse, skip=skip)
            return
        for k, _ in self.scan(prefix, start, end, reverse=reverse, skip=skip):
            yield k

    def keys_in_range(self, prefix: bytes = b"", start: bytes | None = None,
                      end: bytes | None = None) -> list[bytes]:
        if not self._mine(prefix, start, end):
            return self.base.keys_in_range(prefix, start, end)
        return list(self.scan_keys(prefix, start, end))

    def items_in_range(self, prefix: bytes = b"", start: bytes | None = None,
                       end: bytes | None = None) -> list[tuple[bytes, bytes]]:
        if not self._mine(prefix, start, end):
            return self.base.items_in_range(prefix, start, end)
        return list(self.scan(prefix, start, end))

    def count(self, prefix: bytes = b"", start: bytes | None = None,
              end: bytes | None = None) -> int:
        n = self.base.count(prefix, start, end)
        for k in self._mine(prefix, start, end):
            n += (self.writes[k][0] is not None) - (self.base.get(k) is not None)
        return n

    def __len__(self) -> int:
        return self.count()

    # -- the end ------------------------------------------------------------------------
    def ops(self) -> list[tuple[Any, ...]]:
        """The buffered writes as ``write_batch`` ops (a deadline passed by now leaves the
        key deleted, as in the store)."""
        out: list[tuple[Any, ...]] = []
        for k, (v, expiry) in self.writes.items():
            if v is None or expiry is None:
                out.append((k, v))
            elif expiry is KEEP_TTL:
                out.append((k, v, KEEP_TTL))
            else:
                out.append((k, v, Deadline(expiry)))
        return out

    def commit(self) -> None:
        """Apply every buffered write to the store in one atomic batch."""
        if self.writes:
            self.base.write_batch(self.ops(), sync=False)
            self.writes = {}
            self._sorted = None
