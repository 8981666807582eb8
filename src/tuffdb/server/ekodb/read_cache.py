"""Encoded by-id replies, reused while the record's stored bytes are unchanged.

``GET /api/find/{collection}/{id}`` decodes the stored record, converts it to the wire
form and encodes it, every time, though most reads (YCSB's Zipfian keys, any hot record)
fetch a record that has not changed since the last read. This cache keeps the encoded
body beside the stored bytes it was made from, and serves it only when the store still
holds those exact bytes: the check is a comparison with what the store returns for this
read (the same object for a record in the hot tier, a memcmp of one record otherwise), so
no write path has to remember to invalidate it and a stale body cannot be served.

Only replies that depend on nothing but the stored bytes are cached: no projection or
transaction in the request, no field restriction on the key's permission (the caller
checks those), and no TTL on the record (its expiry depends on the clock). The key holds
what else shapes the body: the collection, the id, the typed-values setting and the
encoding. Bounded by bytes in two generations of plain dicts: entries go into the young
one; once it holds half the bound it becomes the old one and the previous old one is
dropped whole, so an entry lives until two flips pass without it being written again. An
``OrderedDict`` kept in exact FIFO order cost twice as much per put at 100,000 entries (its
linked list: ~1.3 vs ~0.6 us interpreted, YCSB A keys), and every update puts. Loop thread
only.

An update that finds its record's entry current decodes the stored bytes the body was
made from (msgspec, one pass over ~1 KB), merges the changes into that, and splices the
changed fields into the cached body instead of encoding it whole (body.py). The
entry does not keep the decoded record for it: that was tried, and held eleven more
objects per YCSB record (ten strings and a dict, about as much memory again as the stored
bytes and body) scattered over the heap, which each update then walked (copy, encode).
Decoding was ahead in CPU per request (cache tier, YCSB A, 32 connections, in process,
pairs run side by side on the two cores: 4 of 4, medians 23.7 vs 26.6 us;
docs/benchmarks/ycsb.md, 2026-12-03).
"""

from __future__ import annotations

DEFAULT_LIMIT = 256 << 20  # bytes of stored records and bodies kept
ENTRY_OVERHEAD = 200  # the key, the tuple and the dict slot, roughly

CacheKey = tuple[str, str, bool, bool]  # collection, id, typed values, msgpack
# stored bytes, the body made from them
Entry = tuple[bytes, bytes]


class ReadCache:
    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self._young: dict[CacheKey, Entry] = {}
        self._old: dict[CacheKey, Entry] = {}
        self._young_size = 0
        self._old_size = 0
        self.hits = 0
        self.misses = 0

    def get(self, key: CacheKey, stored: bytes) -> bytes | None:
        """The body made from ``stored`` for ``key``, or None."""
        hit = self._young.get(key)
        if hit is None:
            hit = self._old.get(key)
        if hit is not None and hit[0] == stored:
            self.hits += 1
            return hit[1]
        self.misses += 1
        return None

    def entry(self, key: CacheKey, stored: bytes) -> Entry | None:
        """The entry made from ``stored`` for ``key``, or None; for an update, so not
        counted as a read's hit or miss."""
        hit = self._young.get(key)
        if hit is None:
            hit = self._old.get(key)
        if hit is not None and hit[0] == stored:
            return hit
        return None

    def put(self, key: CacheKey, stored: bytes, body: bytes) -> None:
        """Keep ``body`` for ``stored``."""
        entry = (stored, body)
        size = _size(entry)
        young = self._young
        prev = young.get(key)
        if prev is not None:
            self._young_size -= _size(prev)
        elif (stale := self._old.pop(key, None)) is not None:
            # superseded: freed now rather than at the next flip, so an update reuses
            # the memory its old reply held instead of growing the heap
            self._old_size -= _size(stale)
        if size > self.limit >> 4:  # one huge record must not flush the rest
            if prev is not None:
                del young[key]
            return
        if self._young_size + size > self.limit >> 1:
            self._old, self._old_size = young, self._young_size  # the old one is dropped
            young = self._young = {}
            self._young_size = 0
        young[key] = entry
        self._young_size += size

    def __len__(self) -> int:
        return len(self._young) + len(self._old)

    @property
    def size(self) -> int:
        return self._young_size + self._old_size


def _size(entry: Entry) -> int:
    return len(entry[0]) + len(entry[1]) + ENTRY_OVERHEAD
