"""Inverted tag index with tiered postings.

Most tags have one or a few positions, so postings are tiered by size and never an object
per posting: an ``int`` (singleton), then a ``list`` of ints (small, up to ``SMALL_MAX``),
then a :class:`pyroaring.BitMap64` (hot tags). Positions are added in ascending order by
the one writer; readers clip to their snapshot head, so postings past it are invisible.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import groupby

import numpy as np
from pyroaring import BitMap64

SMALL_MAX = 32
_EMPTY = np.empty(0, np.int64)


class TagIndex:
    __slots__ = ("postings",)

    def __init__(self) -> None:
        self.postings: dict[str, int | list[int] | BitMap64] = {}

    def __len__(self) -> int:
        return len(self.postings)

    def add(self, first_position: int, tags_per_event: Iterable[Sequence[str]]) -> None:
        """Index consecutive events starting at ``first_position`` (writer only).

        Runs of events with equal tags (a batch for one entity) are added as a range.
        """
        d = self.postings
        get = d.get
        p = first_position
        if type(tags_per_event) is list and tags_per_event:
            n = len(tags_per_event)
            one = tags_per_event[0]
            if n > 1 and tags_per_event.count(one) == n:  # one entity's batch: C-level check
                for tag in dict.fromkeys(one):
                    self._add_range(tag, p, p + n)
                return
        for tags, run in groupby(tags_per_event):
            n = len(list(run))
            if n > 1:
                for tag in dict.fromkeys(tags):
                    self._add_range(tag, p, p + n)
                p += n
                continue
            for tag in tags:
                v = get(tag)
                if v is None:
                    d[tag] = p
                elif type(v) is int:
                    if v != p:  # a tag repeated within one event is indexed once
                        d[tag] = [v, p]
                elif type(v) is list:
                    if v[-1] != p:
                        v.append(p)
                        if len(v) > SMALL_MAX:
                            d[tag] = BitMap64(v)
                else:
                    v.add(p)  # type: ignore[union-attr]
            p += 1

    def _add_range(self, tag: str, start: int, stop: int) -> None:
        d = self.postings
        v = d.get(tag)
        if v is None:
            d[tag] = list(range(start, stop)) if stop - start <= SMALL_MAX else BitMap64(
                range(start, stop))
        elif type(v) is int:
            lst = [v, *range(start, stop)]
            d[tag] = lst if len(lst) <= SMALL_MAX else BitMap64(lst)
        elif type(v) is list:
            v.extend(range(start, stop))
            if len(v) > SMALL_MAX:
                d[tag] = BitMap64(v)
        else:
            v.add_range(start, stop)  # type: ignore[union-attr]

    def add_postings(self, tag: str, positions: np.ndarray) -> None:
        """Bulk-append ascending ``positions`` (above every existing one) for ``tag``."""
        v = self.postings.get(tag)
        if v is None:
            n = len(positions)
            if n == 1:
                self.postings[tag] = int(positions[0])
            elif n <= SMALL_MAX:
                self.postings[tag] = positions.tolist()
            else:
                self.postings[tag] = BitMap64(positions.astype(np.uint64))
        elif type(v) is int:
            del self.postings[tag]
            self.add_postings(tag, np.concatenate([[v], positions]).astype(np.int64))
        elif type(v) is list:
            del self.postings[tag]
            self.add_postings(tag, np.concatenate([v, positions]).astype(np.int64))
        else:
            v.update(positions.astype(np.uint64))  # type: ignore[union-attr]

    def truncate(self, head: int) -> None:
        """Drop postings above ``head`` (after a failed commit, before any reader saw them)."""
        d = self.postings
        for tag, v in list(d.items()):
            if type(v) is int:
                if v > head:
                    del d[tag]
            elif type(v) is list:
                if v[-1] > head:
                    keep = [p for p in v if p <= head]
                    if not keep:
                        del d[tag]
                    else:
                        d[tag] = keep[0] if len(keep) == 1 else keep
            elif v.max() > head:  # type: ignore[union-attr]
                v.remove_range(head + 1, v.max() + 1)  # type: ignore[union-attr]
                if not v:
                    del d[tag]

    def count(self, tag: str) -> int:
        v = self.postings.get(tag)
        if v is None:
            return 0
        if type(v) is int:
            return 1
        return len(v)  # type: ignore[arg-type]

    def few(self, tag: str) -> list[int] | tuple[int, ...] | None:
        """The positions of a tag with at most ``SMALL_MAX`` of them (None: more, or none)."""
        v = self.postings.get(tag)
        if type(v) is int:
            return (v,)
        if type(v) is list:
            return v
        return None

    def tip(self, tag: str) -> int:
        """Highest position carrying ``tag`` (0 if none): the condition fast path."""
        v = self.postings.get(tag)
        if v is None:
            return 0
        if type(v) is int:
            return v
        if type(v) is list:
            return v[-1]
        return v.max()  # type: ignore[union-attr]

    def positions(self, tag: str, lo: int, hi: int) -> np.ndarray:
        """Ascending positions in ``lo..hi`` (inclusive) carrying ``tag``."""
        v = self.postings.get(tag)
        if v is None:
            return _EMPTY
        if type(v) is int:
            return np.array([v], np.int64) if lo <= v <= hi else _EMPTY
        if type(v) is list:
            a = np.array(v, np.int64)
        else:
            a = np.frombuffer(v.to_array(), np.uint64).astype(np.int64)  # type: ignore[union-attr]
        i = np.searchsorted(a, lo, "left") if lo > 1 else 0
        j = np.searchsorted(a, hi, "right")
        return a[i:j]

    def all_positions(self, tags: Sequence[str], lo: int, hi: int) -> np.ndarray:
        """Positions in ``lo..hi`` carrying every tag in ``tags`` (smallest postings first)."""
        if len(tags) == 1:
            return self.positions(tags[0], lo, hi)
        order = sorted(set(tags), key=self.count)
        if self.count(order[0]) == 0:
            return _EMPTY
        acc = self.positions(order[0], lo, hi)
        for tag in order[1:]:
            if len(acc) == 0:
                break
            acc = np.intersect1d(acc, self.positions(tag, lo, hi), assume_unique=True)
        return acc
