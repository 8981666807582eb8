"""Encode and parse runs of KV records (layout in tuffdb._format.kv)."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import repeat
from typing import Any, NamedTuple

import numpy as np

from tuffdb._format.kv import (
    MAX_KEY_SIZE,
    OP_DELETE,
    OP_MASK,
    OP_PUT,
    OP_TTL,
    RECORD,
    RECORD_SIZE,
    RECORD_TTL,
)
from tuffdb.errors import CorruptionError

# RECORD's header as a NumPy row (packed, little-endian) and as one raw item: a column of
# headers is filled by array assignments and cut into bytes objects by one ``tolist``
# (C loops, ~3x cheaper than RECORD.pack per record).
_RECORD_ROW = np.dtype([("op", "u1"), ("klen", "<u2"), ("vlen", "<u4")])
_RECORD_ITEM = np.dtype(f"V{RECORD_SIZE}")
assert _RECORD_ROW.itemsize == RECORD_SIZE
# From this many records a log frame's headers are built as arrays (a fixed cost of ~5 us
# in NumPy calls). Below it ``map(RECORD.pack, ...)`` is as fast or faster, compiled or
# not: 120-185 against 146-386 ns a record for runs of 16-500 records (2026-12-06, the
# run a group-commit round or an everysec drain frames is mostly of that size).
MANY_RECORDS = 1024


class Record(NamedTuple):
    op: int  # OP_PUT or OP_DELETE (TTL flag stripped)
    key: bytes
    value: bytes
    expiry_ms: int  # 0 = none
    value_offset: int  # offset of the value in the parsed buffer


def iter_records(buf: bytes, where: str = "") -> Iterator[Record]:
    """Parse a run of records; CorruptionError if the run is malformed."""
    pos = 0
    end = len(buf)
    unpack = RECORD.unpack_from
    while pos < end:
        if end - pos < RECORD_SIZE:
            raise CorruptionError("truncated KV record header", path=where, offset=pos)
        op, klen, vlen = unpack(buf, pos)
        expiry = 0
        if op & OP_TTL:
            expiry = RECORD_TTL.unpack_from(buf, pos)[3]
            pos += RECORD_TTL.size
        else:
            pos += RECORD_SIZE
        kind = op & OP_MASK
        if kind not in (1, 2) or pos + klen + vlen > end:
            raise CorruptionError(f"bad KV record (op {op}, klen {klen}, vlen {vlen})",
                                  path=where, offset=pos)
        key = buf[pos : pos + klen]
        voff = pos + klen
        pos = voff + vlen
        yield Record(kind, key, buf[voff:pos], expiry, voff)


def encode_record(op: int, key: bytes, value: bytes, expiry_ms: int = 0) -> bytes:
    if expiry_ms:
        return RECORD_TTL.pack(op | OP_TTL, len(key), len(value), expiry_ms) + key + value
    return RECORD.pack(op, len(key), len(value)) + key + value


def record_headers(ops: Any, klens: Any, vlens: Any) -> list[bytes]:
    """RECORD headers (no expiry) of records whose op, key length and value length are
    the columns ``ops`` (or one op for all), ``klens`` and ``vlens`` (NumPy int arrays).

    :raises ValueError: a key longer than RECORD's u16 length (writes refuse those first).
    """
    if len(klens) and int(klens.max()) > MAX_KEY_SIZE:
        raise ValueError(f"a key of {int(klens.max())} bytes: at most {MAX_KEY_SIZE}")
    rows = np.empty(len(klens), dtype=_RECORD_ROW)
    rows["op"], rows["klen"], rows["vlen"] = ops, klens, vlens
    hdrs: list[bytes] = rows.view(_RECORD_ITEM).tolist()
    return hdrs


def interleave(hdrs: list[bytes], keys: list[bytes], vals: list[bytes]) -> list[bytes]:
    """header, key, value of each record in turn (for one ``bytes.join``)."""
    parts: list[bytes] = [b""] * (3 * len(keys))
    parts[0::3] = hdrs
    parts[1::3] = keys
    parts[2::3] = vals
    return parts


def encode_pending(pairs: list[object], mixed: bool) -> bytes:
    """Frame a hot segment's pending (key, value) pairs as a run of records.

    Plain puts (the common case) are framed with C-level ``map``/``join`` and no per-record
    bytecode (their headers as arrays from :data:`MANY_RECORDS` records on); ``mixed``
    runs (deletes: value None; TTL puts: value (bytes, expiry_ms)) take the general loop.
    """
    keys: list[bytes] = pairs[0::2]  # type: ignore[assignment]
    vals: list[Any] = pairs[1::2]
    if mixed:  # (deletes framed as arrays measured no faster: the mask costs what packing did)
        return _encode_general(keys, vals)
    n = len(keys)
    if n < MANY_RECORDS:
        hdrs = list(map(RECORD.pack, repeat(OP_PUT, n), map(len, keys), map(len, vals)))
    else:
        hdrs = record_headers(OP_PUT, np.fromiter(map(len, keys), dtype=np.int64, count=n),
                              np.fromiter(map(len, vals), dtype=np.int64, count=n))
    return b"".join(interleave(hdrs, keys, vals))


def _encode_general(keys: list[bytes], vals: list[Any]) -> bytes:
    parts: list[bytes] = []
    for k, v in zip(keys, vals):
        if v is None:
            parts += (RECORD.pack(OP_DELETE, len(k), 0), k)
        elif type(v) is tuple:
            val, exp = v
            parts += (RECORD_TTL.pack(OP_PUT | OP_TTL, len(k), len(val), exp), k, val)
        else:
            parts += (RECORD.pack(OP_PUT, len(k), len(v)), k, v)
    return b"".join(parts)
