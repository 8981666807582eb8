"""The KV engine's ordered view of its keys: sorted chunks, with counts for positions.

The keydir and the hot tier are dicts (no order); range reads, prefix scans, counts and
seeks by position need the keys in order. :class:`OrderedKeys` holds them as a list of
sorted chunks of at most ``2 * load`` keys (``maxes[i]`` is chunk i's largest key), so an
insert or a delete is two ``bisect`` calls and one list insert or delete of at most
``2 * load`` pointers, done by C. A Fenwick tree over the chunk lengths turns a chunk and
an offset into a position, and back, in O(log chunks): ``bisect_left`` (counts) and
``[i]`` (a seek by position: SPOP, ZRANGE by rank, SCAN cursors).

The engine folds every written key into it (``KVStore._fold_locked``): :meth:`add` and
:meth:`discard` report whether anything changed, each with a single pair of bisects, so
the common case of a key that is already where it should be (a collection's metadata
rewritten) costs one lookup. It replaces ``sortedcontainers.SortedList``, whose pure
Python ``add`` / ``__contains__`` / ``discard`` cost several times more per key on this
path (the fold ran ~2 us per RESP LPUSH on the server's core).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from itertools import filterfalse, pairwise
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

LOAD = 1000  # a chunk splits past 2 * LOAD keys; one under LOAD // 8 joins its successor
# add_many/discard_many: a run of keys for one chunk goes key by key (a bisect and a list
# insert or delete each) while MERGE_RATIO times its length is under the part of the chunk
# it touches, else the chunk is rebuilt in one pass (a sort merge or a filter)
MERGE_RATIO = 16


class OrderedKeys:
    """A sorted set of bytes keys with positional access (see the module docstring)."""

    def __init__(self, keys: Iterable[bytes] = (), load: int = LOAD) -> None:
        self._load = load
        self._chunks: list[list[bytes]] = []
        self._maxes: list[bytes] = []
        self._tree: list[int] = [0]  # Fenwick tree of chunk lengths, 1-based
        self._stale = False  # the tree lags the chunks: rebuilt by the next positional read
        self._len = 0
        self.update(keys)

    def __len__(self) -> int:
        return self._len

    def update(self, keys: Iterable[bytes]) -> None:
        """Add many keys at once: one sort of everything (the view's first build)."""
        merged = set(keys)
        if not merged:
            return
        for chunk in self._chunks:
            merged.update(chunk)
        ordered = sorted(merged)
        load = self._load
        self._chunks = [ordered[i : i + load] for i in range(0, len(ordered), load)]
        self._maxes = [chunk[-1] for chunk in self._chunks]
        self._len = len(ordered)
        self._stale = True

    # -- membership -------------------------------------------------------------------
    def _find(self, key: bytes) -> int:
        """Chunk of ``key`` and its offset there, as ``pos << 32 | i``; -1 if absent."""
        maxes = self._maxes
        pos = bisect_left(maxes, key)
        if pos == len(maxes):
            return -1
        chunk = self._chunks[pos]
        i = bisect_left(chunk, key)  # key <= chunk[-1]: i is in range
        return pos << 32 | i if chunk[i] == key else -1

    def __contains__(self, key: bytes) -> bool:
        return self._find(key) >= 0

    def add(self, key: bytes) -> bool:
        """Insert ``key``; False if it was there already."""
        maxes = self._maxes
        if not maxes:
            self._chunks = [[key]]
            self._maxes = [key]
            self._len = 1
            self._stale = True
            return True
        pos = bisect_left(maxes, key)
        if pos == len(maxes):  # past every key: append to the last chunk
            pos -= 1
            chunk = self._chunks[pos]
            chunk.append(key)
            maxes[pos] = key
        else:
            chunk = self._chunks[pos]
            i = bisect_left(chunk, key)
            if chunk[i] == key:
                return False
            chunk.insert(i, key)
        self._len += 1
        if len(chunk) > 2 * self._load:
            self._split(pos)
        else:
            self._bump(pos, 1)
        return True

    def discard(self, key: bytes) -> bool:
        """Remove ``key``; False if it was not there."""
        found = self._find(key)
        if found < 0:
            return False
        pos = found >> 32
        i = found & 0xFFFFFFFF
        maxes = self._maxes
        chunk = self._chunks[pos]
        del chunk[i]
        self._len -= 1
        if not chunk or (len(chunk) < self._load // 8 and pos + 1 < len(maxes)):
            self._join(pos)  # emptied (dropped) or thin (joins its successor)
        else:
            if i == len(chunk):
                maxes[pos] = chunk[-1]
            self._bump(pos, -1)
        return True

    # -- in bulk (the engine's fold) ------------------------------------------------------
    def add_many(self, keys: list[bytes]) -> None:
        """Insert ``keys`` (distinct; some may be here already). Sorted first, they reach
        each chunk as one run: a run much shorter than the chunk's part after it goes in
        key by key (bisect + insert), a longer one is merged (timsort merges the two
        sorted runs, ``dict.fromkeys`` drops keys that were there), all in C. Chunks that
        outgrew ``2 * load`` are split once at the end, and the tree rebuilt once.
        A run of new keys at a collection's end (RPUSH, XADD, new ids) is an append."""
        if not keys:
            return
        if not self._chunks:
            self.update(keys)
            return
        keys = sorted(keys)
        chunks = self._chunks
        maxes = self._maxes
        last = len(maxes) - 1
        n = len(keys)
        i = 0
        added = 0
        big = 2 * self._load
        oversized: list[int] = []
        while i < n:
            pos = bisect_left(maxes, keys[i])
            if pos > last:  # past every key: the rest go to the end of the last chunk
                pos = last
                j = n
            else:
                j = bisect_right(keys, maxes[pos], i)
            chunk = chunks[pos]
            before = len(chunk)
            lo = bisect_left(chunk, keys[i])
            if lo == before:  # every key of the run is past the chunk's: an append
                chunk += keys[i:j]
            elif (j - i) * MERGE_RATIO < before - lo:
                for k in keys[i:j]:
                    at = bisect_left(chunk, k)
                    if chunk[at] != k:  # k <= the chunk's max: at is in range
                        chunk.insert(at, k)
            else:
                merged = chunk[lo:]
                merged += keys[i:j]
                merged.sort()
                del chunk[lo:]
                chunk += dict.fromkeys(merged)
            maxes[pos] = chunk[-1]
            added += len(chunk) - before
            if len(chunk) > big:
                oversized.append(pos)
            i = j
        self._len += added
        self._stale = True
        for pos in reversed(oversized):  # from the last: a split moves the chunks after it
            self._split(pos)

    def discard_many(self, keys: list[bytes]) -> None:
        """Remove ``keys`` (distinct; some may be absent), a chunk at a time as
        :meth:`add_many` adds; emptied and thinned chunks are dealt with once at the end."""
        if not keys or not self._chunks:
            return
        keys = sorted(keys)
        chunks = self._chunks
        maxes = self._maxes
        n = len(keys)
        i = 0
        removed = 0
        thin = self._load // 8
        reshape: list[int] = []
        while i < n:
            pos = bisect_left(maxes, keys[i])
            if pos == len(maxes):
                break  # the rest are past every key
            j = bisect_right(keys, maxes[pos], i)
            chunk = chunks[pos]
            before = len(chunk)
            if (j - i) * MERGE_RATIO < before:
                for k in keys[i:j]:
                    at = bisect_left(chunk, k)
                    if at < len(chunk) and chunk[at] == k:
                        del chunk[at]
            else:
                chunk[:] = filterfalse(set(keys[i:j]).__contains__, chunk)
            removed += before - len(chunk)
            if chunk:
                maxes[pos] = chunk[-1]
            if not chunk or len(chunk) < thin:
                reshape.append(pos)
            i = j
        self._len -= removed
        if removed:
            self._stale = True
        last = len(chunks) - 1
        for pos in reversed(reshape):  # from the last: a join changes the chunks after it
            if not chunks[pos] or pos < last:
                self._join(pos)
            last = len(chunks) - 1

    def _split(self, pos: int) -> None:
        """Split chunk ``pos`` (past ``2 * load`` keys) into even parts of ``load`` to
        ``2 * load``, in place: the chunks around it stay as they are (O(chunks) pointer
        moves in C, where a Python pass over every chunk cost ~0.7 ms a split at 4 million
        keys)."""
        chunk = self._chunks[pos]
        step = -(-len(chunk) // (len(chunk) // self._load))  # len // load parts, even
        parts = [chunk[s : s + step] for s in range(0, len(chunk), step)]
        self._chunks[pos : pos + 1] = parts
        self._maxes[pos : pos + 1] = [part[-1] for part in parts]
        self._stale = True

    def _join(self, pos: int) -> None:
        """Drop chunk ``pos`` if empty, else join its successor to it (it is thin: under
        ``load // 8`` keys), split again if that made it too big."""
        chunks = self._chunks
        chunk = chunks[pos]
        if not chunk:
            del chunks[pos]
            del self._maxes[pos]
        elif pos + 1 < len(chunks):
            chunk += chunks[pos + 1]
            del chunks[pos + 1]
            del self._maxes[pos]  # the successor's maximum, now at pos, is the join's
            if len(chunk) > 2 * self._load:
                self._split(pos)
        self._stale = True

    # -- positions ----------------------------------------------------------------------
    def bisect_left(self, key: bytes) -> int:
        """How many keys are < ``key``."""
        maxes = self._maxes
        pos = bisect_left(maxes, key)
        if pos == len(maxes):
            return self._len
        return self._before(pos) + bisect_left(self._chunks[pos], key)

    def __getitem__(self, index: int) -> bytes:
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError("OrderedKeys index out of range")
        tree = self._fresh_tree()
        m = len(tree) - 1
        pos = 0  # Fenwick descent: the last chunk boundary at or before ``index``
        rest = index
        bit = 1 << (m.bit_length() - 1)
        while bit:
            nxt = pos + bit
            if nxt <= m and tree[nxt] <= rest:
                pos = nxt
                rest -= tree[nxt]
            bit >>= 1
        return self._chunks[pos][rest]

    # -- ranges -------------------------------------------------------------------------
    def between(self, lo: bytes, hi: bytes | None, limit: int, *,
                reverse: bool = False) -> list[bytes]:
        """Up to ``limit`` keys in [lo, hi) (``hi`` None: no upper bound), ascending, or
        descending from the top with ``reverse``; whole chunk slices, copied by C."""
        chunks = self._chunks
        maxes = self._maxes
        out: list[bytes] = []
        if not chunks or limit <= 0:
            return out
        if not reverse:
            pos = bisect_left(maxes, lo)
            i = bisect_left(chunks[pos], lo) if pos < len(chunks) else 0
            while pos < len(chunks):
                chunk = chunks[pos]
                if hi is None or maxes[pos] < hi:
                    whole = True
                    j = len(chunk)
                else:
                    whole = False
                    j = bisect_left(chunk, hi)
                out += chunk[i : min(j, i + limit - len(out))]
                if not whole or len(out) >= limit:
                    break
                pos += 1
                i = 0
            return out
        if hi is None:
            pos = len(chunks) - 1
            j = len(chunks[pos])
        else:
            pos = bisect_left(maxes, hi)
            if pos == len(chunks):
                pos -= 1
                j = len(chunks[pos])
            else:
                j = bisect_left(chunks[pos], hi)
        while pos >= 0:
            chunk = chunks[pos]
            i = 0 if chunk[0] >= lo else bisect_left(chunk, lo)
            part = chunk[max(i, j - (limit - len(out))) : j]
            part.reverse()
            out += part
            if i > 0 or len(out) >= limit:
                break
            pos -= 1
            j = len(chunks[pos]) if pos >= 0 else 0
        return out

    # -- chunks and the tree ------------------------------------------------------------
    def _rebuild(self) -> None:
        chunks = self._chunks
        m = len(chunks)
        tree = [0] * (m + 1)
        for i in range(1, m + 1):
            tree[i] += len(chunks[i - 1])
            j = i + (i & -i)
            if j <= m:
                tree[j] += tree[i]
        self._tree = tree

    def _fresh_tree(self) -> list[int]:
        if self._stale:
            self._rebuild()
            self._stale = False
        return self._tree

    def _bump(self, pos: int, delta: int) -> None:
        if self._stale:
            return  # counted when the tree is rebuilt
        tree = self._tree
        m = len(tree) - 1
        i = pos + 1
        while i <= m:
            tree[i] += delta
            i += i & -i

    def _before(self, pos: int) -> int:
        """How many keys the chunks before chunk ``pos`` hold."""
        tree = self._fresh_tree()
        total = 0
        i = pos
        while i > 0:
            total += tree[i]
            i &= i - 1
        return total

    def check(self) -> list[str]:
        """Invariant violations (for tests and ``KVStore.check``): empty list if sound."""
        problems: list[str] = []
        flat = [k for chunk in self._chunks for k in chunk]
        if any(a >= b for a, b in pairwise(flat)):
            problems.append("ordered view: keys out of order or repeated")
        if len(flat) != self._len:
            problems.append(f"ordered view: length {self._len} but {len(flat)} keys")
        if [c[-1] if c else None for c in self._chunks] != self._maxes:
            problems.append("ordered view: chunk maxima out of date")
        if any(not c for c in self._chunks):
            problems.append("ordered view: an empty chunk")
        if any(len(c) > 2 * self._load for c in self._chunks):
            problems.append("ordered view: a chunk past twice the load")
        for pos in range(len(self._chunks) + 1):
            if self._before(pos) != sum(len(c) for c in self._chunks[:pos]):
                problems.append(f"ordered view: position count wrong before chunk {pos}")
                break
        return problems
