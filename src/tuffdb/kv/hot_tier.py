"""Hot tier: in-memory append segments with their own index (FASTER's mutable region).

A put lands in the *active* segment: its index (``key -> value`` or ``TOMBSTONE``) and,
when a log is kept, its ``pending`` list of records for the next group commit.
A full segment is *sealed* (immutable from then on) and queued for the spiller, which
writes it to a cold segment; only then is it dropped from the read chain. Reads check
the active segment, then sealed ones newest first, then the cold tier.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tuffdb.storage.log_file import LogFile


class _Tombstone:
    __slots__ = ()

    def __repr__(self) -> str:
        return "TOMBSTONE"


TOMBSTONE = _Tombstone()
# Memory charged per record on top of key and value bytes (dict slot, list slots, header).
RECORD_OVERHEAD_BYTES = 64


def holds(items: list[Any], obj: object) -> bool:
    """``obj in items`` by identity alone, for the value lists of reads (is a miss,
    ``None``, or a ``TOMBSTONE`` among them?). ``in`` compares each bytes value with
    ``==``, which for bytes against ``None`` or a sentinel falls through two rich
    comparisons (~13 ns a value: 8 us for an LRANGE of 600); compiled, this loop is one
    pointer comparison a value."""
    for x in items:
        if x is obj:
            return True
    return False


class HotSegment:
    __slots__ = ("bytes", "expiry", "id", "index", "mixed", "pending", "sealed", "spilled",
                 "wal", "wal_path")

    def __init__(self, seg_id: int, *, logged: bool) -> None:
        self.id = seg_id
        self.index: dict[bytes, object] = {}
        self.expiry: dict[bytes, int] = {}  # key -> expiry ms, for this segment's versions
        # Pending log records as flat (key, value) pairs: value is bytes for a plain put,
        # None for a delete, (value, expiry_ms) for a put with TTL; ``mixed`` is set once
        # any pair is not a plain put.
        self.pending: list[object] | None = [] if logged else None
        self.mixed = False
        self.bytes = 0
        self.sealed = False
        self.spilled = False
        self.wal: LogFile | None = None
        self.wal_path: Path | None = None

    def __repr__(self) -> str:
        state = "spilled" if self.spilled else "sealed" if self.sealed else "active"
        return f"<HotSegment {self.id} {state} {len(self.index)} keys {self.bytes} B>"
