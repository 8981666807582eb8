"""Argument parsing and store helpers shared by the command modules."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from tuffdb.errors import NotFoundError
from tuffdb.kv.store import Deadline
from tuffdb.server.resp.table import NOT_FLOAT, NOT_INTEGER, CommandError

if TYPE_CHECKING:
    from tuffdb.kv.store import KVStore
    from tuffdb.server.resp.overlay import Overlay

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
INT_RE = re.compile(rb"-?(0|[1-9][0-9]*)\Z")
# The canonical spelling of the small integers arguments mostly are (indexes, counts,
# seconds): one dict lookup instead of the regular expression and int().
_SMALL_INTS = {b"%d" % n: n for n in range(-1024, 10_001)}


def to_int(raw: bytes, message: str = NOT_INTEGER) -> int:
    """Parse like Redis's ``string2ll``: no spaces, no '+', no leading zeros, int64."""
    small = _SMALL_INTS.get(raw)
    if small is not None:
        return small
    if len(raw) > 20 or not INT_RE.match(raw) or raw == b"-0":
        raise CommandError(message)
    n = int(raw)
    if not INT64_MIN <= n <= INT64_MAX:
        raise CommandError(message)
    return n


def to_float(raw: bytes) -> float:
    """Parse like ``strtold``-based ``getLongDoubleFromObject`` (no spaces, no NaN)."""
    if not raw or raw[:1].isspace() or raw[-1:].isspace() or b"_" in raw:
        raise CommandError(NOT_FLOAT)
    try:
        x = float(raw)
    except ValueError:
        raise CommandError(NOT_FLOAT) from None
    if math.isnan(x):
        raise CommandError(NOT_FLOAT)
    return x


def remaining_ttl(db: KVStore | Overlay, key: bytes) -> float | None:
    """Seconds left on engine key ``key``'s TTL, None for none or an absent key."""
    try:
        return db.ttl(key)
    except NotFoundError:
        return None


def remaining_deadline(db: KVStore | Overlay, key: bytes) -> Deadline | None:
    """Engine key ``key``'s expiry as a ``write_batch`` op takes it (the millisecond it
    has, as RENAME, COPY and KEEPTTL keep it in Redis), None for none or an absent key."""
    try:
        at = db.expires_at(key)
    except NotFoundError:
        return None
    return None if at is None else Deadline(at)


def put_keep_ttl(db: KVStore | Overlay, key: bytes, raw: bytes, existed: bool) -> None:
    """Overwrite engine key ``key`` keeping its TTL to the millisecond (APPEND, INCR...
    do not clear it)."""
    at = remaining_deadline(db, key) if existed else None
    if at is None:
        db.put(key, raw, None, sync=False)
    else:
        db.write_batch([(key, raw, at)], sync=False)


def lower(raw: bytes) -> bytes:
    return raw.lower()
