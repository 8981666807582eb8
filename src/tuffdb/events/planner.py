"""Query planning and evaluation over the in-memory indexes (never the log bytes).

Every query is answered from two structures: tag postings (:mod:`tag_index`) and the
type column (:mod:`type_column`). Per item the planner picks:

- *tags*: intersect postings, smallest first (posting lengths are exact and free),
  then filter by type through the column;
- *types only*: a vectorised scan of the type column slice (``lo..hi``), chunked from the
  read's end when a ``limit`` is given so that a small limit touches a small slice;
- *empty item / empty query*: the position range itself.

Items are OR'ed (sorted union). The result is a numpy ``int64`` array of positions in read
order, already cut to ``limit``: the limit is pushed down before any log byte is read.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tuffdb.events.api import Query
from tuffdb.events.tag_index import TagIndex
from tuffdb.events.type_column import TypeColumn

_EMPTY = np.empty(0, np.int64)
SCAN_CHUNK = 1 << 16

Items = Sequence[tuple[Sequence[str], Sequence[str]]]  # (types, tags)


def normalise(query: Query | None) -> Items | None:
    """``None`` when the query matches everything, else ``(types, tags)`` pairs."""
    if query is None or not query.items:
        return None
    out = []
    for item in query.items:
        if not item.types and not item.tags:
            return None
        out.append((item.types, item.tags))
    return out


class Planner:
    __slots__ = ("tags", "types")

    def __init__(self, tags: TagIndex, types: TypeColumn) -> None:
        self.tags = tags
        self.types = types

    def positions(
        self, items: Items | None, lo: int, hi: int, *, backwards: bool = False,
        limit: int | None = None,
    ) -> np.ndarray:
        """Matching positions in ``lo..hi`` (inclusive), in read order, at most ``limit``."""
        if hi < lo or limit == 0:
            return _EMPTY
        if items is None:
            if limit is not None:
                if backwards:
                    return np.arange(hi, max(lo, hi - limit + 1) - 1, -1, dtype=np.int64)
                return np.arange(lo, min(hi, lo + limit - 1) + 1, dtype=np.int64)
            r = np.arange(lo, hi + 1, dtype=np.int64)
            return r[::-1] if backwards else r
        parts = [self._item(types, tags, lo, hi, backwards, limit) for types, tags in items]
        parts = [p for p in parts if len(p)]
        if not parts:
            return _EMPTY
        res = parts[0] if len(parts) == 1 else np.unique(np.concatenate(parts))
        if backwards:
            res = res[::-1]
        if limit is not None:
            res = res[:limit]
        return res

    def _item(
        self, types: Sequence[str], tags: Sequence[str], lo: int, hi: int, backwards: bool,
        limit: int | None,
    ) -> np.ndarray:
        tc = self.types
        ids = tc.type_ids(types) if types else None
        if ids is not None and not ids:
            return _EMPTY  # none of the types was ever written
        if tags:
            pos = self.tags.all_positions(tags, lo, hi)
            return tc.filter(pos, ids) if ids is not None else pos
        assert ids is not None
        if limit is None or hi - lo < SCAN_CHUNK:
            return tc.matching(ids, lo, hi)
        # Limit pushdown: scan the column in chunks from the read's starting end.
        found: list[np.ndarray] = []
        n = 0
        if backwards:
            b = hi
            while b >= lo and n < limit:
                a = max(lo, b - SCAN_CHUNK + 1)
                m = tc.matching(ids, a, b)
                found.insert(0, m)
                n += len(m)
                b = a - 1
        else:
            a = lo
            while a <= hi and n < limit:
                b = min(hi, a + SCAN_CHUNK - 1)
                m = tc.matching(ids, a, b)
                found.append(m)
                n += len(m)
                a = b + 1
        return np.concatenate(found) if found else _EMPTY

    def exists(self, items: Items | None, after: int, hi: int) -> bool:
        """Whether any event in ``after+1..hi`` matches (the append-condition check).

        Fast path first: a tag or type whose *tip* (last position) is at or below ``after``
        rules an item out without touching postings. Never a false negative.
        """
        lo = after + 1
        if hi < lo:
            return False
        if items is None:
            return True
        tix = self.tags
        tc = self.types
        for types, tags in items:
            if tags:
                if min(tix.tip(t) for t in tags) < lo:
                    continue
                if types and tc.tip(types) < lo:
                    continue
                if len(tags) == 1 and not types:
                    return True
                if len(tags) == 1:
                    # One tag with a few postings (an entity's recent events): check their
                    # types one by one; numpy set-up would cost more than the whole check.
                    few = tix.few(tags[0])
                    if few is not None:
                        ids = tc.type_ids(types)
                        col = tc.window(1, hi)
                        if any(lo <= p <= hi and col[p - 1] in ids for p in few):
                            return True
                        continue
                if len(self._item(types, tags, lo, hi, False, 1)):
                    return True
            elif tc.tip(types) >= lo:
                return True
        return False
