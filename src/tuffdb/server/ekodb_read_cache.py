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
encoding. Bounded by bytes; the oldest entries leave first. Loop thread only.
"""

from __future__ import annotations

from collections import OrderedDict

DEFAULT_LIMIT = 256 << 20  # bytes of stored records and bodies kept
ENTRY_OVERHEAD = 200  # the key, the tuple and the dict slot, roughly

CacheKey = tuple[str, str, bool, bool]  # collection, id, typed values, msgpack


class ReadCache:
    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self._entries: OrderedDict[CacheKey, tuple[bytes, bytes]] = OrderedDict()
        self._size = 0
        self.hits = 0
        self.misses = 0

    def get(self, key: CacheKey, stored: bytes) -> bytes | None:
        """The body made from ``stored`` for ``key``, or None."""
        hit = self._entries.get(key)
        if hit is not None and hit[0] == stored:
            self.hits += 1
            return hit[1]
        self.misses += 1
        return None

    def put(self, key: CacheKey, stored: bytes, body: bytes) -> None:
        size = len(stored) + len(body) + ENTRY_OVERHEAD
        old = self._entries.pop(key, None)
        if old is not None:
            self._size -= len(old[0]) + len(old[1]) + ENTRY_OVERHEAD
        if size > self.limit >> 4:
            return  # one huge record must not flush the rest
        entries = self._entries
        while self._size + size > self.limit and entries:
            _, (s, b) = entries.popitem(last=False)
            self._size -= len(s) + len(b) + ENTRY_OVERHEAD
        entries[key] = (stored, body)
        self._size += size

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size(self) -> int:
        return self._size
