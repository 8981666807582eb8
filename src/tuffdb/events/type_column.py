"""Event types as a dense per-position column of small ids (types have low cardinality).

``ids[position - 1]`` is the event's type id; ``names`` maps type -> id. A type-only query
item is a vectorised ``isin`` over a slice of the column: no log bytes are touched.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import groupby

import numpy as np

from tuffdb.events.columns import Column


class TypeColumn:
    __slots__ = ("_col", "_tips", "ids", "names")

    def __init__(self) -> None:
        self.names: dict[str, int] = {}
        self._tips: list[int] = []  # type id -> last position with that type
        self._col = Column(np.uint32)

    def __len__(self) -> int:
        return self._col.size

    def extend(self, first_position: int, types: Sequence[str]) -> None:
        """Record the types of consecutive positions starting at ``first_position``."""
        assert first_position == self._col.size + 1, (first_position, self._col.size)
        names = self.names
        tips = self._tips
        ids: list[int] = []
        p = first_position
        for t, run in groupby(types):
            n = len(list(run))
            tid = names.get(t)
            if tid is None:
                tid = names[t] = len(tips)
                tips.append(0)
            ids += [tid] * n
            p += n
            tips[tid] = p - 1
        self._col.extend(ids)

    def extend_ids(self, first_position: int, names: list[str], local: np.ndarray) -> None:
        """Bulk form of :meth:`extend` from a segment index (local ids into ``names``)."""
        assert first_position == self._col.size + 1, (first_position, self._col.size)
        glob = []
        for t in names:
            tid = self.names.get(t)
            if tid is None:
                tid = self.names[t] = len(self._tips)
                self._tips.append(0)
            glob.append(tid)
        mapping = np.asarray(glob, np.uint32)
        if len(local):
            last = np.zeros(len(names), np.int64)
            np.maximum.at(last, local.astype(np.intp), np.arange(1, len(local) + 1))
            for lid, off in enumerate(last.tolist()):
                if off:
                    self._tips[glob[lid]] = first_position + off - 1
            self._col.extend(mapping[local])

    def truncate(self, size: int) -> None:
        self._col.truncate(size)

    def type_ids(self, types: Iterable[str]) -> list[int]:
        names = self.names
        return [names[t] for t in types if t in names]

    def tip(self, types: Iterable[str]) -> int:
        """Highest position holding any of ``types`` (0 if none). Writer-side, staged state."""
        tips = self._tips
        return max((tips[i] for i in self.type_ids(types)), default=0)

    def window(self, lo: int, hi: int) -> np.ndarray:
        """Type ids of positions ``lo..hi`` inclusive (a view)."""
        return self._col.array[lo - 1 : hi]

    def of(self, positions: np.ndarray) -> np.ndarray:
        result: np.ndarray = self._col.array[positions - 1]
        return result

    def matching(self, ids: list[int], lo: int, hi: int) -> np.ndarray:
        """Positions in ``lo..hi`` whose type id is in ``ids``, ascending."""
        if not ids or hi < lo:
            return np.empty(0, np.int64)
        w = self.window(lo, hi)
        mask = w == ids[0] if len(ids) == 1 else np.isin(w, ids)
        return np.flatnonzero(mask).astype(np.int64) + lo

    def filter(self, positions: np.ndarray, ids: list[int]) -> np.ndarray:
        if not ids or len(positions) == 0:
            return positions[:0]
        t = self.of(positions)
        mask = t == ids[0] if len(ids) == 1 else np.isin(t, ids)
        return positions[mask]
