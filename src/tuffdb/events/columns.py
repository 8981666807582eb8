"""A growable numpy column indexed by ``position - 1``, safe for one writer and many readers.

The writer only writes past the published head; when it grows the array it copies into a
new one and swaps the reference, so a reader that took the old reference still sees every
position up to the head it captured.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class Column:
    __slots__ = ("_arr", "_dtype", "size")

    def __init__(self, dtype: Any, capacity: int = 1024) -> None:
        self._dtype = np.dtype(dtype)
        self._arr = np.zeros(capacity, self._dtype)
        self.size = 0

    @property
    def array(self) -> np.ndarray:
        """The backing array; valid up to ``size`` (readers: up to their snapshot head)."""
        return self._arr

    def extend(self, values: Any) -> None:
        vals = np.asarray(values, self._dtype)
        n = self.size
        end = n + len(vals)
        if end > len(self._arr):
            cap = max(end, 2 * len(self._arr))
            new = np.zeros(cap, self._dtype)
            new[:n] = self._arr[:n]
            self._arr = new
        self._arr[n:end] = vals
        self.size = end

    def truncate(self, size: int) -> None:
        self.size = min(self.size, size)
