"""Secondary indexes: hash (equality, ``In``) and ordered (equality, ranges, sort).

Both map the :func:`~tuffdb.documents.values.order_key` of a field's value to record ids;
a missing field is indexed as null so ``Eq null`` can use the index. Arrays are indexed
as whole values (no multikey entries), so ``Contains`` never uses an index.

Indexes live in memory. Their definitions are stored with the collection's metadata and
their contents are rebuilt by one scan of the collection the first time the collection
is used after open (see docs/design/documents.md). Expired (TTL) records can linger in
an index until looked up: the planner only yields candidate ids, the collection fetches
each one and re-checks the whole filter, so a stale entry is never returned.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from typing import TYPE_CHECKING, Any

from tuffdb.documents.query import MISSING, get_path
from tuffdb.documents.values import order_key

if TYPE_CHECKING:
    from collections.abc import Iterator

Key = tuple[Any, ...]


class _Top:
    """Sorts after every id (upper bisect sentinel)."""

    def __lt__(self, other: object) -> bool:
        return False

    def __gt__(self, other: object) -> bool:
        return True


class _Bottom:
    """Sorts before every id (lower bisect sentinel)."""

    def __lt__(self, other: object) -> bool:
        return True

    def __gt__(self, other: object) -> bool:
        return False


TOP, BOTTOM = _Top(), _Bottom()


def key_of(record: dict[str, Any], field: str) -> Key:
    v = get_path(record, field)
    return order_key(None if v is MISSING else v)


class HashIndex:
    """``order_key -> set of ids``; O(1) equality lookups."""

    kind = "hash"

    def __init__(self, field: str, *, unique: bool = False) -> None:
        self.field = field
        self.unique = unique
        self._map: dict[Key, set[str]] = {}
        self._key_by_id: dict[str, Key] = {}

    def __len__(self) -> int:
        return len(self._key_by_id)

    def add(self, rid: str, record: dict[str, Any]) -> None:
        self.remove(rid)
        k = key_of(record, self.field)
        self._map.setdefault(k, set()).add(rid)
        self._key_by_id[rid] = k

    def remove(self, rid: str) -> None:
        k = self._key_by_id.pop(rid, None)
        if k is not None:
            ids = self._map[k]
            ids.discard(rid)
            if not ids:
                del self._map[k]

    def lookup(self, keys: Any) -> list[str]:
        """Ids whose value's key is one of ``keys``, in id order."""
        out: set[str] = set()
        for k in set(keys):
            out |= self._map.get(k, set())
        return sorted(out)

    def check(self) -> list[str]:
        problems = [f"{rid}: key {k} missing from map" for rid, k in self._key_by_id.items()
                    if rid not in self._map.get(k, ())]
        total = sum(len(s) for s in self._map.values())
        if total != len(self._key_by_id):
            problems.append(f"map holds {total} ids, reverse map {len(self._key_by_id)}")
        return problems


class OrderedIndex:
    """A sorted list of ``(order_key, id)``: equality, ranges and ordered walks."""

    kind = "ordered"

    def __init__(self, field: str, *, unique: bool = False) -> None:
        self.field = field
        self.unique = unique
        self._pairs: list[tuple[Key, str]] = []
        self._key_by_id: dict[str, Key] = {}

    def __len__(self) -> int:
        return len(self._pairs)

    def add(self, rid: str, record: dict[str, Any]) -> None:
        self.remove(rid)
        k = key_of(record, self.field)
        insort(self._pairs, (k, rid))
        self._key_by_id[rid] = k

    def remove(self, rid: str) -> None:
        k = self._key_by_id.pop(rid, None)
        if k is not None:
            i = bisect_left(self._pairs, (k, rid))
            assert self._pairs[i] == (k, rid)  # Invariant: every reverse entry is in the list
            del self._pairs[i]

    def lookup(self, keys: Any) -> list[str]:
        out: set[str] = set()
        for k in set(keys):
            out.update(self.range(k, True, k, True))
        return sorted(out)

    def range(self, lo: Key | None, lo_incl: bool, hi: Key | None, hi_incl: bool) -> list[str]:
        """Ids with ``lo <(=) key <(=) hi`` in key order; a None bound is open."""
        pairs = self._pairs
        if lo is None:
            start = 0
        else:
            start = bisect_left(pairs, (lo, BOTTOM)) if lo_incl else bisect_right(pairs, (lo, TOP))
        if hi is None:
            end = len(pairs)
        else:
            end = bisect_right(pairs, (hi, TOP)) if hi_incl else bisect_left(pairs, (hi, BOTTOM))
        return [rid for _, rid in pairs[start:end]]

    def walk(self, ascending: bool = True) -> Iterator[str]:
        """All ids by key; ties in id order in both directions (as a stable sort gives)."""
        pairs = self._pairs
        if ascending:
            for _, rid in pairs:
                yield rid
            return
        i = len(pairs) - 1
        while i >= 0:
            start = bisect_left(pairs, (pairs[i][0], BOTTOM))
            for j in range(start, i + 1):
                yield pairs[j][1]
            i = start - 1

    def check(self) -> list[str]:
        problems = []
        if any(self._pairs[i] > self._pairs[i + 1] for i in range(len(self._pairs) - 1)):
            problems.append("pairs out of order")
        if len(self._pairs) != len(self._key_by_id):
            problems.append(f"{len(self._pairs)} pairs, {len(self._key_by_id)} reverse entries")
        return problems


Index = HashIndex | OrderedIndex


def make_index(field: str, kind: str, *, unique: bool = False) -> Index:
    """``kind``: ``"hash"`` or ``"ordered"`` (``"btree"`` is accepted as ordered)."""
    if kind == "hash":
        return HashIndex(field, unique=unique)
    if kind in ("ordered", "btree"):
        return OrderedIndex(field, unique=unique)
    raise ValueError(f"unknown index kind {kind!r}; use 'hash' or 'ordered'")
